/**
 * The typed events a provider stream yields, the request that starts it and the `Reply` that a recovery scope
 * commits when an attempt reaches its terminal event.
 *
 * A provider emits `Finish` only when the protocol's terminal event arrives (Chat Completions `finish_reason`,
 * Anthropic `message_stop`, Responses `response.completed`/`done`/`incomplete`, subscription `[DONE]`). A stream
 * that ends without `Finish` is a premature EOF.
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import * as Option from "effect/Option"
import * as Schema from "effect/Schema"
import type * as Ledger from "./Ledger.js"
import type * as Message from "./Message.js"

/**
 * Normalised finish reasons. `length` (token limit, `response.incomplete`) is an incomplete finish: it is a
 * terminal, committed like any other, and flagged so that callers can tell.
 *
 * @since 0.1.0
 * @category models
 */
export const FinishReason = Schema.Literal("stop", "tool_calls", "length", "content_filter", "other")

/**
 * @since 0.1.0
 * @category models
 */
export type FinishReason = typeof FinishReason.Type

/**
 * Token usage, when the provider reports it. `inputTokens` counts every input token, cached ones included;
 * `cacheReadTokens` (read from the provider's prompt cache) and `cacheWriteTokens` (written to it) are the parts of
 * it the provider reported as such (Anthropic's `cache_read_input_tokens` / `cache_creation_input_tokens`, OpenAI's
 * `cached_tokens`), absent when it reported none.
 *
 * @since 0.1.0
 * @category models
 */
export const Usage = Schema.Struct({
  inputTokens: Schema.Number,
  outputTokens: Schema.Number,
  cacheReadTokens: Schema.optional(Schema.Number),
  cacheWriteTokens: Schema.optional(Schema.Number)
})

/**
 * @since 0.1.0
 * @category models
 */
export interface Usage extends Schema.Schema.Type<typeof Usage> {}

/**
 * One event of a provider stream.
 *
 * - `TextDelta`: a piece of the reply's text. The committed text is the concatenation of every `TextDelta`.
 * - `ReasoningDelta`: reasoning or thinking text; never part of the committed text.
 * - `ReasoningComplete`: a reasoning block or item is complete, as its protocol must receive it back (an Anthropic
 *   `thinking` block with its signature, a `redacted_thinking` block, a Responses `reasoning` item). Its text was
 *   already surfaced by `ReasoningDelta`s; this carries what sending it back needs. Never text.
 * - `ToolCallDelta`: a fragment of a tool call's JSON arguments (for previews only).
 * - `ToolCallComplete`: a tool call whose arguments parsed at a complete JSON boundary.
 * - `Usage`: token counts. A `partial` one is reported before the terminal (Anthropic's `message_start`): its input
 *   counts are the provider's, its output count is not final. The last `Usage` without `partial` is the attempt's.
 * - `Finish`: the protocol's terminal event arrived.
 *
 * @since 0.1.0
 * @category models
 */
export type GenerationEvent = Data.TaggedEnum<{
  TextDelta: { readonly text: string }
  ReasoningDelta: { readonly text: string }
  ReasoningComplete: { readonly part: Message.ReasoningPart }
  ToolCallDelta: {
    readonly index: number
    readonly id: string | undefined
    readonly name: string | undefined
    readonly argumentsDelta: string
  }
  ToolCallComplete: { readonly call: Message.ToolCall }
  Usage: { readonly usage: Usage; readonly partial?: boolean | undefined }
  Finish: {
    readonly reason: FinishReason
    readonly providerReason: string
    /** The model as the provider named it in its response (`model` of a chunk, a message or a response), if it did. */
    readonly model?: string | undefined
  }
}>

/**
 * @since 0.1.0
 * @category constructors
 */
export const GenerationEvent = Data.taggedEnum<GenerationEvent>()

/**
 * @since 0.1.0
 * @category constructors
 */
export const { Finish, ReasoningComplete, ReasoningDelta, TextDelta, ToolCallComplete, ToolCallDelta } = GenerationEvent

/**
 * @since 0.1.0
 * @category constructors
 */
export const UsageEvent = GenerationEvent.Usage

/**
 * A tool the model may call: its name, a description and a JSON Schema of its parameters.
 *
 * @since 0.1.0
 * @category models
 */
export interface ToolDefinition {
  readonly name: string
  readonly description: string
  readonly parameters: Readonly<Record<string, unknown>>
}

/**
 * Whether and which tool the model must call:
 *
 * - `"auto"`: the model decides whether to call a tool, and which (what every protocol does when there is no choice);
 * - `"none"`: the model must not call a tool (the tools are still sent, so that it knows of them);
 * - `"required"`: the model must call some tool of the request's `tools`;
 * - `{ tool }`: the model must call that tool, which must be one of the request's `tools`.
 *
 * `"required"` and `{ tool }` need tools: a request that forces a call to no tool, or to a tool it does not offer,
 * fails before any send with `ProviderRejection{reason: "BadRequest"}` (and no Budget debit).
 *
 * @since 0.1.0
 * @category models
 */
export type ToolChoice = "auto" | "none" | "required" | { readonly tool: string }

/**
 * The reply's text must be one JSON value that follows `schema` (a JSON Schema object).
 *
 * `name` names the format on the wire: 1 to 64 letters, digits, `_` or `-` (OpenAI's rule, applied on every
 * protocol so that a request valid on one is valid on all); another name fails before any send with
 * `ProviderRejection{reason: "BadRequest"}`. `description` tells the model what the value is for.
 *
 * Each protocol asks for it its own way: OpenAI's natively (`response_format` / `text.format`, non-strict: the
 * schema guides the model and the caller checks the value), Anthropic's with an instruction in the system text.
 *
 * @since 0.1.0
 * @category models
 */
export interface ResponseFormat {
  readonly type: "json"
  readonly name: string
  readonly schema: Readonly<Record<string, unknown>>
  readonly description?: string | undefined
}

/**
 * What one generation asks of a provider.
 *
 * `toolChoice` and `responseFormat` are optional: a request without them carries no tool choice and no response
 * format, so the provider's defaults apply.
 *
 * @since 0.1.0
 * @category models
 */
export interface GenerationRequest {
  readonly model: string
  readonly messages: ReadonlyArray<Message.Message>
  readonly system?: string | undefined
  readonly tools?: ReadonlyArray<ToolDefinition> | undefined
  readonly maxTokens?: number | undefined
  /**
   * Whether and which tool the model must call ({@link ToolChoice}): `"required"` = it must call some tool of
   * `tools`, `{ tool }` = it must call that one. Absent: the protocol's default (`"auto"` when there are tools).
   */
  readonly toolChoice?: ToolChoice | undefined
  /** A JSON Schema the reply's text must follow ({@link ResponseFormat}). Absent: free text. */
  readonly responseFormat?: ResponseFormat | undefined
  /**
   * Run the response in the provider's background mode, where its protocol has one (`openai-responses`): the
   * server keeps generating when the connection drops, and recovery continues the stream from its last event
   * instead of replaying the request (see `Resumption`). Protocols without it ignore it and replay. Background
   * responses are stored by the provider (not available under zero data retention) and start later.
   */
  readonly background?: boolean | undefined
}

/**
 * One route of a plan (see `Routes`), as replies, notifications and errors name it.
 *
 * @since 0.1.0
 * @category models
 */
export interface RouteRef {
  /** Its place in the plan, from 1 (the primary). */
  readonly index: number
  /** Its display name: `openai-chat gpt-4.1` unless the plan named it. */
  readonly name: string
  /** The model the route asks for. */
  readonly model: string
}

/**
 * A committed reply: what the one attempt that reached its terminal event produced.
 *
 * @since 0.1.0
 * @category models
 */
export class Reply extends Data.Class<{
  /** The concatenation of every text part, in order, with nothing inserted. */
  readonly text: string
  /** The concatenation of every reasoning delta: for display, never sent back. */
  readonly reasoning: string
  /**
   * The reasoning as its protocol must receive it back (`ReasoningComplete` events, in order): empty or absent on
   * Chat Completions, and wherever the provider sent no block or item. {@link message} carries it.
   */
  readonly reasoningParts?: ReadonlyArray<Message.ReasoningPart> | undefined
  readonly toolCalls: ReadonlyArray<Message.ToolCall>
  readonly finishReason: FinishReason
  /** The provider's own finish reason (`end_turn`, `max_tokens`, `incomplete`, …). */
  readonly providerFinishReason: string
  readonly usage: Option.Option<Usage>
  /** Physical sends made by this reply, the committed one included. */
  readonly attempts: number
  /** The model as the provider named it in the committed attempt's response; absent when it named none. */
  readonly model?: string | undefined
  /** The route of the plan that served the reply (see `Routes`); absent when the reply ran without a plan. */
  readonly route?: RouteRef | undefined
  /**
   * What every attempt of the reply cost beside what was committed (see `Ledger`). Recovery always sets it; absent on
   * a reply made by hand.
   */
  readonly ledger?: Ledger.Ledger | undefined
}> {
  /**
   * Whether the reply stopped before the model finished (token limit, `response.incomplete`).
   *
   * @since 0.1.0
   */
  get incomplete(): boolean {
    return this.finishReason === "length"
  }

  /**
   * The reply as an assistant message for the transcript and the next request, with its reasoning parts when there
   * are any (a reply without them gives a message without the `reasoning` field).
   *
   * @since 0.1.0
   */
  get message(): Message.AssistantMessage {
    return this.reasoningParts !== undefined && this.reasoningParts.length > 0
      ? { role: "assistant", text: this.text, toolCalls: this.toolCalls, reasoning: this.reasoningParts }
      : { role: "assistant", text: this.text, toolCalls: this.toolCalls }
  }
}
