/**
 * Pacing, opt-in: with `Pacing.layer`, at most `attemptsPerTurn` attempts start in one turn of the event loop, the
 * others in the following turns, in the order they came; without it, every attempt starts at once. Each attempt here
 * records the turn it started in, counted by a `setImmediate` loop of the test's own; a turn's attempts start before
 * the next turn's immediate runs.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, Stream } from "effect"
import * as Generation from "../src/Generation.js"
import * as Pacing from "../src/Pacing.js"
import * as Recovery from "../src/Recovery.js"

const finish = Generation.Finish({ reason: "stop", providerReason: "stop" })

/** Two turns of the event loop: a test starts once the turns of the test before it have ended. */
const quiet = Effect.promise(() => new Promise<void>((resolve) => setImmediate(() => setImmediate(resolve))))

/** The event loop's turns, counted from the first: `now()` is the turn the caller runs in. */
const turns = () => {
  let turn = 0
  let running = true
  const tick = () => {
    turn++
    if (running) setImmediate(tick)
  }
  setImmediate(tick)
  return { now: () => turn, stop: () => void (running = false) }
}

/** A reply whose attempt records, as it starts, the turn and its own number. */
const reply = (started: Array<{ readonly reply: number; readonly turn: number }>, n: number, now: () => number) =>
  Recovery.run(
    Stream.suspend(() => {
      started.push({ reply: n, turn: now() })
      return Stream.make(Generation.TextDelta({ text: `reply ${n}` }), finish)
    })
  )

/** How many attempts started in each turn, in the order of the turns. */
const perTurn = (started: ReadonlyArray<{ readonly turn: number }>) => {
  const counts = new Map<number, number>()
  for (const { turn } of started) counts.set(turn, (counts.get(turn) ?? 0) + 1)
  return [...counts.keys()].sort((a, b) => a - b).map((turn) => counts.get(turn)!)
}

const burst = (n: number, layer: Layer.Layer<never> = Layer.empty) =>
  Effect.gen(function*() {
    yield* quiet
    const clock = turns()
    const started: Array<{ readonly reply: number; readonly turn: number }> = []
    const replies = yield* Effect.forEach(
      Array.from({ length: n }, (_, i) => i),
      (i) => reply(started, i, clock.now),
      { concurrency: "unbounded" }
    ).pipe(Effect.provide(layer), Effect.ensuring(Effect.sync(clock.stop)))
    return { started, replies }
  })

const eight = Pacing.layer({ attemptsPerTurn: 8 })

describe("Pacing", () => {
  it.live("paces nothing by default", () =>
    Effect.gen(function*() {
      const { started } = yield* burst(20)
      assert.deepStrictEqual(perTurn(started), [20])
    }))

  it.live("with a layer, starts at most its limit per turn of the event loop, in the order they came", () =>
    Effect.gen(function*() {
      const { replies, started } = yield* burst(20, eight)
      assert.deepStrictEqual(perTurn(started), [8, 8, 4])
      assert.deepStrictEqual(started.map((s) => s.reply), Array.from({ length: 20 }, (_, i) => i))
      // consecutive turns: each waiting attempt started in the first turn it could
      const distinct = [...new Set(started.map((s) => s.turn))]
      assert.deepStrictEqual(distinct, [distinct[0], distinct[0] + 1, distinct[0] + 2])
      assert.deepStrictEqual(replies.map((r) => r.text), Array.from({ length: 20 }, (_, i) => `reply ${i}`))
    }))

  it.effect("paces under a test clock too: the paced path is the same", () =>
    Effect.gen(function*() {
      const { started } = yield* burst(10, Pacing.layer({ attemptsPerTurn: 3 }))
      assert.deepStrictEqual(perTurn(started), [3, 3, 3, 1])
    }))

  it.live("starts every attempt at once when unpaced", () =>
    Effect.gen(function*() {
      const { started } = yield* burst(20, Pacing.unpaced)
      assert.deepStrictEqual(perTurn(started), [20])
    }))

  it.live("lets no more than the limit start in a turn when attempts arrive one by one", () =>
    Effect.gen(function*() {
      // a reply started after the first 8 of a turn waits, even though the earlier ones have finished
      yield* quiet
      const clock = turns()
      const started: Array<{ readonly reply: number; readonly turn: number }> = []
      yield* Effect.forEach(Array.from({ length: 10 }, (_, i) => i), (i) => reply(started, i, clock.now)).pipe(
        Effect.provide(eight)
      )
      clock.stop()
      assert.deepStrictEqual(perTurn(started), [8, 2])
    }))

  it.live("skips an attempt interrupted while it waits, and starts the ones after it in its place", () =>
    Effect.gen(function*() {
      yield* quiet
      const clock = turns()
      const started: Array<{ readonly reply: number; readonly turn: number }> = []
      const gate = Pacing.make({ attemptsPerTurn: 8 })
      const fibers = []
      for (let i = 0; i < 17; i++) {
        fibers.push(yield* Effect.fork(reply(started, i, clock.now).pipe(Effect.provideService(Pacing.Pacing, gate))))
      }
      // within the turn: the forked fibers run to their start or their wait
      for (let i = 0; i < 100 && started.length < 8; i++) yield* Effect.yieldNow()
      assert.strictEqual(clock.now(), 0)
      assert.deepStrictEqual(started.map((s) => s.reply), [0, 1, 2, 3, 4, 5, 6, 7])
      const exit = yield* Fiber.interrupt(fibers[8])
      for (const [i, fiber] of fibers.entries()) if (i !== 8) yield* Fiber.join(fiber)
      clock.stop()
      assert.isTrue(Exit.isInterrupted(exit))
      assert.deepStrictEqual(started.map((s) => s.reply), [0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16])
      // the interrupted attempt took no place: the next turn starts the eight after it
      assert.deepStrictEqual(perTurn(started), [8, 8])
    }))

  it.live("each layer is a gate of its own", () =>
    Effect.gen(function*() {
      yield* quiet
      const clock = turns()
      const started: Array<{ readonly reply: number; readonly turn: number }> = []
      const some = (from: number, layer: Layer.Layer<never>) =>
        Effect.forEach(Array.from({ length: 6 }, (_, i) => from + i), (i) => reply(started, i, clock.now), {
          concurrency: "unbounded"
        }).pipe(Effect.provide(layer))
      yield* Effect.all([some(0, Pacing.layer({ attemptsPerTurn: 2 })), some(100, Pacing.unpaced)], {
        concurrency: "unbounded"
      })
      clock.stop()
      const paced = started.filter((s) => s.reply < 100)
      const unpaced = started.filter((s) => s.reply >= 100)
      assert.deepStrictEqual(perTurn(paced), [2, 2, 2])
      assert.deepStrictEqual(unpaced.map((s) => s.turn), Array.from({ length: 6 }, () => paced[0].turn))
    }))

  it("refuses a limit that would start nothing", () => {
    for (const attemptsPerTurn of [0, -1, 1.5, Number.NaN]) {
      assert.throws(() => Pacing.layer({ attemptsPerTurn }), RangeError)
    }
    Pacing.layer({ attemptsPerTurn: 1 })
    Pacing.layer({ attemptsPerTurn: Infinity })
  })
})
