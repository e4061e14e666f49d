/**
 * Sending a request: one physical send (`send`: `Budget.reserve`, then the request within the first-byte timeout),
 * and `open`, which turns what the server answered into a readable success or a typed failure (`failure.ts`), with at
 * most one resend for the capability fallback (`fallback.ts`). Nothing here retries.
 *
 * Moved out of `internal/http.ts` when it was split by concept: settings, error bodies, the response headers'
 * facts, the failures and the fallback each have a module of their own now, and this one only sends.
 *
 * @internal
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Budget from "@reprise/core/Budget"
import * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as TransportError from "@reprise/core/TransportError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { encodedBody, fromRequestError, readFailure } from "./failure.js"
import { type Fallbacks, unsupportedParameter } from "./fallback.js"
import { contentEncoding, requestId } from "./responseHeaders.js"
import type { Settings } from "./settings.js"

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
> => Effect.zipRight(Budget.reserve, execute(client, request, settings))

/**
 * The request without a debit, bounded by the first-byte timeout: for the requests that are not generation sends
 * (a background response's follow-up polls and its cancel).
 *
 * @internal
 */
export const execute = (
  client: HttpClient.HttpClient,
  request: HttpClientRequest.HttpClientRequest,
  settings: Settings
): Effect.Effect<HttpClientResponse.HttpClientResponse, ProviderFailure.ProviderFailure> =>
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

/**
 * A response as a success (2xx, without a content encoding) or its typed failure (`ProviderFailure.fromHttpStatus`),
 * with no fallback: for requests without optional parameters.
 *
 * @internal
 */
export const succeeded = (
  response: HttpClientResponse.HttpClientResponse,
  settings: Settings
): Effect.Effect<HttpClientResponse.HttpClientResponse, ProviderFailure.ProviderFailure> => {
  if (response.status >= 200 && response.status < 300) {
    const encoding = contentEncoding(response.headers)
    return encoding === undefined ? Effect.succeed(response) : encodedBody(response, encoding, settings)
  }
  return Effect.flatMap(
    readFailure(response, settings),
    (failure) => Effect.fail(ProviderFailure.fromHttpStatus(failure.input))
  )
}

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
  readonly fallbacks: Fallbacks
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
        return encoding === undefined ? Effect.succeed(response) : encodedBody(response, encoding, settings)
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
