/**
 * The floor of figures 3 and 4: the plain client of `plain.ts` built on the parts DESIGN §3 mandates for every
 * provider and nothing of reprise. The request goes through `HttpClient` from @effect/platform with the undici client
 * of @effect/platform-node, its body is read as that client's `Stream` (a chunk at a time), and the retry is
 * `Effect.retry` with a fixed `Schedule`. The events are handled as the plain loop handles them: `eventsource-parser`,
 * `JSON.parse`, the text appended, the terminal checked; no Schema, no state machine, no budget, no notifications, no
 * spans of its own.
 *
 * It bounds what a client that reads the body as that `Stream` and retries with `Effect.retry` can reach, not what
 * every client on `HttpClient` can: {@link chatLeast} does less (figure 3 measures both; docs/performance.md, "The
 * Effect floor").
 */
import * as HttpClient from "@effect/platform/HttpClient"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { createParser } from "eventsource-parser"
import type { Readable } from "node:stream"
import { chatReply } from "./plain.js"

/** The streaming Chat Completions request both clients send. */
const chatRequest = (baseUrl: string, body: unknown) =>
  HttpClientRequest.post(`${baseUrl}/chat/completions`).pipe(
    HttpClientRequest.setHeaders({ accept: "text/event-stream", authorization: "Bearer sk-bench-not-a-key" }),
    HttpClientRequest.bodyUnsafeJson(body)
  )

/** One Chat Completions reply's text; fails on a non-200 status, an in-band error, a cut body or a missing terminal. */
export const chat = (
  baseUrl: string,
  body: unknown
): Effect.Effect<string, unknown, HttpClient.HttpClient> =>
  Effect.flatMap(HttpClient.HttpClient, (client) =>
    Effect.scoped(
      Effect.flatMap(
        client.execute(chatRequest(baseUrl, body)),
        (response) => {
          if (response.status !== 200) {
            return Effect.zipRight(response.text, Effect.fail(new Error(`status ${response.status}`)))
          }
          const { finished, onEvent, text } = chatReply()
          const parser = createParser({ onEvent })
          const decoder = new TextDecoder()
          return response.stream.pipe(
            Stream.runForEachChunk((chunks) =>
              Effect.try(() => {
                for (const chunk of chunks) parser.feed(decoder.decode(chunk, { stream: true }))
              })
            ),
            Effect.flatMap(() => finished() ? Effect.succeed(text()) : Effect.fail(new Error("premature EOF")))
          )
        }
      )
    ))

/** `chat` retried by `Effect.retry`: up to `attempts` tries, `backoffMs` between them (a fixed `Schedule`). */
export const chatWithRetry = (
  baseUrl: string,
  body: unknown,
  options: { readonly attempts: number; readonly backoffMs: number }
): Effect.Effect<{ text: string; attempts: number }, unknown, HttpClient.HttpClient> =>
  Effect.suspend(() => {
    let attempts = 0
    return chat(baseUrl, body).pipe(
      Effect.onExit(() => Effect.sync(() => attempts++)),
      Effect.retry(
        Schedule.intersect(Schedule.spaced(Duration.millis(options.backoffMs)), Schedule.recurs(options.attempts - 1))
      ),
      Effect.map((text) => ({ text, attempts }))
    )
  })

/**
 * The least a client on `HttpClient` does, the second floor of figure 3: the request through the same client as
 * `chat`, scoped as reprise's sends are (`client` is `HttpClient.withScope` of it, made once: the request is aborted
 * when its scope closes), its undici body read in one promise as the plain loop reads it (no `Stream`, no Effect per
 * chunk), and a recursive retry with `Effect.sleep` (no `Schedule`). What it costs over the plain loop is the
 * platform's client and a handful of Effects per attempt. It relies on the shape of the undici client's responses
 * (`source.body`, undici's `Readable`), as reprise's own body reader does.
 */
export const chatLeast = (
  client: HttpClient.HttpClient.With<HttpClientError.HttpClientError, Scope.Scope>,
  baseUrl: string,
  body: unknown
): Effect.Effect<string, unknown> =>
  Effect.scoped(
    Effect.flatMap(
      client.execute(chatRequest(baseUrl, body)),
      (response) =>
        Effect.tryPromise(async () => {
          const readable = (response as unknown as { readonly source: { readonly body: Readable } }).source.body
          if (response.status !== 200) {
            readable.resume()
            throw new Error(`status ${response.status}`)
          }
          const { finished, onEvent, text } = chatReply()
          const parser = createParser({ onEvent })
          const decoder = new TextDecoder()
          for await (const chunk of readable) parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }))
          if (!finished()) throw new Error("premature EOF")
          return text()
        })
    )
  )

/** `chatLeast` retried by hand: up to `attempts` tries, an `Effect.sleep` of `backoffMs` between them. */
export const chatLeastWithRetry = (
  client: HttpClient.HttpClient.With<HttpClientError.HttpClientError, Scope.Scope>,
  baseUrl: string,
  body: unknown,
  options: { readonly attempts: number; readonly backoffMs: number }
): Effect.Effect<{ text: string; attempts: number }, unknown> => {
  const attempt = (n: number): Effect.Effect<{ text: string; attempts: number }, unknown> =>
    Effect.matchEffect(chatLeast(client, baseUrl, body), {
      onSuccess: (text) => Effect.succeed({ text, attempts: n }),
      onFailure: (error) =>
        n >= options.attempts
          ? Effect.fail(error)
          : Effect.zipRight(Effect.sleep(Duration.millis(options.backoffMs)), attempt(n + 1))
    })
  return attempt(1)
}
