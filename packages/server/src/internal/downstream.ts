/**
 * What the relay needs of each downstream protocol (Chat Completions, Responses, Anthropic Messages): the request
 * decoded into reprise's terms, and the reply encoded back as that protocol's stream or body. The relay itself is
 * protocol-blind: it runs the reply with recovery, applies the preview mode, and writes what the codec gives it.
 *
 * A stream is written as: `open` once (before the first content the client may see), then `delta` per surfaced event
 * of the attempt being shown, then either `terminal` (after the commit) or `failure` (an in-band error in the
 * protocol's own shape, with no success terminal). Each returns complete SSE frames (`event:`/`data:` lines and the
 * blank line), possibly none.
 *
 * A `ToolCallDelta` reaches `delta` with its `id` and `name` once: on the first delta of its `index` (in the attempt
 * being shown) that carries them, and `undefined` on the later ones (providers repeat them on every delta; the relay
 * drops the repeats), so that a codec announces a tool call exactly when they are set.
 *
 * @internal
 */
import type * as Generation from "@reprise/core/Generation"
import type * as Either from "effect/Either"

/** @internal */
export interface Decoded {
  /** The request reprise runs: its `model` is the one the client asked for (the primary route's, with a plan). */
  readonly request: Generation.GenerationRequest
  /** Whether the client asked for a stream (`"stream": true`). */
  readonly stream: boolean
  /**
   * Chat Completions' `stream_options.include_usage`: a usage chunk after the finish chunk. Optional; the relay copies
   * it into the {@link Context} of every frame. Other protocols leave it out.
   */
  readonly includeUsage?: boolean | undefined
}

/** A request the relay refuses before anything is sent upstream: 400 with the protocol's error body. */
export interface Invalid {
  readonly message: string
  /** The request field at fault, when one is (`messages[2].content`). */
  readonly param?: string | undefined
}

/** What every frame of one reply shares. @internal */
export interface Context {
  /** The response id the relay made for this reply (`chatcmpl-…`, `resp_…`, `msg_…`). */
  readonly id: string
  /** Seconds since the epoch, when the request arrived. */
  readonly created: number
  /** The model the client asked for (reported until the serving model is known). */
  readonly model: string
  /** The request's {@link Decoded.includeUsage}, when the codec's decode set it. */
  readonly includeUsage?: boolean | undefined
}

/** The error a client is told, in any protocol's terms. @internal */
export interface Failure {
  /** The HTTP status a body-level error takes (a failure before any byte of a stream also takes it). */
  readonly status: number
  /** The protocol's error `type` (`invalid_request_error`, `rate_limit_error`, `api_error`, `overloaded_error`…). */
  readonly type: string
  /** The provider's code when it named one (`context_length_exceeded`). */
  readonly code?: string | undefined
  /** One line, never with a key. */
  readonly message: string
  /** The request field at fault, for a request the relay refused (`messages[2].content`). Optional. */
  readonly param?: string | undefined
}

/**
 * The frames of one streamed reply, for a protocol whose frames depend on the ones written before them: Responses
 * numbers every event (`sequence_number`) and places content by `output_index`, Anthropic by content block `index`,
 * which a function of one event cannot know. One per reply; each member as the {@link Codec}'s own, which it replaces.
 *
 * @internal
 */
export interface StreamEncoder {
  readonly open: (context: Context) => string
  readonly delta: (context: Context, event: Generation.GenerationEvent) => string
  /**
   * What the attempt being shown wrote is void (the `reset` mode's rollback, which the relay writes next to these
   * frames): the items or blocks it opened are closed, and the next attempt's content goes to new ones.
   */
  readonly rollback: (context: Context) => string
  /** The terminal, preceded by whatever of the reply the deltas did not write (all of it when none were written). */
  readonly terminal: (context: Context, reply: Generation.Reply) => string
  readonly failure: (context: Context, failure: Failure) => string
}

/** @internal */
export interface Codec {
  readonly protocol: "openai-chat" | "openai-responses" | "anthropic"
  readonly decode: (body: unknown) => Either.Either<Decoded, Invalid>
  readonly open: (context: Context) => string
  readonly delta: (context: Context, event: Generation.GenerationEvent) => string
  readonly terminal: (context: Context, reply: Generation.Reply) => string
  readonly failure: (context: Context, failure: Failure) => string
  /**
   * A stream encoder for one reply ({@link StreamEncoder}), for a protocol whose frames depend on the ones before them
   * (Responses, Anthropic). When present, the relay makes one per streamed reply, writes its `open`, `delta`,
   * `terminal` and `failure` instead of the codec's, and its `rollback` when the `reset` mode discards an attempt that
   * showed content. Its first frame that shows something carries the reply's opening when `open` was not called
   * (Responses numbers the opening first). The codec's own members then describe a reply written at once (`open`, then
   * `terminal` with the whole reply, or `failure`); their `delta` writes an event as the first of its reply.
   */
  readonly encoder?: (() => StreamEncoder) | undefined
  /** The whole reply as the non-streaming response body. */
  readonly body: (context: Context, reply: Generation.Reply) => unknown
  /** The error as the protocol's error response body. */
  readonly errorBody: (failure: Failure) => unknown
}

/**
 * How an encoder writes each kind of content event; empty text and reasoning deltas write nothing.
 *
 * @internal
 */
export interface Writers {
  readonly text: (text: string) => string
  readonly reasoning: (text: string) => string
  readonly reasoningComplete: (
    part: Extract<Generation.GenerationEvent, { _tag: "ReasoningComplete" }>["part"]
  ) => string
  readonly toolDelta: (event: Extract<Generation.GenerationEvent, { _tag: "ToolCallDelta" }>) => string
  readonly toolComplete: (call: Extract<Generation.GenerationEvent, { _tag: "ToolCallComplete" }>["call"]) => string
}

/**
 * An encoder's `delta`: each event written by its kind's writer; usage and the finish write nothing (they are taken
 * from the committed reply).
 *
 * @internal
 */
export const deltaWith = (writers: Writers) => (event: Generation.GenerationEvent): string => {
  switch (event._tag) {
    case "TextDelta":
      return event.text.length > 0 ? writers.text(event.text) : ""
    case "ReasoningDelta":
      return event.text.length > 0 ? writers.reasoning(event.text) : ""
    case "ReasoningComplete":
      return writers.reasoningComplete(event.part)
    case "ToolCallDelta":
      return writers.toolDelta(event)
    case "ToolCallComplete":
      return writers.toolComplete(event.call)
    case "Usage":
    case "Finish":
      return ""
  }
}
