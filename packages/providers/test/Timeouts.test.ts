/**
 * First-byte and idle timeouts driven by TestClock over an in-memory HttpClient whose body the test feeds by hand:
 * no real waiting. Keepalive comments and `ping` events do not count as progress; events do.
 */
import { HttpClient, HttpClientResponse } from "@effect/platform"
import * as HttpClientError from "@effect/platform/HttpClientError"
import { assert, describe, it } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import type * as Generation from "@reprise/core/Generation"
import { Deferred, Effect, Exit, Fiber, Option, Redacted, Ref, Stream, TestClock } from "effect"
import { fedBody, KEY, request } from "./support/harness.js"
import { subjects } from "./support/protocols.js"

/** Lets promise-based body reads settle (no clock involved). */
const settle = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve))).pipe(Effect.repeatN(4))

const pendingSleeps = Effect.map(TestClock.sleeps(), (sleeps) => sleeps.length)

/** Waits (without time passing) until the stream is parked on its timeout. */
const awaitTimer = Effect.gen(function*() {
  for (let i = 0; i < 200; i++) {
    if ((yield* pendingSleeps) > 0) return
    yield* settle
  }
  assert.fail("the stream never started a timer")
})

const feedableClient = () => {
  const { body, feed } = fedBody()
  const client = HttpClient.make((req) =>
    Effect.succeed(HttpClientResponse.fromWeb(req, new Response(body, { status: 200 })))
  )
  return { client, feed }
}

for (const subject of subjects) {
  describe(`${subject.name} timeouts (TestClock)`, () => {
    const make = (client: HttpClient.HttpClient) =>
      Effect.provideService(
        subject.make({
          apiKey: Redacted.make(KEY),
          baseUrl: "http://127.0.0.1:9",
          idleTimeout: "120 seconds",
          firstByteTimeout: "60 seconds"
        }),
        HttpClient.HttpClient,
        client
      )

    const start = (client: HttpClient.HttpClient) =>
      Effect.gen(function*() {
        const provider = yield* make(client)
        const events = yield* Ref.make<Array<Generation.GenerationEvent>>([])
        const first = yield* Deferred.make<void>()
        const fiber = yield* provider.stream(request()).pipe(
          Stream.tap((e) =>
            Effect.zipRight(Ref.update(events, (es) => [...es, e]), Deferred.succeed(first, undefined))
          ),
          Stream.runDrain,
          Budget.scoped,
          Effect.fork
        )
        return { fiber, events, first }
      })

    it.effect("keepalives do not reset the idle timeout", () =>
      Effect.gen(function*() {
        const { client, feed } = feedableClient()
        feed(subject.partial)
        const { fiber, first } = yield* start(client)
        yield* Deferred.await(first)
        yield* awaitTimer
        yield* TestClock.adjust("60 seconds")
        for (let i = 0; i < 5; i++) {
          feed(subject.keepalive)
          yield* settle
        }
        yield* TestClock.adjust("59 seconds")
        assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)), "still waiting at 119 s")
        yield* TestClock.adjust("1 second")
        const exit = yield* Fiber.await(fiber)
        assert.isTrue(Exit.isFailure(exit))
        const error: any = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
        assert.strictEqual(error?._tag, "TransportError")
        assert.strictEqual(error?.reason, "Timeout")
      }))

    it.effect("an event is progress: it restarts the idle timeout", () =>
      Effect.gen(function*() {
        const { client, feed } = feedableClient()
        feed(subject.partial)
        const { fiber, events, first } = yield* start(client)
        yield* Deferred.await(first)
        yield* awaitTimer
        yield* TestClock.adjust("100 seconds")
        const before = (yield* Ref.get(events)).length
        // progress: one more text event (the tail of `partial` repeated as a delta)
        const more = subject.name === "anthropic"
          ? `event: content_block_delta\ndata: ${
            JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "l" } })
          }\n\n`
          : subject.name === "openai-chat"
          ? `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "l" } }] })}\n\n`
          : `data: ${JSON.stringify({ type: "response.output_text.delta", delta: "l" })}\n\n`
        feed(more)
        for (let i = 0; i < 100 && (yield* Ref.get(events)).length === before; i++) yield* settle
        assert.isAbove((yield* Ref.get(events)).length, before)
        yield* awaitTimer
        yield* TestClock.adjust("119 seconds")
        assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)), "progress at 100 s moved the timeout to 220 s")
        yield* TestClock.adjust("1 second")
        const exit = yield* Fiber.await(fiber)
        assert.isTrue(Exit.isFailure(exit))
      }))

    it.effect("headers at 59 s are in time; the body is then timed by the idle timeout, from the headers", () =>
      Effect.gen(function*() {
        // the headers come 59 s after the request (of a 60 s first-byte timeout), then the body sends nothing
        const silent = new ReadableStream<Uint8Array>()
        const client = HttpClient.make((req) =>
          Effect.as(Effect.sleep("59 seconds"), HttpClientResponse.fromWeb(req, new Response(silent, { status: 200 })))
        )
        const { fiber } = yield* start(client)
        yield* awaitTimer
        yield* TestClock.adjust("59 seconds")
        yield* settle
        yield* TestClock.adjust("1 second")
        yield* settle
        assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)), "timed out at 60 s, with the headers in")
        // 59 s + 120 s
        yield* TestClock.adjust("118 seconds")
        yield* settle
        assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)), "timed out before 120 s of the body's silence")
        yield* TestClock.adjust("1 second")
        const exit = yield* Fiber.await(fiber)
        const error: any = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
        assert.strictEqual(error?.reason, "Timeout")
        assert.match(error?.detail, /^no progress for 2m/)
      }))

    it.effect("no response headers within the first-byte timeout: Timeout, and the request is aborted", () =>
      Effect.gen(function*() {
        const aborted = yield* Deferred.make<void>()
        // a request never answered, which honours its signal as the platform's clients do
        const client = HttpClient.make((req, _url, signal) =>
          Effect.async<never, HttpClientError.RequestError>((resume) => {
            signal.addEventListener("abort", () => {
              Deferred.unsafeDone(aborted, Exit.void)
              resume(Effect.fail(new HttpClientError.RequestError({ request: req, reason: "Transport" })))
            })
          })
        )
        const { fiber } = yield* start(client)
        yield* awaitTimer
        yield* TestClock.adjust("59 seconds")
        assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)))
        yield* TestClock.adjust("1 second")
        const exit = yield* Fiber.await(fiber)
        const error: any = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
        assert.strictEqual(error?.reason, "Timeout")
        assert.isTrue(yield* Deferred.isDone(aborted))
      }))

    it.effect("a web body of keepalives only: the first-token timeout ends it", () =>
      Effect.gen(function*() {
        const { client, feed } = feedableClient()
        feed(subject.keepalive)
        const provider = yield* Effect.provideService(
          subject.make({
            apiKey: Redacted.make(KEY),
            baseUrl: "http://127.0.0.1:9",
            idleTimeout: "120 seconds",
            firstTokenTimeout: "10 seconds"
          }),
          HttpClient.HttpClient,
          client
        )
        const fiber = yield* provider.stream(request()).pipe(Stream.runDrain, Budget.scoped, Effect.fork)
        yield* awaitTimer
        for (let i = 0; i < 3; i++) {
          feed(subject.keepalive)
          yield* settle
        }
        yield* TestClock.adjust("9999 millis")
        yield* settle
        assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)), "timed out before 10 s")
        yield* TestClock.adjust("1 millis")
        const exit = yield* Fiber.await(fiber)
        const error: any = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
        assert.strictEqual(error?.reason, "Timeout")
        assert.strictEqual(error?.detail, "no first token within 10s")
      }))
  })
}
