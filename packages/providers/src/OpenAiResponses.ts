/**
 * The `openai-responses` protocol: the OpenAI Responses API (`POST {base}/responses`, `Authorization: Bearer`).
 *
 * - The terminal is `response.completed`, `response.done` or `response.incomplete` (an incomplete finish: `length`,
 *   or `content_filter` when that is the stated reason). Reading stops at the first terminal, so a body holding
 *   several responses back to back yields the first one.
 * - `response.failed` and `error` events are explicit failures classified by their code (`server_error` and
 *   `rate_limit_exceeded` are transient).
 * - Native `function_call` items are previewed as `ToolCallDelta`s but withheld until the terminal event: the
 *   terminal's `response.output` decides the reply's calls (the streamed items when it lists none). Arguments that
 *   are not complete JSON fail the stream with `TruncatedToolArguments`; the call is never emitted.
 * - Hosted tools (`mcp_call`, `shell_call`, `code_interpreter_call`, …) are neither tool calls nor text.
 * - Each `reasoning` output item is emitted whole at its `response.output_item.done` as a `ReasoningComplete` (its
 *   id, summary texts and `encrypted_content` when the server sent it), and so are the terminal output's reasoning
 *   items that were not streamed. An assistant message's reasoning parts of this protocol go back as `reasoning`
 *   input items before its message and `function_call` items ({@link reasoningItems}).
 * - Usage is the terminal response's `usage`: `input_tokens` (every input token, cached included), `output_tokens`, and
 *   from `input_tokens_details` `cached_tokens` as `cacheReadTokens` and `cache_write_tokens` as `cacheWriteTokens`
 *   when the server reports them.
 * - `[DONE]` is not a terminal here (see `Subscription`, the variant that accepts it: {@link makeVariant}).
 * - Capability fallback: when the model rejects `max_output_tokens` as unsupported, the request is sent once more
 *   without it (never without `tool_choice` or `text`: that would not be what was asked for).
 * - The request's `toolChoice` is `tool_choice` (sent only with tools; `"none"` keeps the tools in the request) and
 *   its `responseFormat` is `text.format`, a non-strict `json_schema` ({@link textFormat}).
 *
 * Every event the machine reads has its Schema ({@link readEvents}, told apart by `type` in {@link ResponsesEvent}):
 * a field of the wrong type fails the stream with `ProviderRejection{reason: "MalformedStream"}` naming the event,
 * rather than being read as missing. A field that is absent or `null` is read as missing. An event whose data is not
 * JSON is a retryable `TransportError{reason: "MalformedChunk"}` instead. The hot events (text, reasoning and argument
 * deltas) are checked by a guard that is equal to their schema over generated values and costs a fraction of its
 * parse.
 *
 * The state machine, the request body and the event schemas are in this module, so the protocol is read in the file
 * named after it; `Subscription` is a variant of it ({@link makeVariant}), which says itself whether `[DONE]` ends a
 * reply.
 *
 * @since 0.1.0
 */
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Budget from "@reprise/core/Budget"
import * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import * as Provider from "@reprise/core/Provider"
import type * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as Resumption from "@reprise/core/Resumption"
import * as TransportError from "@reprise/core/TransportError"
import * as Clock from "effect/Clock"
import type * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import type * as Types from "effect/Types"
import * as Background from "./internal/background.js"
import * as Body from "./internal/body.js"
import * as Events from "./internal/events.js"
import * as Failure from "./internal/failure.js"
import * as Fallback from "./internal/fallback.js"
import * as Internal from "./internal/provider.js"
import * as RequestChecks from "./internal/requestChecks.js"
import { byType, guarded, isNullableNumber, isNullableString, nullable, optional } from "./internal/schema.js"
import * as Send from "./internal/send.js"
import * as Settings from "./internal/settings.js"
import * as Spans from "./internal/spans.js"
import * as SseInternal from "./internal/sse.js"
import * as ProviderOptions from "./ProviderOptions.js"

/**
 * @since 0.1.0
 * @category constants
 */
export const protocol = "openai-responses" as const

/**
 * @since 0.1.0
 * @category models
 */
export interface Options extends ProviderOptions.Options {
  /**
   * How long a continuation waits between two polls of a background response that is still running (default 1
   * second; see {@link makeVariant}).
   */
  readonly pollInterval?: Duration.DurationInput | undefined
}

// ---------------------------------------------------------------------------------------------------------------
// events

const NullableString = optional(nullable(Schema.String))

/** Every event's `sequence_number`, which a resume counts from (see {@link makeVariant}, background responses). */
const Sequence = optional(nullable(Schema.Number))

const Usage = Schema.Struct({
  input_tokens: optional(nullable(Schema.Number)),
  output_tokens: optional(nullable(Schema.Number)),
  input_tokens_details: optional(nullable(Schema.Struct({
    cached_tokens: optional(nullable(Schema.Number)),
    cache_write_tokens: optional(nullable(Schema.Number))
  })))
})

/** A usage block as `Usage`: the cache figures only when the server reported them. */
const usageOf = (usage: typeof Usage.Type): Generation.Usage => {
  const read = usage.input_tokens_details?.cached_tokens
  const write = usage.input_tokens_details?.cache_write_tokens
  return {
    inputTokens: usage.input_tokens ?? 0,
    outputTokens: usage.output_tokens ?? 0,
    ...(typeof read === "number" ? { cacheReadTokens: read } : {}),
    ...(typeof write === "number" ? { cacheWriteTokens: write } : {})
  }
}

/** `response.error`, and the `error` of an `error` event. */
const ErrorObject = Schema.Struct({
  code: NullableString,
  type: NullableString,
  message: NullableString
}).annotations({ identifier: "ErrorObject" })

/**
 * A `function_call` output item: the one kind of item the machine reads.
 *
 * @since 0.1.0
 * @category schemas
 */
export const FunctionCallItem = Schema.Struct({
  type: Schema.Literal("function_call"),
  id: NullableString,
  call_id: NullableString,
  name: NullableString,
  arguments: NullableString
}).annotations({ identifier: "FunctionCallItem" })

/**
 * A `reasoning` output item: its id, its summary texts and, when asked for (`include:
 * ["reasoning.encrypted_content"]`), its encrypted content. Its `content` (reasoning text) is streamed as deltas and
 * not read here.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ReasoningItem = Schema.Struct({
  type: Schema.Literal("reasoning"),
  id: NullableString,
  summary: optional(nullable(Schema.Array(Schema.Struct({ text: NullableString })))),
  encrypted_content: NullableString
}).annotations({ identifier: "ReasoningItem" })

/**
 * An output item: a `function_call` ({@link FunctionCallItem}), a `reasoning` item ({@link ReasoningItem}), or any
 * other kind (a message, a hosted tool's call or output), of which only the `type` is read.
 *
 * @since 0.1.0
 * @category schemas
 */
export const OutputItem = byType([FunctionCallItem, ReasoningItem], Schema.Struct({ type: Schema.String }))
  .annotations({ identifier: "OutputItem" })

/**
 * @since 0.1.0
 * @category schemas
 */
export type OutputItem = typeof OutputItem.Type

const isFunctionCall = (item: OutputItem): item is typeof FunctionCallItem.Type => item.type === "function_call"

const isReasoning = (item: OutputItem): item is typeof ReasoningItem.Type => item.type === "reasoning"

/**
 * The Responses object that `response.*` events carry: its status, output items, usage, and why it is incomplete or
 * failed.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Response = Schema.Struct({
  // not checked: only a background response's stream reads it, and keeps it only when it is addressable
  id: optional(Schema.Unknown),
  // not checked: read when it is a string (the model that served the reply)
  model: optional(Schema.Unknown),
  status: NullableString,
  output: optional(nullable(Schema.Array(OutputItem))),
  usage: optional(nullable(Usage)),
  incomplete_details: optional(nullable(Schema.Struct({ reason: NullableString }))),
  error: optional(nullable(ErrorObject))
}).annotations({ identifier: "Response" })

/**
 * An assistant `message` output item, as a finished response lists it: the texts of its `output_text` parts.
 *
 * @since 0.1.0
 * @category schemas
 */
export const MessageItem = Schema.Struct({
  type: Schema.Literal("message"),
  content: optional(nullable(Schema.Array(Schema.Struct({ type: Schema.String, text: NullableString }))))
}).annotations({ identifier: "MessageItem" })

/**
 * A finished response object, as a terminal event carries it and a poll (`GET {base}/responses/{id}`) answers it: the
 * {@link Response} and the texts of its messages, whose concatenation is the reply's text. A continuation checks what
 * it surfaced against that text.
 *
 * @since 0.1.0
 * @category schemas
 */
export const FinalResponse = Schema.Struct({
  ...Response.fields,
  output: optional(nullable(Schema.Array(byType(
    [FunctionCallItem, ReasoningItem, MessageItem],
    Schema.Struct({
      type: Schema.String
    })
  ))))
}).annotations({ identifier: "FinalResponse" })

/**
 * @since 0.1.0
 * @category schemas
 */
export type FinalResponse = typeof FinalResponse.Type

// The hot events (text, reasoning and argument deltas, one per token or so) are checked by a guard that accepts what
// their schema accepts and returns what it returns (`guarded`; proven over generated values in
// test/ResponsesEvent.test.ts). Decoding a delta this way costs about 0.1 µs, the schema's own parse several times
// that, and the untyped event schema these replaced about 0.6 µs (median of 16 interleaved runs each).

/** A `delta` event's guard: `delta` absent, `null` or a string; `sequence_number` absent, `null` or a number. */
const deltaGuard = <T extends string>(
  input: { readonly delta?: unknown; readonly sequence_number?: unknown },
  type: T
) => {
  const delta = input.delta
  const sequence = input.sequence_number
  if (!isNullableString(delta) || !isNullableNumber(sequence)) return undefined
  if (sequence === undefined) return delta === undefined ? { type } : { type, delta }
  return delta === undefined ? { type, sequence_number: sequence } : { type, delta, sequence_number: sequence }
}

/**
 * A piece of the reply's text. A hot event.
 *
 * @since 0.1.0
 * @category schemas
 */
export const OutputTextDelta = guarded(
  Schema.Struct({
    type: Schema.Literal("response.output_text.delta"),
    delta: NullableString,
    sequence_number: Sequence
  }),
  deltaGuard
)

/**
 * A piece of the reasoning (its summary, or its text where the server shows it). A hot event.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ReasoningDelta = guarded(
  Schema.Struct({
    type: Schema.Literal("response.reasoning_summary_text.delta", "response.reasoning_text.delta"),
    delta: NullableString,
    sequence_number: Sequence
  }),
  deltaGuard
)

/**
 * An output item, when it starts and when it is done.
 *
 * @since 0.1.0
 * @category schemas
 */
export const OutputItemEvent = Schema.Struct({
  type: Schema.Literal("response.output_item.added", "response.output_item.done"),
  output_index: optional(nullable(Schema.Number)),
  item: optional(nullable(OutputItem)),
  sequence_number: Sequence
})

const ArgumentsDelta = Schema.Struct({
  type: Schema.Literal("response.function_call_arguments.delta"),
  item_id: NullableString,
  delta: NullableString,
  sequence_number: Sequence
})

/**
 * A piece of a function call's arguments. A hot event.
 *
 * @since 0.1.0
 * @category schemas
 */
export const FunctionCallArgumentsDelta = guarded(ArgumentsDelta, (input, type) => {
  const itemId = input.item_id
  const delta = input.delta
  const sequence = input.sequence_number
  if (!isNullableString(itemId) || !isNullableString(delta) || !isNullableNumber(sequence)) return undefined
  const out: Types.Mutable<typeof ArgumentsDelta.Type> = { type }
  if (itemId !== undefined) out.item_id = itemId
  if (delta !== undefined) out.delta = delta
  if (sequence !== undefined) out.sequence_number = sequence
  return out
})

/**
 * A function call's arguments, whole.
 *
 * @since 0.1.0
 * @category schemas
 */
export const FunctionCallArgumentsDone = Schema.Struct({
  type: Schema.Literal("response.function_call_arguments.done"),
  item_id: NullableString,
  arguments: NullableString,
  sequence_number: Sequence
})

/**
 * The terminal events. `response.completed` and `response.done` with the status `failed` are failures, like
 * `response.failed`. The texts of the response's messages are read only at the end of a continued background response,
 * whose surfaced text they check (see {@link makeVariant}).
 *
 * @since 0.1.0
 * @category schemas
 */
export const TerminalEvent = Schema.Struct({
  type: Schema.Literal("response.completed", "response.done", "response.incomplete"),
  response: optional(nullable(FinalResponse)),
  sequence_number: Sequence
})

/**
 * @since 0.1.0
 * @category schemas
 */
export const FailedEvent = Schema.Struct({
  type: Schema.Literal("response.failed"),
  response: optional(nullable(Response)),
  sequence_number: Sequence
})

/**
 * An in-band error: `{code, message}` at the top (OpenAI), or in an `error` object (some compatible servers).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ErrorEvent = Schema.Struct({
  type: Schema.Literal("error"),
  code: NullableString,
  message: NullableString,
  error: optional(nullable(ErrorObject)),
  sequence_number: Sequence
})

/**
 * The events the machine reads, each with its schema.
 *
 * @since 0.1.0
 * @category schemas
 */
export const readEvents = [
  OutputTextDelta,
  ReasoningDelta,
  OutputItemEvent,
  FunctionCallArgumentsDelta,
  FunctionCallArgumentsDone,
  TerminalEvent,
  FailedEvent,
  ErrorEvent
] as const

/**
 * Any event of another type (`response.created`, `response.output_text.done`, `keepalive`, a hosted tool's events):
 * not read, and ignored. The `response` that lifecycle events carry (`response.created`, `response.in_progress`) is
 * checked like a terminal's.
 *
 * @since 0.1.0
 * @category schemas
 */
export const OtherEvent = Schema.Struct({
  type: Schema.String,
  response: optional(nullable(Response)),
  sequence_number: Sequence
})

/**
 * One Responses stream event, as far as reprise reads it: one of {@link readEvents}, chosen by its `type`, or an
 * {@link OtherEvent}. Fields the machine does not read are not checked, so the hosted tools' events, whose fields
 * share names with these but not their types (a `delta` object, `arguments` as an object), pass untouched.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ResponsesEvent = byType(readEvents, OtherEvent).annotations({ identifier: "ResponsesEvent" })

/**
 * @since 0.1.0
 * @category schemas
 */
export type ResponsesEvent = typeof ResponsesEvent.Type

type ReadEvent = (typeof readEvents)[number]["Type"]

const readTypes: ReadonlySet<string> = new Set(readEvents.flatMap((event) => event.fields.type.literals))

// `ResponsesEvent` decodes a value of one of these types with that type's schema (see `byType`).
const isRead = (event: ResponsesEvent): event is ReadEvent => readTypes.has(event.type)

/** The reply's text in a response object: its messages' `output_text` parts, in order, with nothing inserted. */
const outputText = (response: FinalResponse): string => {
  let text = ""
  for (const item of response.output ?? []) {
    if (item.type !== "message") continue
    for (const part of (item as typeof MessageItem.Type).content ?? []) {
      if (part.type === "output_text" && typeof part.text === "string") text += part.text
    }
  }
  return text
}

/** The response lists a message: its output says what the reply's text is (an output left empty says nothing). */
const listsMessage = (response: FinalResponse | null | undefined): response is FinalResponse =>
  response?.output?.some((item) => item.type === "message") === true

/** The reasoning summaries in a response object, in order. */
const summaryText = (response: FinalResponse): string => {
  let text = ""
  for (const item of response.output ?? []) {
    if (item.type !== "reasoning") continue
    for (const s of (item as typeof ReasoningItem.Type).summary ?? []) if (typeof s.text === "string") text += s.text
  }
  return text
}

// ---------------------------------------------------------------------------------------------------------------
// the request

/**
 * A request's tool choice as Responses' `tool_choice`: `"auto"`, `"none"`, `"required"`, or
 * `{type: "function", name}` for `{ tool }`.
 *
 * @since 0.1.0
 * @category request
 */
export const toolChoice = (choice: Generation.ToolChoice): unknown =>
  typeof choice === "string" ? choice : { type: "function", name: choice.tool }

/**
 * A request's response format as Responses' `text`: `{format: {type: "json_schema", name, description?, schema,
 * strict: false}}`. Not strict, for the reason `OpenAiChat.responseFormat` gives: strict mode takes only a subset of
 * JSON Schema and answers any other schema with a 400.
 *
 * @since 0.1.0
 * @category request
 */
export const textFormat = (format: Generation.ResponseFormat): unknown => ({
  format: {
    type: "json_schema",
    name: format.name,
    ...(format.description !== undefined ? { description: format.description } : {}),
    schema: format.schema,
    strict: false
  }
})

/**
 * An assistant message's reasoning as Responses input items, to go before its message and `function_call` items:
 * its parts of `protocol` (`openai-responses` or `subscription`, the backend that issued them), in order, as
 * `{type: "reasoning", id, summary: [{type: "summary_text", text}], encrypted_content?}`. Parts of another protocol
 * are dropped (an item id or encrypted content is only valid where it was issued); on `subscription`, which stores
 * nothing (`store: false`), so is a part without encrypted content, whose id alone the server cannot resolve. A
 * message with neither text nor tool calls sends none: a reasoning item must be followed by the output it led to.
 *
 * @since 0.1.0
 * @category request
 */
export const reasoningItems = (
  message: Message.AssistantMessage,
  protocol: Variant["protocol"] = "openai-responses"
): Array<Record<string, unknown>> => {
  const items: Array<Record<string, unknown>> = []
  if (message.text.length === 0 && message.toolCalls.length === 0) return items
  for (const part of message.reasoning ?? []) {
    if (part.protocol !== protocol || part.kind !== "reasoning") continue
    if (protocol === "subscription" && part.encryptedContent === undefined) continue
    items.push({
      type: "reasoning",
      id: part.id,
      summary: part.summary.map((text) => ({ type: "summary_text", text })),
      ...(part.encryptedContent !== undefined ? { encrypted_content: part.encryptedContent } : {})
    })
  }
  return items
}

/**
 * The JSON body of a request: `model`, `instructions` (the system text), `input` (messages, `function_call` and
 * `function_call_output` items, an assistant message's {@link reasoningItems} first), `tools`, `tool_choice`
 * ({@link toolChoice}, only with tools), `text` ({@link textFormat}, for a `responseFormat`), `max_output_tokens` and
 * `stream: true`. A request without `toolChoice` and `responseFormat` has neither field. `background: true` for a
 * request with `background`, on `openai-responses` only (a `subscription` backend stores nothing, so it has no
 * background responses).
 *
 * @since 0.1.0
 * @category request
 */
export const requestBody = (
  request: Generation.GenerationRequest,
  protocol: Variant["protocol"] = "openai-responses"
): Record<string, unknown> => {
  const choice = RequestChecks.toolChoice(request)
  const input: Array<Record<string, unknown>> = []
  for (const m of request.messages as ReadonlyArray<Message.Message>) {
    switch (m.role) {
      case "system":
      case "user":
        input.push({ role: m.role, content: m.text })
        break
      case "assistant":
        input.push(...reasoningItems(m, protocol))
        if (m.text.length > 0) input.push({ role: "assistant", content: m.text })
        for (const call of m.toolCalls) {
          input.push({
            type: "function_call",
            call_id: call.id,
            name: call.name,
            arguments: JSON.stringify(call.arguments ?? {})
          })
        }
        break
      case "tool":
        input.push({ type: "function_call_output", call_id: m.toolCallId, output: m.content })
        break
    }
  }
  return {
    model: request.model,
    ...(request.system !== undefined && request.system.length > 0 ? { instructions: request.system } : {}),
    input,
    ...(request.tools !== undefined && request.tools.length > 0
      ? {
        tools: request.tools.map((tool) => ({
          type: "function",
          name: tool.name,
          description: tool.description,
          parameters: tool.parameters
        }))
      }
      : {}),
    ...(choice !== undefined ? { tool_choice: toolChoice(choice) } : {}),
    ...(request.responseFormat !== undefined ? { text: textFormat(request.responseFormat) } : {}),
    ...(request.maxTokens !== undefined ? { max_output_tokens: request.maxTokens } : {}),
    ...(request.background === true && protocol === "openai-responses" ? { background: true } : {}),
    stream: true
  }
}

const fallbacks: Fallback.Fallbacks = { max_output_tokens: Fallback.without("max_output_tokens") }

// ---------------------------------------------------------------------------------------------------------------
// the state machine

// What the machine reads: an event it reads, passed as it is, `[DONE]`, or any other event (one marker for all)
const done = { _tag: "Done" } as const
const other = { _tag: "Other" } as const

type Event = ReadEvent | typeof done | typeof other

// by identity: an event is the server's JSON, which may hold any member
const isMarker = (event: Event): event is typeof done | typeof other => event === done || event === other

interface StreamedCall {
  readonly outputIndex: number
  readonly ordinal: number
  readonly itemId: string
  callId: string | undefined
  name: string | undefined
  arguments: string
}

const inBand = (
  settings: Settings.Settings,
  requestId: string | undefined,
  error: typeof ErrorObject.Type | null | undefined,
  fallback: { readonly code?: string | null | undefined; readonly message?: string | null | undefined }
) =>
  Failure.inBandError(settings, {
    code: error?.code ?? fallback.code,
    type: error?.type,
    detail: error?.message ?? fallback.message ?? undefined,
    requestId
  })

/**
 * What the stream of a background response knows of it, for its continuation: its id, the last `sequence_number`
 * read (the cursor), and the text and reasoning surfaced so far.
 */
interface Tracker {
  responseId: string | undefined
  cursor: number | undefined
  /** Set by a resume: the first event it reads must have this number. */
  expect: number | undefined
  /** A resume has read part of the response: its terminal's output is checked against the text surfaced. */
  resumed: boolean
  /** An event came without a number: the stream cannot be continued from a cursor. */
  unnumbered: boolean
  /** The response reached its end on the server: its terminal, `response.failed`, a finished poll. */
  settled: boolean
  /** An in-band `error` event ended the stream: a continuation would read it again. */
  erred: boolean
  text: string
  /** The reasoning summaries surfaced; `rawReasoning` once reasoning text (not a summary) was too. */
  reasoning: string
  rawReasoning: boolean
}

/**
 * A response id reprise can address and show: letters, digits, `_` and `-` (what the API issues), without the key in
 * it. Any other id is not kept: that response is neither resumed nor cancelled (its URL could point elsewhere, its
 * text end up in a notice).
 */
const addressable = (id: unknown, scrub: (text: string) => string): id is string =>
  typeof id === "string" && /^[A-Za-z0-9_-]{1,256}$/.test(id) && scrub(id) === id

const gap = (protocol: string, expected: number, got: number | undefined): TransportError.TransportError =>
  new TransportError.TransportError({
    reason: "ResumeGap",
    detail: `${protocol}: the resumed stream began with ${
      got === undefined ? "an event without a sequence_number" : `event ${got}`
    }, not event ${expected}`
  })

/**
 * Follows a background response's numbering: an event at or before the cursor was surfaced already (a duplicate,
 * dropped: `"duplicate"`), the first one a resume reads must come right after the cursor (otherwise the gap's
 * failure), and every other one moves the cursor.
 */
const follow = (
  protocol: string,
  track: Tracker,
  event: ResponsesEvent,
  scrub: (text: string) => string
): "duplicate" | TransportError.TransportError | undefined => {
  // the id names the response to cancel, numbered or not
  if (track.responseId === undefined && "response" in event) {
    const id = event.response?.id
    if (addressable(id, scrub)) track.responseId = id
  }
  const sequence = event.sequence_number
  if (typeof sequence !== "number") {
    // a keepalive or an error event without a number says nothing of the cursor
    if (event.type === "keepalive" || event.type === "error") return undefined
    if (track.expect !== undefined) return gap(protocol, track.expect, undefined)
    track.unnumbered = true
    return undefined
  }
  if (track.cursor !== undefined && sequence <= track.cursor) return "duplicate"
  if (track.expect !== undefined && sequence !== track.expect) return gap(protocol, track.expect, sequence)
  track.expect = undefined
  track.cursor = sequence
  return undefined
}

/**
 * The Responses state machine. With `doneIsTerminal`, `data: [DONE]` is a terminal too (subscription backends);
 * without it, `[DONE]` before a terminal event ends the stream as a premature EOF. With `track` (a background
 * response), events are followed by their numbers (`follow`) and what is surfaced is kept, for a continuation;
 * `complete` ends the reply from a polled response object.
 */
const decoder = (
  protocol: Variant["protocol"],
  settings: Settings.Settings,
  context: { readonly requestId: string | undefined },
  doneIsTerminal: boolean,
  track?: Tracker | undefined
) => {
  const decodeEvent = SseInternal.jsonDecoder(ResponsesEvent, settings)
  // A `keepalive` event (sent during long server-side work) is not progress, like an SSE comment or a `ping`.
  const decode: SseInternal.Decode<Event> = (event: SseInternal.Event) => {
    if (event.data.trim() === "[DONE]") return done
    const e = decodeEvent(event)
    if (e instanceof SseInternal.Failed) return e
    if (track !== undefined) {
      const followed = follow(protocol, track, e, settings.scrub)
      if (followed === "duplicate") return SseInternal.skip
      if (followed !== undefined) return new SseInternal.Failed(followed)
    }
    if (isRead(e)) return e
    if (e.type === "keepalive") return SseInternal.skip
    // a lifecycle event (`response.created`, `response.in_progress`) names the model
    if (e.response !== undefined && e.response !== null) model = Internal.modelOf(e.response.model) ?? model
    return other
  }

  const calls = new Map<string, StreamedCall>()
  // reasoning items already emitted, by id: the terminal's output repeats them
  const reasoned = new Set<string>()
  let ordinal = 0
  let finished = false
  // the model the response objects name
  let model: string | undefined

  const completeCalls = (
    items: ReadonlyArray<{ callId: string | undefined; name: string | undefined; arguments: string; key: string }>
  ): Either.Either<Array<Generation.GenerationEvent>, ProviderFailure.ProviderFailure> => {
    const out: Array<Generation.GenerationEvent> = []
    for (const item of items) {
      const args = Internal.toolArguments(protocol, item.name, item.arguments, settings.scrub)
      if (Either.isLeft(args)) return Either.left(args.left)
      out.push(Generation.ToolCallComplete({
        call: { id: item.callId ?? item.key, name: item.name ?? "", arguments: args.right }
      }))
    }
    return Either.right(out)
  }

  const streamedItems = () =>
    [...calls.values()].sort((a, b) => a.outputIndex - b.outputIndex || a.ordinal - b.ordinal).map((call) => ({
      callId: call.callId,
      name: call.name,
      arguments: call.arguments,
      key: call.itemId
    }))

  /**
   * Withheld function calls are reconciled with the terminal's `response.output`: when it lists function calls, they
   * are the reply's calls, in its order; when it lists none (some servers send an empty output), the streamed items
   * are.
   */
  const reconcile = (output: ReadonlyArray<OutputItem> | null | undefined) => {
    const streamed = streamedItems()
    // A listed call without arguments keeps what was streamed for it (matched by call id or item id).
    const streamedArguments = (callId: string | undefined, key: string | undefined) =>
      streamed.find((call) => (callId !== undefined && call.callId === callId) || call.key === key)?.arguments ?? ""
    const listed = (output ?? []).filter(isFunctionCall).map((item, i) => {
      const callId = item.call_id ?? undefined
      const id = item.id ?? undefined
      return {
        callId,
        name: item.name ?? undefined,
        arguments: item.arguments ?? streamedArguments(callId, id),
        key: id ?? `call_${i}`
      }
    })
    return listed.length > 0 ? listed : streamed
  }

  const reasoningComplete = (item: typeof ReasoningItem.Type, out: Array<Generation.GenerationEvent>) => {
    const id = item.id ?? undefined
    if (id === undefined || reasoned.has(id)) return
    reasoned.add(id)
    const encrypted = item.encrypted_content ?? undefined
    out.push(Generation.ReasoningComplete({
      part: {
        protocol,
        kind: "reasoning",
        id,
        summary: (item.summary ?? []).flatMap((s) => (typeof s.text === "string" ? [s.text] : [])),
        ...(encrypted !== undefined ? { encryptedContent: encrypted } : {})
      }
    }))
  }

  const terminal = (
    response: typeof Response.Type | null | undefined,
    status: string
  ): Either.Either<ReadonlyArray<Generation.GenerationEvent>, ProviderFailure.ProviderFailure> =>
    Either.map(completeCalls(reconcile(response?.output)), (calls) => {
      finished = true
      const complete: Array<Generation.GenerationEvent> = []
      for (const item of response?.output ?? []) if (isReasoning(item)) reasoningComplete(item, complete)
      const hasCalls = calls.length > 0
      complete.push(...calls)
      model = Internal.modelOf(response?.model) ?? model
      const usage = response?.usage !== undefined && response?.usage !== null ? usageOf(response.usage) : undefined
      if (status === "incomplete") {
        const reason = response?.incomplete_details?.reason ?? undefined
        return [
          ...complete,
          ...Internal.finishEvents(
            usage,
            reason === "content_filter" ? "content_filter" : "length",
            reason ?? status,
            model
          )
        ]
      }
      return [...complete, ...Internal.finishEvents(usage, hasCalls ? "tool_calls" : "stop", status, model)]
    })

  /**
   * What a finished response's output adds to what was surfaced of it: the rest of its text, and of its reasoning
   * summaries when they extend what was shown. A final text that does not begin with the text surfaced is a
   * `ResumeGap`: the continuation left a hole or showed something twice, and is never committed.
   */
  const rest = (
    response: FinalResponse
  ): Either.Either<Array<Generation.GenerationEvent>, TransportError.TransportError> => {
    const shown = track?.text ?? ""
    const text = outputText(response)
    if (!text.startsWith(shown)) {
      return Either.left(
        new TransportError.TransportError({
          reason: "ResumeGap",
          detail:
            `${protocol}: the response's final text (${text.length} characters) does not begin with the ${shown.length} characters surfaced`
        })
      )
    }
    const out: Array<Generation.GenerationEvent> = []
    if (text.length > shown.length) out.push(Generation.TextDelta({ text: text.slice(shown.length) }))
    if (track !== undefined) track.text = text
    const summary = summaryText(response)
    const thought = track?.reasoning ?? ""
    // after reasoning text was shown, a summary would not extend it
    if (track?.rawReasoning !== true && summary.length > thought.length && summary.startsWith(thought)) {
      out.push(Generation.ReasoningDelta({ text: summary.slice(thought.length) }))
      if (track !== undefined) track.reasoning = summary
    }
    return Either.right(out)
  }

  const step = (
    event: Event,
    out: Array<Generation.GenerationEvent>
  ): ProviderFailure.ProviderFailure | undefined => {
    if (finished) return undefined
    if (isMarker(event)) {
      if (event === other) return undefined
      if (!doneIsTerminal) return SseInternal.prematureEof(protocol)
      const complete = completeCalls(streamedItems())
      if (Either.isLeft(complete)) return complete.left
      finished = true
      for (const call of complete.right) out.push(call)
      out.push(
        ...Internal.finishEvents(undefined, complete.right.length > 0 ? "tool_calls" : "stop", "[DONE]", model)
      )
      return undefined
    }
    switch (event.type) {
      case "response.output_text.delta": {
        const text = event.delta
        if (text === undefined || text === null || text.length === 0) return undefined
        if (track !== undefined) track.text += text
        out.push(Events.textDelta(text))
        return undefined
      }
      case "response.reasoning_summary_text.delta":
      case "response.reasoning_text.delta": {
        const text = event.delta
        if (text === undefined || text === null || text.length === 0) return undefined
        if (track !== undefined) {
          if (event.type === "response.reasoning_summary_text.delta") track.reasoning += text
          else track.rawReasoning = true
        }
        out.push(Events.reasoningDelta(text))
        return undefined
      }
      case "response.output_item.added":
      case "response.output_item.done": {
        const item = event.item
        if (item !== undefined && item !== null && isReasoning(item) && event.type === "response.output_item.done") {
          reasoningComplete(item, out)
          return undefined
        }
        if (item === undefined || item === null || !isFunctionCall(item)) return undefined
        const itemId = item.id ?? `item_${event.output_index ?? 0}`
        let call = calls.get(itemId)
        const isNew = call === undefined
        if (call === undefined) {
          call = {
            outputIndex: event.output_index ?? calls.size,
            ordinal: ordinal++,
            itemId,
            callId: undefined,
            name: undefined,
            arguments: ""
          }
          calls.set(itemId, call)
        }
        call.callId = item.call_id ?? call.callId
        call.name = item.name ?? call.name
        const args = item.arguments ?? undefined
        if (event.type === "response.output_item.done" && args !== undefined) call.arguments = args
        else if (isNew && args !== undefined) call.arguments = args
        if (isNew) {
          out.push(
            Generation.ToolCallDelta({ index: call.ordinal, id: call.callId, name: call.name, argumentsDelta: "" })
          )
        }
        return undefined
      }
      case "response.function_call_arguments.delta": {
        const call = calls.get(event.item_id ?? "")
        const delta = event.delta ?? ""
        if (call === undefined) return undefined
        call.arguments += delta
        out.push(
          Events.toolCallDelta(call.ordinal, call.callId, call.name, delta)
        )
        return undefined
      }
      case "response.function_call_arguments.done": {
        const call = calls.get(event.item_id ?? "")
        const args = event.arguments
        if (call !== undefined && args !== undefined && args !== null) call.arguments = args
        return undefined
      }
      case "response.completed":
      case "response.done":
      case "response.incomplete": {
        const status = event.type === "response.incomplete" ? "incomplete" : event.response?.status ?? "completed"
        if (status === "failed") {
          return inBand(settings, context.requestId, event.response?.error, {})
        }
        // A continued response's surfaced text must be the one its output holds, or the start of it.
        if (track?.resumed === true && listsMessage(event.response)) {
          const suffix = rest(event.response)
          if (Either.isLeft(suffix)) return suffix.left
          for (const e of suffix.right) out.push(e)
        }
        const events = terminal(event.response, status === "incomplete" ? "incomplete" : status)
        if (Either.isLeft(events)) return events.left
        for (const e of events.right) out.push(e)
        return undefined
      }
      case "response.failed":
        return inBand(settings, context.requestId, event.response?.error, {})
      case "error":
        return inBand(settings, context.requestId, event.error, event)
    }
  }

  const machine: SseInternal.Machine<Event> = {
    // A terminal or `response.failed` the machine fails on (a failed status, calls that cannot be completed) is the
    // response's end on the server; an `error` event ends the stream, not always the response; `[DONE]` before the
    // terminal is a premature EOF like any other.
    step: track === undefined ? step : (event, out) => {
      const failure = step(event, out)
      if (failure !== undefined && !isMarker(event)) {
        if (event.type === "error") track.erred = true
        else track.settled = true
      }
      return failure
    },
    done: () => finished,
    end: (failure) => Effect.fail(Option.getOrElse(failure, () => SseInternal.prematureEof(protocol)))
  }

  /**
   * The rest of the reply from a finished response object (a poll): {@link rest}, then the terminal's events: its
   * reasoning items and function calls not yet emitted, usage and the finish. A `failed` response is its in-band error,
   * a `cancelled` one a permanent `ProviderError{providerCode: "cancelled"}`.
   */
  const complete = (
    response: FinalResponse,
    status: "completed" | "incomplete" | "failed" | "cancelled"
  ): Either.Either<ReadonlyArray<Generation.GenerationEvent>, ProviderFailure.ProviderFailure> => {
    // finished on the server, whatever becomes of its output here
    if (track !== undefined) track.settled = true
    if (status === "failed" || status === "cancelled") {
      return Either.left(
        status === "failed"
          ? inBand(settings, context.requestId, response.error, {})
          : new TransportError.TransportError({
            reason: "ProviderError",
            providerCode: "cancelled",
            detail: `${protocol}: the response was cancelled on the server`
          })
      )
    }
    return Either.flatMap(
      rest(response),
      (suffix) => Either.map(terminal(response as typeof Response.Type, status), (events) => [...suffix, ...events])
    )
  }
  return { decode, machine, complete }
}

// ---------------------------------------------------------------------------------------------------------------
// constructors

/**
 * What a backend speaking Responses events does differently: its protocol name, its request body, and whether
 * `data: [DONE]` ends a reply. `openai-responses` is `{protocol, requestBody, doneIsTerminal: false}`; `Subscription`
 * is the variant with `store: false` in the body and `[DONE]` as a terminal.
 *
 * @since 0.1.0
 * @category models
 */
export interface Variant {
  readonly protocol: "openai-responses" | "subscription"
  readonly requestBody: (request: Generation.GenerationRequest) => Record<string, unknown>
  /**
   * `data: [DONE]` is a terminal: the withheld function calls are reconciled with the streamed items, and the
   * finish reason is `tool_calls` when there are calls, `stop` otherwise, with provider reason `[DONE]`. Otherwise
   * `[DONE]` before a terminal event is a premature EOF.
   */
  readonly doneIsTerminal: boolean
  /**
   * The backend keeps background responses (`background: true`), which a cut stream continues instead of
   * replaying: `openai-responses` does; `subscription` does not (it stores nothing).
   */
  readonly background?: boolean | undefined
}

/**
 * A provider of a Responses variant over the `HttpClient` in context, sending to `{base}/responses`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeVariant =
  (variant: Variant) => (options: Options): Effect.Effect<Provider.Service, never, HttpClient.HttpClient> =>
    Effect.map(HttpClient.HttpClient, (http) => {
      const settings = Settings.settings(variant.protocol, options)
      const client = Spans.scrubbedClient(http, settings.scrub)
      const url = Settings.endpoint(settings.baseUrl, "/responses")
      const spec = (request: Generation.GenerationRequest): Send.RequestSpec => ({
        url,
        headers: {},
        apiKeyHeader: "authorization",
        body: variant.requestBody(request),
        fallbacks
      })
      const plain = Internal.makeService({
        protocol: variant.protocol,
        client,
        settings,
        request: spec,
        decoder: (context) => decoder(variant.protocol, settings, context, variant.doneIsTerminal)
      })
      if (variant.background !== true) return plain
      const pollInterval = pollIntervalOf(options)
      return Provider.make({
        protocol: variant.protocol,
        endpoint: plain.endpoint,
        open: (request) =>
          request.background === true
            ? Provider.fromStream(backgroundStream(variant, client, settings, pollInterval, spec(request), request))
            : plain.open(request)
      })
    })

/** The wait between two polls of a continuation: `pollInterval`, default 1 second. */
const pollIntervalOf = (options: Options): Duration.Duration => {
  const interval = options.pollInterval === undefined ? Duration.seconds(1) : Duration.decode(options.pollInterval)
  if (!Duration.isFinite(interval) || Duration.lessThanOrEqualTo(interval, Duration.zero)) {
    throw new RangeError(`pollInterval must be a positive, finite duration, got ${Duration.format(interval)}`)
  }
  return interval
}

/**
 * A background response: the send, and the continuations it offers to the recovery scope (`Resumption`). One
 * machine reads the send and every continuation, so its calls, reasoning and cursor carry over.
 *
 * - A **resume** (after a cut stream, or a retryable failure of a resume) is one send,
 *   `GET …/responses/{id}?stream=true&starting_after=N`, N the cursor; the events it reads at or before N are
 *   dropped, and its first event after them must be N + 1 (otherwise a `ResumeGap`). Its terminal's output must
 *   hold the text surfaced (kept and resumed) or extend it, and then its rest is emitted; otherwise the resume showed
 *   a hole or a repeat, a `ResumeGap` of a response that has ended: replayed.
 * - A **poll** follows a refused resume (a 400, such as "can no longer be streamed", or a 404; a gap) at once, and
 *   takes the scope's last send in place of a resume: its first `GET` is the send, then it polls every
 *   `pollInterval` (not debited) until the response is finished, within the deadline, and emits the rest of the
 *   reply (`complete`). A poll that cannot account for the response (a 400 or 404, an object that does not decode,
 *   is another response's or has a status the API does not define) is a `ResumeGap`.
 * - Nothing continues a response that failed on the server, a stream without sequence numbers, a failure that is
 *   not retryable (other than a refusal), or a failed poll: that attempt is replayed like any other.
 * - `cancel` posts `{base}/responses/{id}/cancel`, not debited.
 */
const backgroundStream = (
  variant: Variant,
  client: HttpClient.HttpClient,
  settings: Settings.Settings,
  pollInterval: Duration.Duration,
  spec: Send.RequestSpec,
  request: Generation.GenerationRequest
): Stream.Stream<Generation.GenerationEvent, ProviderFailure.ProviderFailure | Budget.BudgetExhausted, Budget.Budget> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    const refused = RequestChecks.check(variant.protocol, request, settings.scrub)
    if (refused !== undefined) return yield* Effect.fail(refused)
    const track: Tracker = {
      responseId: undefined,
      cursor: undefined,
      expect: undefined,
      resumed: false,
      unnumbered: false,
      settled: false,
      erred: false,
      text: "",
      reasoning: "",
      rawReasoning: false
    }
    const context: { requestId: string | undefined } = { requestId: undefined }
    const { complete, decode, machine } = decoder(variant.protocol, settings, context, variant.doneIsTerminal, track)
    const read = (response: HttpClientResponse.HttpClientResponse) => {
      context.requestId = Option.getOrUndefined(Send.responseRequestId(response, settings.scrub))
      return SseInternal.run({ body: Body.pull(response), settings, decode, machine, requestId: context.requestId })
    }

    const resume = (id: string, after: number) =>
      Stream.unwrap(
        Effect.map(Background.resume(client, settings, id, after), (response) => {
          track.expect = after + 1
          track.resumed = true
          return read(response)
        })
      )

    // A poll that cannot account for the response is a gap of that poll, replayed like any gap: a refusal (400, or a
    // 404: the response is gone, nothing to cancel), an object that does not decode, that is another response's, or
    // whose status the API does not define. Other failures (401, 403, a 5xx, a reset) keep their own classification.
    const unaccounted = (detail: string, cause?: unknown) =>
      new TransportError.TransportError({
        reason: "ResumeGap",
        detail: `${variant.protocol}: the poll of the response ${detail}`,
        ...(cause === undefined ? {} : { cause })
      })
    const refusedPoll = <E>(error: E): E | TransportError.TransportError => {
      if (!ProviderRejection.isProviderRejection(error) || (error.status !== 400 && error.status !== 404)) return error
      if (error.status === 404) track.settled = true
      return unaccounted(`was refused (${error.message})`, error)
    }
    // a polled object is decoded like an event: its schema, its text scrubbed and cut in a complaint, and a value
    // nested too deep reported by its depth
    const decodePolled = SseInternal.jsonDecoder(FinalResponse, settings)
    const poll = (id: string) =>
      Stream.unwrap(Effect.gen(function*() {
        const allowance = yield* Budget.Budget
        let debit = true
        while (true) {
          const body = yield* Effect.mapError(Background.poll(client, settings, id, debit), refusedPoll)
          debit = false
          const response = decodePolled({ event: "response object", id: undefined, data: body })
          if (response instanceof SseInternal.Failed) {
            return yield* Effect.fail(unaccounted("answered an object that does not decode", response.failure))
          }
          if (response.id !== id) return yield* Effect.fail(unaccounted("answered another response's object"))
          const status = response.status
          if (status === "queued" || status === "in_progress") {
            const now = yield* Clock.currentTimeNanos
            if (now + Option.getOrElse(Duration.toNanos(pollInterval), () => 0n) >= allowance.deadlineAt) {
              return yield* Budget.deadlineReached(allowance)
            }
            yield* Effect.sleep(pollInterval)
            continue
          }
          if (status !== "completed" && status !== "incomplete" && status !== "failed" && status !== "cancelled") {
            return yield* Effect.fail(unaccounted("answered a status the API does not define"))
          }
          const events = complete(response, status)
          if (Either.isLeft(events)) return yield* Effect.fail(events.left)
          return Stream.fromIterable(events.right)
        }
      }))

    // the mode of the last continuation: a failed poll is not continued again
    let last: Resumption.Mode | undefined
    // A resume the server refused: it answered 400 (a response too old to stream) or 404, or the stream it sent
    // did not continue the cursor. Told by what the failure says, not by its identity: a failure crossing a span is
    // a proxy of the one raised.
    const refusal = (error: ProviderFailure.ProviderFailure): boolean =>
      last === "stream" && (
        error.status === 400 || error.status === 404 ||
        (TransportError.isTransportError(error) && error.reason === "ResumeGap")
      )
    const continuation = (
      mode: Resumption.Mode,
      id: string,
      from: number,
      immediate: boolean
    ): Option.Option<Resumption.Continuation> => {
      last = mode
      return Option.some({
        mode,
        fromSequence: from,
        immediate,
        stream: mode === "stream" ? resume(id, from) : poll(id)
      })
    }
    yield* Resumption.offer({
      responseId: () => track.responseId,
      settled: () => track.settled || machine.done(),
      continuation: ({ error, remainingAttempts, retryable, shownReasoning, shownText }) => {
        const id = track.responseId
        const from = track.cursor
        if (id === undefined || from === undefined || track.unnumbered || track.erred || last === "poll") {
          return Option.none()
        }
        // What the consumer has is what a continuation extends. Should output this stream counted have failed to
        // reach it, the events cannot be read again without reading some twice: the poll completes from its text.
        if (shownText !== track.text || (!track.rawReasoning && shownReasoning !== track.reasoning)) {
          track.text = shownText
          track.reasoning = shownReasoning
          return retryable || refusal(error) ? continuation("poll", id, from, false) : Option.none()
        }
        if (refusal(error)) return continuation("poll", id, from, true)
        if (!retryable) return Option.none()
        return continuation(remainingAttempts <= 1 ? "poll" : "stream", id, from, false)
      },
      cancel: Effect.suspend(() =>
        track.responseId === undefined ? Effect.void : Background.cancel(client, settings, track.responseId)
      )
    })
    return read(yield* Send.open(client, Send.prepare(spec, settings), settings))
  }))

const variant = makeVariant({ protocol, requestBody, doneIsTerminal: false, background: true })

/**
 * A Responses provider over the `HttpClient` in context (use `NodeHttpClient.layerUndici`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<Provider.Service, never, HttpClient.HttpClient> =>
  variant(options)

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<Provider.Provider, never, HttpClient.HttpClient> =>
  Layer.effect(Provider.Provider, make(options))

/**
 * The provider with its options from the environment: `OPENAI_API_KEY` (or `apiKeyEnv`), `OPENAI_BASE_URL` (default
 * `https://api.openai.com/v1`), `REPRISE_FIRST_BYTE_TIMEOUT`, `REPRISE_IDLE_TIMEOUT`,
 * `REPRISE_MAX_REPLY_BYTES`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  options?: ProviderOptions.ConfigOptions | undefined
): Layer.Layer<Provider.Provider, ConfigError.ConfigError, HttpClient.HttpClient> =>
  Layer.unwrapEffect(Effect.map(ProviderOptions.config(protocol, options), layer))
