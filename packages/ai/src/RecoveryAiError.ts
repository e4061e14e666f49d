/**
 * How reprise's failures become `@effect/ai`'s `AiError`, in one place. The `AiError` keeps the facts in its own
 * fields where it has them (`response.status`, `response.headers`, `description`) and the original reprise error as
 * its `cause`; {@link facts} reads them back in one shape.
 *
 * | reprise error | `AiError` |
 * |---|---|
 * | `TransportError{reason: "HttpStatus"}` (408, 429, 5xx…), `ProviderRejection` with a status >= 300 (401, 404, 400…) | `HttpResponseError{reason: "StatusCode"}`, `response.status`, redacted `response.headers` |
 * | any other `TransportError` that carries a status (a body reset after a 200) | `HttpResponseError{reason: "Decode"}` with that status |
 * | a `TransportError` without a status (connect, reset before the headers, premature EOF, timeouts, truncated tool JSON, most in-band error events) | `HttpRequestError{reason: "Transport"}` |
 * | `ProviderRejection{reason: "MalformedStream"}` | `MalformedOutput` |
 * | any other `ProviderRejection` (`ReplyTooLarge`, `ProtocolViolation`, …) | `UnknownError` |
 * | `RecoveryExhausted` | as its `lastError` above (`UnknownError` without one), its description naming the attempts |
 * | `HookError` | `UnknownError` |
 *
 * The `description` is reprise's own message (status, provider code, request id, Retry-After, last error) followed
 * by the attempts the reply made. `cause` is always the reprise error itself. What the failed reply's attempts cost
 * (its `Ledger`, from the `Exhausted` or `Failed` notification) is in {@link facts}.
 *
 * @since 0.1.0
 */
import * as AiError from "@effect/ai/AiError"
import * as HookError from "@reprise/core/HookError"
import type * as Ledger from "@reprise/core/Ledger"
import type * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import type * as Recovery from "@reprise/core/Recovery"
import * as RecoveryExhausted from "@reprise/core/RecoveryExhausted"
import * as TransportError from "@reprise/core/TransportError"
import * as Cause from "effect/Cause"
import * as Option from "effect/Option"

/**
 * Where the failed call went: the method of `LanguageModel` and the endpoint, for the `AiError`'s request details.
 *
 * @since 0.1.0
 * @category models
 */
export interface Origin {
  /** `generateText`, `generateObject` or `streamText`. */
  readonly method: string
  /** The endpoint URL when known (without its query), otherwise `reprise:<protocol>`. */
  readonly url: string
  readonly urlParams?: ReadonlyArray<readonly [string, string]> | undefined
  /** Physical sends the failed reply made, when known. */
  readonly attempts?: number | undefined
  /** What the failed reply's attempts cost, when recovery told it (`Exhausted` / `Failed`). */
  readonly ledger?: Ledger.Ledger | undefined
}

const module = "RecoveringLanguageModel"

const isRecoveryError = (u: unknown): u is Recovery.RecoveryError =>
  TransportError.isTransportError(u) || ProviderRejection.isProviderRejection(u) ||
  RecoveryExhausted.isRecoveryExhausted(u) || HookError.isHookError(u)

const attemptsText = (attempts: number | undefined): string =>
  attempts === undefined ? "" : ` (${attempts} ${attempts === 1 ? "attempt" : "attempts"})`

const ofFailure = (
  failure: ProviderFailure.ProviderFailure,
  origin: Origin,
  description: string,
  cause: Recovery.RecoveryError
): AiError.AiError => {
  const request = {
    method: "POST" as const,
    url: origin.url,
    urlParams: (origin.urlParams ?? []).map(([k, v]) => [k, v] as const),
    hash: Option.none(),
    headers: {}
  }
  const responseError = (status: number, reason: "StatusCode" | "Decode") =>
    new AiError.HttpResponseError(
      {
        module,
        method: origin.method,
        reason,
        request,
        response: { status, headers: failure.headers ?? {} },
        description,
        // not a field of HttpResponseError: the standard `Error.cause`, so that the original stays reachable
        cause
      } as ConstructorParameters<typeof AiError.HttpResponseError>[0],
      { disableValidation: true }
    )
  if (TransportError.isTransportError(failure)) {
    if (failure.status === undefined) {
      return new AiError.HttpRequestError({
        module,
        method: origin.method,
        reason: "Transport",
        request,
        description,
        cause
      }, { disableValidation: true })
    }
    // an error status, or a body that was cut after a success status
    return responseError(failure.status, failure.reason === "HttpStatus" ? "StatusCode" : "Decode")
  }
  if (failure.reason === "MalformedStream") {
    return new AiError.MalformedOutput({ module, method: origin.method, description, cause })
  }
  return failure.status !== undefined && failure.status >= 300
    ? responseError(failure.status, "StatusCode")
    : new AiError.UnknownError({ module, method: origin.method, description, cause })
}

/**
 * The `AiError` of a failed reply.
 *
 * @since 0.1.0
 * @category mapping
 */
export const fromRecoveryError = (error: Recovery.RecoveryError, origin: Origin): AiError.AiError => {
  const mapped = mapError(error, origin)
  if (origin.attempts !== undefined || origin.ledger !== undefined) {
    replyOf.set(mapped, { attempts: origin.attempts, ledger: origin.ledger })
  }
  return mapped
}

// Kept beside the errors this module made, for `facts(error)`: the sends a failed reply made and what they cost, which
// a user reads to report or bound its retries. An exhaustion carries its attempts itself; for the rest neither the
// `AiError` (its schemas have no field for them) nor its `cause` (the reprise error itself, handed back unchanged) can
// carry them.
const replyOf = new WeakMap<
  object,
  { readonly attempts: number | undefined; readonly ledger: Ledger.Ledger | undefined }
>()

const mapError = (error: Recovery.RecoveryError, origin: Origin): AiError.AiError => {
  if (RecoveryExhausted.isRecoveryExhausted(error)) {
    const description = `recovery exhausted (${error.reason}): ${error.message}`
    return error.lastError === undefined
      ? new AiError.UnknownError({ module, method: origin.method, description, cause: error })
      : ofFailure(error.lastError, origin, description, error)
  }
  if (HookError.isHookError(error)) {
    return new AiError.UnknownError({ module, method: origin.method, description: error.message, cause: error })
  }
  return ofFailure(error, origin, `${error.message}${attemptsText(origin.attempts)}`, error)
}

/**
 * The reprise error behind an `AiError` this package made, if it is one.
 *
 * @since 0.1.0
 * @category accessors
 */
export const recoveryError = (error: AiError.AiError): Option.Option<Recovery.RecoveryError> => {
  const cause: unknown = (error as { readonly cause?: unknown }).cause
  return isRecoveryError(cause) ? Option.some(cause) : Option.none()
}

/**
 * The facts of a failed reply, read back from an `AiError` this package made.
 *
 * @since 0.1.0
 * @category models
 */
export interface Facts {
  /** The reprise error (`cause` of the `AiError`). */
  readonly error: Recovery.RecoveryError
  /** The HTTP status of the failure (the last one, for an exhaustion). */
  readonly status: number | undefined
  /** The provider's error type or code (`rate_limit_exceeded`, `overloaded_error`, `authentication_error`…). */
  readonly providerCode: string | undefined
  /** Physical sends of the reply, when known (always, for an exhaustion). */
  readonly attempts: number | undefined
  /** The last attempt's error: the failure itself, or an exhaustion's `lastError`. */
  readonly lastError: ProviderFailure.ProviderFailure | undefined
  /**
   * What every attempt of the failed reply cost (see `Ledger` of `@reprise/core`), when recovery told it: for a
   * failure that recovery ended (`Exhausted` or `Failed`), not for a stream the model failed itself because it had
   * shown parts nobody could take back (that attempt's entry is on its `AttemptDiscarded`).
   */
  readonly ledger: Ledger.Ledger | undefined
}

/**
 * Reads the {@link Facts} of an `AiError` made by {@link fromRecoveryError}; `None` for any other `AiError`.
 *
 * @since 0.1.0
 * @category accessors
 */
export const facts = (error: AiError.AiError): Option.Option<Facts> =>
  Option.map(recoveryError(error), (cause): Facts => {
    const reply = replyOf.get(Cause.originalError(error))
    const ledger = reply?.ledger
    if (RecoveryExhausted.isRecoveryExhausted(cause)) {
      return {
        error: cause,
        status: cause.lastError?.status,
        providerCode: cause.lastError?.providerCode,
        attempts: cause.attempts,
        lastError: cause.lastError,
        ledger
      }
    }
    if (HookError.isHookError(cause)) {
      return {
        error: cause,
        status: undefined,
        providerCode: undefined,
        attempts: reply?.attempts,
        lastError: undefined,
        ledger
      }
    }
    return {
      error: cause,
      status: cause.status,
      providerCode: cause.providerCode,
      attempts: reply?.attempts,
      lastError: cause,
      ledger
    }
  })
