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
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as HttpTraceContext from "@effect/platform/HttpTraceContext"
import * as Budget from "@reprise/core/Budget"
import * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as TransportError from "@reprise/core/TransportError"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Tracer from "effect/Tracer"
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

// Effect's own tracer, the one in place when no other is provided: its spans reach no exporter.
const nativeTracer = Context.get(DefaultServices.liveServices, Tracer.Tracer)

const always = () => true

// the clients reprise built itself (`HttpProvider.layerUndici`), with no transform of an app's
const ownClients = new WeakSet<HttpClient.HttpClient>()

/**
 * `client`, noted as one reprise built itself, with no transform of an app's: its sends within an attempt may go
 * without the platform client's span ({@link withoutClientSpan}). An app's client is never noted: its transforms (its
 * `HttpClient.withTracerPropagation(false)`, its `withTracerDisabledWhen`, a `mapRequest` that sets a `traceparent`)
 * run inside the client, where the platform decides about the span, and must keep deciding.
 *
 * @internal
 */
export const ownClient = <C extends HttpClient.HttpClient>(client: C): C => {
  ownClients.add(client)
  return client
}

/**
 * The request to send without the platform client's span, or `undefined` to send it as the client would. The client
 * makes a span per request (`http.client POST`: its attributes, the request's and the response's headers redacted and
 * written on it) and sends that span's trace context (`traceparent`, `b3`). With Effect's own tracer, whose spans reach
 * no exporter, that span is work nobody sees: about 0.15 ms of CPU per request, 7 % of figure 3's client (fix 39 of
 * docs/performance.md). Then, when the client would have traced the request (the tracer on, the request not excluded by
 * `HttpClient.withTracerDisabledWhen`) under the attempt's span, the request carries the attempt span's trace context
 * instead (unless `HttpClient.currentTracerPropagation` is off), and is sent with the client's span off. With any other
 * tracer (OpenTelemetry's, the CLI's OTLP one), the client's span is made as before. Only for a client reprise built
 * itself ({@link ownClient}): an app's client decides inside itself, as it always did.
 */
const withoutClientSpan = (
  client: HttpClient.HttpClient,
  fiber: Fiber.RuntimeFiber<any, any>,
  request: HttpClientRequest.HttpClientRequest
): HttpClientRequest.HttpClientRequest | undefined => {
  if (!ownClients.has(client)) return undefined
  if (Context.get(fiber.currentDefaultServices, Tracer.Tracer) !== nativeTracer) return undefined
  if (!fiber.getFiberRef(FiberRef.currentTracerEnabled)) return undefined
  if (fiber.getFiberRef(HttpClient.currentTracerDisabledWhen)(request)) return undefined
  const parent = Context.getOption(fiber.currentContext, Tracer.ParentSpan)
  if (Option.isNone(parent) || parent.value._tag !== "Span") return undefined
  return fiber.getFiberRef(HttpClient.currentTracerPropagation)
    ? HttpClientRequest.setHeaders(request, HttpTraceContext.toHeaders(parent.value))
    : request
}

/**
 * `effect` run by `fiber` with the platform client's span off (`HttpClient.currentTracerDisabledWhen` answering yes),
 * the fiber's own predicate put back when it ends, however it ends: what `Effect.locally` does, in 9 fewer of the 210
 * Effect operations an attempt ran in figure 3 (its acquire and release; fix 40 of docs/performance.md). The set runs
 * inside `Effect.onExit`, so the reset runs on success, failure and interruption alike, an interruption before the set
 * included (the reset then puts back the value the fiber still has). The fiber's predicate is read when this is built,
 * where `Effect.locally` reads it when it runs: the effect returned must run at once, once, on `fiber` (as `sendIn`
 * runs it), not be kept, retried or forked.
 */
const untraced = <A, E, R>(
  fiber: Fiber.RuntimeFiber<any, any>,
  effect: Effect.Effect<A, E, R>
): Effect.Effect<A, E, R> => {
  const before = fiber.getFiberRef(HttpClient.currentTracerDisabledWhen)
  return Effect.onExit(
    Effect.zipRight(FiberRef.set(HttpClient.currentTracerDisabledWhen, always), effect),
    () => FiberRef.set(HttpClient.currentTracerDisabledWhen, before)
  )
}

/**
 * A generation's send within its attempt (`attempt.ts`), timed by the attempt's first-byte queue rather than by a race:
 * the attempt's `Budget` reserved, then the request in the caller's fiber, with the client scoped in the attempt's
 * scope (the current one; `scopedAbort.ts`, as `HttpClient.withScope` scopes it), so that closing that scope aborts it,
 * until the body read in that scope takes the abort over. A first-byte deadline that passes closes the attempt's scope,
 * and the request's failure is then told as the `Timeout`. `Effect.timeoutFail` forks two fibers per send and joins the
 * winner's fiber refs back: that measured about 30 MB of figure 3's peak RSS (docs/performance.md, fix 25). One fiber
 * times the sends of a provider (`deadlines.ts`). The timeout relies on the client honouring the request's
 * `AbortSignal`, as every client of @effect/platform does. Interruption aborts the request (the attempt's scope closes)
 * and stays interruption; the deadline of an interrupted send is disarmed when the attempt ends. On reprise's own
 * client with Effect's own tracer, the client's span per request is not made, and the request carries the attempt
 * span's trace context ({@link withoutClientSpan}).
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
  Scope.Scope
> =>
  Effect.zipRight(
    attempt.allowance.reserve,
    Effect.withFiberRuntime<HttpClientResponse.HttpClientResponse, ProviderFailure.ProviderFailure, Scope.Scope>(
      (fiber) => {
        const entry = Deadlines.arm(attempt.firstByte, attempt.clock, attempt.close)
        attempt.sending = entry
        const settle = () => {
          Deadlines.disarm(attempt.firstByte, entry)
          attempt.sending = undefined
        }
        const scoped = ScopedAbort.scopedClient(client)
        const plain = withoutClientSpan(client, fiber, request)
        const sent = plain === undefined ? scoped.execute(request) : untraced(fiber, scoped.execute(plain))
        return Effect.matchEffect(sent, {
          onFailure: (error) => {
            settle()
            return Effect.fail(entry.timedOut ? firstByteFailure(settings) : fromRequestError(error, settings.scrub))
          },
          // the timer fired as the headers came: the request is aborted, so the response is not read
          onSuccess: (response) => {
            settle()
            return entry.timedOut ? Effect.fail(firstByteFailure(settings)) : Effect.succeed(response)
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
 * Each spec's request with its own body, built once with the settings it was built with: a spec and an
 * `HttpClientRequest` are immutable, so a replay sends the same request without encoding its body again (fix 26).
 */
const built = new WeakMap<
  RequestSpec,
  { readonly settings: Settings; readonly request: HttpClientRequest.HttpClientRequest }
>()

const requestOf = (spec: RequestSpec, body: Readonly<Record<string, unknown>>, settings: Settings) => {
  if (body !== spec.body) return toRequest(spec, body, settings)
  const found = built.get(spec)
  if (found !== undefined && found.settings === settings) return found.request
  const request = toRequest(spec, body, settings)
  built.set(spec, { settings, request })
  return request
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
  settings: Settings,
  attempt?: Attempt.Attempt
): Effect.Effect<
  HttpClientResponse.HttpClientResponse,
  ProviderFailure.ProviderFailure | Budget.BudgetExhausted,
  Budget.Budget | Scope.Scope
> => {
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
        ? send(client, requestOf(spec, body, settings), settings)
        : sendIn(attempt, client, requestOf(spec, body, settings), settings),
      (response) => {
        if (response.status >= 200 && response.status < 300) return succeeded(response, settings)
        // the error body timed by the attempt's idle queue, without a race (fix 33)
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
