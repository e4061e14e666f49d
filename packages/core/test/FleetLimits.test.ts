import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Fiber, Layer, Option, Ref, Stream, TestClock } from "effect"
import * as Budget from "../src/Budget.js"
import * as FleetLimits from "../src/FleetLimits.js"
import * as Policy from "../src/Policy.js"
import * as Recovery from "../src/Recovery.js"
import type * as RecoveryExhausted from "../src/RecoveryExhausted.js"
import * as RecoveryNotifications from "../src/RecoveryNotifications.js"
import { recorder } from "./utils/notifications.js"
import { reset, scripted, status } from "./utils/scripted.js"

const noJitter = Policy.layer({ jitter: false })

/** A fleet that logs every call and answers from the given scripts (the last answer repeats). */
const fake = (answers: {
  readonly deposit?: ReadonlyArray<Option.Option<FleetLimits.Pause>>
  readonly paused?: ReadonlyArray<Option.Option<FleetLimits.Pause>>
  readonly withdraw?: ReadonlyArray<boolean>
}) =>
  Effect.gen(function*() {
    const log = yield* Ref.make<Array<string>>([])
    const counters = { deposit: 0, paused: 0, withdraw: 0 }
    const next = <A>(kind: keyof typeof counters, list: ReadonlyArray<A> | undefined, fallback: A) =>
      list === undefined || list.length === 0 ? fallback : list[Math.min(counters[kind]++, list.length - 1)]
    const service: FleetLimits.Service = {
      deposit: Effect.zipRight(
        Ref.update(log, (l) => [...l, "deposit"]),
        Effect.sync(() => next("deposit", answers.deposit, Option.none()))
      ),
      paused: Effect.zipRight(
        Ref.update(log, (l) => [...l, "paused"]),
        Effect.sync(() => next("paused", answers.paused, Option.none()))
      ),
      withdraw: Effect.zipRight(
        Ref.update(log, (l) => [...l, "withdraw"]),
        Effect.sync(() => ({ allowed: next("withdraw", answers.withdraw, true), replays: 0, allowance: 1 }))
      ),
      pushback: ({ delay, status }) => Ref.update(log, (l) => [...l, `pushback ${Duration.toMillis(delay)} ${status}`])
    }
    return { layer: Layer.succeed(FleetLimits.FleetLimits, service), log: Ref.get(log) }
  })

describe("FleetLimits in the recovery loop", () => {
  it.effect("a Retry-After pauses the fleet until it is over counted from the failure, as the reply's own wait is", () =>
    Effect.gen(function*() {
      const fleet = yield* fake({})
      // a listener that takes 300 ms of the server's 3 s before the pushback is told
      const slow = RecoveryNotifications.layerCallback((n) =>
        n._tag === "AttemptDiscarded" ? Effect.sleep(Duration.millis(300)) : Effect.void
      )
      const started: Array<number> = []
      const { generation } = yield* scripted([
        { text: ["x"], end: status(429, "3 seconds"), takes: "1 second" },
        { text: ["ok"], end: "finish" }
      ])
      const timed = Stream.concat(
        Stream.fromEffect(Effect.map(Clock.currentTimeMillis, (now) => void started.push(now))).pipe(Stream.drain),
        generation
      )
      const fiber = yield* Effect.fork(
        Recovery.run(timed).pipe(Effect.provide(Layer.mergeAll(noJitter, slow, fleet.layer)))
      )
      yield* TestClock.adjust(Duration.seconds(10))
      const reply = yield* Fiber.join(fiber)
      assert.strictEqual(reply.text, "ok")
      // failed at 1 s; told at 1.3 s for the 2.7 s left of the 3 s; the replay sent at 4 s
      assert.isTrue((yield* fleet.log).includes("pushback 2700 429"))
      assert.deepStrictEqual(started, [0, 4000])
    }))

  it.effect("deposit before the first attempt, pushback on Retry-After, withdraw before each backoff, paused after", () =>
    Effect.gen(function*() {
      const fleet = yield* fake({})
      const rec = yield* recorder
      const { generation, sends } = yield* scripted([
        { end: status(429, "3 seconds") },
        { end: reset },
        { text: ["ok"], end: "finish" }
      ])
      const fiber = yield* Effect.fork(
        Recovery.run(generation).pipe(Effect.provide(Layer.mergeAll(noJitter, rec.layer, fleet.layer)))
      )
      yield* TestClock.adjust(Duration.seconds(3))
      yield* TestClock.adjust(Duration.seconds(2))
      const reply = yield* Fiber.join(fiber)
      assert.strictEqual(reply.text, "ok")
      assert.strictEqual(yield* sends, 3)
      assert.deepStrictEqual(yield* fleet.log, [
        "deposit",
        "pushback 3000 429",
        "withdraw",
        "paused",
        "withdraw",
        "paused"
      ])
      assert.isFalse((yield* rec.tags).includes("FleetPaused"), "no pause: nothing announced")
    }))

  it.effect("a pause is waited out before the send, announced, and checked again when it ends", () =>
    Effect.gen(function*() {
      const fleet = yield* fake({
        deposit: [FleetLimits.pause(Duration.seconds(2), 429)],
        paused: [FleetLimits.pause(Duration.millis(500), 503), Option.none()]
      })
      const rec = yield* recorder
      const { generation } = yield* scripted([{ text: ["ok"], end: "finish" }])
      const fiber = yield* Effect.fork(
        Recovery.run(generation).pipe(Effect.provide(Layer.mergeAll(noJitter, rec.layer, fleet.layer)))
      )
      yield* TestClock.adjust(Duration.seconds(2))
      assert.isTrue(Option.isNone(yield* fiber.poll), "still waiting: the pause was extended meanwhile")
      yield* TestClock.adjust(Duration.millis(500))
      yield* Fiber.join(fiber)
      const all = yield* rec.all
      const paused = all.filter((n): n is Extract<RecoveryNotifications.Notification, { _tag: "FleetPaused" }> =>
        n._tag === "FleetPaused"
      )
      assert.deepStrictEqual(paused.map((n) => [n.attempt, Duration.toMillis(n.delay), n.status]), [
        [1, 2000, 429],
        [1, 500, 503]
      ])
      assert.deepStrictEqual(all.map((n) => n._tag).slice(0, 3), ["FleetPaused", "FleetPaused", "AttemptStarted"])
      assert.deepStrictEqual(yield* fleet.log, ["deposit", "paused", "paused"])
    }))

  it.effect("a refused replay ends recovery with FleetBudget before its backoff; RecoveryExhausted says so", () =>
    Effect.gen(function*() {
      const fleet = yield* fake({ withdraw: [true, false] })
      const { generation, sends } = yield* scripted([{ end: status(503) }])
      const fiber = yield* Effect.fork(
        Recovery.run(generation).pipe(Effect.provide(Layer.merge(noJitter, fleet.layer)))
      )
      yield* TestClock.adjust(Duration.seconds(1))
      const error = (yield* Effect.flip(Fiber.join(fiber))) as RecoveryExhausted.RecoveryExhausted
      assert.strictEqual(error.reason, "FleetBudget")
      assert.strictEqual(error.attempts, 2)
      assert.strictEqual(yield* sends, 2)
      assert.strictEqual(Duration.toMillis(error.elapsed), 1000)
      assert.strictEqual(error.errors.length, 2)
    }))

  it.effect("the default is unlimited: no pause, every replay allowed", () =>
    Effect.gen(function*() {
      const service = yield* FleetLimits.FleetLimits
      assert.strictEqual(service, FleetLimits.unlimited)
      assert.isTrue(Option.isNone(yield* service.deposit))
      assert.isTrue((yield* service.withdraw).allowed)
      assert.isTrue(Option.isNone(FleetLimits.pause(Duration.zero)))
    }))

  it.effect("a send a chunk hook reserves is not its attempt's resend: no fleet check, the reply's budget debited", () =>
    Effect.gen(function*() {
      const fleet = yield* fake({})
      const { generation } = yield* scripted([{ text: ["a", "b"], end: "finish" }])
      let hookSends = 0
      const reply = yield* Budget.scoped(Effect.gen(function*() {
        const reply = yield* Recovery.run(generation, {
          hooks: { onChunk: () => Effect.map(Budget.reserve, () => void hookSends++) }
        }).pipe(Effect.provide(Layer.mergeAll(noJitter, fleet.layer)))
        assert.strictEqual(yield* Effect.flatMap(Budget.Budget, (b) => b.used), 1 + hookSends)
        return reply
      }))
      assert.strictEqual(reply.text, "ab")
      assert.isAbove(hookSends, 0)
      // only the reply's first attempt was seen by the fleet: the hook's sends passed no resend check
      assert.deepStrictEqual(yield* fleet.log, ["deposit"])
    }))
})
