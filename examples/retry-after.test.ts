/**
 * A test of your own code against the simulator, with time under `TestClock`: a 429 with `Retry-After: 30` is
 * honoured exactly, and the test takes milliseconds, not 30 seconds. Runs with Node's own test runner
 * (`node --test examples/retry-after.test.js`); with @effect/vitest the body is the same inside `it.effect`.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { Budget, Policy, Recovery, RecoveryNotifications } from "@reprise/core"
import { HttpProvider } from "@reprise/providers"
import { Simulator } from "@reprise/simulator"
import { Chunk, Deferred, Duration, Effect, Fiber, Layer, Option, Redacted, TestClock, TestContext } from "effect"
import * as assert from "node:assert/strict"
import { test } from "node:test"

/** The code under test: a one-line summary, with recovery. */
const summarise = (text: string) =>
  Effect.map(
    Recovery.generate({ model: "gpt-4.1-mini", messages: [{ role: "user", text: `Summarise: ${text}` }] }),
    (reply) => reply.text.trim()
  )

test("a 429 with Retry-After: 30 is waited out exactly, then the reply is committed", () =>
  Effect.gen(function*() {
    const simulator = yield* Simulator.Simulator
    yield* simulator.setScript({
      routes: {
        "openai-chat": {
          steps: [
            { kind: "status", status: 429, headers: { "retry-after": "30" } },
            { kind: "stream", reply: { text: "A short summary." } }
          ]
        }
      }
    })
    const retry = yield* Deferred.make<Duration.Duration>()
    const layer = Layer.mergeAll(
      HttpProvider.layer("openai-chat", { apiKey: Redacted.make("sk-test"), baseUrl: simulator.baseUrl("openai-chat") })
        .pipe(Layer.provide(NodeHttpClient.layerUndici)),
      Budget.layer({}),
      Policy.layer({}),
      RecoveryNotifications.layerCallback((n) =>
        n._tag === "RetryScheduled" ? Deferred.succeed(retry, n.delay) : Effect.void
      )
    )
    const fiber = yield* Effect.fork(Effect.provide(summarise("a long text"), layer))

    // The 429 arrived over a real socket; the wait that follows is on the test clock.
    const delay = yield* Deferred.await(retry)
    assert.equal(Duration.toMillis(delay), 30_000)
    // Move the clock only once the recovery loop sleeps until 30 s (timeouts have test-clock sleeps of their own).
    for (let i = 0; i < 10_000 && !Chunk.some(yield* TestClock.sleeps(), (at) => at === 30_000); i++) {
      yield* Effect.yieldNow()
    }
    yield* TestClock.adjust("29999 millis")
    assert.equal(Option.isNone(yield* Fiber.poll(fiber)), true, "still waiting 1 ms before the end of Retry-After")
    assert.equal(yield* simulator.count("openai-chat"), 1)
    yield* TestClock.adjust("1 millis")

    assert.equal(yield* Fiber.join(fiber), "A short summary.")
    assert.equal(yield* simulator.count("openai-chat"), 2)
  }).pipe(Effect.provide(Simulator.layer()), Effect.provide(TestContext.TestContext), Effect.scoped, Effect.runPromise))
