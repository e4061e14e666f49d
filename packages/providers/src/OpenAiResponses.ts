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
 * - `[DONE]` is not a terminal here (see `Subscription`, the variant that accepts it: {@link makeVariant}).
 * - Capability fallback: when the model rejects `max_output_tokens` as unsupported, the request is sent once more
 *   without it (never without `tool_choice` or `text`: that would not be what was asked for).
 * - The request's `toolChoice` is `tool_choice` (sent only with tools; `"none"` keeps the tools in the request) and
 *   its `responseFormat` is `text.format`, a non-strict `json_schema` ({@link textFormat}).
 *
 * Every event the machine reads has its Schema ({@link readEvents}, told apart by `type` in {@link ResponsesEvent}):
 * a field of the wrong type fails the stream with `ProviderRejection{reason: "MalformedStream"}` naming the event,
 * where it used to be read as missing (the event schema had a `Schema.Unknown` for each field the machine read, and
 * the machine checked them by hand). A field may still be absent or `null`, which is read as missing, as before. The
 * hot events (text, reasoning and argument deltas) are checked by a guard that is equal to their schema over
 * generated values and costs a fraction of its parse.
 *
 * The state machine, the request body and the event schema lived in `internal/responses.ts` behind this module;
 * they are here now, so the protocol is read in the file named after it, and `Subscription` is a variant of it
 * ({@link makeVariant}) instead of a protocol name the shared machine tested.
 *
 * @since 0.1.0
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import * as Provider from "@reprise/core/Provider"
import type * as ProviderFailure from "@reprise/core/ProviderFailure"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Types from "effect/Types"
import * as Failure from "./internal/failure.js"
import * as Fallback from "./internal/fallback.js"
import * as Internal from "./internal/provider.js"
import * as RequestChecks from "./internal/requestChecks.js"
import { byType, guarded, isNullableString, nullable, optional } from "./internal/schema.js"
import * as Settings from "./internal/settings.js"
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
export interface Options extends ProviderOptions.Options {}

// ---------------------------------------------------------------------------------------------------------------
// events

const NullableString = optional(nullable(Schema.String))

const Usage = Schema.Struct({
  input_tokens: optional(nullable(Schema.Number)),
  output_tokens: optional(nullable(Schema.Number))
})

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
  status: NullableString,
  output: optional(nullable(Schema.Array(OutputItem))),
  usage: optional(nullable(Usage)),
  incomplete_details: optional(nullable(Schema.Struct({ reason: NullableString }))),
  error: optional(nullable(ErrorObject))
}).annotations({ identifier: "Response" })

// The hot events (text, reasoning and argument deltas, one per token or so) are checked by a guard that accepts what
// their schema accepts and returns what it returns (`guarded`; proven over generated values in
// test/ResponsesEvent.test.ts). Decoding a delta this way costs about 0.1 µs, the schema's own parse several times
// that, and the untyped event schema these replaced about 0.6 µs (median of 16 interleaved runs each).

/** A `delta` event's guard: `delta` absent, `null` or a string. */
const deltaGuard = <T extends string>(input: { readonly delta?: unknown }, type: T) => {
  const delta = input.delta
  return delta === undefined ? { type } : isNullableString(delta) ? { type, delta } : undefined
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
    delta: NullableString
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
    delta: NullableString
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
  item: optional(nullable(OutputItem))
})

const ArgumentsDelta = Schema.Struct({
  type: Schema.Literal("response.function_call_arguments.delta"),
  item_id: NullableString,
  delta: NullableString
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
  if (!isNullableString(itemId) || !isNullableString(delta)) return undefined
  const out: Types.Mutable<typeof ArgumentsDelta.Type> = { type }
  if (itemId !== undefined) out.item_id = itemId
  if (delta !== undefined) out.delta = delta
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
  arguments: NullableString
})

/**
 * The terminal events. `response.completed` and `response.done` with the status `failed` are failures, like
 * `response.failed`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const TerminalEvent = Schema.Struct({
  type: Schema.Literal("response.completed", "response.done", "response.incomplete"),
  response: optional(nullable(Response))
})

/**
 * @since 0.1.0
 * @category schemas
 */
export const FailedEvent = Schema.Struct({
  type: Schema.Literal("response.failed"),
  response: optional(nullable(Response))
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
  error: optional(nullable(ErrorObject))
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
  response: optional(nullable(Response))
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
 * `function_call_output` items, an assistant message's {@link reasoningItems} first), `tools`, `tool_choice` ({@link toolChoice}, only with tools), `text`
 * ({@link textFormat}, for a `responseFormat`), `max_output_tokens` and `stream: true`. A request without
 * `toolChoice` and `responseFormat` has neither field.
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
    stream: true
  }
}

const fallbacks: Fallback.Fallbacks = { max_output_tokens: Fallback.without("max_output_tokens") }

// ---------------------------------------------------------------------------------------------------------------
// the state machine

type Event =
  | { readonly _tag: "Event"; readonly event: ReadEvent }
  | { readonly _tag: "Other" }
  | { readonly _tag: "Done" }

const done: Event = { _tag: "Done" }
const other: Event = { _tag: "Other" }

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
 * The Responses state machine. With `doneIsTerminal`, `data: [DONE]` is a terminal too (subscription backends);
 * without it, `[DONE]` before a terminal event ends the stream as a premature EOF.
 */
const decoder = (
  protocol: Variant["protocol"],
  settings: Settings.Settings,
  context: { readonly requestId: string | undefined },
  doneIsTerminal: boolean
) => {
  const decodeEvent = SseInternal.jsonDecoder(ResponsesEvent, settings)
  // A `keepalive` event (sent during long server-side work) is not progress, like an SSE comment or a `ping`.
  const decode: SseInternal.Decode<Event> = (event: SseInternal.Event) =>
    event.data.trim() === "[DONE]"
      ? Either.right(Option.some(done))
      : Either.map(
        decodeEvent(event),
        (e) =>
          isRead(e)
            ? Option.some<Event>({ _tag: "Event", event: e })
            : e.type === "keepalive"
            ? Option.none()
            : Option.some(other)
      )

  const calls = new Map<string, StreamedCall>()
  // reasoning items already emitted, by id: the terminal's output repeats them
  const reasoned = new Set<string>()
  let ordinal = 0
  let finished = false

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
      const usage = response?.usage !== undefined && response?.usage !== null
        ? { inputTokens: response.usage.input_tokens ?? 0, outputTokens: response.usage.output_tokens ?? 0 }
        : undefined
      if (status === "incomplete") {
        const reason = response?.incomplete_details?.reason ?? undefined
        return [
          ...complete,
          ...Internal.finishEvents(usage, reason === "content_filter" ? "content_filter" : "length", reason ?? status)
        ]
      }
      return [...complete, ...Internal.finishEvents(usage, hasCalls ? "tool_calls" : "stop", status)]
    })

  const step = (
    input: Event
  ): Either.Either<ReadonlyArray<Generation.GenerationEvent>, ProviderFailure.ProviderFailure> => {
    if (finished || input._tag === "Other") return Either.right([])
    if (input._tag === "Done") {
      if (!doneIsTerminal) return Either.left(SseInternal.prematureEof(protocol))
      return Either.map(completeCalls(streamedItems()), (complete) => {
        finished = true
        return [...complete, ...Internal.finishEvents(undefined, complete.length > 0 ? "tool_calls" : "stop", "[DONE]")]
      })
    }
    const event = input.event
    switch (event.type) {
      case "response.output_text.delta": {
        const text = event.delta
        return Either.right(
          text !== undefined && text !== null && text.length > 0 ? [Generation.TextDelta({ text })] : []
        )
      }
      case "response.reasoning_summary_text.delta":
      case "response.reasoning_text.delta": {
        const text = event.delta
        return Either.right(
          text !== undefined && text !== null && text.length > 0 ? [Generation.ReasoningDelta({ text })] : []
        )
      }
      case "response.output_item.added":
      case "response.output_item.done": {
        const item = event.item
        if (item !== undefined && item !== null && isReasoning(item) && event.type === "response.output_item.done") {
          const out: Array<Generation.GenerationEvent> = []
          reasoningComplete(item, out)
          return Either.right(out)
        }
        if (item === undefined || item === null || !isFunctionCall(item)) return Either.right([])
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
        return Either.right(
          isNew
            ? [Generation.ToolCallDelta({ index: call.ordinal, id: call.callId, name: call.name, argumentsDelta: "" })]
            : []
        )
      }
      case "response.function_call_arguments.delta": {
        const call = calls.get(event.item_id ?? "")
        const delta = event.delta ?? ""
        if (call === undefined) return Either.right([])
        call.arguments += delta
        return Either.right([
          Generation.ToolCallDelta({ index: call.ordinal, id: call.callId, name: call.name, argumentsDelta: delta })
        ])
      }
      case "response.function_call_arguments.done": {
        const call = calls.get(event.item_id ?? "")
        const args = event.arguments
        if (call !== undefined && args !== undefined && args !== null) call.arguments = args
        return Either.right([])
      }
      case "response.completed":
      case "response.done":
      case "response.incomplete": {
        const status = event.type === "response.incomplete" ? "incomplete" : event.response?.status ?? "completed"
        if (status === "failed") {
          return Either.left(inBand(settings, context.requestId, event.response?.error, {}))
        }
        return terminal(event.response, status === "incomplete" ? "incomplete" : status)
      }
      case "response.failed":
        return Either.left(inBand(settings, context.requestId, event.response?.error, {}))
      case "error":
        return Either.left(inBand(settings, context.requestId, event.error, event))
    }
  }

  const machine: SseInternal.Machine<Event> = {
    step,
    done: () => finished,
    end: (failure) => Effect.fail(Option.getOrElse(failure, () => SseInternal.prematureEof(protocol)))
  }
  return { decode, machine }
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
}

/**
 * A provider of a Responses variant over the `HttpClient` in context, sending to `{base}/responses`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeVariant =
  (variant: Variant) => (options: Options): Effect.Effect<Provider.Service, never, HttpClient.HttpClient> =>
    Effect.map(HttpClient.HttpClient, (client) => {
      const settings = Settings.settings(variant.protocol, options)
      const url = Settings.endpoint(settings.baseUrl, "/responses")
      return Internal.makeService({
        protocol: variant.protocol,
        client,
        settings,
        request: (request) => ({
          url,
          headers: {},
          apiKeyHeader: "authorization",
          body: variant.requestBody(request),
          fallbacks
        }),
        decoder: (context) => decoder(variant.protocol, settings, context, variant.doneIsTerminal)
      })
    })

const variant = makeVariant({ protocol, requestBody, doneIsTerminal: false })

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
