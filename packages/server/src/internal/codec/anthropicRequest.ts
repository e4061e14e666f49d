/**
 * A client's Anthropic Messages request (`POST /v1/messages`) decoded into a `GenerationRequest`, or refused with
 * an `Invalid` naming the field at fault.
 *
 * Decoded: `model`, `max_tokens` (required, as the API requires it), `system` as a string or `text` blocks (joined by
 * a blank line), `messages` of role `user` (string content, `text` blocks — one user message each — and `tool_result`
 * blocks with string or `text` block content and `is_error`) and `assistant` (`text`, `tool_use`, and `thinking`
 * blocks with a signature or `redacted_thinking` blocks, which go back upstream with the turn; a `thinking` block
 * without a signature is dropped), `tools` (custom tools: `name`, `description`, `input_schema`), `tool_choice`
 * (`auto`, `any`, `none`, `{type: "tool", name}`), `output_config.format` / `output_format` (`json_schema`) and
 * `stream`.
 *
 * Refused with a 400: image, document and other content blocks the relay does not carry, server tools (`web_search`,
 * `bash`, `code_execution`, … — a tool with a `type` other than `custom`), and a `tool_result` whose content holds
 * anything but text. Ignored: `temperature`, `top_p`, `top_k`, `stop_sequences`, `thinking`, `metadata`,
 * `service_tier`, `cache_control` marks and `disable_parallel_tool_use`.
 *
 * @internal
 */
import type * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import type * as Downstream from "../downstream.js"
import * as Wire from "./wire.js"

const { refuse } = Wire

/** The text of a `system` or a `tool_result` content: a string, or its `text` blocks. */
const blocksText = (u: unknown, param: string, separator: string): string => {
  if (typeof u === "string") return u
  return Wire.array(u, param).map((b, j) => {
    const block = Wire.object(b, `${param}[${j}]`)
    if (block.type !== "text") {
      return refuse(
        `${param}[${j}]`,
        `'${param}[${j}]': blocks of type ${JSON.stringify(block.type)} are not supported`
      )
    }
    return Wire.string(block.text, `${param}[${j}].text`)
  }).join(separator)
}

const decodeMessages = (u: unknown): Array<Message.Message> => {
  const turns = Wire.array(u, "messages")
  if (turns.length === 0) refuse("messages", "'messages' must hold at least one message")
  const messages: Array<Message.Message> = []
  const names = new Map<string, string>()
  turns.forEach((t, i) => {
    const param = `messages[${i}]`
    const turn = Wire.object(t, param)
    const content: ReadonlyArray<unknown> = typeof turn.content === "string"
      ? [{ type: "text", text: turn.content }]
      : Wire.array(turn.content, `${param}.content`)
    if (turn.role === "user") {
      content.forEach((b, j) => {
        const at = `${param}.content[${j}]`
        const block = Wire.object(b, at)
        switch (block.type) {
          case "text":
            messages.push({ role: "user", text: Wire.string(block.text, `${at}.text`) })
            return
          case "tool_result": {
            const id = Wire.string(block.tool_use_id, `${at}.tool_use_id`)
            messages.push({
              role: "tool",
              toolCallId: id,
              name: names.get(id) ?? "",
              content: block.content === undefined || block.content === null
                ? ""
                : blocksText(block.content, `${at}.content`, "\n\n"),
              isError: Wire.optionalBoolean(block.is_error, `${at}.is_error`) ?? false
            })
            return
          }
          default:
            refuse(at, `'${at}': blocks of type ${JSON.stringify(block.type)} are not supported by the relay`)
        }
      })
      return
    }
    if (turn.role !== "assistant") return refuse(`${param}.role`, `'${param}.role' must be user or assistant`)
    let text = ""
    const toolCalls: Array<Message.ToolCall> = []
    const reasoning: Array<Message.ReasoningPart> = []
    content.forEach((b, j) => {
      const at = `${param}.content[${j}]`
      const block = Wire.object(b, at)
      switch (block.type) {
        case "text":
          text += Wire.string(block.text, `${at}.text`)
          return
        case "tool_use": {
          const id = Wire.string(block.id, `${at}.id`)
          const name = Wire.string(block.name, `${at}.name`)
          names.set(id, name)
          toolCalls.push({ id, name, arguments: block.input === undefined ? {} : block.input })
          return
        }
        case "thinking": {
          const signature = Wire.optionalString(block.signature, `${at}.signature`) ?? ""
          const thinking = Wire.string(block.thinking, `${at}.thinking`)
          // a block without a signature cannot be verified upstream
          if (signature.length > 0) {
            reasoning.push({ protocol: "anthropic", kind: "thinking", text: thinking, signature })
          }
          return
        }
        case "redacted_thinking":
          reasoning.push({ protocol: "anthropic", kind: "redacted", data: Wire.string(block.data, `${at}.data`) })
          return
        default:
          refuse(at, `'${at}': blocks of type ${JSON.stringify(block.type)} are not supported by the relay`)
      }
    })
    messages.push(
      reasoning.length > 0 ? { role: "assistant", text, toolCalls, reasoning } : { role: "assistant", text, toolCalls }
    )
  })
  return messages
}

const decodeTools = (u: unknown): Array<Generation.ToolDefinition> =>
  Wire.array(u, "tools").map((t, i) => {
    const tool = Wire.object(t, `tools[${i}]`)
    if (tool.type !== undefined && tool.type !== null && tool.type !== "custom") {
      return refuse(`tools[${i}].type`, `'tools[${i}]': server tools (${JSON.stringify(tool.type)}) are not supported`)
    }
    return {
      name: Wire.string(tool.name, `tools[${i}].name`),
      description: Wire.optionalString(tool.description, `tools[${i}].description`) ?? "",
      parameters: Wire.schemaObject(tool.input_schema, `tools[${i}].input_schema`) ?? Wire.anyObject
    }
  })

const decodeToolChoice = (u: unknown): Generation.ToolChoice => {
  const choice = Wire.object(u, "tool_choice")
  switch (choice.type) {
    case "auto":
    case "none":
      return choice.type
    case "any":
      return "required"
    case "tool":
      return { tool: Wire.string(choice.name, "tool_choice.name") }
    default:
      return refuse("tool_choice.type", `'tool_choice.type' must be auto, any, none or tool`)
  }
}

const decodeFormat = (u: unknown, param: string): Generation.ResponseFormat => {
  const format = Wire.object(u, param)
  if (format.type !== "json_schema") return refuse(`${param}.type`, `'${param}.type' must be json_schema`)
  return { type: "json", name: "output", schema: Wire.object(format.schema, `${param}.schema`) }
}

/**
 * The request of a client's body, and whether it asked for a stream.
 *
 * @internal
 */
export const decodeBody = (u: unknown): Downstream.Decoded => {
  const body = Wire.object(u, "body")
  const model = Wire.string(body.model, "model")
  if (body.max_tokens === undefined || body.max_tokens === null) refuse("max_tokens", "'max_tokens' is required")
  const maxTokens = Wire.positiveInteger(body.max_tokens, "max_tokens")
  const messages = decodeMessages(body.messages)
  const system = body.system === undefined || body.system === null
    ? undefined
    : blocksText(body.system, "system", "\n\n")
  const tools = body.tools === undefined || body.tools === null ? [] : decodeTools(body.tools)
  const toolChoice = body.tool_choice === undefined || body.tool_choice === null
    ? undefined
    : decodeToolChoice(body.tool_choice)
  if (toolChoice !== undefined) Wire.checkToolChoice(toolChoice, tools)
  const config = body.output_config === undefined || body.output_config === null
    ? undefined
    : Wire.object(body.output_config, "output_config")
  const responseFormat = config?.format !== undefined && config.format !== null
    ? decodeFormat(config.format, "output_config.format")
    : body.output_format !== undefined && body.output_format !== null
    ? decodeFormat(body.output_format, "output_format")
    : undefined
  const request: Generation.GenerationRequest = {
    model,
    messages,
    maxTokens,
    ...(system !== undefined && system.length > 0 ? { system } : {}),
    ...(tools.length > 0 ? { tools } : {}),
    ...(toolChoice !== undefined ? { toolChoice } : {}),
    ...(responseFormat !== undefined ? { responseFormat } : {})
  }
  return { request, stream: Wire.optionalBoolean(body.stream, "stream") === true }
}
