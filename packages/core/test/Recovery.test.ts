import { assert, describe, it } from "@effect/vitest"
import { Clock, Duration, Effect, Exit, Fiber, Layer, Option, Random, Ref, Stream, TestClock } from "effect"
import * as Budget from "../src/Budget.js"
import * as Generation from "../src/Generation.js"
import * as Policy from "../src/Policy.js"
import * as ProviderFailure from "../src/ProviderFailure.js"
import * as Recovery from "../src/Recovery.js"
import type * as RecoveryExhausted from "../src/RecoveryExhausted.js"
import * as RecoveryNotifications from "../src/RecoveryNotifications.js"
import * as TransportError from "../src/TransportError.js"
import { recorder } from "./utils/notifications.js"
import { reset, scripted, status } from "./utils/scripted.js"

const noJitter = Policy.layer({ jitter: false })

const retryDelays = (all: ReadonlyArray<RecoveryNotifications.Notification>) =>
  all.flatMap((n) => n._tag === "RetryScheduled" ? [Duration.toMillis(n.delay)] : [])

/**
 * Runs `self` in a fiber and moves the TestClock forward until it ends. `TestClock.adjust` wakes every sleep due
 * before the new time in order, at its own instant, so elapsed times stay exact.
 */
const runToEnd = <A, E>(self: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(self)
    for (let i = 0; i < 100 && Option.isNone(yield* fiber.poll); i++) yield* TestClock.adjust(Duration.hours(1))
    return yield* Fiber.await(fiber)
  })

describe("Recovery", () => {
  it.effect("commits the attempt that reached its terminal, after replaying faults", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const { generation, sends } = yield* scripted([
        { text: ["Hel", "lo wr"], end: reset },
        { text: ["Hello"], end: "eof" },
        { text: ["Hello", ", world"], end: "finish" }
      ])
      const fiber = yield* Effect.fork(Recovery.run(generation).pipe(Effect.provide(Layer.merge(noJitter, rec.layer))))
      yield* TestClock.adjust(Duration.seconds(1))
      yield* TestClock.adjust(Duration.seconds(2))
      const reply = yield* Fiber.join(fiber)
      assert.strictEqual(reply.text, "Hello, world")
      assert.strictEqual(reply.attempts, 3)
      assert.strictEqual(reply.finishReason, "stop")
      assert.strictEqual(yield* sends, 3)
      assert.deepStrictEqual(yield* rec.tags, [
        "AttemptStarted",
        "Preview",
        "Preview",
        "AttemptDiscarded",
        "RetryScheduled",
        "AttemptStarted",
        "Preview",
        "AttemptDiscarded",
        "RetryScheduled",
        "AttemptStarted",
        "Preview",
        "Preview",
        "Preview",
        "Committed"
      ])
      const all = yield* rec.all
      const discarded = all.flatMap((n) => n._tag === "AttemptDiscarded" ? [[n.attempt, n.discardedText]] : [])
      assert.deepStrictEqual(discarded, [[1, "Hello wr"], [2, "Hello"]])
      const eof = all.find((n) => n._tag === "AttemptDiscarded" && n.attempt === 2)
      assert.strictEqual((eof as any).error.reason, "PrematureEof")
      const started = all.flatMap((n) => n._tag === "AttemptStarted" ? [n.attempt] : [])
      assert.deepStrictEqual(started, [1, 2, 3])
      const scheduled = all.filter((n) => n._tag === "RetryScheduled")
      assert.deepStrictEqual(scheduled.map((n) => [n.nextAttempt, n.delaySource, n.remainingAttempts]), [
        [2, "backoff", 10],
        [3, "backoff", 9]
      ])
    }))

  it.effect("waits exactly 1, 2, 4, 8, 16, 32, 60, 60, 60, 60 s and gives up after 11 sends", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const { generation, sends } = yield* scripted([{ text: ["x"], end: status(503) }])
      const exit = yield* runToEnd(
        Recovery.run(generation).pipe(Effect.provide(Layer.merge(noJitter, rec.layer)))
      )
      assert.deepStrictEqual(retryDelays(yield* rec.all), [1, 2, 4, 8, 16, 32, 60, 60, 60, 60].map((s) => s * 1000))
      assert.strictEqual(yield* sends, 11)
      assert.isTrue(Exit.isFailure(exit))
      const error = yield* Effect.flip(exit) as Effect.Effect<RecoveryExhausted.RecoveryExhausted>
      assert.strictEqual(error._tag, "RecoveryExhausted")
      assert.strictEqual(error.reason, "Attempts")
      assert.strictEqual(error.attempts, 11)
      assert.strictEqual(error.maxAttempts, 11)
      assert.strictEqual(Duration.toMillis(error.elapsed), 303_000)
      assert.strictEqual(error.errors.length, 11)
      assert.isTrue(error.errors.every((e) => e._tag === "TransportError" && e.status === 503))
      assert.strictEqual(error.lastError?.status, 503)
      assert.strictEqual(error.errors[0].partialOutputChars, 1)
      assert.deepStrictEqual((yield* rec.tags).at(-1), "Exhausted")
    }))

  it.effect("with jitter, every wait is within [0.75·w, w] and the same seed gives the same waits", () =>
    Effect.gen(function*() {
      const run = (seed: string) =>
        Effect.gen(function*() {
          const rec = yield* recorder
          const { generation } = yield* scripted([{ end: reset }])
          yield* runToEnd(
            Effect.withRandom(Recovery.run(generation).pipe(Effect.provide(rec.layer)), Random.make(seed))
          )
          return retryDelays(yield* rec.all)
        })
      const a = yield* run("alpha")
      const b = yield* run("alpha")
      const nominal = [1, 2, 4, 8, 16, 32, 60, 60, 60, 60].map((s) => s * 1000)
      assert.deepStrictEqual(a, b)
      assert.strictEqual(a.length, 10)
      a.forEach((w, i) => {
        assert.isAtLeast(w, 0.75 * nominal[i])
        assert.isAtMost(w, nominal[i])
      })
    }))

  it.effect("the wait runs from the failure: a slow listener is inside it, and one slower than it is not waited for", () =>
    Effect.gen(function*() {
      const startedAt = (listenerTakes: Duration.Duration) =>
        Effect.gen(function*() {
          const started: Array<number> = []
          const delays: Array<number> = []
          const listener = RecoveryNotifications.layerCallback((n) => {
            switch (n._tag) {
              case "AttemptStarted":
                return Effect.map(Clock.currentTimeMillis, (now) => void started.push(now))
              case "AttemptDiscarded":
                return Effect.sleep(listenerTakes)
              case "RetryScheduled":
                return Effect.sync(() => void delays.push(Duration.toMillis(n.delay)))
              default:
                return Effect.void
            }
          })
          const { generation } = yield* scripted([
            { text: ["x"], end: status(503), takes: Duration.seconds(2) },
            { text: ["y"], end: "finish" }
          ])
          const exit = yield* runToEnd(Recovery.run(generation).pipe(Effect.provide(Layer.merge(noJitter, listener))))
          assert.isTrue(Exit.isSuccess(exit))
          // the policy's wait is told unchanged
          assert.deepStrictEqual(delays, [1000])
          return started.map((at) => at - started[0])
        })
      // the first attempt fails after 2 s; the listener's 300 ms are inside the 1 s that follow: the second send is
      // 1 s after the failure (not after the first send, nor 1.3 s after the failure)
      assert.deepStrictEqual(yield* startedAt(Duration.millis(300)), [0, 3000])
      // a listener that outlasts the wait: nothing is left to wait, and the replay is sent at once
      assert.deepStrictEqual(yield* startedAt(Duration.seconds(5)), [0, 7000])
    }))

  it.effect("Retry-After lengthens the wait and is not capped, but never shortens it", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const { generation, sends } = yield* scripted([
        { end: status(429, Duration.seconds(90)) },
        { end: status(429, Duration.millis(300)) },
        { text: ["ok"], end: "finish" }
      ])
      const fiber = yield* Effect.fork(Recovery.run(generation).pipe(Effect.provide(Layer.merge(noJitter, rec.layer))))
      yield* TestClock.adjust(Duration.seconds(89))
      assert.strictEqual(yield* sends, 1, "no second send before the server's 90 s")
      yield* TestClock.adjust(Duration.seconds(1))
      assert.strictEqual(yield* sends, 2)
      yield* TestClock.adjust(Duration.millis(1999))
      assert.strictEqual(yield* sends, 2, "a 300 ms Retry-After does not shorten the 2 s backoff")
      yield* TestClock.adjust(Duration.millis(1))
      const reply = yield* Fiber.join(fiber)
      assert.strictEqual(reply.text, "ok")
      const scheduled = (yield* rec.all).filter((n) => n._tag === "RetryScheduled")
      assert.deepStrictEqual(scheduled.map((n) => [Duration.toMillis(n.delay), n.delaySource]), [
        [90_000, "retry-after"],
        [2_000, "backoff"]
      ])
    }))

  it.effect("a Retry-After past the deadline ends recovery at once, without sleeping", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const { generation, sends } = yield* scripted([{ end: status(429, Duration.seconds(700)) }])
      // Not forked and the clock never moves: the run must end by itself.
      const error = yield* Effect.flip(Recovery.run(generation).pipe(Effect.provide(rec.layer)))
      assert.strictEqual(error._tag, "RecoveryExhausted")
      if (error._tag !== "RecoveryExhausted") return
      assert.strictEqual(error.reason, "RetryAfterBeyondDeadline")
      assert.strictEqual(Duration.toMillis(error.retryAfter!), 700_000)
      assert.strictEqual(error.attempts, 1)
      assert.strictEqual(Duration.toMillis(error.elapsed), 0)
      assert.strictEqual(yield* sends, 1)
      assert.notInclude(yield* rec.tags, "RetryScheduled")
    }))

  it.effect("no attempt is admitted and no backoff begun past the deadline; the error names the wait that would cross it", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const { generation, sends } = yield* scripted([{ end: reset }])
      const exit = yield* runToEnd(
        Recovery.run(generation).pipe(
          Effect.provide(Layer.mergeAll(noJitter, rec.layer, Budget.layer({ deadline: Duration.seconds(10) })))
        )
      )
      // Sends at 0, 1, 3 and 7 s; the next wait (8 s) would end at 15 s, past the 10 s deadline.
      assert.strictEqual(yield* sends, 4)
      assert.deepStrictEqual(retryDelays(yield* rec.all), [1000, 2000, 4000])
      const error = yield* Effect.flip(exit)
      assert.strictEqual(error._tag, "RecoveryExhausted")
      if (error._tag === "RecoveryExhausted") {
        assert.strictEqual(error.reason, "Deadline")
        assert.strictEqual(Duration.toMillis(error.elapsed), 7_000)
        assert.strictEqual(error.errors.length, 4)
        // the deadline was not reached: the wait would have crossed it
        assert.strictEqual(Duration.toMillis(error.nextDelay!), 8_000)
        assert.strictEqual(
          error.message,
          "stopped after 7.0s and 4 attempts: the 8.0s wait before the next attempt would end past the deadline; " +
            "last error: connection reset"
        )
      }
    }))

  it.effect("an attempt that outlives the deadline is not followed by another; the error says it was reached", () =>
    Effect.gen(function*() {
      const { generation, sends } = yield* scripted([{ text: ["slow"], end: reset, takes: Duration.seconds(30) }])
      const exit = yield* runToEnd(
        Recovery.run(generation).pipe(Effect.provide(Budget.layer({ deadline: Duration.seconds(10) })))
      )
      assert.strictEqual(yield* sends, 1)
      const error = yield* Effect.flip(exit)
      assert.strictEqual(error._tag === "RecoveryExhausted" && error.reason, "Deadline")
      if (error._tag === "RecoveryExhausted") {
        assert.isUndefined(error.nextDelay)
        assert.match(error.message, /^deadline reached after 30\.0s and 1 attempts; last error: /)
      }
    }))

  it.effect("N attempts reserve exactly N sends, even though the provider reserves each send itself", () =>
    Effect.gen(function*() {
      const { generation } = yield* scripted([{ end: reset }, { end: reset }, { text: ["done"], end: "finish" }])
      const used = yield* Budget.scoped(Effect.gen(function*() {
        const fiber = yield* Effect.fork(Recovery.run(generation).pipe(Effect.provide(noJitter)))
        yield* TestClock.adjust(Duration.seconds(3))
        yield* Fiber.join(fiber)
        return yield* Effect.flatMap(Budget.Budget, (b) => b.used)
      }))
      assert.strictEqual(used, 3)
    }))

  it.effect("a capability fallback inside an attempt is a second physical send and is debited", () =>
    Effect.gen(function*() {
      const fallback = Stream.unwrap(Effect.gen(function*() {
        yield* Budget.reserve // the first send, rejected for an unsupported parameter
        yield* Budget.reserve // the resend without it
        return Stream.make(Generation.Finish({ reason: "stop", providerReason: "stop" }))
      }))
      const used = yield* Budget.scoped(
        Effect.zipRight(Recovery.run(fallback), Effect.flatMap(Budget.Budget, (b) => b.used))
      )
      assert.strictEqual(used, 2)
    }))

  it.effect("a nested scope shares the budget: it can neither reset attempts nor the deadline", () =>
    Effect.gen(function*() {
      const inner = yield* scripted([{ end: reset }])
      const outer = yield* scripted([{ end: reset }, { text: ["outer"], end: "finish" }])
      const exit = yield* runToEnd(
        Budget.scoped(Effect.gen(function*() {
          // A nested reply that fails three times, then is abandoned (say, cut off by its caller's timeout).
          yield* Effect.exit(Effect.timeout(Recovery.run(inner.generation), Duration.millis(3500)))
          return yield* Recovery.run(outer.generation)
        })).pipe(Effect.provide(Layer.merge(noJitter, Budget.layer({ maxAttempts: 4 }))))
      )
      assert.strictEqual(yield* inner.sends, 3, "the first reply used 3 of the scope's 4 attempts")
      assert.strictEqual(yield* outer.sends, 1, "the second reply got only the one attempt left")
      const error = yield* Effect.flip(exit)
      assert.strictEqual(error._tag === "RecoveryExhausted" && error.reason, "Attempts")
      if (error._tag === "RecoveryExhausted") assert.strictEqual(error.attempts, 4)
    }))

  it.effect("a permanent error surfaces after exactly one send, unchanged", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const rejection = ProviderFailure.fromHttpStatus({ status: 401, type: "authentication_error" })
      const { generation, sends } = yield* scripted([{ end: rejection }])
      const error = yield* Effect.flip(Recovery.run(generation).pipe(Effect.provide(rec.layer)))
      assert.strictEqual(error._tag, "ProviderRejection")
      if (error._tag === "ProviderRejection") {
        assert.strictEqual(error.reason, "Authentication")
        assert.strictEqual(error.status, 401)
      }
      assert.strictEqual(yield* sends, 1)
      assert.deepStrictEqual(yield* rec.tags, ["AttemptStarted", "AttemptDiscarded", "Failed"])
    }))

  it.effect("interruption during a 60 s backoff ends at once and commits nothing", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const { generation, sends } = yield* scripted([{ end: reset }])
      const fiber = yield* Effect.fork(
        Recovery.run(generation).pipe(
          Effect.provide(Layer.merge(Policy.layer({ jitter: false, backoffBase: Duration.seconds(60) }), rec.layer))
        )
      )
      yield* TestClock.adjust(Duration.seconds(1)) // inside the 60 s wait
      assert.strictEqual((yield* rec.tags).at(-1), "RetryScheduled")
      const exit = yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.isInterrupted(exit))
      assert.strictEqual(yield* sends, 1)
      yield* TestClock.adjust(Duration.seconds(120))
      assert.strictEqual(yield* sends, 1, "no attempt after the interruption")
      assert.notInclude(yield* rec.tags, "Committed")
    }))

  it.effect("interruption during a stream aborts it and commits nothing", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const closed = yield* Ref.make(false)
      const endless = Stream.concat(
        Stream.make(Generation.TextDelta({ text: "partial" })),
        Stream.never
      ).pipe(Stream.ensuring(Ref.set(closed, true)))
      const fiber = yield* Effect.fork(Recovery.run(endless).pipe(Effect.provide(rec.layer)))
      yield* TestClock.adjust(Duration.seconds(1))
      const exit = yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.isInterrupted(exit))
      assert.isTrue(yield* Ref.get(closed), "the attempt's stream was released")
      assert.deepStrictEqual(yield* rec.tags, ["AttemptStarted", "Preview"])
    }))

  it.effect("no replay once a chunk hook has run: the failure surfaces with replayBlocked", () =>
    Effect.gen(function*() {
      const spoken = yield* Ref.make<Array<string>>([])
      const { generation, sends } = yield* scripted([{ text: ["one", "two"], end: reset }, {
        text: ["never"],
        end: "finish"
      }])
      const error = yield* Effect.flip(Recovery.run(generation, {
        hooks: {
          onChunk: (event) => event._tag === "TextDelta" ? Ref.update(spoken, (s) => [...s, event.text]) : Effect.void
        }
      }))
      assert.strictEqual(error._tag, "TransportError")
      if (error._tag === "TransportError") {
        assert.strictEqual(error.replayBlocked, "ExternalEffects")
        assert.strictEqual(error.partialOutputChars, 6)
      }
      assert.strictEqual(yield* sends, 1)
      assert.deepStrictEqual(yield* Ref.get(spoken), ["one", "two"])
    }))

  it.effect("a failure before any chunk hook ran is still replayed", () =>
    Effect.gen(function*() {
      const { generation, sends } = yield* scripted([{ end: reset }, { text: ["ok"], end: "finish" }])
      const fiber = yield* Effect.fork(Recovery.run(generation, { hooks: { onChunk: () => Effect.void } }))
      yield* TestClock.adjust(Duration.seconds(1))
      assert.strictEqual((yield* Fiber.join(fiber)).text, "ok")
      assert.strictEqual(yield* sends, 2)
    }))

  it.effect("Recovery.disabled: one attempt, failure unchanged, budget still debited", () =>
    Effect.gen(function*() {
      const { generation, sends } = yield* scripted([{ text: ["par"], end: reset }, { text: ["ok"], end: "finish" }])
      const [error, used] = yield* Budget.scoped(Effect.gen(function*() {
        const error = yield* Effect.flip(Recovery.disabled(Recovery.run(generation)))
        return [error, yield* Effect.flatMap(Budget.Budget, (b) => b.used)] as const
      }))
      assert.strictEqual(error._tag, "TransportError")
      if (error._tag === "TransportError") {
        assert.strictEqual(error.reason, "Reset")
        assert.isUndefined(error.replayBlocked)
      }
      assert.strictEqual(yield* sends, 1)
      assert.strictEqual(used, 1)
    }))

  it.effect("a chunk hook's failure is not provider-origin and is never replayed", () =>
    Effect.gen(function*() {
      const { generation, sends } = yield* scripted([{ text: ["a"], end: "finish" }])
      const error = yield* Effect.flip(Recovery.run(generation, {
        hooks: { onChunk: () => Effect.fail("speaker unplugged") }
      }))
      assert.strictEqual(error._tag, "HookError")
      if (error._tag === "HookError") {
        assert.strictEqual(error.hook, "onChunk")
        assert.strictEqual(error.attempt, 1)
      }
      assert.strictEqual(yield* sends, 1)
    }))

  it.effect("beforeGeneration runs once per reply, not per attempt; afterGeneration once after commit", () =>
    Effect.gen(function*() {
      const log = yield* Ref.make<Array<string>>([])
      const { generation } = yield* scripted([{ end: reset }, { end: reset }, { text: ["ok"], end: "finish" }])
      const fiber = yield* Effect.fork(
        Recovery.run(generation, {
          hooks: {
            beforeGeneration: Ref.update(log, (l) => [...l, "before"]),
            afterGeneration: (reply) => Ref.update(log, (l) => [...l, `after:${reply.text}`])
          }
        }).pipe(Effect.provide(noJitter))
      )
      yield* TestClock.adjust(Duration.seconds(3))
      yield* Fiber.join(fiber)
      assert.deepStrictEqual(yield* Ref.get(log), ["before", "after:ok"])
    }))

  it.effect("a failing beforeGeneration hook makes no send", () =>
    Effect.gen(function*() {
      const { generation, sends } = yield* scripted([{ text: ["ok"], end: "finish" }])
      const error = yield* Effect.flip(Recovery.run(generation, { hooks: { beforeGeneration: Effect.fail("no") } }))
      assert.strictEqual(error._tag === "HookError" && error.hook, "beforeGeneration")
      assert.strictEqual(yield* sends, 0)
    }))

  it.effect("early break: output after the first complete tool call is drained, not surfaced", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const events = Stream.make(
        Generation.TextDelta({ text: "Let me check." }),
        Generation.ToolCallComplete({ call: { id: "c1", name: "now", arguments: {} } }),
        Generation.TextDelta({ text: " ignored" }),
        Generation.ToolCallComplete({ call: { id: "c2", name: "now", arguments: {} } }),
        Generation.UsageEvent({ usage: { inputTokens: 10, outputTokens: 5 } }),
        Generation.Finish({ reason: "tool_calls", providerReason: "tool_calls" })
      )
      const reply = yield* Recovery.run(events, { earlyBreakOnToolCall: true }).pipe(Effect.provide(rec.layer))
      assert.strictEqual(reply.text, "Let me check.")
      assert.deepStrictEqual(reply.toolCalls.map((c) => c.id), ["c1"])
      assert.deepStrictEqual(Option.getOrThrow(reply.usage), { inputTokens: 10, outputTokens: 5 })
      const previews = (yield* rec.all).filter((n) => n._tag === "Preview").map((n) => n.event._tag)
      assert.deepStrictEqual(previews, ["TextDelta", "ToolCallComplete", "Usage", "Finish"])
    }))

  it.effect("early break: a failed drain fails the attempt and its tool call is not committed", () =>
    Effect.gen(function*() {
      const call = { id: "c1", name: "append_file", arguments: { path: "a", line: "x" } }
      const { generation, sends } = yield* scripted([
        { toolCalls: [call], end: reset },
        { text: ["fine"], end: "finish" }
      ])
      const fiber = yield* Effect.fork(Recovery.run(generation, { earlyBreakOnToolCall: true }))
      yield* TestClock.adjust(Duration.seconds(1))
      const reply = yield* Fiber.join(fiber)
      assert.strictEqual(yield* sends, 2)
      assert.deepStrictEqual(reply.toolCalls, [])
      assert.strictEqual(reply.text, "fine")
    }))

  it.effect("an incomplete finish is a terminal: committed and flagged", () =>
    Effect.gen(function*() {
      const { generation } = yield* scripted([{ text: ["trunc"], end: "finish", finishReason: "length" }])
      const reply = yield* Recovery.run(generation)
      assert.isTrue(reply.incomplete)
      assert.strictEqual(reply.text, "trunc")
    }))

  it.effect("a stream that ends without Finish is a premature EOF, replayed", () =>
    Effect.gen(function*() {
      const { generation, sends } = yield* scripted([{ text: ["half"], end: "eof" }])
      const error = yield* Effect.flip(
        Recovery.run(generation).pipe(Effect.provide(Budget.layer({ maxAttempts: 1 })))
      )
      assert.strictEqual(error._tag === "RecoveryExhausted" && error.lastError?._tag, "TransportError")
      if (error._tag === "RecoveryExhausted") {
        const last = error.lastError as TransportError.TransportError
        assert.strictEqual(last.reason, "PrematureEof")
        assert.strictEqual(last.partialOutputChars, 4)
      }
      assert.strictEqual(yield* sends, 1)
    }))
})
