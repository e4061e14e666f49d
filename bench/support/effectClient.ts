/**
 * The floor of figures 3 and 4: the plain client of `plain.ts` built on the parts DESIGN §3 mandates for every
 * provider and nothing of reprise. The request goes through `HttpClient` from @effect/platform with the undici client
 * of @effect/platform-node, its body is read as that client's `Stream` (a chunk at a time), and the retry is
 * `Effect.retry` with a fixed `Schedule`. The events are handled as the plain loop handles them: `eventsource-parser`,
 * `JSON.parse`, the text appended, the terminal checked; no Schema, no state machine, no budget, no notifications, no
 * spans of its own.
 *
 * No client on those parts can recover faster or hold less per stream, so its figures bound what reprise can reach
 * against the plain loop while it keeps them.
 */
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientRequest from "@effect/platform/HttpClientRequest"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Schedule from "effect/Schedule"
import * as Stream from "effect/Stream"
import { createParser } from "eventsource-parser"
import { chatReply } from "./plain.js"

/** One Chat Completions reply's text; fails on a non-200 status, an in-band error, a cut body or a missing terminal. */
export const chat = (
  baseUrl: string,
  body: unknown
): Effect.Effect<string, unknown, HttpClient.HttpClient> =>
  Effect.flatMap(HttpClient.HttpClient, (client) =>
    Effect.scoped(
      Effect.flatMap(
        client.execute(
          HttpClientRequest.post(`${baseUrl}/chat/completions`).pipe(
            HttpClientRequest.setHeaders({ accept: "text/event-stream", authorization: "Bearer sk-bench-not-a-key" }),
            HttpClientRequest.bodyUnsafeJson(body)
          )
        ),
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
