/**
 * `hold` mode's keepalives run on the `Clock`: with the TestClock, none is sent before the interval has passed (the
 * response has not even started), one when it has, then the whole answer once the upstream reply committed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Option, TestClock } from "effect"
import { chat, content, post, relay } from "./support.js"

const realTurns = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 20)))

describe("Relay hold keepalives", () => {
  it.effect(
    "one `: reprise hold` comment per interval of the Clock, then the committed answer",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({
          models: { late: { reply: { text: "Late but whole." }, then: { kind: "slow-first-token", delayMs: 1_000 } } }
        }, { idleTimeoutMs: 60_000, firstByteTimeoutMs: 60_000 })
        const response = yield* Effect.fork(Effect.promise(() =>
          fetch(`${h.url}/v1/chat/completions`, {
            method: "POST",
            headers: { "content-type": "application/json", "x-reprise-preview": "hold" },
            body: JSON.stringify(chat("late", { stream: true }))
          })
        ))
        for (let i = 0; i < 200 && (yield* h.sim.requestsFor("late")).length === 0; i++) yield* realTurns
        yield* TestClock.adjust(Duration.millis(4_999))
        for (let i = 0; i < 5; i++) yield* realTurns
        // no byte yet: not even the status line
        assert.isTrue(Option.isNone(yield* Fiber.poll(response)))
        yield* TestClock.adjust(Duration.millis(1))
        const r = yield* Fiber.join(response)
        assert.strictEqual(r.status, 200)
        const text = yield* Effect.promise(() => r.text())
        assert.isTrue(text.startsWith(": reprise hold\n\ndata: "))
        assert.strictEqual(text.split(": reprise hold").length - 1, 1)
        assert.strictEqual(content(text), "Late but whole.")
        assert.isTrue(text.endsWith("data: [DONE]\n\n"))
      }).pipe(Effect.scoped),
    20_000
  )

  it.live(
    "a failure after keepalives is one in-band error frame, with no success terminal",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({
          models: { gone: { then: { kind: "stall", durationMs: 300, then: "eof" } } }
        }, { keepalive: "50 millis", maxAttempts: 1 })
        const r = yield* post(`${h.url}/v1/chat/completions`, chat("gone", { stream: true }))
        assert.strictEqual(r.status, 200)
        const blocks = r.text.split("\n\n").filter((b) => b.length > 0)
        const last = blocks.pop()!
        assert.isAtLeast(blocks.length, 2)
        for (const block of blocks) assert.strictEqual(block, ": reprise hold")
        assert.isTrue(last.startsWith("data: {\"error\":"))
        assert.strictEqual(JSON.parse(last.slice(6)).error.type, "api_error")
        assert.notInclude(r.text, "[DONE]")
        assert.strictEqual((yield* h.sim.requestsFor("gone")).length, 1)
      }).pipe(Effect.scoped),
    20_000
  )
})
