/**
 * Sending a request: one physical send (`send`: `Budget.reserve`, then the request within the first-byte
 * timeout), and `open`, which turns what the server answered into a readable success or a typed failure
 * (`failure.ts`), with at most one resend for the capability fallback (`fallback.ts`). Nothing here retries.
 *
 * @internal
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Budget from "@reprise/core/Budget"
import * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as TransportError from "@reprise/core/TransportError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Attempt from "./attempt.js"
import * as Deadlines from "./deadlines.js"
import { encodedBody, fromRequestError, readFailure, statusFailure } from "./failure.js"
import { type Fallbacks, unsupportedParameter } from "./fallback.js"
import { contentEncoding, headersOf, requestId } from "./responseHeaders.js"
import * as ScopedAbort from "./scopedAbort.js"
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

// the failure of a send whose response headers did not come within the first-byte timeout
const firstByteFailure = (settings: Settings) =>
  new TransportError.TransportError({
    reason: "Timeout",
    detail: `no response headers within ${Duration.format(settings.firstByteTimeout)}`
  })

/**
 * The failure of an attempt whose first content event did not come within the first-token timeout.
 *
 * @internal
 */
export const firstTokenFailure = (settings: Settings): TransportError.TransportError =>
  new TransportError.TransportError({
    reason: "Timeout",
    detail: `no first token within ${Duration.format(settings.firstTokenTimeout ?? Duration.zero)}`
  })

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
    Effect.timeoutFail({ duration: settings.firstByteTimeout, onTimeout: () => firstByteFailure(settings) })
  )

/**
 * A generation's send within its attempt (`attempt.ts`), timed by the provider's first-byte queue rather than by a
 * race: the send reserved (`Budget.reserve`), then the request in the caller's fiber, with the client scoped in
 * the attempt's scope (`scopedAbort.ts`, as `HttpClient.withScope` scopes it), so that closing that scope aborts it,
 * until the body read in that scope takes the abort over. A first-byte deadline that passes closes the attempt's
 * scope, and the request's failure is then told as the `Timeout`: one fiber times the sends of a provider
 * (`deadlines.ts`) where `Effect.timeoutFail` would fork two per send. The timeout relies on the client honouring the
 * request's `AbortSignal`, as every client of @effect/platform does. Interruption aborts the request (the attempt's
 * scope closes) and stays interruption; the deadline of an interrupted send is disarmed when the attempt ends.
 *
 * @internal
 */
export const sendIn = (
  attempt: Attempt.Attempt,
  client: HttpClient.HttpClient,
  request: HttpClientRequest.HttpClientRequest,
  settings: Settings
): Effect.Effect<
  HttpClientResponse.HttpClientResponse,
  ProviderFailure.ProviderFailure | Budget.BudgetExhausted,
  Budget.Budget | Scope.Scope
> =>
  Effect.zipRight(
    Budget.reserve,
    Effect.suspend(
      () => {
        const entry = Deadlines.arm(attempt.firstByte, attempt.clock, attempt.close)
        attempt.sending = entry
        // the first token is timed from this send (a capability fallback's resend starts it again)
        let token: Deadlines.Deadline | undefined
        if (attempt.tokens !== undefined) {
          if (attempt.token !== undefined) Deadlines.disarm(attempt.tokens, attempt.token)
          token = Deadlines.arm(attempt.tokens, attempt.clock, attempt.expireToken)
          attempt.token = token
        }
        const settle = () => {
          Deadlines.disarm(attempt.firstByte, entry)
          attempt.sending = undefined
        }
        const timedOut = () =>
          entry.timedOut
            ? firstByteFailure(settings)
            : token !== undefined && token.timedOut
            ? firstTokenFailure(settings)
            : undefined
        return Effect.matchEffect(ScopedAbort.scopedClient(client).execute(request), {
          onFailure: (error) => {
            settle()
            return Effect.fail(timedOut() ?? fromRequestError(error, settings.scrub))
          },
          // the timer fired as the headers came: the request is aborted, so the response is not read
          onSuccess: (response) => {
            settle()
            const failure = timedOut()
            return failure !== undefined ? Effect.fail(failure) : Effect.succeed(response)
          }
        })
      }
    )
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
    const encoding = contentEncoding(headersOf(response))
    return encoding === undefined ? Effect.succeed(response) : encodedBody(response, encoding, settings)
  }
  return Effect.flatMap(readFailure(response, settings), (failure) => Effect.fail(statusFailure(failure)))
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

/**
 * A request's description with its HTTP request built: made once per reply, so that a replay sends the same request
 * without mapping the request or encoding its body again.
 *
 * @internal
 */
export interface Prepared {
  readonly spec: RequestSpec
  readonly request: HttpClientRequest.HttpClientRequest
}

/** @internal */
export const prepare = (spec: RequestSpec, settings: Settings): Prepared => ({
  spec,
  request: toRequest(spec, spec.body, settings)
})

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
  prepared: Prepared,
  settings: Settings,
  attempt?: Attempt.Attempt
): Effect.Effect<
  HttpClientResponse.HttpClientResponse,
  ProviderFailure.ProviderFailure | Budget.BudgetExhausted,
  Budget.Budget | Scope.Scope
> => {
  const { spec } = prepared
  const requestOf = (body: Readonly<Record<string, unknown>>) =>
    body === spec.body ? prepared.request : toRequest(spec, body, settings)
  const sendBody = (
    body: Readonly<Record<string, unknown>>,
    fallbackAllowed: boolean
  ): Effect.Effect<
    HttpClientResponse.HttpClientResponse,
    ProviderFailure.ProviderFailure | Budget.BudgetExhausted,
    Budget.Budget | Scope.Scope
  > =>
    Effect.flatMap<
      HttpClientResponse.HttpClientResponse,
      ProviderFailure.ProviderFailure | Budget.BudgetExhausted,
      Budget.Budget | Scope.Scope,
      HttpClientResponse.HttpClientResponse,
      ProviderFailure.ProviderFailure | Budget.BudgetExhausted,
      Budget.Budget | Scope.Scope
    >(
      attempt === undefined
        ? send(client, requestOf(body), settings)
        : sendIn(attempt, client, requestOf(body), settings),
      (response) => {
        if (response.status >= 200 && response.status < 300) return succeeded(response, settings)
        // the error body timed by the attempt's idle queue: a race would fork two fibers per refused send
        const timer = attempt?.idle === undefined ? undefined : { deadlines: attempt.idle, clock: attempt.clock }
        return Effect.flatMap(readFailure(response, settings, timer), (failure) => {
          const candidates = Object.keys(spec.fallbacks).filter((name) => name in body)
          const rejected = fallbackAllowed ? unsupportedParameter(failure, candidates) : undefined
          return rejected !== undefined
            ? Effect.zipRight(
              Effect.logDebug(`resending without the unsupported parameter ${rejected}`),
              sendBody(spec.fallbacks[rejected](body), false)
            )
            : Effect.fail(statusFailure(failure))
        })
      }
    )
  return sendBody(spec.body, true)
}

/**
 * The request id of a successful response, for in-band errors, scrubbed of the key like any server text.
 *
 * @internal
 */
export const responseRequestId = (
  response: HttpClientResponse.HttpClientResponse,
  scrub: (text: string) => string
): Option.Option<string> => Option.map(Option.fromNullable(requestId(headersOf(response))), scrub)
