/**
 * Where what went wrong on the wire becomes one of the core's typed failures: a send that got no response
 * (`fromRequestError`), a body that broke while being read (`fromBodyError`), a non-success response (`readFailure`,
 * for `ProviderFailure.fromHttpStatus`), a success whose body the client cannot decode (`encodedBody`), and an in-band
 * error event (`inBandError`). Every text that comes from the server is scrubbed of the key, and the headers an error
 * keeps are redacted (`redaction.ts`).
 *
 * @internal
 */
import * as Headers from "@effect/platform/Headers"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as TransportError from "@reprise/core/TransportError"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Predicate from "effect/Predicate"
import * as Stream from "effect/Stream"
import { type ErrorBody, parseErrorBody, readErrorBody, type Timer } from "./errorBody.js"
import { excerpt, redactHeaders } from "./redaction.js"
import { contentEncoding, header, headersOf, requestId, retryAfter, shouldRetry } from "./responseHeaders.js"
import type { Settings } from "./settings.js"

const connectCodes = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "UND_ERR_CONNECT_TIMEOUT"
])

const errorCode = (u: unknown, depth = 0): string | undefined => {
  if (depth > 4 || !Predicate.isObject(u)) return undefined
  if ("code" in u && typeof u.code === "string") return u.code
  return "cause" in u ? errorCode(u.cause, depth + 1) : undefined
}

/** The errors of a failure, outermost first: the error, its `cause`, and so on (at most five). */
const causes = (u: unknown): Array<Record<string, unknown>> => {
  const out: Array<Record<string, unknown>> = []
  for (let e = u; out.length < 5 && Predicate.isObject(e); e = "cause" in e ? e.cause : undefined) {
    out.push(e as Record<string, unknown>)
  }
  return out
}

/**
 * What made undici refuse a response that the same server would send again on every replay, or `undefined` for any
 * other failure. Undici names these by code, and some only by message (its `SocketError("bad response")` for a
 * `100 Continue`; its `HTTPParserError`, whose code it leaves unset). A parser error at the end of the input
 * (`Invalid EOF state`, a body cut short) is a truncation, not one of these.
 */
const violation = (u: unknown): string | undefined => {
  for (const e of causes(u)) {
    const code = typeof e.code === "string" ? e.code : undefined
    const message = typeof e.message === "string" ? e.message : ""
    if (code === "UND_ERR_HEADERS_OVERFLOW") {
      return "the response headers are larger than the client accepts (UND_ERR_HEADERS_OVERFLOW)"
    }
    if (code === "UND_ERR_SOCKET" && message === "bad response") {
      return "an informational (1xx) response such as 100 Continue, which the request did not ask for"
    }
    if (code === "UND_ERR_SOCKET" && message === "bad upgrade") {
      return "a protocol upgrade (101 Switching Protocols), which the request did not ask for"
    }
    if (e.name === "HTTPParserError" || code?.startsWith("HPE_") === true) {
      if (code === "HPE_INVALID_EOF_STATE" || message.includes("Invalid EOF state")) return undefined
      return message.length > 0 ? message : `the response does not match the HTTP/1.1 protocol (${code})`
    }
  }
  return undefined
}

const protocolViolation = (detail: string, scrub: (text: string) => string, status?: number | undefined) =>
  new ProviderRejection.ProviderRejection({
    reason: "ProtocolViolation",
    detail: excerpt(scrub, detail, 300),
    ...(status !== undefined ? { status } : {})
  })

const errorText = (u: unknown): string => {
  if (Predicate.isObject(u) && "message" in u && typeof u.message === "string") {
    const code = errorCode(u)
    return code !== undefined && !u.message.includes(code) ? `${u.message} (${code})` : u.message
  }
  return String(u)
}

// Built from literals and strings this module computes, so not validated again by the Schema class
// (`disableValidation`): a validated construction costs about 0.1 ms, on the path from a fault to its replay.
const built = { disableValidation: true } as const

/**
 * A failed send (no response): a response undici cannot read (see `violation`) is a permanent
 * `ProviderRejection{reason: "ProtocolViolation"}`; refused or unreachable is `Connect`, anything else (the socket
 * closed before the headers) is `Reset`. The platform error is not kept as `cause`: it holds the request and its
 * headers.
 *
 * @internal
 */
export const fromRequestError = (
  error: HttpClientError.HttpClientError,
  scrub: (text: string) => string
): ProviderFailure.ProviderFailure => {
  if (error._tag === "RequestError" && error.reason !== "Transport") {
    return new ProviderRejection.ProviderRejection({
      reason: "BadRequest",
      detail: scrub(`${error.reason === "InvalidUrl" ? "invalid URL" : "request could not be encoded"}`)
    })
  }
  const unreadable = violation(error.cause)
  if (unreadable !== undefined) return protocolViolation(unreadable, scrub)
  const code = errorCode(error.cause)
  return new TransportError.TransportError({
    reason: code !== undefined && connectCodes.has(code) ? "Connect" : "Reset",
    detail: scrub(errorText(error.cause))
  }, built)
}

/**
 * A body that failed while being read: the socket was reset or closed mid-body (`Reset`), or the body broke HTTP/1.1
 * (an invalid chunk, see `violation`: `ProtocolViolation`).
 *
 * @internal
 */
export const fromBodyError = (
  error: HttpClientError.ResponseError,
  scrub: (text: string) => string
): ProviderFailure.ProviderFailure => {
  const unreadable = violation(error.cause)
  if (unreadable !== undefined) return protocolViolation(`body unreadable: ${unreadable}`, scrub, error.response.status)
  return new TransportError.TransportError({
    reason: "Reset",
    status: error.response.status,
    detail: scrub(`body interrupted: ${errorText(error.cause)}`)
  }, built)
}

/**
 * Stops reading a body at once and releases its connection: the platform aborts the request when the body's stream
 * ends, which it does as soon as it has started.
 */
const release = (response: HttpClientResponse.HttpClientResponse): Effect.Effect<void> =>
  Effect.flatMap(Deferred.make<void>(), (started) =>
    response.stream.pipe(
      Stream.onStart(Deferred.succeed(started, undefined)),
      Stream.interruptWhen(Deferred.await(started)),
      Stream.runDrain,
      Effect.ignore
    ))

/**
 * A success (2xx) whose body has a content encoding (see `contentEncoding`): released unread, a permanent
 * `ProviderRejection{reason: "ProtocolViolation"}`.
 *
 * @internal
 */
export const encodedBody = (
  response: HttpClientResponse.HttpClientResponse,
  encoding: string,
  settings: Settings
): Effect.Effect<never, ProviderRejection.ProviderRejection> => {
  const id = requestId(headersOf(response))
  return Effect.zipRight(
    release(response),
    Effect.fail(
      new ProviderRejection.ProviderRejection({
        reason: "ProtocolViolation",
        status: response.status,
        detail: `the body is ${
          excerpt(settings.scrub, encoding, 100)
        }-encoded, which the client does not decode (the request asked for identity)`,
        ...(id !== undefined ? { requestId: settings.scrub(id) } : {})
      })
    )
  )
}

/**
 * What a non-success response said, read once: the parsed error body and the facts of its headers.
 *
 * @internal
 */
export interface FailedResponse {
  readonly status: number
  readonly error: ErrorBody
  readonly input: ProviderFailure.HttpFailureInput
  /** When the response arrived (`Clock`, nanoseconds), before its error body was read. */
  readonly observedAt: bigint
}

/**
 * The typed failure of a non-success response (`ProviderFailure.fromHttpStatus`), marked as observed when the
 * response arrived (its `observedAt`): reading its error body is inside the wait that follows.
 *
 * @internal
 */
export const statusFailure = (failed: FailedResponse): ProviderFailure.ProviderFailure =>
  ProviderFailure.withObservedAt(ProviderFailure.fromHttpStatus(failed.input), failed.observedAt)

/**
 * Reads a non-success response once: its error body (bounded, see `readErrorBody`; released unread when encoded),
 * its retry hints, request id and `location`, and its headers redacted (the names of `Headers.currentRedactedNames`
 * and core's `ProviderFailure.sensitiveHeaders`; the key scrubbed from every other value).
 *
 * @internal
 */
export const readFailure = (
  response: HttpClientResponse.HttpClientResponse,
  settings: Settings,
  timer?: Timer
): Effect.Effect<FailedResponse> =>
  Effect.gen(function*() {
    const observedAt = yield* Clock.currentTimeNanos
    const status = response.status
    const headers = headersOf(response)
    // An encoded body cannot be read (see `contentEncoding`): released unread, the status still classifies it.
    const encoding = contentEncoding(headers)
    // Read (bounded) even for a redirect, so the connection is released; no second request follows.
    const text = encoding === undefined ? yield* readErrorBody(response, settings.idleTimeout, timer) : ""
    if (encoding !== undefined) yield* release(response)
    const error = parseErrorBody(text, settings.scrub)
    const after = yield* retryAfter(headers)
    const retry = shouldRetry(headers)
    const rawId = requestId(headers)
    const id = rawId === undefined ? undefined : settings.scrub(rawId)
    const location = header(headers, "location")
    const redacted = yield* FiberRef.get(Headers.currentRedactedNames)
    const detail = error.message ??
      (encoding !== undefined
        ? `the error body is ${excerpt(settings.scrub, encoding, 100)}-encoded, which the client does not decode`
        : status >= 300 && status < 400 && status !== 304
        ? "redirects are not followed"
        : undefined)
    const input: ProviderFailure.HttpFailureInput = {
      status,
      code: error.code === undefined ? undefined : settings.scrub(error.code),
      type: error.type === undefined ? undefined : settings.scrub(error.type),
      headers: redactHeaders(headers, redacted, settings.scrub),
      ...(detail !== undefined ? { detail: settings.scrub(detail) } : {}),
      ...(after !== undefined ? { retryAfter: after } : {}),
      ...(retry !== undefined ? { shouldRetry: retry } : {}),
      ...(id !== undefined ? { requestId: id } : {}),
      ...(location !== undefined ? { location: settings.scrub(location) } : {})
    }
    return { status, error, input, observedAt }
  })

/**
 * An in-band error event, with every provider-supplied text scrubbed of the key.
 *
 * @internal
 */
export const inBandError = (
  settings: Settings,
  input: ProviderFailure.InBandErrorInput
): ProviderFailure.ProviderFailure => {
  const clean = (s: string | null | undefined) => (s === null || s === undefined ? undefined : settings.scrub(s))
  return ProviderFailure.fromInBandError({
    code: clean(input.code),
    type: clean(input.type),
    detail: clean(input.detail),
    requestId: input.requestId,
    status: input.status
  })
}
