/**
 * What the two failoverbench suites share (test/failoverbench.test.ts through the library's plan,
 * test/failoverbench-relay.test.ts through the relay): the interactive configuration of docs/routes.md, the catalogue's
 * script with the full profile's delays and no pause between tokens, the canonical answer, the driver that steps the
 * TestClock while sockets work, the provider's view of a model, and the catalogue's checks of each single-call
 * scenario, written once over what a suite measured (`Measured`).
 */
import { assert } from "@effect/vitest"
import * as Failoverbench from "@reprise/simulator/Failoverbench"
import type * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Clock, Duration, Effect, Fiber, Option, TestClock } from "effect"

/** The configuration of docs/routes.md's interactive example: the one its scorecards were measured with. */
export const interactive = {
  deadline: Duration.seconds(40),
  firstByteTimeout: Duration.seconds(10),
  firstTokenTimeout: Duration.seconds(5),
  idleTimeout: Duration.seconds(10),
  fallbackContextWindow: 200_000
}

export const prompt =
  "Explain in exactly sixty words why a gateway earns trust only when the provider behind it misbehaves."

/** The catalogue's faults with the full profile's delays, and no pause between tokens. */
export const script: SimulatorScript.Script = (() => {
  const t = { ...Failoverbench.timings.full, tokenIntervalMs: 0 }
  const reply = { text: Failoverbench.canonicalAnswer }
  const models: Record<string, SimulatorScript.ModelScript> = {
    [Failoverbench.healthyModel]: { reply, then: { kind: "stream" } },
    [Failoverbench.noPrefillModel]: { reply, then: { kind: "stream" }, rejectPrefill: true }
  }
  for (const s of Failoverbench.scenarios) models[s.model] = s.modelScript(t)
  return { models }
})()

export const norm = (text: string) => text.trim().replace(/\s+/g, " ")

/** Whether `text` is the canonical answer, whitespace aside (the catalogue's `complete`). */
export const isCanonical = (text: string) => norm(text) === norm(Failoverbench.canonicalAnswer)

export const scenario = (id: string) => Failoverbench.scenarios.find((s) => s.id === id)!

const nextTurn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))

/**
 * Runs `effect` to its end, stepping the TestClock by 50 ms whenever the sockets have had their turns: its exit and
 * the TestClock's seconds it took.
 */
export const drive = <A, E>(effect: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const start = yield* Clock.currentTimeMillis
    const fiber = yield* Effect.fork(effect)
    for (let i = 0; i < 10_000 && Option.isNone(yield* fiber.poll); i++) {
      for (let turn = 0; turn < 8; turn++) yield* nextTurn
      if (Option.isNone(yield* fiber.poll)) yield* TestClock.adjust(Duration.millis(50))
    }
    const exit = yield* Fiber.await(fiber)
    return { exit, seconds: ((yield* Clock.currentTimeMillis) - start) / 1000 }
  })

/** What the provider saw of `model`: its requests' times (TestClock seconds from `since`) and actions. */
export const seen = (sim: Simulator.Service, model: string, since: number) =>
  Effect.map(
    sim.requestsFor(model),
    (requests) => requests.map((r) => ({ at: (r.receivedAt - since) / 1000, action: r.action ?? "" }))
  )

/** Attempts inside the first `window` seconds after the first one. */
export const within = (attempts: ReadonlyArray<{ readonly at: number }>, window: number) =>
  attempts.filter((a) => a.at - attempts[0]!.at < window).length

/** What a suite measured of one scenario's call, in the catalogue's terms. */
export interface Measured {
  /** The call succeeded with the canonical answer. */
  readonly complete: boolean
  /** The call failed (a clean error). */
  readonly failed: boolean
  /** The error's text, when it failed (shown on an assertion's failure too). */
  readonly error: string
  /** The call claimed success with another answer. */
  readonly truncatedSuccess: boolean
  /** The model the caller was told served it. */
  readonly servedModel: string | undefined
  /** The caller got a usage block. */
  readonly usage: boolean
  /** TestClock seconds the call took. */
  readonly seconds: number
  readonly primary: ReadonlyArray<{ readonly at: number; readonly action: string }>
  readonly fallback: ReadonlyArray<{ readonly at: number; readonly action: string }>
  /** The healthy call through the same system afterwards succeeded. */
  readonly alive: boolean
}

/**
 * The catalogue's checks of every single-call scenario (S15 is a sequence, checked by each suite), as assertions over
 * what a suite measured; titled as the tests are.
 */
export const checks: ReadonlyArray<{
  readonly id: string
  readonly title: string
  readonly check: (r: Measured) => void
}> = (() => {
  const fallbackServed = (r: Measured, id: string) => assert.strictEqual(r.servedModel, scenario(id).fallback)
  const answered = (r: Measured) => assert.isTrue(r.complete, r.error)
  const prefillRejections = (r: Measured) => [...r.primary, ...r.fallback].filter((a) => a.action === "400 prefill")
  return [
    {
      id: "S01",
      title: "429 with Retry-After: retried after the server's wait, on the same route",
      check: (r) => {
        answered(r)
        assert.isAtLeast(r.primary.length, 2)
        assert.isAtLeast(r.primary[1]!.at - r.primary[0]!.at, 1.8)
        assert.isAtMost(within(r.primary, 1.5), 2)
        assert.strictEqual(r.fallback.length, 0)
        assert.isTrue(r.alive)
      }
    },
    {
      id: "S02",
      title: "persistent 429: backs off, then the fallback answers; the provider is never hammered",
      check: (r) => {
        answered(r)
        assert.isAtMost(within(r.primary, 3), 4)
        assert.isAtMost(r.primary.length, 6)
        assert.isAtLeast(r.fallback.length, 1)
        fallbackServed(r, "S02")
        assert.isTrue(r.alive)
      }
    },
    {
      id: "S03",
      title: "500 once: retried once on the same route",
      check: (r) => {
        answered(r)
        assert.strictEqual(r.primary.length, 2)
        assert.strictEqual(r.fallback.length, 0)
        assert.isTrue(r.alive)
      }
    },
    {
      id: "S04",
      title: "persistent 503: the fallback answers within the retry budget",
      check: (r) => {
        answered(r)
        assert.isAtMost(r.primary.length, 6)
        fallbackServed(r, "S04")
        assert.isTrue(r.alive)
      }
    },
    {
      id: "S05",
      title: "reset before headers: the request is sent again and answered",
      check: (r) => {
        answered(r)
        assert.strictEqual(r.primary.length, 2)
        assert.isTrue(r.alive)
      }
    },
    {
      id: "S06",
      title: "no response: the first-byte timeout leaves the silent route after one attempt",
      check: (r) => {
        answered(r)
        assert.isAtMost(r.seconds, 100)
        assert.strictEqual(r.primary.length, 1)
        assert.strictEqual(r.fallback.length, 1)
        assert.isTrue(r.alive)
      }
    },
    {
      id: "S07",
      title: "slow first token: the first-token limit fails over within 15 s",
      check: (r) => {
        answered(r)
        assert.isAtMost(r.seconds, 15)
        assert.strictEqual(r.primary.length, 1)
        fallbackServed(r, "S07")
        assert.isTrue(r.alive)
      }
    },
    {
      id: "S08",
      title: "stream cut after 40 of 60 tokens: never a truncated success; the fallback's whole answer",
      check: (r) => {
        assert.isFalse(r.truncatedSuccess)
        answered(r)
        fallbackServed(r, "S08")
        assert.isTrue(r.alive)
      }
    },
    {
      id: "S09",
      title: "stream stall: the idle timeout ends it within 45 s; the fallback answers; alive after",
      check: (r) => {
        assert.isFalse(r.truncatedSuccess)
        answered(r)
        assert.isAtMost(r.seconds, 45)
        assert.strictEqual(r.primary.length, 1)
        assert.isTrue(r.alive)
      }
    },
    {
      id: "S10",
      title: "malformed chunk: replayed once on the route, then the fallback; nothing partial leaks",
      check: (r) => {
        assert.isFalse(r.truncatedSuccess)
        answered(r)
        assert.strictEqual(r.primary.length, 2)
        assert.strictEqual(r.fallback.length, 1)
        assert.isTrue(r.alive)
      }
    },
    {
      id: "S11",
      title: "no [DONE]: finalised at the end of the body, with usage",
      check: (r) => {
        answered(r)
        assert.isAtMost(r.seconds, 8)
        assert.isTrue(r.usage)
        assert.strictEqual(r.primary.length, 1)
      }
    },
    {
      id: "S12",
      title: "context length exceeded: never resent to the same model; the larger fallback answers",
      check: (r) => {
        assert.strictEqual(r.primary.length, 1)
        answered(r)
        fallbackServed(r, "S12")
      }
    },
    {
      id: "S13",
      title: "content filter: one attempt, the provider's reason surfaced as a clean error, no fallback",
      check: (r) => {
        assert.strictEqual(r.primary.length, 1)
        assert.strictEqual(r.fallback.length, 0)
        assert.isTrue(r.failed)
        assert.include(r.error, "content_policy_violation")
        assert.isTrue(r.alive)
      }
    },
    {
      id: "S14",
      title: "fallback refuses prefill: the fallback gets the request as asked, never a continuation",
      check: (r) => {
        assert.strictEqual(prefillRejections(r).length, 0)
        assert.isFalse(r.truncatedSuccess)
        answered(r)
        fallbackServed(r, "S14")
      }
    },
    {
      id: "S16",
      title: "fail-over accounting: the caller is told the fallback's model and its usage",
      check: (r) => {
        answered(r)
        assert.include(r.servedModel ?? "", Failoverbench.healthyModel)
        assert.isTrue(r.usage)
        assert.isAtMost(r.primary.length, 6)
      }
    }
  ]
})()
