/**
 * The relay's wire vocabulary, shared by the relay and its clients: the preview modes a request chooses with the
 * `X-Reprise-Preview` header, and the named SSE events of the `reset` mode.
 *
 * - `hold` (the default): content is sent only once the upstream reply committed; until then SSE comment lines
 *   (`: reprise hold`) keep the connection alive. A client sees one whole answer or one error.
 * - `live`: deltas flow as they arrive; recovery works until the first content byte went out, and after that an
 *   upstream failure ends the stream with one in-band error in the protocol's own shape and no success terminal.
 * - `reset`: deltas flow live, and beside the protocol's own events the relay sends `event: reprise.attempt` when an
 *   attempt starts, `event: reprise.rollback` when an attempt's preview is discarded (the client drops what it showed
 *   of that attempt), and `event: reprise.commit` when the reply committed, before the protocol's terminal. A
 *   rollback is not an error object: clients treat `{"error": …}` as terminal.
 *
 * Every event's data is one JSON object. For Chat Completions it also carries `"choices": []`, the shape of a usage
 * chunk, so that a parser that yields every event's data (openai-node does) yields a chunk with no choice instead of
 * failing on it. docs/relay-protocol.md is the reference.
 *
 * @since 0.1.0
 */
import * as Ledger from "@reprise/core/Ledger"
import * as Schema from "effect/Schema"

/**
 * @since 0.1.0
 * @category modes
 */
export const PreviewMode = Schema.Literal("hold", "live", "reset")

/**
 * @since 0.1.0
 * @category modes
 */
export type PreviewMode = typeof PreviewMode.Type

/**
 * The request header that chooses the preview mode (case-insensitive, as every HTTP header).
 *
 * @since 0.1.0
 * @category modes
 */
export const previewHeader = "x-reprise-preview"

/**
 * The route that an attempt went to or that served the reply.
 *
 * @since 0.1.0
 * @category events
 */
export const Route = Schema.Struct({
  index: Schema.Number,
  name: Schema.String,
  model: Schema.String
})

/**
 * `event: reprise.attempt`: attempt `attempt` (numbered in the reply's budget, from 1) is sent.
 *
 * @since 0.1.0
 * @category events
 */
export const AttemptEvent = Schema.Struct({
  attempt: Schema.Number,
  maxAttempts: Schema.Number,
  route: Schema.optional(Route)
})

/**
 * @since 0.1.0
 * @category events
 */
export interface AttemptEvent extends Schema.Schema.Type<typeof AttemptEvent> {}

/**
 * `event: reprise.rollback`: what attempt `attempt` showed is void (`discardedChars` characters of text,
 * `discardedToolCalls` tool calls); `reason` says why in a few words (`HTTP 503`, `connection reset`). When another
 * attempt follows, `nextAttempt` and `delayMs` say when, and `route` where (a switch to another route). `entry` is the
 * attempt's ledger entry: how far it got, its tokens and billing verdict (see `@reprise/core/Ledger`).
 *
 * @since 0.1.0
 * @category events
 */
export const RollbackEvent = Schema.Struct({
  attempt: Schema.Number,
  discardedChars: Schema.Number,
  discardedToolCalls: Schema.Number,
  reason: Schema.String,
  nextAttempt: Schema.optional(Schema.Number),
  delayMs: Schema.optional(Schema.Number),
  route: Schema.optional(Route),
  entry: Schema.optional(Ledger.Entry)
})

/**
 * @since 0.1.0
 * @category events
 */
export interface RollbackEvent extends Schema.Schema.Type<typeof RollbackEvent> {}

/**
 * `event: reprise.commit`: attempt `attempt` committed; `attempts` sends were made for the reply; the serving route,
 * the model the provider named, the committed attempt's usage, and the reply's `ledger` (every attempt's entry,
 * the committed and discarded totals; see `@reprise/core/Ledger`).
 *
 * @since 0.1.0
 * @category events
 */
export const CommitEvent = Schema.Struct({
  attempt: Schema.Number,
  attempts: Schema.Number,
  route: Schema.optional(Route),
  model: Schema.optional(Schema.String),
  usage: Schema.optional(Schema.Struct({ input_tokens: Schema.Number, output_tokens: Schema.Number })),
  ledger: Schema.optional(Ledger.Ledger)
})

/**
 * @since 0.1.0
 * @category events
 */
export interface CommitEvent extends Schema.Schema.Type<typeof CommitEvent> {}

/**
 * The names of the `reset` mode's events.
 *
 * @since 0.1.0
 * @category events
 */
export const EventName = {
  attempt: "reprise.attempt",
  rollback: "reprise.rollback",
  commit: "reprise.commit"
} as const
