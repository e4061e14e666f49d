/**
 * The `anthropic` protocol: Anthropic Messages (`POST {base}/v1/messages`, `x-api-key`, `anthropic-version`).
 *
 * - The terminal is `message_stop`; reading stops there. `ping` events are ignored and do not count as progress.
 * - An event whose data is not JSON fails the attempt with a retryable `TransportError{reason: "MalformedChunk"}`; a
 *   JSON event that does not match its schema is a permanent `ProviderRejection{reason: "MalformedStream"}`.
 * - `tool_use` input is assembled from `input_json_delta` per content block and parsed at the block's
 *   `content_block_stop` (a complete JSON boundary); a tool call announced whole in `message_start` or in
 *   `content_block_start` (no deltas) keeps the input given there. Input that is not complete JSON is never emitted:
 *   the stream fails with `TransportError{reason: "TruncatedToolArguments"}` at `message_stop`. Input (streamed or
 *   given whole) nested deeper than `ProviderOptions.maxNestingDepth` fails the stream at once with a permanent
 *   `MalformedStream`.
 * - `server_tool_use` blocks and server-side tool results are not tool calls and not text; `thinking` is reasoning.
 *   Each `thinking` block (its text and the `signature` of its `signature_delta`) and each `redacted_thinking` block
 *   (its `data`) is also emitted whole at its `content_block_stop` as a `ReasoningComplete`, so that the reply's
 *   message carries it; a `thinking` block without a signature (some compatible servers) is reasoning text only.
 * - An assistant message's `anthropic` reasoning parts are sent back first in its turn, unchanged and in order, as
 *   `thinking` / `redacted_thinking` blocks (Anthropic requires them for the last assistant turn when extended
 *   thinking is used with tools); parts of another protocol are dropped: signatures are bound to Anthropic.
 * - Usage: `message_start`'s `message.usage`, when it has `input_tokens`, is reported at once as a `partial` `Usage`
 *   (the input is final there, the output count is not); the terminal's `Usage` is the last report of each count,
 *   `message_delta`'s cumulative usage over `message_start`'s. `inputTokens` is every input token: `input_tokens` plus
 *   `cache_creation_input_tokens` (also `cacheWriteTokens`) plus `cache_read_input_tokens` (also `cacheReadTokens`);
 *   a cache count the server did not report is absent.
 * - An `error` event is classified by its type (`overloaded_error`, `api_error`, `rate_limit_error` are transient).
 * - The request's `toolChoice` is `tool_choice` (`"required"` is `{type: "any"}`; sent only with tools, and
 *   `"none"` keeps the tools in the request). A `responseFormat` is asked for in words, at the end of the system
 *   text ({@link formatInstruction} says why not natively).
 *
 * @since 0.1.0
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import * as Provider from "@reprise/core/Provider"
import type * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as TransportError from "@reprise/core/TransportError"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Events from "./internal/events.js"
import * as Failure from "./internal/failure.js"
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
export const protocol = "anthropic" as const

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultAnthropicVersion = "2023-06-01"

/**
 * Anthropic requires `max_tokens`; this is sent when the request has none.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultMaxTokens = 4096

/**
 * @since 0.1.0
 * @category models
 */
export interface Options extends ProviderOptions.Options {
  /** The `anthropic-version` header. Default `2023-06-01`. */
  readonly anthropicVersion?: string | undefined
  /** `max_tokens` when the request has none. Default 4096. */
  readonly defaultMaxTokens?: number | undefined
}

const Usage = Schema.Struct({
  input_tokens: optional(nullable(Schema.Number)),
  output_tokens: optional(nullable(Schema.Number)),
  cache_creation_input_tokens: optional(nullable(Schema.Number)),
  cache_read_input_tokens: optional(nullable(Schema.Number))
})

const Block = Schema.Struct({
  type: Schema.String,
  id: optional(Schema.Unknown),
  name: optional(Schema.Unknown),
  input: optional(Schema.Unknown),
  text: optional(Schema.Unknown),
  thinking: optional(Schema.Unknown),
  signature: optional(Schema.Unknown),
  data: optional(Schema.Unknown)
})

const MessagesEventStruct = Schema.Struct({
  type: Schema.String,
  index: optional(nullable(Schema.Number)),
  message: optional(nullable(Schema.Struct({
    // not checked: read when it is a string (the model that served the reply)
    model: optional(Schema.Unknown),
    content: optional(nullable(Schema.Array(Block))),
    stop_reason: optional(nullable(Schema.String)),
    usage: optional(nullable(Usage))
  }))),
  content_block: optional(nullable(Block)),
  delta: optional(nullable(Schema.Struct({
    type: optional(nullable(Schema.String)),
    text: optional(Schema.Unknown),
    thinking: optional(Schema.Unknown),
    signature: optional(Schema.Unknown),
    partial_json: optional(Schema.Unknown),
    stop_reason: optional(nullable(Schema.String))
  }))),
  usage: optional(nullable(Usage)),
  error: optional(nullable(Schema.Struct({
    type: optional(nullable(Schema.String)),
    message: optional(nullable(Schema.String))
  })))
})

// The guard of an event: a `content_block_delta` comes once per token or so, the stream's hot event. It type-checks
// every member the schema declares, at every level, and takes the event as it is (what `JSON.parse` built: members
// the schema does not declare stay on it, unread); anything it does not take (an array where an object is, a wrong
// type anywhere) is left to the schema, which reports the issue. It takes only what the schema accepts, and the
// schema's value agrees with the event on every member it declares: test/HotEvents.test.ts, over generated values.

const isUsage = (input: unknown): boolean =>
  Predicate.isRecord(input) &&
  isNullableNumber(input.input_tokens) && isNullableNumber(input.output_tokens) &&
  isNullableNumber(input.cache_creation_input_tokens) && isNullableNumber(input.cache_read_input_tokens)

const isNullableUsage = (input: unknown): boolean => input === undefined || input === null || isUsage(input)

// `type` is the one member of a block that is not `Unknown`
const isBlock = (input: unknown): boolean => Predicate.isRecord(input) && typeof input.type === "string"

const isMessage = (input: unknown): boolean => {
  if (!Predicate.isRecord(input)) return false
  const { content, stop_reason, usage } = input
  if (!isNullableString(stop_reason) || !isNullableUsage(usage)) return false
  if (content === undefined || content === null) return true
  if (!Array.isArray(content)) return false
  for (const block of content) if (!isBlock(block)) return false
  return true
}

const isDelta = (input: unknown): boolean =>
  Predicate.isRecord(input) && isNullableString(input.type) && isNullableString(input.stop_reason)

const isError = (input: unknown): boolean =>
  Predicate.isRecord(input) && isNullableString(input.type) && isNullableString(input.message)

type Event = typeof MessagesEventStruct.Type

const eventGuard = (input: unknown): Event | undefined => {
  if (!Predicate.isRecord(input)) return undefined
  const { content_block, delta, error, index, message, type, usage } = input
  if (typeof type !== "string" || !isNullableNumber(index)) return undefined
  if (delta !== undefined && delta !== null && !isDelta(delta)) return undefined
  if (message !== undefined && message !== null && !isMessage(message)) return undefined
  if (content_block !== undefined && content_block !== null && !isBlock(content_block)) return undefined
  if (!isNullableUsage(usage)) return undefined
  if (error !== undefined && error !== null && !isError(error)) return undefined
  // every member the schema declares is of its type
  return input as Event
}

/**
 * One Messages stream event, as far as reprise reads it. Unknown fields and event types are ignored.
 *
 * The stream's decoder checks an event with a guard first (`internal/schema.ts`, `withGuard`): it type-checks the same
 * members and takes the event as it is, and leaves an event it does not take to this schema, which reports its issue.
 * `Schema.decodeUnknownEither(MessagesEvent)` is the schema alone.
 *
 * @since 0.1.0
 * @category schemas
 */
export const MessagesEvent = withGuard(MessagesEventStruct, eventGuard)

/**
 * @since 0.1.0
 * @category schemas
 */
export type MessagesEvent = typeof MessagesEvent.Type

/**
 * Maps a Messages `stop_reason`.
 *
 * @since 0.1.0
 * @category finish reasons
 */
export const finishReason = (reason: string): Generation.FinishReason => {
  switch (reason) {
    case "end_turn":
    case "stop_sequence":
      return "stop"
    case "tool_use":
      return "tool_calls"
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length"
    case "refusal":
      return "content_filter"
    default:
      return "other"
  }
}

type Role = "user" | "assistant"

/**
 * A request's tool choice as Messages' `tool_choice`: `{type: "auto"}`, `{type: "none"}`, `{type: "any"}` for
 * `"required"`, `{type: "tool", name}` for `{ tool }`.
 *
 * @since 0.1.0
 * @category request
 */
export const toolChoice = (choice: Generation.ToolChoice): Record<string, unknown> => {
  if (typeof choice !== "string") return { type: "tool", name: choice.tool }
  return { type: choice === "required" ? "any" : choice }
}

/**
 * How a response format is asked for: an instruction at the end of the system text, naming the value and giving its
 * JSON Schema. Messages has a native form (`output_config.format`), but only on recent models, and only in a strict
 * mode that takes a subset of JSON Schema: a model or a schema outside it gets a 400, where the instruction works on
 * every model and every schema. The caller checks the value (`@effect/ai` decodes it against its Schema).
 *
 * @since 0.1.0
 * @category request
 */
export const formatInstruction = (format: Generation.ResponseFormat): string =>
  `Answer with one JSON value named "${format.name}"` +
  (format.description !== undefined && format.description.length > 0 ? ` (${format.description})` : "") +
  ` and nothing else (no prose, no code fence). It must match this JSON Schema: ${JSON.stringify(format.schema)}`

/**
 * An assistant message's reasoning as Messages content blocks, to go first in its turn: its `anthropic` parts,
 * unchanged and in order (`{type: "thinking", thinking, signature}`, `{type: "redacted_thinking", data}`). Parts of
 * another protocol are dropped: a signature or an encrypted item is only valid where it was issued.
 *
 * @since 0.1.0
 * @category request
 */
export const reasoningBlocks = (
  reasoning: ReadonlyArray<Message.ReasoningPart> | undefined
): Array<Record<string, unknown>> => {
  const blocks: Array<Record<string, unknown>> = []
  for (const part of reasoning ?? []) {
    if (part.protocol !== "anthropic") continue
    blocks.push(
      part.kind === "thinking"
        ? { type: "thinking", thinking: part.text, signature: part.signature }
        : { type: "redacted_thinking", data: part.data }
    )
  }
  return blocks
}

/**
 * The JSON body of a request: `model`, `max_tokens`, `system` (the request's system text, any system messages, then
 * the {@link formatInstruction} of a `responseFormat`), `messages` (an assistant turn's {@link reasoningBlocks} first,
 * then its text and `tool_use` blocks; tool results as `tool_result` blocks of a user
 * turn, consecutive turns of one role merged), `tools`, `tool_choice` ({@link toolChoice}, only with tools) and
 * `stream: true`. A request without `toolChoice` and `responseFormat` has no `tool_choice` and no instruction.
 *
 * @since 0.1.0
 * @category request
 */
export const requestBody = (
  request: Generation.GenerationRequest,
  maxTokens: number = defaultMaxTokens
): Record<string, unknown> => {
  const choice = RequestChecks.toolChoice(request)
  const system: Array<string> = []
  if (request.system !== undefined && request.system.length > 0) system.push(request.system)
  const messages: Array<{ role: Role; content: Array<Record<string, unknown>> }> = []
  const push = (role: Role, blocks: ReadonlyArray<Record<string, unknown>>) => {
    if (blocks.length === 0) return
    const last = messages[messages.length - 1]
    if (last !== undefined && last.role === role) last.content.push(...blocks)
    else messages.push({ role, content: [...blocks] })
  }
  for (const m of request.messages as ReadonlyArray<Message.Message>) {
    switch (m.role) {
      case "system":
        system.push(m.text)
        break
      case "user":
        push("user", [{ type: "text", text: m.text }])
        break
      case "assistant":
        push("assistant", [
          ...reasoningBlocks(m.reasoning),
          ...(m.text.length > 0 ? [{ type: "text", text: m.text }] : []),
          ...m.toolCalls.map((call) => ({
            type: "tool_use",
            id: call.id,
            name: call.name,
            input: call.arguments ?? {}
          }))
        ])
        break
      case "tool":
        push("user", [{ type: "tool_result", tool_use_id: m.toolCallId, content: m.content, is_error: m.isError }])
        break
    }
  }
  if (request.responseFormat !== undefined) system.push(formatInstruction(request.responseFormat))
  return {
    model: request.model,
    max_tokens: request.maxTokens ?? maxTokens,
    ...(system.length > 0 ? { system: system.join("\n\n") } : {}),
    messages,
    ...(request.tools !== undefined && request.tools.length > 0
      ? {
        tools: request.tools.map((tool) => ({
          name: tool.name,
          description: tool.description,
          input_schema: tool.parameters
        }))
      }
      : {}),
    ...(choice !== undefined ? { tool_choice: toolChoice(choice) } : {}),
    stream: true
  }
}

const str = (u: unknown): string | undefined => (typeof u === "string" ? u : undefined)

/** A `thinking` or `redacted_thinking` block being read, until its `content_block_stop`. */
interface ThinkingBlock {
  readonly redacted: boolean
  text: string
  signature: string
  readonly data: string
}

interface ToolBlock {
  readonly ordinal: number
  readonly id: string
  readonly name: string
  readonly input: unknown
  json: string
  deltas: number
  closed: boolean
}

const decoder = (settings: Settings.Settings, context: { readonly requestId: string | undefined }) => {
  const decodeEvent = SseInternal.jsonDecoder(MessagesEvent, settings)
  const decode: SseInternal.Decode<MessagesEvent> = (event: SseInternal.Event) => {
    if (event.event === "ping") return SseInternal.skip
    const decoded = decodeEvent(event)
    return decoded instanceof SseInternal.Failed || decoded.type !== "ping" ? decoded : SseInternal.skip
  }

  const tools = new Map<number, ToolBlock>()
  const thinking = new Map<number, ThinkingBlock>()
  let ordinal = 0
  let stopReason: string | undefined
  // the model `message_start` names
  let model: string | undefined
  // the usage reported so far: `input_tokens` and the cache counts as reported (the last report of each), the output
  let inputTokens: number | undefined
  let cacheWriteTokens: number | undefined
  let cacheReadTokens: number | undefined
  let outputTokens: number | undefined
  let truncated: TransportError.TransportError | undefined
  let done = false

  const usageFrom = (usage: typeof Usage.Type | null | undefined) => {
    if (usage === undefined || usage === null) return
    if (typeof usage.input_tokens === "number") inputTokens = usage.input_tokens
    if (typeof usage.cache_creation_input_tokens === "number") cacheWriteTokens = usage.cache_creation_input_tokens
    if (typeof usage.cache_read_input_tokens === "number") cacheReadTokens = usage.cache_read_input_tokens
    if (typeof usage.output_tokens === "number") outputTokens = usage.output_tokens
  }

  /** The usage reported so far: every input token (`input_tokens` and both cache counts), the cache parts reported. */
  const usage = (): Generation.Usage => ({
    inputTokens: (inputTokens ?? 0) + (cacheWriteTokens ?? 0) + (cacheReadTokens ?? 0),
    outputTokens: outputTokens ?? 0,
    ...(cacheReadTokens !== undefined ? { cacheReadTokens } : {}),
    ...(cacheWriteTokens !== undefined ? { cacheWriteTokens } : {})
  })

  /**
   * The complete call of a block, or none when its input is not complete JSON (remembered as `truncated`, the
   * failure of the stream at `message_stop`); input nested too deep fails the stream at once.
   */
  const close = (
    block: ToolBlock
  ): Either.Either<Option.Option<Generation.GenerationEvent>, ProviderFailure.ProviderFailure> => {
    block.closed = true
    const args = block.deltas > 0 && block.json.trim().length > 0
      ? Internal.toolArguments(protocol, block.name, block.json, settings.scrub)
      : Internal.givenArguments(protocol, block.name, block.input ?? {}, settings.scrub)
    if (Either.isLeft(args)) {
      if (!TransportError.isTransportError(args.left)) return Either.left(args.left)
      truncated ??= args.left
      return Either.right(Option.none())
    }
    return Either.right(
      Option.some(Generation.ToolCallComplete({ call: { id: block.id, name: block.name, arguments: args.right } }))
    )
  }

  /** The complete reasoning part of a thinking block, when it has what sending it back needs. */
  const closeThinking = (block: ThinkingBlock, out: Array<Generation.GenerationEvent>) => {
    if (block.redacted) {
      out.push(Generation.ReasoningComplete({ part: { protocol, kind: "redacted", data: block.data } }))
    } else if (block.signature.length > 0) {
      out.push(Generation.ReasoningComplete({
        part: { protocol, kind: "thinking", text: block.text, signature: block.signature }
      }))
    }
  }

  const startBlock = (
    index: number | undefined,
    block: typeof Block.Type,
    out: Array<Generation.GenerationEvent>
  ): ToolBlock | undefined => {
    switch (block.type) {
      case "text": {
        const text = str(block.text)
        if (text !== undefined && text.length > 0) out.push(Generation.TextDelta({ text }))
        return undefined
      }
      case "thinking": {
        const text = str(block.thinking)
        if (text !== undefined && text.length > 0) out.push(Generation.ReasoningDelta({ text }))
        const started: ThinkingBlock = {
          redacted: false,
          text: text ?? "",
          signature: str(block.signature) ?? "",
          data: ""
        }
        if (index !== undefined) thinking.set(index, started)
        else closeThinking(started, out)
        return undefined
      }
      case "redacted_thinking": {
        const data = str(block.data)
        if (data === undefined) return undefined
        const started: ThinkingBlock = { redacted: true, text: "", signature: "", data }
        if (index !== undefined) thinking.set(index, started)
        else closeThinking(started, out)
        return undefined
      }
      case "tool_use": {
        const tool: ToolBlock = {
          ordinal: ordinal++,
          id: str(block.id) ?? `toolu_${ordinal}`,
          name: str(block.name) ?? "",
          input: block.input,
          json: "",
          deltas: 0,
          closed: false
        }
        if (index !== undefined) tools.set(index, tool)
        out.push(Generation.ToolCallDelta({ index: tool.ordinal, id: tool.id, name: tool.name, argumentsDelta: "" }))
        return tool
      }
      default:
        return undefined
    }
  }

  const step = (
    event: MessagesEvent,
    out: Array<Generation.GenerationEvent>
  ): ProviderFailure.ProviderFailure | undefined => {
    if (done) return undefined
    switch (event.type) {
      case "message_start": {
        const message = event.message
        if (message === undefined || message === null) break
        model = Internal.modelOf(message.model)
        usageFrom(message.usage)
        // the input counts are the provider's from the start: reported at once, before any content
        if (typeof message.usage?.input_tokens === "number") {
          out.push(Generation.UsageEvent({ usage: usage(), partial: true }))
        }
        if (typeof message.stop_reason === "string") stopReason = message.stop_reason
        // A message may arrive whole in `message_start` (programmatic tool calling): its blocks are complete.
        for (const block of message.content ?? []) {
          const tool = startBlock(undefined, block, out)
          const closed = tool === undefined ? undefined : close(tool)
          if (closed !== undefined && Either.isLeft(closed)) return closed.left
          if (closed !== undefined) Option.map(closed.right, (e) => out.push(e))
        }
        break
      }
      case "content_block_start": {
        if (event.content_block !== undefined && event.content_block !== null) {
          startBlock(event.index ?? undefined, event.content_block, out)
        }
        break
      }
      case "content_block_delta": {
        const delta = event.delta
        if (delta === undefined || delta === null) break
        if (delta.type === "text_delta") {
          const text = str(delta.text)
          if (text !== undefined && text.length > 0) out.push(Events.textDelta(text))
        } else if (delta.type === "thinking_delta") {
          const text = str(delta.thinking)
          if (text !== undefined && text.length > 0) {
            out.push(Events.reasoningDelta(text))
            const block = event.index === undefined || event.index === null ? undefined : thinking.get(event.index)
            if (block !== undefined && !block.redacted) block.text += text
          }
        } else if (delta.type === "signature_delta") {
          const signature = str(delta.signature)
          const block = event.index === undefined || event.index === null ? undefined : thinking.get(event.index)
          if (signature !== undefined && block !== undefined && !block.redacted) block.signature += signature
        } else if (delta.type === "input_json_delta") {
          const tool = event.index === undefined || event.index === null ? undefined : tools.get(event.index)
          const json = str(delta.partial_json) ?? ""
          if (tool !== undefined && !tool.closed) {
            tool.json += json
            tool.deltas++
            out.push(
              Events.toolCallDelta(tool.ordinal, tool.id, tool.name, json)
            )
          }
        }
        break
      }
      case "content_block_stop": {
        const block = event.index === undefined || event.index === null ? undefined : thinking.get(event.index)
        if (block !== undefined) {
          thinking.delete(event.index!)
          closeThinking(block, out)
          break
        }
        const tool = event.index === undefined || event.index === null ? undefined : tools.get(event.index)
        if (tool === undefined || tool.closed) break
        const closed = close(tool)
        if (Either.isLeft(closed)) return closed.left
        Option.map(closed.right, (e) => out.push(e))
        break
      }
      case "message_delta": {
        if (typeof event.delta?.stop_reason === "string") stopReason = event.delta.stop_reason
        usageFrom(event.usage)
        break
      }
      case "message_stop": {
        // a block whose `content_block_stop` never came is complete at the message's end
        for (const index of [...thinking.keys()].sort((a, b) => a - b)) closeThinking(thinking.get(index)!, out)
        thinking.clear()
        for (const tool of [...tools.values()].sort((a, b) => a.ordinal - b.ordinal)) {
          if (tool.closed) continue
          const closed = close(tool)
          if (Either.isLeft(closed)) return closed.left
          Option.map(closed.right, (e) => out.push(e))
        }
        if (truncated !== undefined) return truncated
        done = true
        out.push(
          ...Internal.finishEvents(
            inputTokens !== undefined || outputTokens !== undefined ? usage() : undefined,
            stopReason === undefined ? "other" : finishReason(stopReason),
            stopReason ?? "unknown",
            model
          )
        )
        break
      }
      case "error": {
        return Failure.inBandError(settings, {
          type: event.error?.type,
          detail: event.error?.message ?? undefined,
          requestId: context.requestId
        })
      }
      default:
        break
    }
    return undefined
  }

  const machine: SseInternal.Machine<MessagesEvent> = {
    step,
    done: () => done,
    end: (failure) => Effect.fail(Option.getOrElse(failure, () => SseInternal.prematureEof(protocol)))
  }
  return { decode, machine }
}

const isPositiveInteger = (n: unknown): n is number => Predicate.isNumber(n) && Number.isInteger(n) && n > 0

/**
 * A Messages provider over the `HttpClient` in context (use `NodeHttpClient.layerUndici`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<Provider.Service, never, HttpClient.HttpClient> =>
  Effect.map(HttpClient.HttpClient, (http) => {
    const settings = Settings.settings(protocol, options)
    const client = Spans.scrubbedClient(http, settings.scrub)
    const version = options.anthropicVersion ?? defaultAnthropicVersion
    const maxTokens = options.defaultMaxTokens ?? defaultMaxTokens
    if (!isPositiveInteger(maxTokens)) throw new RangeError(`defaultMaxTokens must be an integer >= 1`)
    const url = Settings.endpoint(settings.baseUrl, "/v1/messages")
    return Internal.makeService({
      protocol,
      client,
      settings,
      request: (request) => ({
        url,
        headers: { "anthropic-version": version },
        apiKeyHeader: "x-api-key",
        body: requestBody(request, maxTokens),
        fallbacks: {}
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
 * The provider with its options from the environment: `ANTHROPIC_API_KEY` (or `apiKeyEnv`), `ANTHROPIC_BASE_URL`
 * (default `https://api.anthropic.com`), `REPRISE_FIRST_BYTE_TIMEOUT`, `REPRISE_IDLE_TIMEOUT`,
 * `REPRISE_MAX_REPLY_BYTES`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  options?: ProviderOptions.ConfigOptions | undefined
): Layer.Layer<Provider.Provider, ConfigError.ConfigError, HttpClient.HttpClient> =>
  Layer.unwrapEffect(Effect.map(ProviderOptions.config(protocol, options), layer))
