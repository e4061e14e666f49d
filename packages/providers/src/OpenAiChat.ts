/**
 * The `openai-chat` protocol: OpenAI Chat Completions (`POST {base}/chat/completions`, `Authorization: Bearer`) and
 * the many servers that speak it.
 *
 * - The terminal is a choice with a non-null `finish_reason`. `[DONE]` alone is not a terminal; a usage-only chunk
 *   after the finish is normal and read until `[DONE]` or the end of the body. Once the terminal has arrived, a
 *   failure while reading that trailer ends the stream normally: the reply is complete.
 * - `tool_calls` deltas accumulate by `index`; the arguments are parsed when the terminal arrives, and a call whose
 *   arguments are not complete JSON then fails the stream with `TruncatedToolArguments` (nested deeper than
 *   `ProviderOptions.maxNestingDepth`: a permanent `MalformedStream`) and is never emitted.
 * - An `{"error": {...}}` chunk is an in-band error classified by its code and type.
 * - A chunk whose data is not JSON (other than `[DONE]`) fails the attempt with a retryable
 *   `TransportError{reason: "MalformedChunk"}`; a JSON chunk that does not match the schema is a permanent
 *   `ProviderRejection{reason: "MalformedStream"}`.
 * - Usage: the request asks for it in the stream (`stream_options: {include_usage: true}`) unless the option
 *   `streamUsage` is `false` (`REPRISE_STREAM_USAGE`); the usage-only chunk becomes a `Usage` event: `prompt_tokens`
 *   (every input token, cached included) and `completion_tokens`, and from `prompt_tokens_details` `cached_tokens` as
 *   `cacheReadTokens` and `cache_write_tokens` as `cacheWriteTokens` when the server reports them. A server that
 *   rejects `stream_options` gets the request once more without it (below), and that reply has no usage.
 * - `reasoning_content` / `reasoning` deltas are `ReasoningDelta`s, for display only: Chat Completions has no
 *   reasoning input, and providers that stream it (DeepSeek) ask not to send it back, so an assistant message's
 *   `reasoning` parts are never sent and no `ReasoningComplete` is emitted.
 * - Capability fallback: when the model rejects `max_tokens` as unsupported, the request is sent once more with
 *   `max_completion_tokens`; when it rejects `stream_options`, once more without it. `tool_choice` and
 *   `response_format` have no fallback: a server that rejects them fails the request (`BadRequest`), since a resend
 *   without them would not be what was asked for.
 * - The request's `toolChoice` is `tool_choice` (sent only with tools; `"none"` keeps the tools in the request) and
 *   its `responseFormat` is a non-strict `response_format` of type `json_schema` ({@link responseFormat} says why
 *   not strict).
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
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Events from "./internal/events.js"
import * as Failure from "./internal/failure.js"
import * as Fallback from "./internal/fallback.js"
import * as Internal from "./internal/provider.js"
import * as RequestChecks from "./internal/requestChecks.js"
import { isNullableNumber, isNullableString, nullable, optional, withGuard } from "./internal/schema.js"
import * as Settings from "./internal/settings.js"
import * as Spans from "./internal/spans.js"
import * as SseInternal from "./internal/sse.js"
import * as ProviderOptions from "./ProviderOptions.js"

/**
 * @since 0.1.0
 * @category constants
 */
export const protocol = "openai-chat" as const

/**
 * @since 0.1.0
 * @category models
 */
export interface Options extends ProviderOptions.Options {}

const NullableString = optional(nullable(Schema.String))

const ToolCallChunk = Schema.Struct({
  index: optional(nullable(Schema.Number)),
  id: NullableString,
  function: optional(nullable(Schema.Struct({ name: NullableString, arguments: NullableString })))
})

const Choice = Schema.Struct({
  index: optional(nullable(Schema.Number)),
  delta: optional(nullable(Schema.Struct({
    content: NullableString,
    reasoning_content: NullableString,
    reasoning: NullableString,
    tool_calls: optional(nullable(Schema.Array(ToolCallChunk)))
  }))),
  finish_reason: NullableString
})

const Usage = Schema.Struct({
  prompt_tokens: optional(nullable(Schema.Number)),
  completion_tokens: optional(nullable(Schema.Number)),
  prompt_tokens_details: optional(nullable(Schema.Struct({
    cached_tokens: optional(nullable(Schema.Number)),
    cache_write_tokens: optional(nullable(Schema.Number))
  })))
})

const ErrorObject = Schema.Struct({
  message: NullableString,
  type: NullableString,
  code: optional(nullable(Schema.Union(Schema.String, Schema.Number)))
})

const ChatChunkStruct = Schema.Struct({
  // not checked: read when it is a string (the model that served the reply)
  model: optional(Schema.Unknown),
  choices: optional(nullable(Schema.Array(Choice))),
  usage: optional(nullable(Usage)),
  error: optional(nullable(ErrorObject))
})

// The guard of a chunk: one per token, so the stream's hot event. It type-checks every member the schema declares,
// at every level, and takes the chunk as it is (what `JSON.parse` built: members the schema does not declare stay on
// it, unread); anything it does not take (an array where an object is, a wrong type anywhere) is left to the schema,
// which reports the issue. It takes only what the schema accepts, and the schema's value agrees with the chunk on
// every member it declares: test/HotEvents.test.ts, over generated values.

const isToolCall = (input: unknown): boolean => {
  if (!Predicate.isRecord(input)) return false
  const fn = input.function
  if (!isNullableNumber(input.index) || !isNullableString(input.id)) return false
  return fn === undefined || fn === null ||
    (Predicate.isRecord(fn) && isNullableString(fn.name) && isNullableString(fn.arguments))
}

const isChoiceDelta = (input: unknown): boolean => {
  if (!Predicate.isRecord(input)) return false
  const { content, reasoning, reasoning_content, tool_calls } = input
  if (!isNullableString(content) || !isNullableString(reasoning_content) || !isNullableString(reasoning)) return false
  if (tool_calls === undefined || tool_calls === null) return true
  if (!Array.isArray(tool_calls)) return false
  for (const call of tool_calls) if (!isToolCall(call)) return false
  return true
}

const isChoice = (input: unknown): boolean => {
  if (!Predicate.isRecord(input)) return false
  const delta = input.delta
  return isNullableNumber(input.index) && isNullableString(input.finish_reason) &&
    (delta === undefined || delta === null || isChoiceDelta(delta))
}

const isUsage = (input: unknown): boolean => {
  if (!Predicate.isRecord(input)) return false
  const details = input.prompt_tokens_details
  return isNullableNumber(input.prompt_tokens) && isNullableNumber(input.completion_tokens) &&
    (details === undefined || details === null ||
      (Predicate.isRecord(details) && isNullableNumber(details.cached_tokens) &&
        isNullableNumber(details.cache_write_tokens)))
}

const isError = (input: unknown): boolean => {
  if (!Predicate.isRecord(input)) return false
  const code = input.code
  return isNullableString(input.message) && isNullableString(input.type) &&
    (code === undefined || code === null || typeof code === "string" || typeof code === "number")
}

const chunkGuard = (input: unknown): typeof ChatChunkStruct.Type | undefined => {
  if (!Predicate.isRecord(input)) return undefined
  const { choices, error, usage } = input
  if (choices !== undefined && choices !== null) {
    if (!Array.isArray(choices)) return undefined
    for (const choice of choices) if (!isChoice(choice)) return undefined
  }
  if (usage !== undefined && usage !== null && !isUsage(usage)) return undefined
  if (error !== undefined && error !== null && !isError(error)) return undefined
  // every member the schema declares is of its type
  return input as typeof ChatChunkStruct.Type
}

/**
 * One Chat Completions chunk, as far as reprise reads it. Unknown fields are ignored.
 *
 * The stream's decoder checks a chunk with a guard first (`internal/schema.ts`, `withGuard`): it type-checks the same
 * members and takes the chunk as it is, and leaves a chunk it does not take to this schema, which reports its issue.
 * `Schema.decodeUnknownEither(ChatChunk)` is the schema alone.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ChatChunk = withGuard(ChatChunkStruct, chunkGuard)

/**
 * @since 0.1.0
 * @category schemas
 */
export type ChatChunk = typeof ChatChunk.Type

/**
 * Maps a Chat Completions `finish_reason`.
 *
 * @since 0.1.0
 * @category finish reasons
 */
export const finishReason = (reason: string): Generation.FinishReason => {
  switch (reason) {
    case "stop":
      return "stop"
    case "length":
      return "length"
    case "tool_calls":
    case "function_call":
      return "tool_calls"
    case "content_filter":
      return "content_filter"
    default:
      return "other"
  }
}

const message = (m: Message.Message): Record<string, unknown> => {
  switch (m.role) {
    case "system":
    case "user":
      return { role: m.role, content: m.text }
    case "assistant":
      return m.toolCalls.length === 0
        ? { role: "assistant", content: m.text }
        : {
          role: "assistant",
          content: m.text.length > 0 ? m.text : null,
          tool_calls: m.toolCalls.map((call) => ({
            id: call.id,
            type: "function",
            function: { name: call.name, arguments: JSON.stringify(call.arguments ?? {}) }
          }))
        }
    case "tool":
      return { role: "tool", tool_call_id: m.toolCallId, content: m.content }
  }
}

/**
 * A request's tool choice as Chat Completions' `tool_choice`: `"auto"`, `"none"`, `"required"`, or
 * `{type: "function", function: {name}}` for `{ tool }`.
 *
 * @since 0.1.0
 * @category request
 */
export const toolChoice = (choice: Generation.ToolChoice): unknown =>
  typeof choice === "string" ? choice : { type: "function", function: { name: choice.tool } }

/**
 * A request's response format as Chat Completions' `response_format`:
 * `{type: "json_schema", json_schema: {name, description?, schema, strict: false}}`.
 *
 * `strict` is `false`: strict mode accepts only a subset of JSON Schema (every object with
 * `additionalProperties: false` and all of its properties `required`, no open records, fewer keywords), and the
 * schemas an app writes (an optional field in an Effect `Schema.Struct`, say) often fall outside it, which strict mode
 * answers with a 400. Non-strict, the schema guides the model and the caller checks the value (`@effect/ai` decodes
 * it against its Schema).
 *
 * @since 0.1.0
 * @category request
 */
export const responseFormat = (format: Generation.ResponseFormat): unknown => ({
  type: "json_schema",
  json_schema: {
    name: format.name,
    ...(format.description !== undefined ? { description: format.description } : {}),
    schema: format.schema,
    strict: false
  }
})

/**
 * The JSON body of a request: `model`, `messages` (system first), `tools`, `tool_choice` ({@link toolChoice}, only
 * with tools), `response_format` ({@link responseFormat}), `max_tokens`, `stream: true` and, unless `streamUsage` is
 * `false`, `stream_options: {include_usage: true}`. A request without `toolChoice` and `responseFormat` has neither
 * field.
 *
 * @since 0.1.0
 * @category request
 */
export const requestBody = (
  request: Generation.GenerationRequest,
  options?: { readonly streamUsage?: boolean | undefined } | undefined
): Record<string, unknown> => {
  const messages: Array<Record<string, unknown>> = []
  if (request.system !== undefined && request.system.length > 0) {
    messages.push({ role: "system", content: request.system })
  }
  for (const m of request.messages) messages.push(message(m))
  const choice = RequestChecks.toolChoice(request)
  const streamUsage = options?.streamUsage ?? ProviderOptions.defaultStreamUsage
  return {
    model: request.model,
    messages,
    ...(request.tools !== undefined && request.tools.length > 0
      ? {
        tools: request.tools.map((tool) => ({
          type: "function",
          function: { name: tool.name, description: tool.description, parameters: tool.parameters }
        }))
      }
      : {}),
    ...(choice !== undefined ? { tool_choice: toolChoice(choice) } : {}),
    ...(request.responseFormat !== undefined ? { response_format: responseFormat(request.responseFormat) } : {}),
    ...(request.maxTokens !== undefined ? { max_tokens: request.maxTokens } : {}),
    stream: true,
    ...(streamUsage ? { stream_options: { include_usage: true } } : {})
  }
}

const fallbacks: Fallback.Fallbacks = {
  max_tokens: (body) => ({ ...Fallback.without("max_tokens")(body), max_completion_tokens: body.max_tokens }),
  stream_options: Fallback.without("stream_options")
}

/** A usage block as `Usage`: the cache figures only when the server reported them. */
const usageOf = (usage: typeof Usage.Type): Generation.Usage => {
  const read = usage.prompt_tokens_details?.cached_tokens
  const write = usage.prompt_tokens_details?.cache_write_tokens
  return {
    inputTokens: usage.prompt_tokens ?? 0,
    outputTokens: usage.completion_tokens ?? 0,
    ...(typeof read === "number" ? { cacheReadTokens: read } : {}),
    ...(typeof write === "number" ? { cacheWriteTokens: write } : {})
  }
}

interface PendingCall {
  id: string | undefined
  name: string | undefined
  arguments: string
}

// `data: [DONE]`; every other event is a chunk, passed to the machine as it is
const doneEvent = { _tag: "Done" } as const

type ChatEvent = ChatChunk | typeof doneEvent

// by identity: a chunk is the server's JSON, which may hold any member
const isDone = (event: ChatEvent): event is typeof doneEvent => event === doneEvent

const decoder = (settings: Settings.Settings, context: { readonly requestId: string | undefined }) => {
  const decodeChunk = SseInternal.jsonDecoder(ChatChunk, settings)
  const decode: SseInternal.Decode<ChatEvent> = (event: SseInternal.Event) =>
    event.data.trim() === "[DONE]" ? doneEvent : decodeChunk(event)

  const calls = new Map<number, PendingCall>()
  let finish: { readonly reason: Generation.FinishReason; readonly providerReason: string } | undefined
  // the model the chunks name
  let model: string | undefined
  let done = false

  const terminal = (): Generation.GenerationEvent => {
    done = true
    return Internal.finish(finish!.reason, finish!.providerReason, model)
  }

  const completeCalls = (): Either.Either<Array<Generation.GenerationEvent>, ProviderFailure.ProviderFailure> => {
    const out: Array<Generation.GenerationEvent> = []
    for (const index of [...calls.keys()].sort((a, b) => a - b)) {
      const call = calls.get(index)!
      const args = Internal.toolArguments(protocol, call.name, call.arguments, settings.scrub)
      if (Either.isLeft(args)) return Either.left(args.left)
      out.push(Generation.ToolCallComplete({
        call: { id: call.id ?? `call_${index}`, name: call.name ?? "", arguments: args.right }
      }))
    }
    return Either.right(out)
  }

  const step = (
    event: ChatEvent,
    out: Array<Generation.GenerationEvent>
  ): ProviderFailure.ProviderFailure | undefined => {
    if (done) return undefined
    if (isDone(event)) {
      if (finish === undefined) return SseInternal.prematureEof(protocol)
      out.push(terminal())
      return undefined
    }
    const chunk = event
    if (model === undefined) model = Internal.modelOf(chunk.model)
    if (chunk.error !== undefined && chunk.error !== null) {
      if (finish !== undefined) {
        out.push(terminal())
        return undefined
      }
      const code = chunk.error.code
      return Failure.inBandError(settings, {
        code: code === undefined || code === null ? undefined : String(code),
        type: chunk.error.type,
        detail: chunk.error.message ?? undefined,
        requestId: context.requestId
      })
    }
    if (chunk.usage !== undefined && chunk.usage !== null) {
      out.push(Generation.UsageEvent({ usage: usageOf(chunk.usage) }))
    }
    if (finish !== undefined) return undefined
    let finishedNow: string | undefined
    // indexed loops over what is there: `for…of` over `?? []` would make an empty array for every event without tool
    // calls
    const choices = chunk.choices
    const count = choices === undefined || choices === null ? 0 : choices.length
    for (let c = 0; c < count; c++) {
      const choice = choices![c]
      // reprise asks for one choice; a server that sends more is read for its first one only
      if (choice.index !== undefined && choice.index !== null && choice.index !== 0) continue
      const delta = choice.delta
      if (delta !== undefined && delta !== null) {
        const reasoning = delta.reasoning_content ?? delta.reasoning
        if (reasoning !== undefined && reasoning !== null && reasoning.length > 0) {
          out.push(Events.reasoningDelta(reasoning))
        }
        if (delta.content !== undefined && delta.content !== null && delta.content.length > 0) {
          out.push(Events.textDelta(delta.content))
        }
        const parts = delta.tool_calls
        const partCount = parts === undefined || parts === null ? 0 : parts.length
        for (let t = 0; t < partCount; t++) {
          const part = parts![t]
          const index = part.index ?? 0
          let call = calls.get(index)
          if (call === undefined) {
            call = { id: undefined, name: undefined, arguments: "" }
            calls.set(index, call)
          }
          if (part.id !== undefined && part.id !== null && part.id.length > 0) call.id = part.id
          const name = part.function?.name
          if (name !== undefined && name !== null && name.length > 0) call.name = name
          const argumentsDelta = part.function?.arguments ?? ""
          call.arguments += argumentsDelta
          out.push(Events.toolCallDelta(index, call.id, call.name, argumentsDelta))
        }
      }
      if (choice.finish_reason !== undefined && choice.finish_reason !== null) finishedNow = choice.finish_reason
    }
    if (finishedNow === undefined) return undefined
    const complete = completeCalls()
    if (Either.isLeft(complete)) return complete.left
    for (const call of complete.right) out.push(call)
    finish = { reason: finishReason(finishedNow), providerReason: finishedNow }
    return undefined
  }

  const machine: SseInternal.Machine<ChatEvent> = {
    step,
    done: () => done,
    end: (failure) =>
      finish !== undefined
        ? Effect.succeed([terminal()])
        : Effect.fail(Option.getOrElse(failure, () => SseInternal.prematureEof(protocol)))
  }
  return { decode, machine }
}

/**
 * A Chat Completions provider over the `HttpClient` in context (use `NodeHttpClient.layerUndici`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<Provider.Service, never, HttpClient.HttpClient> =>
  Effect.map(HttpClient.HttpClient, (http) => {
    const settings = Settings.settings(protocol, options)
    const client = Spans.scrubbedClient(http, settings.scrub)
    const url = Settings.endpoint(settings.baseUrl, "/chat/completions")
    const streamUsage = options.streamUsage ?? ProviderOptions.defaultStreamUsage
    return Internal.makeService({
      protocol,
      client,
      settings,
      request: (request) => ({
        url,
        headers: {},
        apiKeyHeader: "authorization",
        body: requestBody(request, { streamUsage }),
        fallbacks
      }),
      decoder: (context) => decoder(settings, context)
    })
  })

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<Provider.Provider, never, HttpClient.HttpClient> =>
  Layer.effect(Provider.Provider, make(options))

/**
 * The provider with its options from the environment: `OPENAI_API_KEY` (or `apiKeyEnv`), `OPENAI_BASE_URL` (default
 * `https://api.openai.com/v1`), `REPRISE_FIRST_BYTE_TIMEOUT`, `REPRISE_IDLE_TIMEOUT`,
 * `REPRISE_MAX_REPLY_BYTES`, `REPRISE_STREAM_USAGE`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  options?: ProviderOptions.ConfigOptions | undefined
): Layer.Layer<Provider.Provider, ConfigError.ConfigError, HttpClient.HttpClient> =>
  Layer.unwrapEffect(Effect.map(ProviderOptions.config(protocol, options), layer))
