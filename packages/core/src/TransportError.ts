/**
 * `TransportError` is how a provider says "this attempt did not reach its terminal event": the connection was
 * refused or reset, the body ended early, a timeout fired, the server answered with a status, or the stream
 * carried an error event. Whether it may be replayed is decided by {@link Classification.classify}, not by the
 * error's tag: a 503 with `x-should-retry: false` is a `TransportError` that is never replayed.
 *
 * Every `TransportError` is provider-origin: only a provider's send or its stream raises it. Failures of tools,
 * hooks and callers have their own types and are never replayed.
 *
 * @since 0.1.0
 */
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Family from "./internal/family.js"
import * as RouteFailure from "./internal/routeFailure.js"
import * as Seconds from "./internal/seconds.js"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@reprise/core/TransportError")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * What went wrong on the wire.
 *
 * - `Connect`: the connection could not be opened (refused, unreachable, DNS).
 * - `Reset`: the socket closed or reset before or during the body.
 * - `PrematureEof`: the body ended cleanly without the protocol's terminal event.
 * - `Timeout`: no first byte, or no progress for the idle window.
 * - `HttpStatus`: the server answered with a status that is not a success (see `status`).
 * - `ProviderError`: the stream carried an in-band error event (see `providerCode`).
 * - `TruncatedToolArguments`: a tool call's JSON arguments were still incomplete at EOF.
 * - `ResumeGap`: a continued response did not continue what was surfaced: its first event after the cursor was
 *   not the next one, its final output does not hold or extend the preview, or a poll could not account for it (see
 *   `Resumption`).
 * - `MalformedChunk`: an SSE event's data was not JSON. Read as corruption on the way (a proxy or CDN that rewrote
 *   the body), not as the provider's answer: replayed once on the same route, then the route is left (see `Routes`).
 *   A chunk that is JSON but not the protocol's shape is a `ProviderRejection{reason: "MalformedStream"}`.
 *
 * @since 0.1.0
 * @category models
 */
export const Reason = Schema.Literal(
  "Connect",
  "Reset",
  "PrematureEof",
  "Timeout",
  "HttpStatus",
  "ProviderError",
  "TruncatedToolArguments",
  "ResumeGap",
  "MalformedChunk"
)

/**
 * @since 0.1.0
 * @category models
 */
export type Reason = typeof Reason.Type

/**
 * The HTTP statuses that report the server's condition rather than judge the request (a `TransportError{reason:
 * "HttpStatus"}` carries one): it timed out (408), it is rate limited (429), it failed or is overloaded (500, 502,
 * 503, 504, 529).
 *
 * @since 0.1.0
 * @category constants
 */
export const serverConditionStatuses: ReadonlySet<number> = new Set([408, 429, 500, 502, 503, 504, 529])

/**
 * Why a failure that could otherwise be replayed was surfaced instead: `ExternalEffects`, a chunk hook had already
 * run an effect that cannot be taken back. (Inside `Recovery.disabled` failures surface unchanged, unmarked.)
 *
 * @since 0.1.0
 * @category models
 */
export const ReplayBlocked = Schema.Literal("ExternalEffects")

/**
 * @since 0.1.0
 * @category models
 */
export type ReplayBlocked = typeof ReplayBlocked.Type

/**
 * A provider-origin failure of one attempt.
 *
 * @since 0.1.0
 * @category errors
 */
export class TransportError extends Schema.TaggedError<TransportError>("@reprise/core/TransportError")(
  "TransportError",
  {
    reason: Reason,
    /** A human-readable explanation; never contains a key. */
    detail: Schema.optional(Schema.String),
    /** The HTTP status, when the server answered. */
    status: Schema.optional(Schema.Number),
    /** The provider's error type or code (`overloaded_error`, `server_error`, …). */
    providerCode: Schema.optional(Schema.String),
    /** How long the server asked us to wait (`retry-after-ms` or `Retry-After`). */
    retryAfter: Schema.optional(Schema.DurationFromSelf),
    /** The server's `x-should-retry` header, when present. */
    shouldRetry: Schema.optional(Schema.Boolean),
    /** The provider's request id, for support tickets. */
    requestId: Schema.optional(Schema.String),
    /** Response headers with credentials and cookies redacted. */
    headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
    /** How many characters of preview the failed attempt had produced. */
    partialOutputChars: Schema.optional(Schema.Number),
    /** Set when this failure would have been replayed but replay was off. */
    replayBlocked: Schema.optional(ReplayBlocked),
    cause: Schema.optional(Schema.Defect),
    /** Each route's last failure, when every route of a plan failed (see `Routes`). */
    ...RouteFailure.field
  }
) {
  /**
   * @since 0.1.0
   */
  readonly [TypeId]: TypeId = TypeId

  /**
   * When the provider observed the failure (`Clock.currentTimeNanos`): the failed response's headers, or the read that
   * held the error, the body's end or its failure; set by `ProviderFailure.withObservedAt`. The wait before the next
   * attempt is counted from here. Not part of the error's data: not enumerable, so neither serialized nor compared.
   *
   * @since 0.1.0
   */
  declare readonly observedAt?: bigint

  /**
   * The `RecoveryError` family's mark.
   *
   * @since 0.1.0
   */
  readonly [Family.TypeId]: Family.TypeId = Family.TypeId

  /**
   * @since 0.1.0
   */
  override get message(): string {
    const parts: Array<string> = [describeReason(this)]
    if (this.providerCode !== undefined && this.reason !== "ProviderError") parts.push(` (${this.providerCode})`)
    if (this.detail !== undefined && this.detail.length > 0) parts.push(`: ${this.detail}`)
    if (this.retryAfter !== undefined) parts.push(`; retry after ${Seconds.format(this.retryAfter)}`)
    if (this.requestId !== undefined) parts.push(` [request ${this.requestId}]`)
    if (this.replayBlocked !== undefined) parts.push(` (not replayed: ${this.replayBlocked})`)
    return parts.join("")
  }
}

const describeReason = (error: TransportError): string => {
  switch (error.reason) {
    case "Connect":
      return "connection failed"
    case "Reset":
      return "connection reset"
    case "PrematureEof":
      return "stream ended before its terminal event"
    case "Timeout":
      return "timed out"
    case "HttpStatus":
      return `HTTP ${error.status ?? "error"}`
    case "ProviderError":
      return `provider error ${error.providerCode ?? "(no code)"}`
    case "TruncatedToolArguments":
      return "tool-call arguments truncated at end of stream"
    case "ResumeGap":
      return "the resumed response did not continue where it was cut"
    case "MalformedChunk":
      return "a stream event was not JSON"
  }
}

/**
 * @since 0.1.0
 * @category guards
 */
export const isTransportError = (u: unknown): u is TransportError => Predicate.hasProperty(u, TypeId)
