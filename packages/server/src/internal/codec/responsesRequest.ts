/**
 * A client's Responses request (`POST /v1/responses`) decoded into a `GenerationRequest`, or refused with an
 * `Invalid` naming the field at fault.
 *
 * Decoded: `model`, `instructions` (the system text), `input` as a string (one user message) or a list of items —
 * messages of role `user`, `system`, `developer` (a system message) and `assistant`, with string content or
 * `input_text` / `output_text` / `refusal` parts; `function_call` (its `arguments` must be JSON) and
 * `function_call_output` items; `reasoning` items that carry `encrypted_content` (sent back upstream with the next
 * assistant turn; one without it names a stored item the relay cannot vouch for, and is dropped) — `tools` of type
 * `function`, `tool_choice` (`auto`, `none`, `required`, `{type: "function", name}`; one that forces a call needs the
 * tool), `max_output_tokens`, `text.format` (`json_schema`; `text` is free text) and `stream`.
 *
 * Refused with a 400, because honouring them needs state the relay does not keep or content it does not carry:
 * `previous_response_id` and `conversation` (the relay stores no response), `background: true`, `prompt` (stored
 * prompts), `item_reference` items, image, file and audio parts, hosted tools (`web_search`, `file_search`, …) and
 * the `json_object` format. Ignored: `store` (nothing is stored: responses report `store: false`), `include`,
 * `temperature`, `top_p`, `reasoning`, `parallel_tool_calls`, `truncation`, `metadata`, `user`, `service_tier` and
 * the other sampling and bookkeeping fields.
 *
 * @internal
 */
import type * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import type * as Downstream from "../downstream.js"
import * as Wire from "./wire.js"

const { refuse } = Wire

const refused: ReadonlyArray<readonly [string, string]> = [
  ["previous_response_id", "the relay stores no response: send the whole conversation in 'input'"],
  ["conversation", "the relay stores no conversation: send the whole conversation in 'input'"],
  ["prompt", "stored prompts are not supported by the relay"]
]

/** The text of a message's content: a string, or its text parts in order. */
const contentText = (content: unknown, param: string): string => {
  if (typeof content === "string") return content
  const parts = Wire.array(content, param)
  let text = ""
  parts.forEach((u, j) => {
    const part = Wire.object(u, `${param}[${j}]`)
    switch (part.type) {
      case "input_text":
      case "output_text":
      case "text":
        text += Wire.string(part.text, `${param}[${j}].text`)
        break
      case "refusal":
        // an earlier reply's refusal, sent back as its text
        text += Wire.string(part.refusal, `${param}[${j}].refusal`)
        break
      default:
        refuse(`${param}[${j}]`, `'${param}[${j}]': content of type ${JSON.stringify(part.type)} is not supported`)
    }
  })
  return text
}

const parseArguments = (text: string, param: string): unknown => {
  try {
    return JSON.parse(text)
  } catch {
    return refuse(param, `'${param}' must be a JSON text`)
  }
}

const decodeInput = (input: unknown): Array<Message.Message> => {
  if (typeof input === "string") return [{ role: "user", text: input }]
  const items = Wire.array(input, "input")
  const messages: Array<Message.Message> = []
  const names = new Map<string, string>()
  let reasoning: Array<Message.ReasoningPart> = []
  // the assistant turn that `function_call` items join: the one just decoded, until another item comes
  let turn: { text: string; toolCalls: Array<Message.ToolCall> } | undefined
  const assistant = (text: string) => {
    const message = reasoning.length > 0
      ? { role: "assistant" as const, text, toolCalls: [] as Array<Message.ToolCall>, reasoning }
      : { role: "assistant" as const, text, toolCalls: [] as Array<Message.ToolCall> }
    reasoning = []
    messages.push(message)
    turn = message
    return message
  }
  items.forEach((u, i) => {
    const param = `input[${i}]`
    const item = Wire.object(u, param)
    const type = item.type ?? "message"
    switch (type) {
      case "message": {
        const role = item.role
        const text = contentText(item.content, `${param}.content`)
        if (role === "assistant") {
          assistant(text)
          return
        }
        turn = undefined
        reasoning = []
        if (role === "user") messages.push({ role: "user", text })
        else if (role === "system" || role === "developer") messages.push({ role: "system", text })
        else refuse(`${param}.role`, `'${param}.role' must be one of user, system, developer, assistant`)
        return
      }
      case "function_call": {
        const id = Wire.string(item.call_id, `${param}.call_id`)
        const name = Wire.string(item.name, `${param}.name`)
        const args = parseArguments(Wire.string(item.arguments, `${param}.arguments`), `${param}.arguments`)
        names.set(id, name)
        const into = turn ?? assistant("")
        into.toolCalls.push({ id, name, arguments: args })
        return
      }
      case "function_call_output": {
        turn = undefined
        reasoning = []
        const id = Wire.string(item.call_id, `${param}.call_id`)
        const content = contentText(item.output, `${param}.output`)
        messages.push({ role: "tool", toolCallId: id, name: names.get(id) ?? "", content, isError: false })
        return
      }
      case "reasoning": {
        turn = undefined
        const encrypted = Wire.optionalString(item.encrypted_content, `${param}.encrypted_content`)
        if (encrypted === undefined) return
        const summary = item.summary === undefined || item.summary === null
          ? []
          : Wire.array(item.summary, `${param}.summary`).map((s, j) =>
            Wire.string(Wire.object(s, `${param}.summary[${j}]`).text, `${param}.summary[${j}].text`)
          )
        reasoning.push({
          protocol: "openai-responses",
          kind: "reasoning",
          id: Wire.string(item.id, `${param}.id`),
          summary,
          encryptedContent: encrypted
        })
        return
      }
      default:
        refuse(`${param}.type`, `'${param}': items of type ${JSON.stringify(type)} are not supported by the relay`)
    }
  })
  return messages
}

const decodeTools = (u: unknown): Array<Generation.ToolDefinition> =>
  Wire.array(u, "tools").map((t, i) => {
    const tool = Wire.object(t, `tools[${i}]`)
    if (tool.type !== "function") {
      return refuse(`tools[${i}].type`, `'tools[${i}]': tools of type ${JSON.stringify(tool.type)} are not supported`)
    }
    return {
      name: Wire.string(tool.name, `tools[${i}].name`),
      description: Wire.optionalString(tool.description, `tools[${i}].description`) ?? "",
      parameters: Wire.schemaObject(tool.parameters, `tools[${i}].parameters`) ?? Wire.anyObject
    }
  })

const decodeToolChoice = (u: unknown): Generation.ToolChoice => {
  if (u === "auto" || u === "none" || u === "required") return u
  if (Wire.isObject(u) && u.type === "function") return { tool: Wire.string(u.name, "tool_choice.name") }
  return refuse("tool_choice", `'tool_choice' must be auto, none, required or {"type": "function", "name": …}`)
}

const decodeFormat = (u: unknown): Generation.ResponseFormat | undefined => {
  const text = Wire.object(u, "text")
  if (text.format === undefined || text.format === null) return undefined
  const format = Wire.object(text.format, "text.format")
  if (format.type === "text") return undefined
  if (format.type !== "json_schema") {
    return refuse("text.format.type", `'text.format.type' must be text or json_schema`)
  }
  const description = Wire.optionalString(format.description, "text.format.description")
  return {
    type: "json",
    name: Wire.string(format.name, "text.format.name"),
    schema: Wire.object(format.schema, "text.format.schema"),
    ...(description !== undefined ? { description } : {})
  }
}

/**
 * The request of a client's body, and whether it asked for a stream.
 *
 * @internal
 */
export const decodeBody = (u: unknown): Downstream.Decoded => {
  const body = Wire.object(u, "body")
  for (const [field, why] of refused) {
    if (body[field] !== undefined && body[field] !== null) refuse(field, `'${field}' is not supported: ${why}`)
  }
  if (Wire.optionalBoolean(body.background, "background") === true) {
    refuse("background", "'background' is not supported: the relay keeps no response to retrieve")
  }
  const model = Wire.string(body.model, "model")
  if (body.input === undefined) refuse("input", "'input' is required")
  const messages = decodeInput(body.input)
  const system = Wire.optionalString(body.instructions, "instructions")
  const tools = body.tools === undefined || body.tools === null ? [] : decodeTools(body.tools)
  const toolChoice = body.tool_choice === undefined || body.tool_choice === null
    ? undefined
    : decodeToolChoice(body.tool_choice)
  if (toolChoice !== undefined) Wire.checkToolChoice(toolChoice, tools)
  const maxTokens = body.max_output_tokens === undefined || body.max_output_tokens === null
    ? undefined
    : Wire.positiveInteger(body.max_output_tokens, "max_output_tokens")
  const responseFormat = body.text === undefined || body.text === null ? undefined : decodeFormat(body.text)
  const request: Generation.GenerationRequest = {
    model,
    messages,
    ...(system !== undefined ? { system } : {}),
    ...(tools.length > 0 ? { tools } : {}),
    ...(maxTokens !== undefined ? { maxTokens } : {}),
    ...(toolChoice !== undefined ? { toolChoice } : {}),
    ...(responseFormat !== undefined ? { responseFormat } : {})
  }
  return { request, stream: Wire.optionalBoolean(body.stream, "stream") === true }
}
