/**
 * What the two failoverbench suites share (test/failoverbench.test.ts through the library's plan,
 * test/failoverbench-relay.test.ts through the relay): the interactive configuration of docs/routes.md, the catalogue's
 * script with the full profile's delays and no pause between tokens, the canonical answer, the driver that steps the
 * TestClock while sockets work, and the provider's view of a model.
 */
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
