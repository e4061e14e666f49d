/**
 * recovery-nested-budget: a nested recovery scope shares the enclosing Budget, over real loopback HTTP (the
 * simulator and the undici client). A second reply inside `Budget.scoped` gets only the attempts the first one left;
 * an `Overflow` retry with a smaller context view is debited from the same allowance; and nothing inside the scope
 * resets the deadline (driven by TestClock). Every count is read from the simulator.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import * as Chat from "@reprise/core/Chat"
import type * as Message from "@reprise/core/Message"
import * as Overflow from "@reprise/core/Overflow"
import * as Policy from "@reprise/core/Policy"
import * as Recovery from "@reprise/core/Recovery"
import * as RecoveryExhausted from "@reprise/core/RecoveryExhausted"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Chunk, Clock, Duration, Effect, Either, Fiber, Layer, Option, TestClock } from "effect"
import { conversation, countingTool, errorClass, fastPolicy, overflowStep, provider, recorder } from "./support/chat.js"

const protocols: ReadonlyArray<SimulatorScript.Route> = ["openai-chat", "anthropic", "openai-responses", "subscription"]

const short = { model: "budget-model", messages: [{ role: "user" as const, text: "A short question." }] }
const replyShort = Recovery.generate(short)

/** Five messages, two turns of which can be dropped by the default overflow strategy. */
const history: ReadonlyArray<Message.Message> = [
  { role: "user", text: `The first question, long ago. ${"lorem ipsum ".repeat(40)}` },
  { role: "assistant", text: `The first answer. ${"dolor sit amet ".repeat(40)}`, toolCalls: [] },
  { role: "user", text: "The second question." },
  { role: "assistant", text: "The second answer.", toolCalls: [] },
  { role: "user", text: "The question now." }
]
const long = { model: "budget-model", messages: history }
const replyLong = Overflow.generate(long)

const status503: SimulatorScript.Step = { kind: "status", status: 503 }
const text = (t: string): SimulatorScript.Step => ({ kind: "stream", reply: { text: t } })

const setRoute = (route: SimulatorScript.Route, script: SimulatorScript.RouteScript) =>
  Effect.flatMap(Simulator.Simulator, (sim) => sim.setScript({ routes: { [route]: script } }))

const exhausted = (result: Either.Either<unknown, unknown>): RecoveryExhausted.RecoveryExhausted => {
  if (Either.isRight(result) || !RecoveryExhausted.isRecoveryExhausted(result.left)) {
    return assert.fail(
      `expected RecoveryExhausted, got ${Either.isRight(result) ? "a reply" : errorClass(result.left)}`
    )
  }
  return result.left
}

/**
 * Runs `self` under TestClock while it talks to the simulator over real sockets: whenever the program is parked on a
 * wait that ends within `step` (a backoff, never a 60 s provider timeout), the clock is moved to its end; otherwise
 * real I/O is given a turn (`setImmediate`, not a timer).
 */
const driveTestClock = <A, E>(self: Effect.Effect<A, E>, step: Duration.Duration) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(self)
    const horizon = Duration.toMillis(step)
    // Bounded by the test's timeout: real I/O may take a while on a busy machine.
    while (true) {
      const exit = yield* Fiber.poll(fiber)
      if (Option.isSome(exit)) return yield* exit.value
      const now = yield* Clock.currentTimeMillis
      const due = Chunk.findFirst(yield* TestClock.sleeps(), (at) => at <= now + horizon)
      if (Option.isSome(due)) yield* TestClock.adjust(Duration.millis(Math.max(0, due.value - now)))
      else yield* Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
    }
  })

for (const route of protocols) {
  describe(`recovery-nested-budget (${route})`, () => {
    it.live("a second reply in the same scope only gets the attempts the first one left", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* setRoute(route, {
          steps: [status503, status503, text("first reply"), status503],
          afterLast: "repeat-last"
        })
        const notes = recorder()
        const [first, second] = yield* Effect.zip(replyShort, Effect.either(replyShort)).pipe(
          Budget.scoped,
          Effect.provide(
            Layer.mergeAll(provider(sim, route), fastPolicy, notes.layer, Budget.layer({ maxAttempts: 5 }))
          )
        )
        assert.strictEqual(first.text, "first reply")
        assert.strictEqual(first.attempts, 3)
        const error = exhausted(second)
        assert.strictEqual(error.reason, "Attempts")
        assert.strictEqual(error.attempts, 5)
        assert.strictEqual(error.maxAttempts, 5)
        // The second reply made two sends (its own errors), not five.
        assert.deepStrictEqual(error.errors.map(errorClass), ["TransportError.HttpStatus", "TransportError.HttpStatus"])
        assert.strictEqual(yield* sim.count(route), 5)
        assert.deepStrictEqual(notes.of("AttemptStarted").map((n) => n.attempt), [1, 2, 3, 4, 5])
        assert.deepStrictEqual(notes.of("RetryScheduled").map((n) => n.remainingAttempts), [4, 3, 1])
      }).pipe(Effect.provide(Simulator.layer())))

    it.live("control: without the enclosing scope each reply has its own allowance", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* setRoute(route, {
          steps: [status503, status503, text("first reply"), status503],
          afterLast: "repeat-last"
        })
        const [first, second] = yield* Effect.zip(replyShort, Effect.either(replyShort)).pipe(
          Effect.provide(Layer.mergeAll(provider(sim, route), fastPolicy, Budget.layer({ maxAttempts: 5 })))
        )
        assert.strictEqual(first.attempts, 3)
        assert.strictEqual(exhausted(second).attempts, 5)
        assert.strictEqual(yield* sim.count(route), 3 + 5)
      }).pipe(Effect.provide(Simulator.layer())))

    it.live("an overflow retry with a smaller view runs in the same scope and counts against it", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* setRoute(route, {
          steps: [status503, text("first reply"), overflowStep(route), text("answer from a smaller view")]
        })
        const notes = recorder()
        const [first, second] = yield* Effect.zip(replyShort, replyLong).pipe(
          Budget.scoped,
          Effect.provide(
            Layer.mergeAll(provider(sim, route), fastPolicy, notes.layer, Budget.layer({ maxAttempts: 4 }))
          )
        )
        assert.strictEqual(first.attempts, 2)
        assert.strictEqual(second.text, "answer from a smaller view")
        assert.strictEqual(yield* sim.count(route), 4)
        // Sends are numbered across the scope: the overflow retry is its fourth send, not a first.
        assert.deepStrictEqual(notes.of("AttemptStarted").map((n) => n.attempt), [1, 2, 3, 4])
        assert.deepStrictEqual(notes.of("AttemptStarted").map((n) => n.maxAttempts), [4, 4, 4, 4])
        // The overflow was not replayed as is: the retry sent a strictly smaller view.
        const [, , overflowed, retried] = yield* sim.requestsTo(route)
        const full = conversation(route, overflowed.body)
        const smaller = conversation(route, retried.body)
        assert.strictEqual(full.length, history.length)
        assert.strictEqual(smaller.length, history.length - 2)
        assert.isBelow(JSON.stringify(retried.body).length, JSON.stringify(overflowed.body).length)
        assert.deepStrictEqual(smaller, full.slice(2))
      }).pipe(Effect.provide(Simulator.layer())))

    it.live("an overflow retry that the scope cannot afford is not sent", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* setRoute(route, {
          steps: [status503, text("first reply"), overflowStep(route), text("never sent")]
        })
        const [first, second] = yield* Effect.zip(replyShort, Effect.either(replyLong))
          .pipe(
            Budget.scoped,
            Effect.provide(Layer.mergeAll(provider(sim, route), fastPolicy, Budget.layer({ maxAttempts: 3 })))
          )
        assert.strictEqual(first.attempts, 2)
        const error = exhausted(second)
        assert.strictEqual(error.reason, "Attempts")
        assert.strictEqual(error.attempts, 3)
        assert.strictEqual(yield* sim.count(route), 3)
      }).pipe(Effect.provide(Simulator.layer())))

    it.effect("nothing in the scope resets the deadline: the overflow retry inherits what is left (TestClock)", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        // t=0 503, t=3 503, t=6 commit; then t=6 overflow, t=6 smaller view 503, t=9 503, and a wait to t=12 would
        // cross the deadline at t=10. A deadline restarted by the second reply (t=16) would allow sends at 12 and 15.
        yield* setRoute(route, {
          steps: [status503, status503, text("first reply"), overflowStep(route), status503],
          afterLast: "repeat-last"
        })
        const notes = recorder()
        const [first, second] = yield* driveTestClock(
          Effect.zip(replyShort, Effect.either(replyLong)).pipe(
            Budget.scoped,
            Effect.provide(Layer.mergeAll(
              provider(sim, route),
              notes.layer,
              Policy.layer({ backoffBase: Duration.seconds(3), backoffMax: Duration.seconds(3), jitter: false }),
              Budget.layer({ maxAttempts: 11, deadline: Duration.seconds(10) })
            ))
          ),
          Duration.seconds(3)
        )
        assert.strictEqual(first.attempts, 3)
        const error = exhausted(second)
        assert.strictEqual(error.reason, "Deadline")
        assert.strictEqual(error.attempts, 6)
        assert.strictEqual(Duration.toMillis(error.elapsed), 9_000)
        assert.deepStrictEqual(error.errors.map(errorClass), ["TransportError.HttpStatus", "TransportError.HttpStatus"])
        assert.strictEqual(yield* sim.count(route), 6)
        assert.deepStrictEqual(
          notes.of("RetryScheduled").map((n) => Duration.toMillis(n.remainingTime)),
          [10_000, 7_000, 4_000]
        )
        // Both sends of the smaller view carried it.
        const requests = yield* sim.requestsTo(route)
        assert.deepStrictEqual(requests.map((r) => conversation(route, r.body).length), [1, 1, 1, 5, 3, 3])
      }).pipe(Effect.provide(Simulator.layer())))

    it.effect("a second reply starts with the time the first one left (TestClock)", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        // t=0 503, t=4 503, t=8 commit; the second reply's 503 at t=8 would wait until t=12, the deadline. With a
        // deadline of its own (t=20) it would have sent again at 12 and 16.
        yield* setRoute(route, {
          steps: [status503, status503, text("first reply"), status503],
          afterLast: "repeat-last"
        })
        const notes = recorder()
        const [first, second] = yield* driveTestClock(
          Effect.zip(replyShort, Effect.either(replyShort)).pipe(
            Budget.scoped,
            Effect.provide(Layer.mergeAll(
              provider(sim, route),
              notes.layer,
              Policy.layer({ backoffBase: Duration.seconds(4), backoffMax: Duration.seconds(4), jitter: false }),
              Budget.layer({ maxAttempts: 11, deadline: Duration.seconds(12) })
            ))
          ),
          Duration.seconds(4)
        )
        assert.strictEqual(first.attempts, 3)
        const error = exhausted(second)
        assert.strictEqual(error.reason, "Deadline")
        assert.strictEqual(error.attempts, 4)
        assert.strictEqual(Duration.toMillis(error.elapsed), 8_000)
        assert.strictEqual(error.errors.length, 1)
        assert.strictEqual(yield* sim.count(route), 4)
        assert.deepStrictEqual(
          notes.of("RetryScheduled").map((n) => Duration.toMillis(n.remainingTime)),
          [12_000, 8_000]
        )
      }).pipe(Effect.provide(Simulator.layer())))
  })
}

describe("recovery-nested-budget (conversation step)", () => {
  it.live("a step wrapped in Budget.scoped gives all its replies one allowance", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      const counting = countingTool()
      yield* setRoute("openai-chat", {
        steps: [
          status503,
          { kind: "stream", reply: { toolCalls: [{ name: "record", arguments: { line: "once" } }] } },
          status503
        ],
        afterLast: "repeat-last"
      })
      const commits: Array<Chat.Commit> = []
      const result = yield* Chat.step(short.messages, {
        model: short.model,
        onCommit: (commit) => Effect.sync(() => void commits.push(commit))
      }).pipe(
        Budget.scoped,
        Effect.either,
        Effect.provide(Layer.mergeAll(
          provider(sim, "openai-chat"),
          fastPolicy,
          counting.layer,
          Budget.layer({ maxAttempts: 3 })
        ))
      )
      // Reply 1 spent two sends; reply 2 had one left and the step failed with the exhaustion.
      const error = exhausted(result)
      assert.strictEqual(error.reason, "Attempts")
      assert.strictEqual(error.attempts, 3)
      assert.strictEqual(yield* sim.count("openai-chat"), 3)
      assert.deepStrictEqual(counting.calls, ["once"])
      assert.deepStrictEqual(commits.map((c) => c._tag), ["Reply", "ToolResult"])
    }).pipe(Effect.provide(Simulator.layer())))
})
