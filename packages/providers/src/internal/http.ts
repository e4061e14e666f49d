/**
 * Sending one request and turning what the server answered into the core's typed failures: status, provider
 * error body, `retry-after-ms` / `Retry-After`, `x-should-retry`, request id, redirects, the first-byte timeout, and
 * the responses the client cannot read (`ProtocolViolation`). Every send is debited from the Budget immediately
 * before it is made, and nothing here retries.
 *
 * @internal
 */
import type * as Headers from "@effect/platform/Headers"
import type * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Budget from "@reprise/core/Budget"
import * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as TransportError from "@reprise/core/TransportError"
import * as Clock from "effect/Clock"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import * as Stream from "effect/Stream"
import * as ProviderOptions from "../ProviderOptions.js"

/**
 * Options after defaults and validation.
 *
 * @internal
 */
export interface Settings {
  /** An http(s) URL without a fragment (`endpoint` appends a protocol's path to it). */
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string>
  readonly firstByteTimeout: Duration.Duration
  readonly idleTimeout: Duration.Duration
  readonly maxEventSize: number
  readonly maxReplyBytes: number
  /** Replaces every occurrence of the key in a text that may end up in an error. */
  readonly scrub: (text: string) => string
}

const positive = (name: string, input: Duration.DurationInput | undefined, fallback: Duration.Duration) => {
  const duration = input === undefined ? fallback : Duration.decode(input)
  if (!Duration.isFinite(duration) || Duration.lessThanOrEqualTo(duration, Duration.zero)) {
    throw new RangeError(`${name} must be a positive, finite duration`)
  }
  return duration
}

/** @internal */
export const makeScrub = (apiKey: Redacted.Redacted<string>) => {
  const secret = Redacted.value(apiKey)
  // A key too short to be a secret is not scrubbed: replacing one letter everywhere would only garble messages.
  if (secret.length < 4) return (text: string) => text
  return (text: string) => text.includes(secret) ? text.split(secret).join("<redacted>") : text
}

/**
 * At most `max` characters of server text for a message, with `…` when it was cut. The text is scrubbed of the key
 * **before** it is cut: cutting first could split the key, leaving a fragment the scrub no longer recognises.
 *
 * @internal
 */
export const excerpt = (scrub: (text: string) => string, text: string, max: number): string => {
  const clean = scrub(text)
  return clean.length > max ? `${clean.slice(0, max)}…` : clean
}

const integer = (name: string, input: number | undefined, fallback: number) => {
  const value = input ?? fallback
  if (!Number.isInteger(value) || value < 1) throw new RangeError(`${name} must be an integer >= 1, got ${value}`)
  return value
}

/** @internal */
export const settings = (protocol: ProviderOptions.Protocol, options: ProviderOptions.Options): Settings => {
  const scrub = makeScrub(options.apiKey)
  const baseUrl = options.baseUrl ?? ProviderOptions.defaultBaseUrl(protocol)
  const problem = ProviderOptions.baseUrlProblem(baseUrl)
  if (problem !== undefined) throw new RangeError(`baseUrl ${problem}, got ${JSON.stringify(scrub(baseUrl))}`)
  return {
    baseUrl,
    apiKey: options.apiKey,
    firstByteTimeout: positive("firstByteTimeout", options.firstByteTimeout, ProviderOptions.defaultFirstByteTimeout),
    idleTimeout: positive("idleTimeout", options.idleTimeout, ProviderOptions.defaultIdleTimeout),
    maxEventSize: integer("maxEventSize", options.maxEventSize, ProviderOptions.defaultMaxEventSize),
    maxReplyBytes: integer("maxReplyBytes", options.maxReplyBytes, ProviderOptions.defaultMaxReplyBytes),
    scrub
  }
}

/**
 * The URL of a protocol's endpoint: `path` appended to the base URL's path, trailing slashes ignored, and the base
 * URL's query kept (`https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21` with `/chat/completions`
 * is `…/openai/deployments/d/chat/completions?api-version=2024-10-21`). The base has no fragment (`settings`).
 *
 * @internal
 */
export const endpoint = (baseUrl: string, path: string): string => {
  const url = new URL(baseUrl)
  url.pathname = `${url.pathname.replace(/\/+$/, "")}${path}`
  return url.href
}

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
  })
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
  })
}

/**
 * The provider's error object, from any of the shapes OpenAI and Anthropic use.
 *
 * @internal
 */
export interface ErrorBody {
  readonly code?: string | undefined
  readonly type?: string | undefined
  readonly message?: string | undefined
  readonly param?: string | undefined
}

const str = (u: unknown): string | undefined => (typeof u === "string" && u.length > 0 ? u : undefined)

const pick = (o: Record<string, unknown>): ErrorBody => ({
  ...(str(o.code) !== undefined ? { code: str(o.code)! } : {}),
  ...(str(o.type) !== undefined ? { type: str(o.type)! } : {}),
  ...(str(o.message) !== undefined ? { message: str(o.message)! } : {}),
  ...(str(o.param) !== undefined ? { param: str(o.param)! } : {})
})

/**
 * OpenAI `{error: {message, type, code, param}}`, Anthropic `{type: "error", error: {type, message}}`, or a bare
 * `{message, code}`; anything else keeps at most 300 characters of the text, scrubbed of the key, as its message.
 *
 * @internal
 */
export const parseErrorBody = (text: string, scrub: (text: string) => string): ErrorBody => {
  const trimmed = text.trim()
  if (trimmed.length === 0) return {}
  try {
    const json: unknown = JSON.parse(trimmed)
    if (Predicate.isRecord(json)) {
      if (Predicate.isRecord(json.error)) return pick(json.error)
      if (typeof json.error === "string") return { message: json.error }
      const picked = pick(json)
      if (picked.message !== undefined || picked.code !== undefined) return picked
    }
  } catch {
    // not JSON: fall through to the raw text
  }
  return { message: excerpt(scrub, trimmed, 300) }
}

const maxErrorBody = 64 * 1024

/** Reads at most 64 KiB of an error body, within the idle timeout; an unreadable body is an empty one. */
const readErrorBody = (
  response: HttpClientResponse.HttpClientResponse,
  idleTimeout: Duration.Duration
): Effect.Effect<string> =>
  response.stream.pipe(
    Stream.decodeText(),
    Stream.runFoldWhile("", (acc) => acc.length < maxErrorBody, (acc, chunk) => acc + chunk),
    Effect.timeout(idleTimeout),
    Effect.orElseSucceed(() => "")
  )

const header = (headers: Headers.Headers, name: string): string | undefined => {
  const value = headers[name]
  return typeof value === "string" && value.length > 0 ? value : undefined
}

/**
 * The `content-encoding` of a response other than `identity`, if any. The undici client decodes none (and every
 * request asks for `identity`): such a body is unreadable bytes to the SSE parser, and would be on every replay.
 *
 * @internal
 */
export const contentEncoding = (headers: Headers.Headers): string | undefined => {
  const codings = (header(headers, "content-encoding") ?? "").split(",").map((c) => c.trim().toLowerCase())
    .filter((c) => c.length > 0 && c !== "identity")
  return codings.length > 0 ? codings.join(", ") : undefined
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

const httpDate = /^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? /

/**
 * `retry-after-ms` (milliseconds) wins over `Retry-After` (seconds, or an HTTP-date relative to
 * `Clock.currentTimeMillis`). A date in the past is a zero wait; an unparsable value is ignored.
 *
 * @internal
 */
export const retryAfter = (headers: Headers.Headers): Effect.Effect<Duration.Duration | undefined> =>
  Effect.gen(function*() {
    const ms = header(headers, "retry-after-ms")
    if (ms !== undefined && /^\s*\d+(\.\d+)?\s*$/.test(ms)) return Duration.millis(Number(ms))
    const value = header(headers, "retry-after")?.trim()
    if (value === undefined) return undefined
    if (/^\d+(\.\d+)?$/.test(value)) return Duration.millis(Number(value) * 1000)
    // Anything else must be an HTTP-date (IMF-fixdate, RFC 850 or asctime: all start with the day's name), not
    // whatever Date.parse makes of it ("-1" is a date in 2001 to V8): an invalid value is ignored.
    if (!httpDate.test(value)) return undefined
    const at = Date.parse(value)
    if (Number.isNaN(at)) return undefined
    const now = yield* Clock.currentTimeMillis
    return Duration.millis(Math.max(0, at - now))
  })

/** @internal */
export const shouldRetry = (headers: Headers.Headers): boolean | undefined => {
  const value = header(headers, "x-should-retry")?.trim().toLowerCase()
  return value === "true" ? true : value === "false" ? false : undefined
}

/** @internal */
export const requestId = (headers: Headers.Headers): string | undefined =>
  header(headers, "x-request-id") ?? header(headers, "request-id")

const scrubHeaders = (headers: Headers.Headers, scrub: (text: string) => string): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (typeof value === "string") out[name] = scrub(value)
  }
  return out
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
}

/** @internal */
export const readFailure = (
  response: HttpClientResponse.HttpClientResponse,
  settings: Settings
): Effect.Effect<FailedResponse> =>
  Effect.gen(function*() {
    const status = response.status
    const headers = response.headers
    // An encoded body cannot be read (see `contentEncoding`): released unread, the status still classifies it.
    const encoding = contentEncoding(headers)
    // Read (bounded) even for a redirect, so the connection is released; no second request follows.
    const text = encoding === undefined ? yield* readErrorBody(response, settings.idleTimeout) : ""
    if (encoding !== undefined) yield* release(response)
    const error = parseErrorBody(text, settings.scrub)
    const after = yield* retryAfter(headers)
    const retry = shouldRetry(headers)
    const rawId = requestId(headers)
    const id = rawId === undefined ? undefined : settings.scrub(rawId)
    const location = header(headers, "location")
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
      headers: scrubHeaders(headers, settings.scrub),
      ...(detail !== undefined ? { detail: settings.scrub(detail) } : {}),
      ...(after !== undefined ? { retryAfter: after } : {}),
      ...(retry !== undefined ? { shouldRetry: retry } : {}),
      ...(id !== undefined ? { requestId: id } : {}),
      ...(location !== undefined ? { location: settings.scrub(location) } : {})
    }
    return { status, error, input }
  })

const unsupportedPatterns: ReadonlyArray<RegExp> = [
  /unsupported parameter:?\s*['"`]?([A-Za-z_][\w.]*)/i,
  /['"`]([A-Za-z_][\w.]*)['"`] is not supported/i,
  /unrecognized request arguments? supplied:\s*['"`]?([A-Za-z_][\w.]*)/i,
  /([A-Za-z_][\w.]*) is not supported (?:with|by|for|on) this model/i
]

/**
 * The optional parameter a 400/422 response rejected as unsupported, if it is one of `candidates` (the optional
 * parameters actually sent). Narrow on purpose: the status must be 400 or 422, and the parameter must be named by
 * `error.param` together with an "unsupported" code or message, or by one of the known "unsupported parameter"
 * message forms. Anything else is an ordinary bad request.
 *
 * @internal
 */
export const unsupportedParameter = (
  failure: FailedResponse,
  candidates: ReadonlyArray<string>
): string | undefined => {
  if (failure.status !== 400 && failure.status !== 422) return undefined
  const { code, message, param } = failure.error
  const saysUnsupported = (code !== undefined && /unsupported|unknown_parameter/i.test(code)) ||
    (message !== undefined && /unsupported|not supported|unrecognized/i.test(message))
  const named: Array<string> = []
  if (param !== undefined && saysUnsupported) named.push(param)
  if (message !== undefined) {
    for (const pattern of unsupportedPatterns) {
      const match = pattern.exec(message)
      if (match !== null) named.push(match[1])
    }
  }
  return named.find((name) => candidates.includes(name))
}

/**
 * One physical send: `Budget.reserve`, then the request, bounded by the first-byte timeout (until the response
 * headers). Interruption aborts the request and stays interruption.
 *
 * @internal
 */
export const send = (
  client: HttpClient.HttpClient,
  request: HttpClientRequest.HttpClientRequest,
  settings: Settings
): Effect.Effect<
  HttpClientResponse.HttpClientResponse,
  ProviderFailure.ProviderFailure | Budget.BudgetExhausted,
  Budget.Budget
> =>
  Effect.zipRight(
    Budget.reserve,
    client.execute(request).pipe(
      Effect.mapError((error) => fromRequestError(error, settings.scrub)),
      Effect.timeoutFail({
        duration: settings.firstByteTimeout,
        onTimeout: () =>
          new TransportError.TransportError({
            reason: "Timeout",
            detail: `no response headers within ${Duration.format(settings.firstByteTimeout)}`
          })
      })
    )
  )

/**
 * The description of a request: where to post the JSON body, with which headers, and which optional parameters may
 * be dropped once when the model rejects them as unsupported (the capability fallback).
 *
 * @internal
 */
export interface RequestSpec {
  readonly url: string
  readonly headers: Readonly<Record<string, string>>
  readonly apiKeyHeader: "authorization" | "x-api-key"
  readonly body: Readonly<Record<string, unknown>>
  /** Optional body parameters and how to resend without each one. */
  readonly fallbacks: Readonly<Record<string, (body: Readonly<Record<string, unknown>>) => Record<string, unknown>>>
}

const toRequest = (spec: RequestSpec, body: Readonly<Record<string, unknown>>, settings: Settings) => {
  const request = HttpClientRequest.post(spec.url).pipe(
    HttpClientRequest.setHeaders(spec.headers),
    HttpClientRequest.accept("text/event-stream"),
    // The client decodes no content encoding: ask for none (a body that has one anyway is refused in `open`).
    HttpClientRequest.setHeader("accept-encoding", "identity"),
    HttpClientRequest.bodyUnsafeJson(body)
  )
  return spec.apiKeyHeader === "authorization"
    ? HttpClientRequest.bearerToken(request, settings.apiKey)
    : HttpClientRequest.setHeader(request, "x-api-key", Redacted.value(settings.apiKey))
}

/**
 * Sends the request and returns a successful (2xx) response. A non-success status becomes a failure through
 * `ProviderFailure.fromHttpStatus`, except a rejected optional parameter, which is dropped for exactly one resend
 * (debited from the Budget like any send). A success whose body has a content encoding is released unread and fails
 * with a permanent `ProviderRejection{reason: "ProtocolViolation"}`.
 *
 * @internal
 */
export const open = (
  client: HttpClient.HttpClient,
  spec: RequestSpec,
  settings: Settings
): Effect.Effect<
  HttpClientResponse.HttpClientResponse,
  ProviderFailure.ProviderFailure | Budget.BudgetExhausted,
  Budget.Budget
> => {
  const attempt = (
    body: Readonly<Record<string, unknown>>,
    fallbackAllowed: boolean
  ): Effect.Effect<
    HttpClientResponse.HttpClientResponse,
    ProviderFailure.ProviderFailure | Budget.BudgetExhausted,
    Budget.Budget
  > =>
    Effect.flatMap(send(client, toRequest(spec, body, settings), settings), (response) => {
      if (response.status >= 200 && response.status < 300) {
        const encoding = contentEncoding(response.headers)
        if (encoding === undefined) return Effect.succeed(response)
        const id = requestId(response.headers)
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
      return Effect.flatMap(readFailure(response, settings), (failure) => {
        const candidates = Object.keys(spec.fallbacks).filter((name) => name in body)
        const rejected = fallbackAllowed ? unsupportedParameter(failure, candidates) : undefined
        return rejected !== undefined
          ? Effect.zipRight(
            Effect.logDebug(`resending without the unsupported parameter ${rejected}`),
            attempt(spec.fallbacks[rejected](body), false)
          )
          : Effect.fail(ProviderFailure.fromHttpStatus(failure.input))
      })
    })
  return attempt(spec.body, true)
}

/**
 * The request id of a successful response, for in-band errors, scrubbed of the key like any server text.
 *
 * @internal
 */
export const responseRequestId = (
  response: HttpClientResponse.HttpClientResponse,
  scrub: (text: string) => string
): Option.Option<string> => Option.map(Option.fromNullable(requestId(response.headers)), scrub)

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
