/**
 * The Responses event machine shared by `openai-responses` and `subscription`, and the Responses request body.
 *
 * @internal
 */
import type * as Sse from "@effect/experimental/Sse"
import type * as HttpClient from "@effect/platform/HttpClient"
import * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import type * as Provider from "@reprise/core/Provider"
import type * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import type * as ProviderOptions from "../ProviderOptions.js"
import * as Http from "./http.js"
import * as Internal from "./provider.js"
import { nullable, optional } from "./schema.js"
import * as SseInternal from "./sse.js"

const Usage = Schema.Struct({
  input_tokens: optional(nullable(Schema.Number)),
  output_tokens: optional(nullable(Schema.Number))
})

/**
 * One Responses stream event, as far as reprise reads it. Fields whose shape differs between event types are read
 * defensively; unknown fields and event types are ignored.
 *
 * @internal
 */
export const ResponsesEvent = Schema.Struct({
  type: Schema.String,
  delta: optional(Schema.Unknown),
  item_id: optional(Schema.Unknown),
  output_index: optional(Schema.Unknown),
  item: optional(Schema.Unknown),
  arguments: optional(Schema.Unknown),
  code: optional(Schema.Unknown),
  message: optional(Schema.Unknown),
  error: optional(Schema.Unknown),
  response: optional(nullable(Schema.Struct({
    status: optional(Schema.Unknown),
    output: optional(Schema.Unknown),
    usage: optional(nullable(Usage)),
    incomplete_details: optional(Schema.Unknown),
    error: optional(Schema.Unknown)
  })))
})

/** @internal */
export type ResponsesEvent = typeof ResponsesEvent.Type

type Event = { readonly _tag: "Event"; readonly event: ResponsesEvent } | { readonly _tag: "Done" }

const str = (u: unknown): string | undefined => (typeof u === "string" ? u : undefined)
const field = (u: unknown, key: string): unknown => (Predicate.isRecord(u) ? u[key] : undefined)

/**
 * The JSON body of a request: `model`, `instructions` (the system text), `input` (messages, `function_call` and
 * `function_call_output` items), `tools`, `max_output_tokens`, `stream: true`.
 *
 * @internal
 */
export const requestBody = (request: Generation.GenerationRequest): Record<string, unknown> => {
  const input: Array<Record<string, unknown>> = []
  for (const m of request.messages as ReadonlyArray<Message.Message>) {
    switch (m.role) {
      case "system":
      case "user":
        input.push({ role: m.role, content: m.text })
        break
      case "assistant":
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
    ...(request.maxTokens !== undefined ? { max_output_tokens: request.maxTokens } : {}),
    stream: true
  }
}

/**
 * The capability fallback of the Responses protocols: `max_output_tokens`, when rejected as unsupported, is dropped
 * for one resend.
 *
 * @internal
 */
export const fallbacks = {
  max_output_tokens: (body: Readonly<Record<string, unknown>>): Record<string, unknown> => {
    const { max_output_tokens: _, ...rest } = body
    return rest
  }
}

interface StreamedCall {
  readonly outputIndex: number
  readonly ordinal: number
  readonly itemId: string
  callId: string | undefined
  name: string | undefined
  arguments: string
}

const inBand = (
  settings: Http.Settings,
  requestId: string | undefined,
  error: unknown,
  fallback: { readonly code?: unknown; readonly message?: unknown }
) =>
  Http.inBandError(settings, {
    code: str(field(error, "code")) ?? str(fallback.code),
    type: str(field(error, "type")),
    detail: str(field(error, "message")) ?? str(fallback.message),
    requestId
  })

/**
 * The Responses state machine. With `acceptDone`, `data: [DONE]` is a terminal too (subscription backends); without
 * it, `[DONE]` before a terminal event ends the stream as a premature EOF.
 *
 * @internal
 */
export const decoder = (
  protocol: string,
  settings: Http.Settings,
  context: { readonly requestId: string | undefined },
  acceptDone: boolean
) => {
  const decodeEvent = SseInternal.jsonDecoder(ResponsesEvent, settings)
  // A `keepalive` event (sent during long server-side work) is not progress, like an SSE comment or a `ping`.
  const decode: SseInternal.Decode<Event> = (event: Sse.Event) =>
    event.data.trim() === "[DONE]"
      ? Either.right(Option.some({ _tag: "Done" }))
      : Either.map(
        decodeEvent(event),
        (e) => e.type === "keepalive" ? Option.none() : Option.some({ _tag: "Event", event: e })
      )

  const calls = new Map<string, StreamedCall>()
  let ordinal = 0
  let done = false

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
  const reconcile = (output: unknown) => {
    const streamed = streamedItems()
    // A listed call without arguments keeps what was streamed for it (matched by call id or item id).
    const streamedArguments = (callId: string | undefined, key: string | undefined) =>
      streamed.find((call) => (callId !== undefined && call.callId === callId) || call.key === key)?.arguments ?? ""
    const listed = Array.isArray(output)
      ? output.filter((item) => field(item, "type") === "function_call").map((item, i) => {
        const callId = str(field(item, "call_id"))
        const id = str(field(item, "id"))
        return {
          callId,
          name: str(field(item, "name")),
          arguments: str(field(item, "arguments")) ?? streamedArguments(callId, id),
          key: id ?? `call_${i}`
        }
      })
      : []
    return listed.length > 0 ? listed : streamed
  }

  const terminal = (
    response: ResponsesEvent["response"],
    status: string
  ): Either.Either<ReadonlyArray<Generation.GenerationEvent>, ProviderFailure.ProviderFailure> =>
    Either.map(completeCalls(reconcile(response?.output)), (complete) => {
      done = true
      const usage = response?.usage !== undefined && response?.usage !== null
        ? { inputTokens: response.usage.input_tokens ?? 0, outputTokens: response.usage.output_tokens ?? 0 }
        : undefined
      if (status === "incomplete") {
        const reason = str(field(response?.incomplete_details, "reason"))
        return [
          ...complete,
          ...Internal.finishEvents(usage, reason === "content_filter" ? "content_filter" : "length", reason ?? status)
        ]
      }
      return [...complete, ...Internal.finishEvents(usage, complete.length > 0 ? "tool_calls" : "stop", status)]
    })

  const step = (
    input: Event
  ): Either.Either<ReadonlyArray<Generation.GenerationEvent>, ProviderFailure.ProviderFailure> => {
    if (done) return Either.right([])
    if (input._tag === "Done") {
      if (!acceptDone) return Either.left(SseInternal.prematureEof(protocol))
      return Either.map(completeCalls(streamedItems()), (complete) => {
        done = true
        return [...complete, ...Internal.finishEvents(undefined, complete.length > 0 ? "tool_calls" : "stop", "[DONE]")]
      })
    }
    const event = input.event
    switch (event.type) {
      case "response.output_text.delta": {
        const text = str(event.delta)
        return Either.right(text !== undefined && text.length > 0 ? [Generation.TextDelta({ text })] : [])
      }
      case "response.reasoning_summary_text.delta":
      case "response.reasoning_text.delta": {
        const text = str(event.delta)
        return Either.right(text !== undefined && text.length > 0 ? [Generation.ReasoningDelta({ text })] : [])
      }
      case "response.output_item.added":
      case "response.output_item.done": {
        const item = event.item
        if (field(item, "type") !== "function_call") return Either.right([])
        const itemId = str(field(item, "id")) ??
          `item_${typeof event.output_index === "number" ? event.output_index : 0}`
        let call = calls.get(itemId)
        const isNew = call === undefined
        if (call === undefined) {
          call = {
            outputIndex: typeof event.output_index === "number" ? event.output_index : calls.size,
            ordinal: ordinal++,
            itemId,
            callId: undefined,
            name: undefined,
            arguments: ""
          }
          calls.set(itemId, call)
        }
        call.callId = str(field(item, "call_id")) ?? call.callId
        call.name = str(field(item, "name")) ?? call.name
        const args = str(field(item, "arguments"))
        if (event.type === "response.output_item.done" && args !== undefined) call.arguments = args
        else if (isNew && args !== undefined) call.arguments = args
        return Either.right(
          isNew
            ? [Generation.ToolCallDelta({ index: call.ordinal, id: call.callId, name: call.name, argumentsDelta: "" })]
            : []
        )
      }
      case "response.function_call_arguments.delta": {
        const call = calls.get(str(event.item_id) ?? "")
        const delta = str(event.delta) ?? ""
        if (call === undefined) return Either.right([])
        call.arguments += delta
        return Either.right([
          Generation.ToolCallDelta({ index: call.ordinal, id: call.callId, name: call.name, argumentsDelta: delta })
        ])
      }
      case "response.function_call_arguments.done": {
        const call = calls.get(str(event.item_id) ?? "")
        const args = str(event.arguments)
        if (call !== undefined && args !== undefined) call.arguments = args
        return Either.right([])
      }
      case "response.completed":
      case "response.done":
      case "response.incomplete": {
        const status = event.type === "response.incomplete"
          ? "incomplete"
          : str(event.response?.status) ?? "completed"
        if (status === "failed") {
          return Either.left(inBand(settings, context.requestId, event.response?.error, {}))
        }
        return terminal(event.response, status === "incomplete" ? "incomplete" : status)
      }
      case "response.failed":
        return Either.left(inBand(settings, context.requestId, event.response?.error, {}))
      case "error":
        return Either.left(inBand(settings, context.requestId, event.error, event))
      default:
        return Either.right([])
    }
  }

  const machine: SseInternal.Machine<Event> = {
    step,
    done: () => done,
    end: (failure) => Effect.fail(Option.getOrElse(failure, () => SseInternal.prematureEof(protocol)))
  }
  return { decode, machine }
}

/**
 * A provider speaking Responses events over `{base}/responses`: `openai-responses`, or `subscription`, which also
 * accepts `data: [DONE]` as a terminal.
 *
 * @internal
 */
export const makeService = (
  protocol: "openai-responses" | "subscription",
  client: HttpClient.HttpClient,
  options: ProviderOptions.Options,
  body: (request: Generation.GenerationRequest) => Record<string, unknown>
): Provider.Service => {
  const settings = Http.settings(protocol, options)
  const url = Http.endpoint(settings.baseUrl, "/responses")
  return Internal.makeService({
    protocol,
    client,
    settings,
    request: (request) => ({
      url,
      headers: {},
      apiKeyHeader: "authorization",
      body: body(request),
      fallbacks
    }),
    decoder: (context) => decoder(protocol, settings, context, protocol === "subscription")
  })
}
