/**
 * Classification decides, in one pure function, whether a failed attempt may be replayed. It is the allowlist of
 * the design: only provider-origin failures that are known to be transient are replayed.
 *
 * | replayed | never replayed |
 * |---|---|
 * | connect/reset/premature EOF/timeout/truncated tool JSON, a chunk that is not JSON (once per route) | anything not raised by a provider (tools, hooks, callers) |
 * | HTTP 408, 429, 500, 502, 503, 504, 529 | 400, 401, 402, 403, 404, 413, 422, 501, 505, any 3xx |
 * | 409 only with `x-should-retry: true` | anything with `x-should-retry: false` |
 * | `overloaded_error`, `api_error`, `rate_limit_error`, `server_error`, `rate_limit_exceeded` | `insufficient_quota`, context overflow, malformed streams |
 * | | a reply over its size bound, a response the HTTP client cannot read (every `ProviderRejection`) |
 *
 * @since 0.1.0
 */
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import * as ProviderRejection from "./ProviderRejection.js"
import * as TransportError from "./TransportError.js"

/**
 * The HTTP statuses that are replayed: every status that reports the server's condition
 * (`TransportError.serverConditionStatuses`), unless the server forbids it (`x-should-retry: false`). A status that
 * judges the request is not, even on a hand-made `TransportError`.
 *
 * @since 0.1.0
 * @category allowlist
 */
export const retryableStatuses: ReadonlySet<number> = TransportError.serverConditionStatuses

/**
 * In-band provider error types and codes that are replayed (Anthropic error types, OpenAI error codes and types).
 *
 * @since 0.1.0
 * @category allowlist
 */
export const transientProviderCodes: ReadonlySet<string> = new Set([
  "overloaded_error",
  "api_error",
  "rate_limit_error",
  "server_error",
  "rate_limit_exceeded"
])

/**
 * Why a failure is not replayed.
 *
 * @since 0.1.0
 * @category models
 */
export type PermanentReason =
  | "NotProviderOrigin"
  | "ServerForbidsRetry"
  | "PermanentStatus"
  | "PermanentProviderCode"
  | ProviderRejection.Reason

/**
 * The verdict on one failure.
 *
 * @since 0.1.0
 * @category models
 */
export type Classification = Data.TaggedEnum<{
  /** May be replayed; `retryAfter` is the server's requested wait, if any. */
  Retryable: { readonly retryAfter: Option.Option<Duration.Duration> }
  /** Must surface to the caller. */
  Permanent: { readonly reason: PermanentReason }
}>

/**
 * @since 0.1.0
 * @category constructors
 */
export const { Permanent, Retryable, $is: is, $match: match } = Data.taggedEnum<Classification>()

/**
 * Whether an HTTP status is replayed, given the server's `x-should-retry` header.
 *
 * @since 0.1.0
 * @category classification
 */
export const isRetryableStatus = (status: number, shouldRetry?: boolean | undefined): boolean =>
  shouldRetry === false ? false : retryableStatuses.has(status) || (status === 409 && shouldRetry === true)

/**
 * Classifies any failure. Only `TransportError`s are ever replayable; everything that is not a provider failure
 * (a tool error, a hook error, a caller's own error) is `Permanent("NotProviderOrigin")`.
 *
 * @since 0.1.0
 * @category classification
 */
export const classify = (error: unknown): Classification => {
  if (ProviderRejection.isProviderRejection(error)) return Permanent({ reason: error.reason })
  if (!TransportError.isTransportError(error)) return Permanent({ reason: "NotProviderOrigin" })
  if (error.shouldRetry === false) return Permanent({ reason: "ServerForbidsRetry" })
  const retryable = Retryable({ retryAfter: Option.fromNullable(error.retryAfter) })
  switch (error.reason) {
    case "Connect":
    case "Reset":
    case "PrematureEof":
    case "Timeout":
    case "TruncatedToolArguments":
    case "ResumeGap":
    case "MalformedChunk":
      return retryable
    case "HttpStatus":
      return error.status !== undefined && isRetryableStatus(error.status, error.shouldRetry)
        ? retryable
        : Permanent({ reason: "PermanentStatus" })
    case "ProviderError":
      return error.providerCode !== undefined && transientProviderCodes.has(error.providerCode)
        ? retryable
        : Permanent({ reason: "PermanentProviderCode" })
  }
}

/**
 * Shorthand for `classify(error)._tag === "Retryable"`.
 *
 * @since 0.1.0
 * @category classification
 */
export const isRetryable = (error: unknown): boolean => classify(error)._tag === "Retryable"
