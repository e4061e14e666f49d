/**
 * The one place where what a provider said (a status, an in-band error object) becomes a typed failure. Provider
 * modules call {@link fromHttpStatus} and {@link fromInBandError}; nothing else matches on status codes or error
 * strings.
 *
 * @since 0.1.0
 */
import * as Headers from "@effect/platform/Headers"
import type * as Duration from "effect/Duration"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Classification from "./Classification.js"
import * as ProviderRejection from "./ProviderRejection.js"
import * as TransportError from "./TransportError.js"

/**
 * Everything a provider's send or stream may fail with.
 *
 * @since 0.1.0
 * @category models
 */
export type ProviderFailure = TransportError.TransportError | ProviderRejection.ProviderRejection

/**
 * @since 0.1.0
 * @category schemas
 */
export const ProviderFailure: Schema.Union<
  [typeof TransportError.TransportError, typeof ProviderRejection.ProviderRejection]
> = Schema.Union(TransportError.TransportError, ProviderRejection.ProviderRejection)

/**
 * @since 0.1.0
 * @category guards
 */
export const isProviderFailure = (u: unknown): u is ProviderFailure =>
  TransportError.isTransportError(u) || ProviderRejection.isProviderRejection(u)

/**
 * A copy of `failure`, of its own class, with `fields` of its Schema set, and its `observedAt`. Not validated again:
 * the copy is of a valid member with fields of that member's own types. The fields are read one by one, not by
 * spreading the error: a failure raised in a span reaches recovery as Effect's proxy of it, and spreading a proxy
 * formats its `stack`.
 *
 * @internal
 */
export const copyWith = <F extends ProviderFailure>(
  failure: F,
  fields: Partial<F>,
  observedAt: bigint | undefined = failure.observedAt
): F => {
  const Class = TransportError.isTransportError(failure)
    ? TransportError.TransportError
    : ProviderRejection.ProviderRejection
  const out: Record<string, unknown> = {}
  for (const name in Class.fields) {
    if (name !== "_tag" && name in failure) out[name] = (failure as unknown as Record<string, unknown>)[name]
  }
  const copy = new Class({ ...out, ...fields } as never, { disableValidation: true }) as unknown as F
  if (observedAt !== undefined) Object.defineProperty(copy, "observedAt", { value: observedAt, enumerable: false })
  return copy
}

/**
 * `failure` observed at `at`, the `Clock`'s time in nanoseconds when what carried it reached the provider (the
 * failed response's headers, or the read of the body that held the error, its end or its failure): a copy with that
 * `observedAt`. A failure that has one keeps it.
 *
 * Recovery counts the wait before the next attempt from this moment when it falls within the attempt, so what the
 * provider does with a failure before it is reported (the error body read, the rest of the read decoded) is inside
 * the wait, not added to it (docs/recovery.md, "When the wait starts").
 *
 * @since 0.1.0
 * @category observation
 */
export const withObservedAt = <F extends ProviderFailure>(failure: F, at: bigint): F =>
  failure.observedAt !== undefined ? failure : copyWith(failure, {}, at)

/**
 * The headers an error never shows: credentials, cookies and account identifiers. The one list: the providers
 * redact with it too.
 *
 * @since 0.1.0
 * @category redaction
 */
export const sensitiveHeaders: ReadonlyArray<string> = [
  "authorization",
  "proxy-authorization",
  "x-api-key",
  "api-key",
  "cookie",
  "set-cookie",
  "openai-organization",
  "openai-project"
]

/**
 * Copies headers with {@link sensitiveHeaders} (and any of `more`) replaced by `<redacted>`, so that an error can
 * carry them safely as plain strings. The matching is `@effect/platform`'s `Headers.redact` (names compared
 * lower-cased; a `RegExp` in `more` matches names).
 *
 * @since 0.1.0
 * @category redaction
 */
export const redactHeaders = (
  headers: Readonly<Record<string, string>>,
  more: ReadonlyArray<string | RegExp> = []
): Record<string, string> => {
  const out: Record<string, string> = {}
  for (
    const [name, value] of Object.entries(Headers.redact(Headers.fromInput(headers), [...sensitiveHeaders, ...more]))
  ) {
    out[name] = Redacted.isRedacted(value) ? "<redacted>" : value
  }
  return out
}

/**
 * The facts of a failed HTTP response.
 *
 * @since 0.1.0
 * @category models
 */
export interface HttpFailureInput {
  readonly status: number
  /** The provider's error code (OpenAI `error.code`). */
  readonly code?: string | null | undefined
  /** The provider's error type (OpenAI `error.type`, Anthropic `error.type`). */
  readonly type?: string | null | undefined
  readonly detail?: string | undefined
  readonly retryAfter?: Duration.Duration | undefined
  readonly shouldRetry?: boolean | undefined
  readonly requestId?: string | undefined
  readonly location?: string | undefined
  readonly headers?: Readonly<Record<string, string>> | undefined
}

/**
 * The facts of an in-band error event.
 *
 * @since 0.1.0
 * @category models
 */
export interface InBandErrorInput {
  readonly code?: string | null | undefined
  readonly type?: string | null | undefined
  readonly detail?: string | undefined
  readonly requestId?: string | undefined
  readonly status?: number | undefined
}

const nonEmpty = (s: string | null | undefined): s is string => typeof s === "string" && s.length > 0

const rejectionFromCode = (
  code: string | null | undefined,
  type: string | null | undefined,
  detail: string | undefined
): ProviderRejection.Reason | undefined => {
  const names = [code, type].filter(nonEmpty)
  if (names.includes("insufficient_quota")) return "Quota"
  if (
    names.includes("context_length_exceeded") || names.includes("request_too_large") ||
    (detail !== undefined && /prompt is too long|maximum context length/i.test(detail))
  ) {
    return "ContextOverflow"
  }
  if (names.some((n) => n === "authentication_error" || n === "invalid_api_key")) return "Authentication"
  if (names.includes("permission_error")) return "Permission"
  if (names.some((n) => n === "not_found_error" || n === "model_not_found")) return "NotFound"
  return undefined
}

const optional = <K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } =>
  (value === undefined ? {} : { [key]: value }) as { [P in K]?: V }

// The failures built here are not validated again by their Schema class (`disableValidation`): every field is
// computed from the typed input (a status, strings, redacted headers), and the validation costs about 0.1 ms per
// construction on the recovery path.
const built = { disableValidation: true } as const

/**
 * Maps a non-success HTTP response to a typed failure that says what happened: a status that reports the server's
 * condition (`TransportError.serverConditionStatuses`, or a 409 the server calls transient with `x-should-retry: true`:
 * the conflict is its state, not the request's) is a `TransportError{reason: "HttpStatus"}`; a redirect, a quota, an
 * overflow, the key, the permission, an unknown resource or a bad request is a `ProviderRejection` with that reason,
 * and any other status (`501`, `505`, `418`, …) a `ProviderRejection{reason: "OtherStatus"}`. Whether it is replayed is
 * not decided here: that is `Classification.classify`, by its allowlist and `x-should-retry` (a 503 with
 * `x-should-retry: false` is a `TransportError` that is never replayed).
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromHttpStatus = (input: HttpFailureInput): ProviderFailure => {
  const providerCode = nonEmpty(input.code) ? input.code : nonEmpty(input.type) ? input.type : undefined
  const common = {
    status: input.status,
    ...optional("providerCode", providerCode),
    ...optional("detail", input.detail),
    ...optional("requestId", input.requestId),
    ...optional("headers", input.headers === undefined ? undefined : redactHeaders(input.headers))
  }
  const rejection = (reason: ProviderRejection.Reason) =>
    new ProviderRejection.ProviderRejection({ reason, ...common, ...optional("location", input.location) }, built)
  // 304 Not Modified sends the client nowhere: it is an unexpected status, not a redirect
  if (input.status >= 300 && input.status < 400 && input.status !== 304) return rejection("RedirectRefused")
  const byCode = rejectionFromCode(input.code, input.type, input.detail)
  if (byCode !== undefined) return rejection(byCode)
  if (input.status === 402) return rejection("Quota")
  if (input.status === 413) return rejection("ContextOverflow")
  if (
    TransportError.serverConditionStatuses.has(input.status) || (input.status === 409 && input.shouldRetry === true)
  ) {
    return new TransportError.TransportError({
      reason: "HttpStatus",
      ...common,
      ...optional("retryAfter", input.retryAfter),
      ...optional("shouldRetry", input.shouldRetry)
    }, built)
  }
  switch (input.status) {
    case 401:
      return rejection("Authentication")
    case 403:
      return rejection("Permission")
    case 404:
      return rejection("NotFound")
    case 400:
    case 409:
    case 422:
      return rejection("BadRequest")
    default:
      return rejection("OtherStatus")
  }
}

/**
 * Maps an in-band error event (Chat Completions error chunk, Responses `error`/`response.failed`, Anthropic
 * `error`) to a typed failure. Quota, overflow, authentication, permission and not-found codes become rejections;
 * everything else is a `TransportError` whose code {@link Classification.classify} checks against the allowlist.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromInBandError = (input: InBandErrorInput): ProviderFailure => {
  const names = [input.code, input.type].filter(nonEmpty)
  const transient = names.find((n) => Classification.transientProviderCodes.has(n))
  const providerCode = transient ?? names[0]
  const common = {
    ...optional("providerCode", providerCode),
    ...optional("detail", input.detail),
    ...optional("requestId", input.requestId),
    ...optional("status", input.status)
  }
  const byCode = rejectionFromCode(input.code, input.type, input.detail)
  if (byCode !== undefined) return new ProviderRejection.ProviderRejection({ reason: byCode, ...common }, built)
  if (transient === undefined && names.includes("invalid_request_error")) {
    return new ProviderRejection.ProviderRejection({ reason: "BadRequest", ...common }, built)
  }
  return new TransportError.TransportError({ reason: "ProviderError", ...common }, built)
}
