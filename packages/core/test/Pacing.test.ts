/**
 * Pacing: at most `attemptsPerTurn` attempts start in one turn of the event loop, the others in the following turns,
 * in the order they came. Each attempt here records the turn it started in, counted by a `setImmediate` loop of the
 * test's own; a turn's attempts start before the next turn's immediate runs.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Fiber, Layer, ManagedRuntime, Stream } from "effect"
import * as Generation from "../src/Generation.js"
import * as Pace from "../src/internal/pacing.js"
import * as Pacing from "../src/Pacing.js"
import * as Recovery from "../src/Recovery.js"

const finish = Generation.Finish({ reason: "stop", providerReason: "stop" })

/**
 * Two turns of the event loop: the count is the process's, so a test starts once the turns of the test before it have
 * ended (a turn in which nothing started schedules no other).
 */
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

describe("Pacing", () => {
  it.live("starts 8 attempts per turn of the event loop by default, in the order they came", () =>
    Effect.gen(function*() {
      const { replies, started } = yield* burst(20)
      assert.deepStrictEqual(perTurn(started), [8, 8, 4])
      assert.deepStrictEqual(started.map((s) => s.reply), Array.from({ length: 20 }, (_, i) => i))
      // consecutive turns: each waiting attempt started in the first turn it could
      const distinct = [...new Set(started.map((s) => s.turn))]
      assert.deepStrictEqual(distinct, [distinct[0], distinct[0] + 1, distinct[0] + 2])
      assert.deepStrictEqual(replies.map((r) => r.text), Array.from({ length: 20 }, (_, i) => `reply ${i}`))
    }))

  it.live("starts every attempt at once when unpaced", () =>
    Effect.gen(function*() {
      const { started } = yield* burst(20, Pacing.unpaced)
      assert.deepStrictEqual(perTurn(started), [20])
    }))

  it.live("takes its limit from the fiber's settings", () =>
    Effect.gen(function*() {
      const { started } = yield* burst(10, Pacing.layer({ attemptsPerTurn: 3 }))
      assert.deepStrictEqual(perTurn(started), [3, 3, 3, 1])
    }))

  it.live("lets no more than the limit start in a turn when attempts arrive one by one", () =>
    Effect.gen(function*() {
      // a reply started after the first 8 of a turn waits, even though the earlier ones have finished
      yield* quiet
      const clock = turns()
      const started: Array<{ readonly reply: number; readonly turn: number }> = []
      yield* Effect.forEach(Array.from({ length: 10 }, (_, i) => i), (i) => reply(started, i, clock.now))
      clock.stop()
      assert.deepStrictEqual(perTurn(started), [8, 2])
    }))

  it.live("skips an attempt interrupted while it waits, and starts the ones after it in its place", () =>
    Effect.gen(function*() {
      yield* quiet
      const clock = turns()
      const started: Array<{ readonly reply: number; readonly turn: number }> = []
      const fibers = []
      for (let i = 0; i < 17; i++) fibers.push(yield* Effect.fork(reply(started, i, clock.now)))
      // within the turn: the forked fibers run to their start or their wait
      for (let i = 0; i < 100 && (started.length < 8 || Pace.state().waiting < 9); i++) yield* Effect.yieldNow()
      assert.strictEqual(clock.now(), 0)
      assert.deepStrictEqual(started.map((s) => s.reply), [0, 1, 2, 3, 4, 5, 6, 7])
      assert.strictEqual(Pace.state().waiting, 9)
      const exit = yield* Fiber.interrupt(fibers[8])
      assert.strictEqual(Pace.state().waiting, 8)
      for (const [i, fiber] of fibers.entries()) if (i !== 8) yield* Fiber.join(fiber)
      clock.stop()
      assert.isTrue(Exit.isInterrupted(exit))
      assert.deepStrictEqual(started.map((s) => s.reply), [0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16])
      // the interrupted attempt took no place: the next turn starts the eight after it
      assert.deepStrictEqual(perTurn(started), [8, 8])
    }))

  it.live("starts a wait at once when it registers after its turn has ended", () =>
    Effect.gen(function*() {
      yield* quiet
      assert.isUndefined(Pace.admit(1))
      // the turn has no room left: a wait, not yet registered
      const wait = Pace.admit(1)
      assert.isDefined(wait)
      // the turn ends with nobody waiting, and schedules no other
      yield* quiet
      assert.deepStrictEqual(Pace.state(), { admitted: 0, waiting: 0, scheduled: false })
      const result = yield* wait!.pipe(
        Effect.as("started"),
        Effect.timeoutTo({ duration: "1 second", onTimeout: () => "still waiting", onSuccess: (s) => s })
      )
      assert.strictEqual(result, "started")
    }))

  it.live("does not count the attempts of an unpaced fiber, nor hold them", () =>
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

  it.live("paces the fibers of a ManagedRuntime", () =>
    Effect.gen(function*() {
      yield* quiet
      // a ManagedRuntime's fibers inherit the SyncScheduler its layer was built with, deferred since
      const runtime = ManagedRuntime.make(Layer.empty)
      const clock = turns()
      const started: Array<{ readonly reply: number; readonly turn: number }> = []
      yield* Effect.promise(() =>
        runtime.runPromise(
          Effect.forEach(Array.from({ length: 10 }, (_, i) => i), (i) => reply(started, i, clock.now), {
            concurrency: "unbounded"
          })
        )
      )
      clock.stop()
      yield* Effect.promise(() => runtime.dispose())
      assert.deepStrictEqual(perTurn(started), [8, 2])
    }))

  it.effect("does not pace under a test clock", () =>
    Effect.gen(function*() {
      const { started } = yield* burst(20)
      assert.deepStrictEqual(perTurn(started), [20])
    }))

  it.live("does not pace a fiber run synchronously", () =>
    Effect.gen(function*() {
      yield* quiet
      const clock = turns()
      const started: Array<{ readonly reply: number; readonly turn: number }> = []
      const texts = Array.from({ length: 12 }, (_, i) => Effect.runSync(reply(started, i, clock.now)).text)
      clock.stop()
      assert.deepStrictEqual(texts, Array.from({ length: 12 }, (_, i) => `reply ${i}`))
      assert.deepStrictEqual(perTurn(started), [12])
    }))

  it("refuses a limit that would start nothing", () => {
    for (const attemptsPerTurn of [0, -1, 1.5, Number.NaN]) {
      assert.throws(() => Pacing.layer({ attemptsPerTurn }), RangeError)
    }
    Pacing.layer({ attemptsPerTurn: 1 })
    Pacing.layer({ attemptsPerTurn: Infinity })
  })
})
