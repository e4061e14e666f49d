/**
 * The first-token timeout (`ProviderOptions.firstTokenTimeout`): from the send to the first event of content, over the
 * loopback simulator with the real undici client, the provider's deadlines on a TestClock. Keepalive comments, a
 * role-only chunk and metadata events (`message_start`, `response.created`) do not count; a text delta does. When it
 * passes, the request is aborted and the attempt fails with a transient `TransportError{reason: "Timeout"}`.
 */
import { assert, describe, layer } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import * as Classification from "@reprise/core/Classification"
import * as Provider from "@reprise/core/Provider"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as ProviderOptions from "@reprise/providers/ProviderOptions"
import * as Simulator from "@reprise/simulator/Simulator"
import { Chunk, Duration, Effect, Exit, Fiber, Layer, Option, Redacted, Stream, TestClock, TestContext } from "effect"
import { KEY } from "./support/harness.js"

const request = { model: "gpt-sim", messages: [{ role: "user" as const, text: "Hello" }], maxTokens: 64 }

const providerLayer = (protocol: ProviderOptions.Protocol, options: Partial<HttpProvider.Options>) =>
  Layer.unwrapEffect(
    Effect.map(
      Simulator.Simulator,
      (sim) =>
        HttpProvider.layerUndici(protocol, {
          apiKey: Redacted.make(KEY),
          baseUrl: sim.baseUrl(protocol),
          idleTimeout: "120 seconds",
          ...options
        })
    )
  )

/** Lets socket events and promise callbacks run, without any clock. */
const settle = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve))).pipe(Effect.repeatN(3))

/** Waits until some fiber sleeps until `end` ms of the test clock. */
const awaitSleepUntil = (end: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 2000; i++) {
      if (Chunk.some(yield* TestClock.sleeps(), (at) => at === end)) return
      yield* settle
    }
    assert.fail(`no fiber ever slept until ${end} ms on the test clock`)
  })

/** One generation, forked in its Budget scope: its events, or how it failed. */
const start = Effect.gen(function*() {
  const provider = yield* Provider.Provider
  return yield* provider.stream(request).pipe(Stream.runCollect, Budget.scoped, Effect.fork)
})

const failureOf = (exit: Exit.Exit<unknown, unknown>): any =>
  Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined

// One simulator for the file, on the live clock; each test provides its own TestClock.
layer(Simulator.layer(), { excludeTestServices: true })("firstTokenTimeout", (it) => {
  for (const protocol of ProviderOptions.protocols) {
    describe(protocol, () => {
      it.effect("a stall after the headers and a metadata event, with keepalives, times out at the first-token timeout", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* sim.setScript({
            routes: { [protocol]: { steps: [{ kind: "stall", afterEvents: 1, keepaliveMs: 5 }] } }
          })
          const fiber = yield* start
          yield* awaitSleepUntil(10_000)
          const recorded = yield* sim.awaitRequest(protocol, 1)
          // the headers, the metadata event and keepalives arrive; none of them is a token
          for (let i = 0; i < 20; i++) yield* settle
          yield* TestClock.adjust("9999 millis")
          for (let i = 0; i < 5; i++) yield* settle
          assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)), "timed out before 10 s")
          yield* TestClock.adjust("1 millis")
          const error = failureOf(yield* Fiber.await(fiber))
          assert.strictEqual(error?._tag, "TransportError")
          assert.strictEqual(error?.reason, "Timeout")
          assert.strictEqual(error?.detail, "no first token within 10s")
          assert.isTrue(Classification.isRetryable(error))
          // the request was aborted: the client closed the exchange
          assert.strictEqual((yield* sim.awaitClose(recorded.id)).by, "client")
        }).pipe(
          Effect.provide(providerLayer(protocol, { firstTokenTimeout: "10 seconds" })),
          Effect.provide(TestContext.TestContext)
        ))

      it.effect("a stall before the headers fails as no first token when that timeout is the shorter", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* sim.setScript({ routes: { [protocol]: { steps: [{ kind: "stall" }] } } })
          const fiber = yield* start
          yield* awaitSleepUntil(5_000)
          const recorded = yield* sim.awaitRequest(protocol, 1)
          yield* TestClock.adjust("5 seconds")
          const error = failureOf(yield* Fiber.await(fiber))
          assert.strictEqual(error?.reason, "Timeout")
          assert.strictEqual(error?.detail, "no first token within 5s")
          assert.strictEqual((yield* sim.awaitClose(recorded.id)).by, "client")
        }).pipe(
          Effect.provide(providerLayer(protocol, { firstTokenTimeout: "5 seconds", firstByteTimeout: "60 seconds" })),
          Effect.provide(TestContext.TestContext)
        ))

      it.effect("a first text delta disarms it: a stall after it is timed by the idle timeout only", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          // the events before the stall end with the reply's first text delta
          const before = protocol === "openai-chat" ? 2 : protocol === "anthropic" ? 4 : 5
          yield* sim.setScript({
            routes: {
              [protocol]: {
                reply: { text: "Hello there" },
                steps: [{ kind: "stall", afterEvents: before, keepaliveMs: 5 }]
              }
            }
          })
          const fiber = yield* start
          yield* awaitSleepUntil(10_000)
          yield* sim.awaitRequest(protocol, 1)
          for (let i = 0; i < 20; i++) yield* settle
          yield* TestClock.adjust("30 seconds")
          for (let i = 0; i < 5; i++) yield* settle
          assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)), "timed out with a token in")
          yield* TestClock.adjust("90 seconds")
          const error = failureOf(yield* Fiber.await(fiber))
          assert.strictEqual(error?.reason, "Timeout")
          assert.match(error?.detail, /^no progress for 2m/)
        }).pipe(
          Effect.provide(providerLayer(protocol, { firstTokenTimeout: "10 seconds" })),
          Effect.provide(TestContext.TestContext)
        ))

      it.effect("a whole reply within it completes", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* sim.setScript({ routes: { [protocol]: { reply: { text: "Hello there" } } } })
          const events = yield* Fiber.join(yield* start)
          const text = Chunk.toArray(events).map((e) => e._tag === "TextDelta" ? e.text : "").join("")
          assert.strictEqual(text, "Hello there")
        }).pipe(
          Effect.provide(providerLayer(protocol, { firstTokenTimeout: Duration.seconds(10) })),
          Effect.provide(TestContext.TestContext)
        ))
    })
  }
})
