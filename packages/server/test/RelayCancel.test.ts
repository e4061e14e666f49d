/**
 * A client that goes away interrupts its reply at once: the upstream request is closed by the relay (the simulator
 * records it closed by the client), and no further upstream request follows, though the provider's timeouts would
 * have replayed it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { chat, relay } from "./support.js"

const WORDS = Array.from({ length: 40 }, (_, i) => `w${i}`).join(" ")

/** Starts a streamed request and reads until `until` returns true of what came so far, then aborts it. */
const readThenAbort = (url: string, body: unknown, mode: string, until: (text: string) => boolean) =>
  Effect.promise(async () => {
    const controller = new AbortController()
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-reprise-preview": mode },
      body: JSON.stringify(body),
      signal: controller.signal
    })
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let text = ""
    while (!until(text)) {
      const { done, value } = await reader.read()
      if (done) break
      text += decoder.decode(value, { stream: true })
    }
    controller.abort()
    return text
  })

const waitFor = <A>(effect: Effect.Effect<A>, ok: (a: A) => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 200; i++) {
      const a = yield* effect
      if (ok(a)) return a
      yield* Effect.sleep("10 millis")
    }
    return yield* Effect.die("timed out waiting")
  })

describe("Relay cancellation", () => {
  it.live(
    "live: a disconnect after content closes the upstream request, and nothing is sent again",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({
          models: { slow: { reply: { text: WORDS }, then: { kind: "drip", everyMs: 50, events: 1 } } }
        }, { idleTimeoutMs: 150 })
        const text = yield* readThenAbort(h.url, chat("slow", { stream: true }), "live", (t) => t.includes("w1\""))
        assert.include(text, "\"w0\"")
        assert.notInclude(text, "w39")
        const [upstream] = yield* h.sim.requestsFor("slow")
        const closure = yield* h.sim.awaitClose(upstream!.id)
        assert.strictEqual(closure.by, "client")
        // an idle timeout would have replayed it by now
        yield* Effect.sleep("400 millis")
        assert.strictEqual((yield* h.sim.requestsFor("slow")).length, 1)
        const entry = yield* waitFor(Effect.sync(() => h.log), (log) => log.length === 1)
        assert.strictEqual(entry[0]!.attempts, 1)
      }).pipe(Effect.scoped),
    20_000
  )

  it.live(
    "hold: a disconnect while holding closes the upstream request, and nothing is sent again",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({
          models: { silent: { then: { kind: "stall", durationMs: 10_000, then: "eof" } } }
        }, { firstByteTimeoutMs: 150 })
        const controller = new AbortController()
        const pending = fetch(`${h.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(chat("silent", { stream: true })),
          signal: controller.signal
        }).catch(() => undefined)
        const [upstream] = yield* waitFor(h.sim.requestsFor("silent"), (r) => r.length === 1)
        controller.abort()
        yield* Effect.promise(() => pending)
        const closure = yield* h.sim.awaitClose(upstream!.id)
        assert.strictEqual(closure.by, "client")
        // the first-byte timeout would have replayed it by now
        yield* Effect.sleep("400 millis")
        assert.strictEqual((yield* h.sim.requestsFor("silent")).length, 1)
        const log = yield* waitFor(Effect.sync(() => h.log), (log) => log.length === 1)
        assert.strictEqual(log[0]!.status, 499)
      }).pipe(Effect.scoped),
    20_000
  )
})
