/**
 * What a client is told of a reply that failed: reprise's error mapped to an HTTP status, a protocol-neutral error
 * `type` and code, a one-line message (already scrubbed of keys by the providers), and a `Retry-After` when the
 * upstream gave one. The one place that reads reprise's errors for the relay.
 *
 * @internal
 */
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as RecoveryExhausted from "@reprise/core/RecoveryExhausted"
import * as TransportError from "@reprise/core/TransportError"
import * as Cause from "effect/Cause"
import * as Duration from "effect/Duration"
import * as Option from "effect/Option"
import type { Failure } from "./downstream.js"

/** A failure and the `Retry-After` (whole seconds) its response carries. @internal */
export interface Mapped {
  readonly failure: Failure
  readonly retryAfter?: number | undefined
}

const seconds = (d: Duration.Duration | undefined): number | undefined =>
  d === undefined ? undefined : Math.max(1, Math.ceil(Duration.toMillis(d) / 1000))

const message = (error: unknown): string => {
  const text = error instanceof Error ? error.message : String(error)
  // one line
  return `upstream: ${text.replace(/\s+/g, " ").trim()}`
}

const overloaded = (error: TransportError.TransportError): boolean =>
  error.status === 503 || error.status === 529 || error.providerCode === "overloaded_error"

/** A transient failure surfaced as it was: the upstream's condition as the client's. */
const transport = (error: TransportError.TransportError, text: string, retryAfter?: Duration.Duration): Mapped => {
  const wait = seconds(retryAfter ?? error.retryAfter)
  const withWait = (failure: Failure): Mapped => wait === undefined ? { failure } : { failure, retryAfter: wait }
  if (
    error.status === 429 || error.providerCode === "rate_limit_exceeded" || error.providerCode === "rate_limit_error"
  ) {
    return withWait({ status: 429, type: "rate_limit_error", code: "rate_limit_exceeded", message: text })
  }
  if (overloaded(error)) {
    return withWait({ status: 503, type: "overloaded_error", code: "overloaded", message: text })
  }
  if (error.reason === "Timeout") {
    return { failure: { status: 504, type: "api_error", code: "upstream_timeout", message: text } }
  }
  return { failure: { status: 502, type: "api_error", code: "upstream_error", message: text } }
}

const rejection = (error: ProviderRejection.ProviderRejection, text: string): Mapped => {
  switch (error.reason) {
    case "BadRequest":
    case "ContextOverflow":
      return {
        failure: {
          status: 400,
          type: "invalid_request_error",
          code: error.providerCode ?? (error.reason === "ContextOverflow" ? "context_length_exceeded" : undefined),
          message: text
        }
      }
    case "Authentication":
    case "Permission":
      // the client's key is not the upstream's: the relay's configuration is at fault, not the client
      return { failure: { status: 502, type: "api_error", code: "upstream_authentication", message: text } }
    default:
      return { failure: { status: 502, type: "api_error", code: error.providerCode, message: text } }
  }
}

/**
 * The client's view of `error`, what `Recovery.generate` failed with.
 *
 * - a rate limit (429) → 429, overloaded (503, 529, `overloaded_error`) → 503, each with `Retry-After` when known;
 * - `RecoveryExhausted`: its last failure's 429/503 as above; else 504 for the deadline, 502 otherwise;
 * - a rejected request (`BadRequest`, `ContextOverflow`) → 400 with the provider's code;
 * - an upstream key or permission refused → 502 (the client's key is not the upstream's); any other → 502.
 *
 * @internal
 */
export const fromError = (error: unknown): Mapped => {
  const text = message(error)
  if (RecoveryExhausted.isRecoveryExhausted(error)) {
    const last = error.lastError
    if (last !== undefined && TransportError.isTransportError(last)) {
      const mapped = transport(last, text, error.retryAfter)
      if (mapped.failure.status === 429 || mapped.failure.status === 503) return mapped
    }
    if (error.reason === "Deadline" || error.reason === "RetryAfterBeyondDeadline") {
      return { failure: { status: 504, type: "api_error", code: "deadline_exceeded", message: text } }
    }
    return { failure: { status: 502, type: "api_error", code: "upstream_unavailable", message: text } }
  }
  if (TransportError.isTransportError(error)) return transport(error, text)
  if (ProviderRejection.isProviderRejection(error)) return rejection(error, text)
  return { failure: { status: 500, type: "api_error", message: text } }
}

/**
 * The reason a discarded attempt's `reprise.rollback` event gives: a few words.
 *
 * @internal
 */
export const reason = (error: unknown): string => {
  if (TransportError.isTransportError(error)) {
    switch (error.reason) {
      case "HttpStatus":
        return `HTTP ${error.status ?? "?"}`
      case "Reset":
        return "connection reset"
      case "Connect":
        return "connection failed"
      case "PrematureEof":
        return "stream ended early"
      case "Timeout":
        return "timeout"
      case "ProviderError":
        return `provider error ${error.providerCode ?? ""}`.trim()
      case "TruncatedToolArguments":
        return "truncated tool call"
      case "MalformedChunk":
        return "malformed chunk"
      case "ResumeGap":
        return "resume gap"
    }
  }
  if (ProviderRejection.isProviderRejection(error)) {
    return error.status === undefined ? error.reason : `HTTP ${error.status}`
  }
  return "failure"
}

/**
 * The error a failed reply's cause holds: its failure, else its defect.
 *
 * @internal
 */
export const squash = (cause: Cause.Cause<unknown>): unknown =>
  Option.getOrElse(Cause.failureOption(cause), () => Cause.squash(cause))
