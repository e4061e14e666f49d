/**
 * What reprise reads from a response's headers: the server's retry hints (`retry-after-ms`, `Retry-After`,
 * `x-should-retry`), the request id, and a `content-encoding` the client cannot decode.
 *
 * Failures read these facts (`failure.ts`); the send reads the encoding of a success and the request id in-band
 * errors carry (`send.ts`).
 *
 * @internal
 */
import type * as Headers from "@effect/platform/Headers"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"

/**
 * The response's headers.
 *
 * @internal
 */
export const headersOf = (response: HttpClientResponse.HttpClientResponse): Headers.Headers => response.headers

/**
 * A header's value, unless it is absent or empty.
 *
 * @internal
 */
export const header = (headers: Headers.Headers, name: string): string | undefined => {
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
  const value = header(headers, "content-encoding")
  // nearly every response: no header, nothing to split
  if (value === undefined) return undefined
  // compared in lower case, returned as sent: a caller scrubs the value of the key, which only matches as sent
  const codings = value.split(",").map((c) => c.trim())
    .filter((c) => c.length > 0 && c.toLowerCase() !== "identity")
  return codings.length > 0 ? codings.join(", ") : undefined
}

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
