/**
 * Generated replies: faithful event sequences for each protocol built from text and tool calls, plus the in-band
 * error events and the default error bodies of HTTP statuses.
 *
 * @internal
 */
import type * as SimulatorScript from "../SimulatorScript.js"
import * as Frames from "./frames.js"

/** What a generated reply needs to know about the request it answers. @internal */
export interface Context {
  /** The request's sequence number, which makes ids unique. */
  readonly id: number
  /** The request's `model`, echoed when the reply has none. */
  readonly model: string | undefined
  /** Seconds since the epoch, for `created` fields. */
  readonly created: number
  /** Responses only: a background response (`"background": true`), stored by the server. */
  readonly background?: boolean | undefined
  /** Chat Completions only: the request asked for usage in the stream (`stream_options.include_usage: true`). */
  readonly includeUsage?: boolean | undefined
}

/** @internal */
export const defaultText = "Hello from the reprise simulator. This reply was generated for the route's protocol."

const defaultModel = "reprise-simulator"

/**
 * Splits text into deltas: one word (with its leading whitespace) each, or `size` characters each.
 *
 * @internal
 */
export const splitText = (text: string, size: number | undefined): ReadonlyArray<string> => {
  if (text.length === 0) return []
  if (size !== undefined) {
    const out: Array<string> = []
    for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
    return out
  }
  return text.match(/\s*\S+|\s+$/g) ?? [text]
}

/** Tool-call arguments arrive in pieces of a few characters, as real providers send them. */
const splitArguments = (text: string): ReadonlyArray<string> => {
  const out: Array<string> = []
  for (let i = 0; i < text.length; i += 8) out.push(text.slice(i, i + 8))
  return out
}

/** @internal */
export interface Call {
  readonly id: string
  readonly name: string
  readonly arguments: string
}

const callsOf = (
  reply: SimulatorScript.GeneratedReply,
  prefix: string,
  ctx: Context
): ReadonlyArray<Call> =>
  (reply.toolCalls ?? []).map((call, i) => ({
    id: call.id ?? `${prefix}_sim_${ctx.id}_${i}`,
    name: call.name,
    arguments: call.arguments === undefined
      ? "{}"
      : typeof call.arguments === "string"
      ? call.arguments
      : JSON.stringify(call.arguments)
  }))

const finishOf = (reply: SimulatorScript.GeneratedReply) =>
  reply.finishReason ?? ((reply.toolCalls?.length ?? 0) > 0 ? "tool_calls" : "stop")

const usageOf = (reply: SimulatorScript.GeneratedReply, text: string): SimulatorScript.Usage =>
  reply.usage ?? { inputTokens: 12, outputTokens: Math.max(1, splitText(text, undefined).length) }

// -----------------------------------------------------------------------------
// Chat Completions
// -----------------------------------------------------------------------------

const chat = (reply: SimulatorScript.GeneratedReply, ctx: Context): ReadonlyArray<Frames.Frame> => {
  const text = reply.text ?? ((reply.toolCalls?.length ?? 0) > 0 ? "" : defaultText)
  const base = {
    id: `chatcmpl-sim-${ctx.id}`,
    object: "chat.completion.chunk",
    created: ctx.created,
    model: reply.model ?? ctx.model ?? defaultModel,
    system_fingerprint: "fp_reprise_sim"
  }
  const chunk = (delta: unknown, finish: string | null = null) =>
    Frames.jsonFrame(undefined, {
      ...base,
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }],
      usage: null
    })
  const frames: Array<Frames.Frame> = [chunk({ role: "assistant", content: "", refusal: null })]
  for (const piece of splitText(text, reply.deltaSize)) frames.push(chunk({ content: piece }))
  callsOf(reply, "call", ctx).forEach((call, index) => {
    frames.push(chunk({
      tool_calls: [{ index, id: call.id, type: "function", function: { name: call.name, arguments: "" } }]
    }))
    for (const piece of splitArguments(call.arguments)) {
      frames.push(chunk({ tool_calls: [{ index, function: { arguments: piece } }] }))
    }
  })
  frames.push(chunk({}, finishOf(reply)))
  // the usage chunk only when the request asked for it, as the real API does
  if (ctx.includeUsage === true) {
    const usage = usageOf(reply, text)
    frames.push(Frames.jsonFrame(undefined, {
      ...base,
      choices: [],
      usage: {
        prompt_tokens: usage.inputTokens,
        completion_tokens: usage.outputTokens,
        total_tokens: usage.inputTokens + usage.outputTokens,
        ...(usage.cacheReadTokens !== undefined || usage.cacheWriteTokens !== undefined
          ? {
            prompt_tokens_details: {
              ...(usage.cacheReadTokens !== undefined ? { cached_tokens: usage.cacheReadTokens } : {}),
              ...(usage.cacheWriteTokens !== undefined ? { cache_write_tokens: usage.cacheWriteTokens } : {})
            }
          }
          : {})
      }
    }))
  }
  frames.push(Frames.done)
  return frames
}

// -----------------------------------------------------------------------------
// Anthropic Messages
// -----------------------------------------------------------------------------

const anthropicStop = {
  stop: "end_turn",
  tool_calls: "tool_use",
  length: "max_tokens",
  content_filter: "refusal"
} as const

const anthropic = (reply: SimulatorScript.GeneratedReply, ctx: Context): ReadonlyArray<Frames.Frame> => {
  const text = reply.text ?? ((reply.toolCalls?.length ?? 0) > 0 ? "" : defaultText)
  const usage = usageOf(reply, text)
  const ev = (payload: { readonly type: string; readonly [key: string]: unknown }) =>
    Frames.jsonFrame(payload.type, payload)
  const frames: Array<Frames.Frame> = [
    ev({
      type: "message_start",
      message: {
        id: `msg_sim_${ctx.id}`,
        type: "message",
        role: "assistant",
        model: reply.model ?? ctx.model ?? defaultModel,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        // the input counts are final at the start, as the real API sends them
        usage: {
          input_tokens: usage.inputTokens - (usage.cacheReadTokens ?? 0) - (usage.cacheWriteTokens ?? 0),
          ...(usage.cacheWriteTokens !== undefined ? { cache_creation_input_tokens: usage.cacheWriteTokens } : {}),
          ...(usage.cacheReadTokens !== undefined ? { cache_read_input_tokens: usage.cacheReadTokens } : {}),
          output_tokens: 1
        }
      }
    }),
    ev({ type: "ping" })
  ]
  let index = 0
  if (text.length > 0) {
    frames.push(ev({ type: "content_block_start", index, content_block: { type: "text", text: "" } }))
    for (const piece of splitText(text, reply.deltaSize)) {
      frames.push(ev({ type: "content_block_delta", index, delta: { type: "text_delta", text: piece } }))
    }
    frames.push(ev({ type: "content_block_stop", index }))
    index++
  }
  for (const call of callsOf(reply, "toolu", ctx)) {
    frames.push(ev(
      {
        type: "content_block_start",
        index,
        content_block: { type: "tool_use", id: call.id, name: call.name, input: {} }
      }
    ))
    frames.push(
      ev({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: "" } })
    )
    for (const piece of splitArguments(call.arguments)) {
      frames.push(
        ev({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: piece } })
      )
    }
    frames.push(ev({ type: "content_block_stop", index }))
    index++
  }
  frames.push(ev(
    {
      type: "message_delta",
      delta: { stop_reason: anthropicStop[finishOf(reply)], stop_sequence: null },
      usage: { output_tokens: usage.outputTokens }
    }
  ))
  frames.push(ev({ type: "message_stop" }))
  return frames
}

// -----------------------------------------------------------------------------
// Responses (and subscription)
// -----------------------------------------------------------------------------

const responseObject = (
  reply: SimulatorScript.GeneratedReply,
  ctx: Context,
  status: string,
  output: ReadonlyArray<unknown>,
  usage: SimulatorScript.Usage | null
) => ({
  id: `resp_sim_${ctx.id}`,
  object: "response",
  created_at: ctx.created,
  status,
  // As the real API orders it; ordinary responses keep the simulator's shape of before background mode.
  ...(ctx.background === true ? { background: true } : {}),
  error: null,
  incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
  instructions: null,
  max_output_tokens: null,
  model: reply.model ?? ctx.model ?? defaultModel,
  output,
  parallel_tool_calls: true,
  previous_response_id: null,
  reasoning: { effort: null, summary: null },
  // Background mode requires store: true.
  store: ctx.background === true,
  temperature: 1,
  text: { format: { type: "text" } },
  tool_choice: "auto",
  tools: [],
  top_p: 1,
  truncation: "disabled",
  usage: usage === null ? null : {
    input_tokens: usage.inputTokens,
    input_tokens_details: {
      cached_tokens: usage.cacheReadTokens ?? 0,
      ...(usage.cacheWriteTokens !== undefined ? { cache_write_tokens: usage.cacheWriteTokens } : {})
    },
    output_tokens: usage.outputTokens,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: usage.inputTokens + usage.outputTokens
  },
  user: null,
  metadata: {}
})

const responses = (
  reply: SimulatorScript.GeneratedReply,
  ctx: Context,
  subscription: boolean
): ReadonlyArray<Frames.Frame> => {
  const text = reply.text ?? ((reply.toolCalls?.length ?? 0) > 0 ? "" : defaultText)
  const usage = usageOf(reply, text)
  let sequence = 0
  const ev = (type: string, payload: Record<string, unknown>) =>
    Frames.jsonFrame(type, { type, sequence_number: sequence++, ...payload })
  // A background response is created queued, as the real API streams it: created and queued, then in progress.
  const frames: Array<Frames.Frame> = ctx.background === true
    ? [
      ev("response.created", { response: responseObject(reply, ctx, "queued", [], null) }),
      ev("response.queued", { response: responseObject(reply, ctx, "queued", [], null) }),
      ev("response.in_progress", { response: responseObject(reply, ctx, "in_progress", [], null) })
    ]
    : [
      ev("response.created", { response: responseObject(reply, ctx, "in_progress", [], null) }),
      ev("response.in_progress", { response: responseObject(reply, ctx, "in_progress", [], null) })
    ]
  const output: Array<unknown> = []
  if (text.length > 0) {
    const itemId = `msg_sim_${ctx.id}`
    const outputIndex = output.length
    frames.push(ev("response.output_item.added", {
      output_index: outputIndex,
      item: { id: itemId, type: "message", status: "in_progress", content: [], role: "assistant" }
    }))
    frames.push(ev("response.content_part.added", {
      item_id: itemId,
      output_index: outputIndex,
      content_index: 0,
      part: { type: "output_text", annotations: [], logprobs: [], text: "" }
    }))
    for (const piece of splitText(text, reply.deltaSize)) {
      frames.push(ev("response.output_text.delta", {
        item_id: itemId,
        output_index: outputIndex,
        content_index: 0,
        delta: piece,
        logprobs: []
      }))
    }
    frames.push(ev("response.output_text.done", {
      item_id: itemId,
      output_index: outputIndex,
      content_index: 0,
      text,
      logprobs: []
    }))
    const part = { type: "output_text", annotations: [], logprobs: [], text }
    frames.push(
      ev("response.content_part.done", { item_id: itemId, output_index: outputIndex, content_index: 0, part })
    )
    const item = { id: itemId, type: "message", status: "completed", content: [part], role: "assistant" }
    frames.push(ev("response.output_item.done", { output_index: outputIndex, item }))
    output.push(item)
  }
  callsOf(reply, "call", ctx).forEach((call, i) => {
    const itemId = `fc_sim_${ctx.id}_${i}`
    const outputIndex = output.length
    frames.push(ev("response.output_item.added", {
      output_index: outputIndex,
      item: {
        id: itemId,
        type: "function_call",
        status: "in_progress",
        arguments: "",
        call_id: call.id,
        name: call.name
      }
    }))
    for (const piece of splitArguments(call.arguments)) {
      frames.push(ev("response.function_call_arguments.delta", {
        item_id: itemId,
        output_index: outputIndex,
        delta: piece
      }))
    }
    frames.push(ev("response.function_call_arguments.done", {
      item_id: itemId,
      output_index: outputIndex,
      name: call.name,
      arguments: call.arguments
    }))
    const item = {
      id: itemId,
      type: "function_call",
      status: "completed",
      arguments: call.arguments,
      call_id: call.id,
      name: call.name
    }
    frames.push(ev("response.output_item.done", { output_index: outputIndex, item }))
    output.push(item)
  })
  const incomplete = finishOf(reply) === "length"
  frames.push(ev(incomplete ? "response.incomplete" : "response.completed", {
    response: responseObject(reply, ctx, incomplete ? "incomplete" : "completed", output, usage)
  }))
  if (subscription) frames.push(Frames.done)
  return frames
}

/**
 * The frames of a generated reply for a route.
 *
 * @internal
 */
export const generate = (
  route: SimulatorScript.Route,
  reply: SimulatorScript.GeneratedReply,
  ctx: Context
): Frames.Frames => {
  switch (route) {
    case "openai-chat":
      return Frames.make(chat(reply, ctx), route)
    case "anthropic":
      return Frames.make(anthropic(reply, ctx), route)
    case "openai-responses":
      return Frames.make(responses(reply, ctx, false), route)
    case "subscription":
      return Frames.make(responses(reply, ctx, true), route)
  }
}

// -----------------------------------------------------------------------------
// errors
// -----------------------------------------------------------------------------

/**
 * The frame of an in-band error event. `sequence` is the Responses `sequence_number` it takes.
 *
 * @internal
 */
export const errorFrame = (
  route: SimulatorScript.Route,
  error: SimulatorScript.ErrorObject | undefined,
  event: "error" | "response.failed",
  ctx: Context & { readonly sequence: number }
): Frames.Frame => {
  switch (route) {
    case "openai-chat":
      return Frames.jsonFrame(undefined, {
        error: {
          message: error?.message ?? "The server had an error while processing your request. Sorry about that!",
          type: error?.type ?? "server_error",
          param: null,
          code: error?.code ?? "server_error"
        }
      })
    case "anthropic":
      return Frames.jsonFrame("error", {
        type: "error",
        error: { type: error?.type ?? "overloaded_error", message: error?.message ?? "Overloaded" }
      })
    case "openai-responses":
    case "subscription": {
      const code = error?.code ?? error?.type ?? "server_error"
      const message = error?.message ?? "The server had an error while processing your request. Sorry about that!"
      if (event === "response.failed") {
        return Frames.jsonFrame("response.failed", {
          type: "response.failed",
          sequence_number: ctx.sequence,
          response: {
            ...responseObject({}, ctx, "failed", [], null),
            error: { code, message }
          }
        })
      }
      return Frames.jsonFrame("error", { type: "error", sequence_number: ctx.sequence, code, message, param: null })
    }
  }
}

const anthropicTypes: Record<number, string> = {
  400: "invalid_request_error",
  401: "authentication_error",
  402: "billing_error",
  403: "permission_error",
  404: "not_found_error",
  413: "request_too_large",
  429: "rate_limit_error",
  500: "api_error",
  504: "timeout_error",
  529: "overloaded_error"
}

const openAiErrors: Record<number, { readonly type: string; readonly code: string | null; readonly message: string }> =
  {
    400: { type: "invalid_request_error", code: null, message: "Invalid request." },
    401: { type: "invalid_request_error", code: "invalid_api_key", message: "Incorrect API key provided." },
    403: { type: "invalid_request_error", code: "unsupported_country_region_territory", message: "Forbidden." },
    404: { type: "invalid_request_error", code: "model_not_found", message: "The model does not exist." },
    429: { type: "requests", code: "rate_limit_exceeded", message: "Rate limit reached. Please try again later." }
  }

/**
 * The error body a provider sends with an HTTP error status, shaped for the route's protocol.
 *
 * @internal
 */
export const errorBody = (
  route: SimulatorScript.Route,
  status: number,
  error: SimulatorScript.ErrorObject | undefined
): unknown => {
  if (route === "anthropic") {
    const type = error?.type ?? anthropicTypes[status] ?? "api_error"
    return { type: "error", error: { type, message: error?.message ?? `simulated ${status} (${type})` } }
  }
  const known = openAiErrors[status] ?? {
    type: status >= 500 ? "server_error" : "invalid_request_error",
    code: null,
    message: `simulated ${status}`
  }
  return {
    error: {
      message: error?.message ?? known.message,
      type: error?.type ?? known.type,
      param: null,
      code: error?.code ?? known.code
    }
  }
}
