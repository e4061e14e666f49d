import { assert, describe, it } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import * as FleetLimits from "@reprise/core/FleetLimits"
import * as Generation from "@reprise/core/Generation"
import * as Policy from "@reprise/core/Policy"
import * as Recovery from "@reprise/core/Recovery"
import type * as RecoveryExhausted from "@reprise/core/RecoveryExhausted"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as TransportError from "@reprise/core/TransportError"
import { Clock, Duration, Effect, Exit, Fiber, Layer, Option, Ref, Stream, TestClock } from "effect"
import * as MemoryFleet from "../src/MemoryFleet.js"
import * as RetryBudget from "../src/RetryBudget.js"
import { cases } from "./utils/cases.js"

const noJitter = Policy.layer({ jitter: false })

const fleet = (options: MemoryFleet.Options) => Effect.flatMap(MemoryFleet.make(options), (f) => Effect.succeed(f))

const millis = (pause: Option.Option<FleetLimits.Pause>) =>
  Option.match(pause, { onNone: () => 0, onSome: (p) => Duration.toMillis(p.remaining) })

/**
 * A provider-shaped generation: each run reserves from the Budget, records the send's Clock time, and plays the
 * next of `ends` (the last repeats): `"ok"` streams `text` to its terminal, an error fails before any event.
 */
const scripted = (ends: ReadonlyArray<"ok" | TransportError.TransportError>, text = "done") =>
  Effect.map(Ref.make<Array<number>>([]), (sent) => ({
    sent: Ref.get(sent),
    generation: Stream.unwrap(Effect.gen(function*() {
      yield* Budget.reserve
      const now = yield* Clock.currentTimeMillis
      const n = (yield* Ref.getAndUpdate(sent, (all) => [...all, now])).length
      const end = ends[Math.min(n, ends.length - 1)]
      return end === "ok"
        ? Stream.make(
          Generation.TextDelta({ text }),
          Generation.Finish({ reason: "stop", providerReason: "stop" })
        )
        : Stream.fail(end)
    }))
  }))

const status = (code: number, retryAfter?: Duration.DurationInput) =>
  new TransportError.TransportError({
    reason: "HttpStatus",
    status: code,
    ...(retryAfter === undefined ? {} : { retryAfter: Duration.decode(retryAfter) })
  })

const recorder = Effect.map(Ref.make<Array<RecoveryNotifications.Notification>>([]), (ref) => ({
  layer: RecoveryNotifications.layerCallback((n) => Ref.update(ref, (all) => [...all, n])),
  tags: Effect.map(Ref.get(ref), (all) => all.map((n) => n._tag)),
  all: Ref.get(ref)
}))

describe("RetryBudget arithmetic", () => {
  it("allows a replay while replays + 1 <= ratio × firsts + floor × active seconds", () => {
    const settings = { ratio: 0.2, floor: 10, window: Duration.seconds(10) }
    assert.strictEqual(RetryBudget.allowance(settings, { firsts: 50, replays: 0, activeSeconds: 3 }), 40)
    assert.isTrue(RetryBudget.allows(settings, { firsts: 50, replays: 39, activeSeconds: 3 }))
    assert.isFalse(RetryBudget.allows(settings, { firsts: 50, replays: 40, activeSeconds: 3 }))
  })

  it("counts the buckets of the last `window` seconds and names the stale ones", () => {
    const buckets: Array<readonly [number, RetryBudget.Bucket]> = [
      [90, { firsts: 7, replays: 7 }], // now - window: out
      [91, { firsts: 1, replays: 2 }],
      [100, { firsts: 3, replays: 1 }],
      [115, { firsts: 5, replays: 5 }] // far ahead: a clock that stepped back; out
    ]
    const counts = RetryBudget.count(buckets, 100, 10)
    assert.deepStrictEqual(counts, { firsts: 4, replays: 3, activeSeconds: 10, stale: [90, 115] })
    assert.strictEqual(RetryBudget.count([], 100, 10).activeSeconds, 1)
    assert.strictEqual(RetryBudget.count([[99, { firsts: 1, replays: 0 }]], 100, 10).activeSeconds, 2)
  })

  it("refuses settings it cannot honour", () => {
    const base = RetryBudget.defaultSettings
    assert.throws(() => RetryBudget.validateSettings({ ...base, ratio: -0.1 }), /ratio/)
    assert.throws(() => RetryBudget.validateSettings({ ...base, floor: Infinity }), /floor/)
    assert.throws(() => RetryBudget.validateSettings({ ...base, window: Duration.millis(1500) }), /window/)
    assert.throws(() => RetryBudget.validateSettings({ ...base, window: Duration.zero }), /window/)
  })
})

describe("MemoryFleet (TestClock)", () => {
  for (const c of cases) {
    it.effect(c.name, () =>
      Effect.gen(function*() {
        const f = yield* fleet({ budget: c.settings })
        const answers: Array<FleetLimits.Withdrawal> = []
        for (const op of c.ops) {
          if (op === "d") yield* f.deposit
          else answers.push(yield* f.withdraw)
        }
        assert.deepStrictEqual(answers.map((a) => a.allowed), c.allowed)
        assert.closeTo(answers.at(-1)!.allowance, c.lastAllowance, 1e-9)
      }))
  }

  it.effect("the floor accrues second by second, and the window forgets", () =>
    Effect.gen(function*() {
      const f = yield* fleet({ budget: { ratio: 0, floor: 1, window: Duration.seconds(3) } })
      const ask = Effect.map(f.withdraw, (w) => w.allowed)
      assert.deepStrictEqual([yield* ask, yield* ask], [true, false], "1 replay in the first second")
      yield* TestClock.adjust(Duration.seconds(1))
      assert.deepStrictEqual([yield* ask, yield* ask], [true, false], "2 in two seconds")
      yield* TestClock.adjust(Duration.seconds(1))
      assert.deepStrictEqual([yield* ask, yield* ask], [true, false], "3 in three")
      yield* TestClock.adjust(Duration.seconds(1))
      // second 0 left the window (3 s): its replay no longer counts, and the window spans 3 seconds
      assert.deepStrictEqual([yield* ask, yield* ask], [true, false])
      yield* TestClock.adjust(Duration.seconds(10))
      const fresh = yield* f.withdraw
      assert.deepStrictEqual(fresh, { allowed: true, replays: 1, allowance: 1 }, "idle: forgotten, a fresh window")
    }))

  it.effect("first attempts older than the window stop paying for replays", () =>
    Effect.gen(function*() {
      const f = yield* fleet({ budget: { ratio: 0.5, floor: 0, window: Duration.seconds(2) } })
      yield* f.deposit
      yield* f.deposit
      assert.isTrue((yield* f.withdraw).allowed)
      yield* TestClock.adjust(Duration.seconds(2))
      assert.isFalse((yield* f.withdraw).allowed)
      yield* f.deposit
      yield* f.deposit
      assert.isTrue((yield* f.withdraw).allowed)
    }))

  it.effect("pushback pauses until its end, is never shortened, and is capped at maxPause", () =>
    Effect.gen(function*() {
      const f = yield* fleet({ maxPause: Duration.minutes(10) })
      assert.isTrue(Option.isNone(yield* f.paused))
      yield* f.pushback({ delay: Duration.seconds(2), status: 429 })
      const p = yield* f.paused
      // getOrUndefined: assert.deepStrictEqual takes Option.none() for Option.some(x)
      assert.deepStrictEqual(Option.getOrUndefined(Option.map(p, (p) => [Duration.toMillis(p.remaining), p.status])), [
        2000,
        429
      ])
      yield* TestClock.adjust(Duration.millis(500))
      assert.strictEqual(millis(yield* f.deposit), 1500, "a deposit reports the pause too")
      yield* f.pushback({ delay: Duration.seconds(1), status: 503 })
      assert.strictEqual(millis(yield* f.paused), 1500, "a shorter pushback does not shorten it")
      yield* f.pushback({ delay: Duration.seconds(3), status: 503 })
      assert.strictEqual(millis(yield* f.paused), 3000)
      yield* TestClock.adjust(Duration.seconds(3))
      assert.isTrue(Option.isNone(yield* f.paused))
      yield* f.pushback({ delay: Duration.hours(1) })
      assert.strictEqual(millis(yield* f.paused), 600_000)
    }))
})

describe("Recovery with a fleet (MemoryFleet, TestClock)", () => {
  it.effect("a replay the fleet refuses ends recovery at once with FleetBudget; no backoff is begun", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const { generation, sent } = yield* scripted([status(503)])
      const fiber = yield* Effect.fork(
        Recovery.run(generation).pipe(
          Effect.provide(Layer.mergeAll(noJitter, rec.layer, MemoryFleet.layer({ budget: { ratio: 1, floor: 0 } })))
        )
      )
      yield* TestClock.adjust(Duration.seconds(1))
      const exit = yield* Fiber.await(fiber)
      assert.isTrue(Exit.isFailure(exit))
      const error = (yield* Effect.flip(exit)) as RecoveryExhausted.RecoveryExhausted
      assert.strictEqual(error.reason, "FleetBudget")
      assert.strictEqual(error.attempts, 2)
      assert.strictEqual(Duration.toMillis(error.elapsed), 1000, "stopped when refused, not after another backoff")
      assert.deepStrictEqual(yield* sent, [0, 1000])
      assert.deepStrictEqual(yield* rec.tags, [
        "AttemptStarted",
        "AttemptDiscarded",
        "RetryScheduled",
        "AttemptStarted",
        "AttemptDiscarded",
        "Exhausted"
      ])
      assert.match(error.message, /fleet's retry budget refused a replay after 2 of 11 attempts/)
    }))

  it.effect("scopes under one layer share the budget: of two failed first attempts at 50 %, one is replayed", () =>
    Effect.gen(function*() {
      const a = yield* scripted([status(503), "ok"], "a")
      const b = yield* scripted([status(503), "ok"], "b")
      const fiber = yield* Effect.fork(
        Effect.all([Effect.either(Recovery.run(a.generation)), Effect.either(Recovery.run(b.generation))], {
          concurrency: 2
        }).pipe(Effect.provide(Layer.merge(noJitter, MemoryFleet.layer({ budget: { ratio: 0.5, floor: 0 } }))))
      )
      yield* TestClock.adjust(Duration.seconds(1))
      const [ra, rb] = yield* Fiber.join(fiber)
      assert.deepStrictEqual([ra._tag, rb._tag].sort(), ["Left", "Right"])
      assert.strictEqual((yield* a.sent).length + (yield* b.sent).length, 3)
      const refused = ra._tag === "Left" ? ra.left : rb._tag === "Left" ? rb.left : undefined
      assert.strictEqual((refused as RecoveryExhausted.RecoveryExhausted).reason, "FleetBudget")
    }))

  it.effect("a Retry-After seen by one scope holds every other scope's sends until it ends", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const a = yield* scripted([status(429, "5 seconds"), "ok"], "a")
      const b = yield* scripted(["ok"], "b")
      const fiber = yield* Effect.fork(
        Effect.all([
          Recovery.run(a.generation),
          Effect.zipRight(Effect.sleep(Duration.seconds(1)), Recovery.run(b.generation).pipe(Effect.provide(rec.layer)))
        ], { concurrency: 2 }).pipe(Effect.provide(Layer.merge(noJitter, MemoryFleet.layer())))
      )
      yield* TestClock.adjust(Duration.seconds(1))
      yield* TestClock.adjust(Duration.seconds(4))
      const [ra, rb] = yield* Fiber.join(fiber)
      assert.deepStrictEqual([ra.text, rb.text], ["a", "b"])
      assert.deepStrictEqual(yield* a.sent, [0, 5000])
      assert.deepStrictEqual(yield* b.sent, [5000], "b's first send waited for the fleet's pause")
      const all = yield* rec.all
      assert.deepStrictEqual(all.map((n) => n._tag), [
        "FleetPaused",
        "AttemptStarted",
        "Preview",
        "Preview",
        "Committed"
      ])
      const paused = all[0] as Extract<RecoveryNotifications.Notification, { _tag: "FleetPaused" }>
      assert.deepStrictEqual(
        [paused.attempt, Duration.toMillis(paused.delay), paused.status, Duration.toMillis(paused.remainingTime)],
        [1, 4000, 429, 600_000]
      )
    }))

  it.effect("a pause that ends past the deadline fails fast with RetryAfterBeyondDeadline, sending nothing", () =>
    Effect.gen(function*() {
      const f = yield* MemoryFleet.make()
      yield* f.pushback({ delay: Duration.seconds(60), status: 429 })
      const { generation, sent } = yield* scripted(["ok"])
      const error = yield* Effect.flip(
        Recovery.run(generation).pipe(
          Effect.provideService(FleetLimits.FleetLimits, f),
          Effect.provide(Budget.layer({ deadline: Duration.seconds(30) }))
        )
      ) as Effect.Effect<RecoveryExhausted.RecoveryExhausted>
      assert.strictEqual(error.reason, "RetryAfterBeyondDeadline")
      assert.strictEqual(Duration.toMillis(error.retryAfter!), 60_000)
      assert.strictEqual(error.attempts, 0)
      assert.strictEqual(Duration.toMillis(error.elapsed), 0)
      assert.deepStrictEqual(yield* sent, [])
    }))

  it.effect("the per-reply Budget still applies on top of a generous fleet", () =>
    Effect.gen(function*() {
      const { generation, sent } = yield* scripted([status(503)])
      const fiber = yield* Effect.fork(
        Recovery.run(generation).pipe(
          Effect.provide(Layer.mergeAll(
            noJitter,
            Budget.layer({ maxAttempts: 3 }),
            MemoryFleet.layer({ budget: { ratio: 100, floor: 100 } })
          ))
        )
      )
      yield* TestClock.adjust(Duration.seconds(10))
      const error = (yield* Effect.flip(Fiber.join(fiber))) as RecoveryExhausted.RecoveryExhausted
      assert.strictEqual(error.reason, "Attempts")
      assert.strictEqual((yield* sent).length, 3)
    }))

  it.effect("a resend inside an attempt (a capability fallback) is a replay for the fleet", () =>
    Effect.gen(function*() {
      let sends = 0
      // one send, then (as a provider does after a 400 naming an unsupported parameter) a second reserve and send
      const generation = Stream.unwrap(Effect.gen(function*() {
        yield* Budget.reserve
        sends++
        yield* Budget.reserve
        sends++
        return Stream.make(Generation.Finish({ reason: "stop", providerReason: "stop" }))
      }))
      const refused = yield* Effect.flip(
        Recovery.run(generation).pipe(Effect.provide(MemoryFleet.layer({ budget: { ratio: 0, floor: 0 } })))
      ) as Effect.Effect<RecoveryExhausted.RecoveryExhausted>
      assert.strictEqual(refused.reason, "FleetBudget")
      assert.strictEqual(sends, 1, "the refused resend was not made")
      sends = 0
      const reply = yield* Recovery.run(generation).pipe(Effect.provide(MemoryFleet.layer()))
      assert.strictEqual(reply.finishReason, "stop")
      assert.strictEqual(sends, 2)
    }))
})
