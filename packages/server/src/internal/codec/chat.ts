/**
 * The Chat Completions codec (`POST /v1/chat/completions`): an OpenAI request decoded into a
 * `GenerationRequest` (the reverse of what `@reprise/providers/OpenAiChat` encodes), and the reply encoded as
 * OpenAI writes it: `chat.completion.chunk`s (a role chunk first, content and tool-call deltas, a finish chunk, a
 * usage chunk when `stream_options.include_usage`, then `data: [DONE]`) or one `chat.completion` body.
 *
 * What the request may carry: `messages` (`system`/`developer`, `user`, `assistant` with `tool_calls`, `tool`; content
 * a string or an array of text parts), `tools` (functions), `tool_choice`, `max_tokens` / `max_completion_tokens`,
 * `response_format` (`text`, `json_object`, `json_schema`), `stream`, `stream_options`. Sampling fields
 * (`temperature`, `top_p`, …) are accepted and not forwarded; `n` other than 1 and non-text content are refused.
 *
 * @internal
 */
import type * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type { Codec, Context, Decoded, Failure, Invalid } from "../downstream.js"

type Json = Record<string, unknown>

const isObject = (u: unknown): u is Json => typeof u === "object" && u !== null && !Array.isArray(u)

class Refused {
  constructor(readonly message: string, readonly param?: string | undefined) {}
}

const refuse = (message: string, param?: string): never => {
  throw new Refused(message, param)
}

/** A content field as text: a string, or an array of `text` parts (joined with nothing between them). */
const text = (content: unknown, param: string, allowNull: boolean): string => {
  if (typeof content === "string") return content
  if (content === null || content === undefined) {
    return allowNull ? "" : refuse(`${param} is required`, param)
  }
  if (!Array.isArray(content)) return refuse(`${param} must be a string or an array of text parts`, param)
  return content.map((part, i) => {
    if (!isObject(part)) return refuse(`${param}[${i}] must be an object`, `${param}[${i}]`)
    if ((part.type === "text" || part.type === "refusal") && typeof (part.text ?? part.refusal) === "string") {
      return (part.text ?? part.refusal) as string
    }
    return refuse(
      `${param}[${i}]: only text content is supported, got ${JSON.stringify(part.type)}`,
      `${param}[${i}].type`
    )
  }).join("")
}

const toolCalls = (value: unknown, param: string): Array<Message.ToolCall> => {
  if (value === undefined || value === null) return []
  if (!Array.isArray(value)) return refuse(`${param} must be an array`, param)
  return value.map((call, i) => {
    const at = `${param}[${i}]`
    if (!isObject(call) || !isObject(call.function)) return refuse(`${at} must be a function tool call`, at)
    if (typeof call.id !== "string") return refuse(`${at}.id must be a string`, `${at}.id`)
    const name = call.function.name
    if (typeof name !== "string" || name.length === 0) return refuse(`${at}.function.name is required`, at)
    const raw = call.function.arguments ?? "{}"
    if (typeof raw !== "string") return refuse(`${at}.function.arguments must be a string`, `${at}.function.arguments`)
    let args: unknown
    try {
      args = raw.trim() === "" ? {} : JSON.parse(raw)
    } catch {
      return refuse(`${at}.function.arguments is not JSON`, `${at}.function.arguments`)
    }
    return { id: call.id, name, arguments: args }
  })
}

const positiveInt = (value: unknown, param: string): number | undefined => {
  if (value === undefined || value === null) return undefined
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
    return refuse(`${param} must be a whole number of at least 1`, param)
  }
  return value
}

const toolChoice = (value: unknown): Generation.ToolChoice | undefined => {
  if (value === undefined || value === null) return undefined
  if (value === "auto" || value === "none" || value === "required") return value
  if (isObject(value) && value.type === "function" && isObject(value.function)) {
    const name = value.function.name
    if (typeof name === "string" && name.length > 0) return { tool: name }
  }
  return refuse(
    `tool_choice must be "auto", "none", "required" or {"type":"function","function":{"name":…}}`,
    "tool_choice"
  )
}

const responseFormat = (value: unknown): Generation.ResponseFormat | undefined => {
  if (value === undefined || value === null) return undefined
  if (!isObject(value)) return refuse("response_format must be an object", "response_format")
  switch (value.type) {
    case "text":
      return undefined
    case "json_object":
      return { type: "json", name: "json_object", schema: { type: "object" } }
    case "json_schema": {
      const spec = value.json_schema
      if (!isObject(spec) || typeof spec.name !== "string") {
        return refuse("response_format.json_schema.name is required", "response_format.json_schema")
      }
      const schema = spec.schema ?? {}
      if (!isObject(schema)) return refuse("response_format.json_schema.schema must be an object", "response_format")
      return {
        type: "json",
        name: spec.name,
        schema,
        ...(typeof spec.description === "string" ? { description: spec.description } : {})
      }
    }
    default:
      return refuse(`response_format.type must be "text", "json_object" or "json_schema"`, "response_format.type")
  }
}

const tools = (value: unknown): Array<Generation.ToolDefinition> | undefined => {
  if (value === undefined || value === null) return undefined
  if (!Array.isArray(value)) return refuse("tools must be an array", "tools")
  return value.map((tool, i) => {
    const at = `tools[${i}]`
    if (!isObject(tool) || tool.type !== "function" || !isObject(tool.function)) {
      return refuse(`${at} must be {"type":"function","function":{…}}`, at)
    }
    const { description, name, parameters } = tool.function
    if (typeof name !== "string" || name.length === 0) return refuse(`${at}.function.name is required`, at)
    if (parameters !== undefined && !isObject(parameters)) {
      return refuse(`${at}.function.parameters must be an object`, `${at}.function.parameters`)
    }
    return {
      name,
      description: typeof description === "string" ? description : "",
      parameters: parameters ?? { type: "object", properties: {} }
    }
  })
}

const decodeBody = (body: unknown): Decoded & { readonly includeUsage: boolean } => {
  if (!isObject(body)) return refuse("the request body must be a JSON object")
  if (typeof body.model !== "string" || body.model.length === 0) return refuse("model is required", "model")
  if (!Array.isArray(body.messages) || body.messages.length === 0) {
    return refuse("messages must be a non-empty array", "messages")
  }
  if (body.n !== undefined && body.n !== null && body.n !== 1) return refuse("n must be 1", "n")
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== "boolean") {
    return refuse("stream must be a boolean", "stream")
  }
  const system: Array<string> = []
  const messages: Array<Message.Message> = []
  // a tool message names its call only; the name is the call's, from the assistant message that made it
  const names = new Map<string, string>()
  body.messages.forEach((m, i) => {
    const at = `messages[${i}]`
    if (!isObject(m)) return refuse(`${at} must be an object`, at)
    switch (m.role) {
      case "system":
      case "developer": {
        const content = text(m.content, `${at}.content`, false)
        // the leading instructions are the request's system text; a later one keeps its place
        if (messages.length === 0) system.push(content)
        else messages.push({ role: "system", text: content })
        return
      }
      case "user":
        messages.push({ role: "user", text: text(m.content, `${at}.content`, false) })
        return
      case "assistant": {
        const calls = toolCalls(m.tool_calls, `${at}.tool_calls`)
        for (const call of calls) names.set(call.id, call.name)
        messages.push({ role: "assistant", text: text(m.content, `${at}.content`, true), toolCalls: calls })
        return
      }
      case "tool": {
        if (typeof m.tool_call_id !== "string") return refuse(`${at}.tool_call_id is required`, `${at}.tool_call_id`)
        messages.push({
          role: "tool",
          toolCallId: m.tool_call_id,
          name: names.get(m.tool_call_id) ?? "",
          content: text(m.content, `${at}.content`, false),
          isError: false
        })
        return
      }
      default:
        return refuse(
          `${at}.role must be "system", "developer", "user", "assistant" or "tool", got ${JSON.stringify(m.role)}`,
          `${at}.role`
        )
    }
  })
  const maxTokens = positiveInt(body.max_completion_tokens, "max_completion_tokens") ??
    positiveInt(body.max_tokens, "max_tokens")
  const definitions = tools(body.tools)
  const choice = toolChoice(body.tool_choice)
  const format = responseFormat(body.response_format)
  const request: Generation.GenerationRequest = {
    model: body.model,
    messages,
    ...(system.length > 0 ? { system: system.join("\n\n") } : {}),
    ...(definitions !== undefined && definitions.length > 0 ? { tools: definitions } : {}),
    ...(maxTokens !== undefined ? { maxTokens } : {}),
    ...(choice !== undefined ? { toolChoice: choice } : {}),
    ...(format !== undefined ? { responseFormat: format } : {})
  }
  const streamOptions = body.stream_options
  return {
    request,
    stream: body.stream === true,
    includeUsage: isObject(streamOptions) && streamOptions.include_usage === true
  }
}

const decode = (body: unknown): Either.Either<Decoded, Invalid> => {
  try {
    return Either.right(decodeBody(body))
  } catch (e) {
    if (e instanceof Refused) {
      return Either.left(e.param === undefined ? { message: e.message } : { message: e.message, param: e.param })
    }
    throw e
  }
}

const finishReason = (reply: Generation.Reply): string => {
  switch (reply.finishReason) {
    case "stop":
    case "length":
    case "tool_calls":
    case "content_filter":
      return reply.finishReason
    case "other":
      return "stop"
  }
}

const usage = (reply: Generation.Reply) =>
  Option.match(reply.usage, {
    onNone: () => null,
    onSome: (u) => ({
      prompt_tokens: u.inputTokens,
      completion_tokens: u.outputTokens,
      total_tokens: u.inputTokens + u.outputTokens,
      ...(u.cacheReadTokens === undefined && u.cacheWriteTokens === undefined ? {} : {
        prompt_tokens_details: {
          cached_tokens: u.cacheReadTokens ?? 0,
          ...(u.cacheWriteTokens === undefined ? {} : { cache_write_tokens: u.cacheWriteTokens })
        }
      })
    })
  })

const frame = (data: unknown): string => `data: ${JSON.stringify(data)}\n\n`

const chunk = (context: Context, delta: Json, finish: string | null = null): string =>
  frame({
    id: context.id,
    object: "chat.completion.chunk",
    created: context.created,
    model: context.model,
    choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }]
  })

const delta = (context: Context, event: Generation.GenerationEvent): string => {
  switch (event._tag) {
    case "TextDelta":
      return event.text.length === 0 ? "" : chunk(context, { content: event.text })
    case "ReasoningDelta":
      // the field DeepSeek and the OpenAI-compatible servers that stream reasoning use; openai-node passes it on
      return event.text.length === 0 ? "" : chunk(context, { reasoning_content: event.text })
    case "ToolCallDelta":
      return chunk(context, {
        tool_calls: [{
          index: event.index,
          ...(event.id !== undefined ? { id: event.id, type: "function" } : {}),
          function: { ...(event.name !== undefined ? { name: event.name } : {}), arguments: event.argumentsDelta }
        }]
      })
    case "ToolCallComplete":
    case "ReasoningComplete":
    case "Usage":
    case "Finish":
      return ""
  }
}

const errorBody = (failure: Failure) => ({
  error: { message: failure.message, type: failure.type, param: failure.param ?? null, code: failure.code ?? null }
})

/** @internal */
export const codec: Codec = {
  protocol: "openai-chat",
  decode,
  open: (context) => chunk(context, { role: "assistant", content: "" }),
  delta,
  terminal: (context, reply) => {
    let out = chunk(context, {}, finishReason(reply))
    if (context.includeUsage === true) {
      out += frame({
        id: context.id,
        object: "chat.completion.chunk",
        created: context.created,
        model: context.model,
        choices: [],
        usage: usage(reply)
      })
    }
    return out + "data: [DONE]\n\n"
  },
  failure: (_context, failure) => frame(errorBody(failure)),
  body: (context, reply) => ({
    id: context.id,
    object: "chat.completion",
    created: context.created,
    model: context.model,
    choices: [{
      index: 0,
      message: {
        role: "assistant",
        content: reply.text.length === 0 && reply.toolCalls.length > 0 ? null : reply.text,
        refusal: null,
        ...(reply.toolCalls.length > 0
          ? {
            tool_calls: reply.toolCalls.map((call) => ({
              id: call.id,
              type: "function",
              function: { name: call.name, arguments: JSON.stringify(call.arguments ?? {}) }
            }))
          }
          : {})
      },
      logprobs: null,
      finish_reason: finishReason(reply)
    }],
    usage: usage(reply)
  }),
  errorBody
}
