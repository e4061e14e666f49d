/**
 * A reply's connection is kept for the next request when the body's last bytes come after its terminal event (fix 34
 * of docs/performance.md): the reply commits at the terminal, and the body's release then reads what is left of it
 * (`data: [DONE]`, the chunked encoding's end) rather than aborting the request, within `Body.trailerBytes` and the
 * idle timeout. Over a real node:http server on 127.0.0.1, with the real undici client of @effect/platform-node (its
 * body's `dump`) and the fetch client of @effect/platform (its web body read on); the server holds each body's end until
 * the test lets it go, so no timing decides what the client has read.
 */
import { FetchHttpClient } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Recovery from "@reprise/core/Recovery"
import type * as ProviderOptions from "@reprise/providers/ProviderOptions"
import { Effect, Redacted, TestClock } from "effect"
import * as DiagnosticsChannel from "node:diagnostics_channel"
import type * as Http from "node:http"
import * as Body from "../src/internal/body.js"
import { KEY, request, server, turns, waitFor } from "./support/harness.js"
import { type Subject, subjects } from "./support/protocols.js"

const clients = [
  { name: "the undici client", layer: NodeHttpClient.layerUndici },
  { name: "the fetch client", layer: FetchHttpClient.layer }
]

/**
 * undici's requests completed (every byte of the response received), counted from its diagnostics channel (Node's
 * `fetch` is undici too, and publishes on the same channels).
 */
const completions = () => {
  let count = 0
  const onMessage = () => {
    count++
  }
  return Effect.acquireRelease(
    Effect.sync(() => {
      DiagnosticsChannel.subscribe("undici:request:trailers", onMessage)
      return { count: () => count }
    }),
    () => Effect.sync(() => DiagnosticsChannel.unsubscribe("undici:request:trailers", onMessage))
  )
}

/**
 * A server whose every reply is `body`, its end held until `end(index)` lets it go (`write(index, text)` sends more
 * before it); and the connections it took.
 */
const holding = (body: (index: number) => string) =>
  Effect.gen(function*() {
    const held: Array<Http.ServerResponse> = []
    const s = yield* server((_req, res, index) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.write(body(index))
      held[index] = res
    })
    let connections = 0
    s.http.on("connection", () => connections++)
    return {
      s,
      connections: () => connections,
      end: (index: number) => held[index].end(),
      write: (index: number, text: string) => held[index].write(text)
    }
  })

const reply = (subject: Subject, url: string, extra: Partial<ProviderOptions.Options> = {}) =>
  Effect.flatMap(
    subject.make({ apiKey: Redacted.make(KEY), baseUrl: subject.base(url), ...extra }),
    (provider) => Recovery.run(provider.stream(request()))
  )

for (const { layer, name } of clients) {
  for (const subject of subjects) {
    describe(`${subject.name} over ${name}: the connection of a reply whose body ends after its terminal`, () => {
      it.scoped("is kept: each reply commits before its body's end arrives, and one connection serves them all", () =>
        Effect.gen(function*() {
          const done = yield* completions()
          const { connections, end, s } = yield* holding(() => subject.success)
          for (let i = 0; i < 3; i++) {
            // committed while the server still holds the body's end: the release does not hold the reply back
            const committed = yield* reply(subject, s.url)
            assert.strictEqual(committed.text, "Hello")
            assert.strictEqual(done.count(), i, "the body's end had not arrived")
            end(i)
            yield* waitFor(() => done.count() === i + 1)
            assert.strictEqual(done.count(), i + 1, "the body's end was not read")
            yield* turns(2)
          }
          assert.strictEqual(s.received.length, 3)
          assert.deepStrictEqual(s.aborted, [])
          assert.strictEqual(connections(), 1)
        }).pipe(Effect.provide(layer)))

      it.scoped("is kept when what follows the terminal is within Body.trailerBytes", () =>
        Effect.gen(function*() {
          const done = yield* completions()
          const { connections, end, s, write } = yield* holding(() => subject.success)
          assert.strictEqual((yield* reply(subject, s.url)).text, "Hello")
          // after the reply, a comment line 1 KiB within the bound, then the end
          write(0, `: ${"x".repeat(Body.trailerBytes - 1024)}\n\n`)
          end(0)
          yield* waitFor(() => done.count() === 1)
          assert.strictEqual(done.count(), 1, "the body's end was not read")
          yield* turns(2)
          assert.strictEqual((yield* reply(subject, s.url)).text, "Hello")
          assert.deepStrictEqual(s.aborted, [])
          assert.strictEqual(connections(), 1)
        }).pipe(Effect.provide(layer)))

      it.scoped("is cut when more than Body.trailerBytes follow the terminal: the request is aborted", () =>
        Effect.gen(function*() {
          const { connections, s, write } = yield* holding(() => subject.success)
          const committed = yield* reply(subject, s.url)
          assert.strictEqual(committed.text, "Hello")
          // after the reply, a comment line past the bound
          write(0, `: ${"x".repeat(Body.trailerBytes)}\n\n`)
          yield* s.awaitAbort(0)
          // the next request opens another connection
          assert.strictEqual((yield* reply(subject, s.url)).text, "Hello")
          assert.deepStrictEqual(s.aborted, [0])
          assert.isAbove(connections(), 1)
        }).pipe(Effect.provide(layer)))

      it.scoped("is cut at the idle timeout when the body's end does not come (TestClock)", () =>
        Effect.gen(function*() {
          const { s } = yield* holding(() => subject.success)
          const committed = yield* reply(subject, s.url, { idleTimeout: "30 seconds" })
          assert.strictEqual(committed.text, "Hello")
          yield* turns(5)
          yield* TestClock.adjust("29 seconds")
          yield* turns(5)
          assert.deepStrictEqual(s.aborted, [], "cut before the idle timeout")
          yield* TestClock.adjust("1 second")
          yield* s.awaitAbort(0)
        }).pipe(Effect.provide(layer)))
    })
  }
}
