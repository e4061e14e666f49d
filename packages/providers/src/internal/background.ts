/**
 * The requests of the Responses API's background mode, besides the send: a **resume**
 * (`GET {base}/responses/{id}?stream=true&starting_after=N`, the events after N), a **poll**
 * (`GET {base}/responses/{id}`, the response object) and a **cancel** (`POST {base}/responses/{id}/cancel`). Each
 * keeps the base URL's query, carries the key as a bearer token and asks for no content encoding. A resume and the
 * first poll of a continuation are sends (debited); the later polls of that continuation and the cancel are not
 * generation attempts and debit nothing.
 *
 * @internal
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Budget from "@reprise/core/Budget"
import type * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as TransportError from "@reprise/core/TransportError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Stream from "effect/Stream"
import { fromBodyError } from "./failure.js"
import * as Send from "./send.js"
import { endpoint, type Settings } from "./settings.js"

/**
 * How long a cancel may take: it runs when recovery gives up or is interrupted (Ctrl-C), which must not wait on a
 * server for long.
 *
 * @internal
 */
export const cancelTimeout: Duration.Duration = Duration.seconds(2)

const resourceUrl = (settings: Settings, id: string, suffix = ""): URL =>
  new URL(endpoint(settings.baseUrl, `/responses/${encodeURIComponent(id)}${suffix}`))

/** @internal */
export const resumeUrl = (settings: Settings, id: string, after: number): string => {
  const url = resourceUrl(settings, id)
  url.searchParams.set("stream", "true")
  url.searchParams.set("starting_after", String(after))
  return url.href
}

const request = (
  method: "GET" | "POST",
  url: string,
  accept: string,
  settings: Settings
): HttpClientRequest.HttpClientRequest =>
  (method === "GET" ? HttpClientRequest.get(url) : HttpClientRequest.post(url)).pipe(
    HttpClientRequest.accept(accept),
    HttpClientRequest.setHeader("accept-encoding", "identity"),
    HttpClientRequest.bearerToken(settings.apiKey)
  )

/**
 * A resume: one send (debited), answered with the event stream after `after`, or its typed failure.
 *
 * @internal
 */
export const resume = (
  client: HttpClient.HttpClient,
  settings: Settings,
  id: string,
  after: number
): Effect.Effect<
  HttpClientResponse.HttpClientResponse,
  ProviderFailure.ProviderFailure | Budget.BudgetExhausted,
  Budget.Budget
> =>
  Effect.flatMap(
    Send.send(client, request("GET", resumeUrl(settings, id, after), "text/event-stream", settings), settings),
    (response) => Send.succeeded(response, settings)
  )

/**
 * A poll: the response object's text, for the caller to decode. `debit`: the poll is the continuation's send (its
 * first poll).
 *
 * @internal
 */
export const poll = (
  client: HttpClient.HttpClient,
  settings: Settings,
  id: string,
  debit: boolean
): Effect.Effect<string, ProviderFailure.ProviderFailure | Budget.BudgetExhausted, Budget.Budget> => {
  const get = request("GET", resourceUrl(settings, id).href, "application/json", settings)
  return (debit ? Send.send(client, get, settings) : Send.execute(client, get, settings)).pipe(
    Effect.flatMap((response) => Send.succeeded(response, settings)),
    Effect.flatMap((response) => readText(response, settings))
  )
}

/**
 * A cancel, not debited, within {@link cancelTimeout}: a success, or the failure the server answered.
 *
 * @internal
 */
export const cancel = (
  client: HttpClient.HttpClient,
  settings: Settings,
  id: string
): Effect.Effect<void, ProviderFailure.ProviderFailure> =>
  Send.execute(client, request("POST", resourceUrl(settings, id, "/cancel").href, "application/json", settings), {
    ...settings,
    firstByteTimeout: Duration.min(settings.firstByteTimeout, cancelTimeout)
  }).pipe(
    Effect.flatMap((response) => Send.succeeded(response, settings)),
    Effect.flatMap((response) => Effect.ignore(response.stream.pipe(Stream.runDrain))),
    Effect.timeoutFail({
      duration: cancelTimeout,
      onTimeout: () =>
        new TransportError.TransportError({
          reason: "Timeout",
          detail: `the cancel was not answered within ${Duration.format(cancelTimeout)}`
        })
    })
  )

/**
 * A body's text, read within `maxReplyBytes` and the idle timeout: past the bound `ReplyTooLarge`, a body cut
 * mid-read `Reset`.
 *
 * @internal
 */
export const readText = (
  response: HttpClientResponse.HttpClientResponse,
  settings: Settings
): Effect.Effect<string, ProviderFailure.ProviderFailure> =>
  response.stream.pipe(
    Stream.mapError((error) => fromBodyError(error, settings.scrub)),
    Stream.runFoldEffect({ parts: [] as Array<Uint8Array>, size: 0 }, (acc, bytes) => {
      acc.size += bytes.length
      if (acc.size > settings.maxReplyBytes) {
        return Effect.fail(
          new ProviderRejection.ProviderRejection({
            reason: "ReplyTooLarge",
            detail: `the response object passed the bound of ${settings.maxReplyBytes} bytes (maxReplyBytes)`
          })
        )
      }
      acc.parts.push(bytes)
      return Effect.succeed(acc)
    }),
    Effect.timeoutFail({
      duration: settings.idleTimeout,
      onTimeout: () =>
        new TransportError.TransportError({
          reason: "Timeout",
          detail: `the response object was not read within ${Duration.format(settings.idleTimeout)}`
        })
    }),
    Effect.map(({ parts }) => Buffer.concat(parts).toString("utf8"))
  )
