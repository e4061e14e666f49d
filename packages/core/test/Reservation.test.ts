/**
 * One reservation per send: the sender (the provider) reserves each send, once, and the recovery loop reads the
 * attempt number from that reservation. A run that fails before reserving sent nothing and is never replayed; a
 * stream that shows output without reserving (not a provider) is charged when it does.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Stream } from "effect"
import * as Budget from "../src/Budget.js"
import * as Generation from "../src/Generation.js"
import * as Policy from "../src/Policy.js"
import * as ProviderRejection from "../src/ProviderRejection.js"
import * as Recovery from "../src/Recovery.js"
import * as TransportError from "../src/TransportError.js"
import { recorder } from "./utils/notifications.js"

const finish = Generation.Finish({ reason: "stop", providerReason: "stop" })
const used = Effect.flatMap(Budget.Budget, (b) => b.used)

describe("one reservation per send", () => {
  it.effect("the provider's reservation is the attempt: its number is the one AttemptStarted tells, none other made", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const got: Array<number> = []
      const generation = Stream.unwrap(
        Effect.map(Budget.reserve, (n) => {
          got.push(n)
          return Stream.make(Generation.TextDelta({ text: "hi" }), finish)
        })
      )
      const [reply, spent] = yield* Budget.scoped(
        Effect.all([Recovery.run(generation).pipe(Effect.provide(rec.layer)), used])
      )
      assert.strictEqual(reply.attempts, 1)
      assert.strictEqual(spent, 1, "one send, one reservation")
      assert.deepStrictEqual(got, [1])
      const notes = yield* rec.all
      assert.deepStrictEqual(notes.map((n) => n._tag), ["AttemptStarted", "Preview", "Preview", "Committed"])
      assert.strictEqual(notes[0]._tag === "AttemptStarted" && notes[0].attempt, 1)
    }))

  it.effect("a nested scope's attempt numbers continue the shared budget's", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const generation = Stream.unwrap(Effect.as(Budget.reserve, Stream.make(finish)))
      yield* Budget.scoped(Effect.gen(function*() {
        yield* Budget.reserve // someone else's send in the same scope
        yield* Recovery.run(generation).pipe(Effect.provide(rec.layer))
      }))
      const started = (yield* rec.all).flatMap((n) => n._tag === "AttemptStarted" ? [n.attempt] : [])
      assert.deepStrictEqual(started, [2])
    }))

  it.effect("a chunk hook sees the reply's Budget, not the one the attempt's stream reserves through", () =>
    Effect.gen(function*() {
      const seen: Array<Budget.Allowance> = []
      const look = Effect.asVoid(Effect.flatMap(Budget.Budget, (b) => Effect.sync(() => seen.push(b))))
      const generation = Stream.unwrap(
        Effect.as(Budget.reserve, Stream.make(Generation.TextDelta({ text: "hi" }), finish))
      )
      const outer = yield* Budget.scoped(Effect.gen(function*() {
        const outer = yield* Budget.Budget
        yield* Recovery.run(generation, { hooks: { onChunk: () => look } })
        return outer
      }))
      assert.strictEqual(seen.length, 2, "one call per event")
      for (const b of seen) assert.strictEqual(b, outer)
    }))

  it.effect("a request refused before its send: surfaced at once, nothing debited, no AttemptStarted", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const refused = Stream.fail(
        new ProviderRejection.ProviderRejection({ reason: "BadRequest", detail: "no tool x" })
      )
      const [exit, spent] = yield* Budget.scoped(
        Effect.all([Effect.exit(Recovery.run(refused).pipe(Effect.provide(rec.layer))), used])
      )
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(spent, 0)
      assert.deepStrictEqual((yield* rec.all).map((n) => n._tag), ["Failed"])
    }))

  it.effect("a retryable failure before any reservation is not replayed (nothing was sent)", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      let runs = 0
      const failing = Stream.unwrap(Effect.sync(() => {
        runs++
        return Stream.fail(new TransportError.TransportError({ reason: "Reset" }))
      }))
      const [exit, spent] = yield* Budget.scoped(
        Effect.all([Effect.exit(Recovery.run(failing).pipe(Effect.provide(rec.layer))), used])
      )
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(runs, 1)
      assert.strictEqual(spent, 0)
    }))

  it.effect("a stream that shows output without reserving is charged when it does: one attempt, one debit", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const bare = Stream.make(Generation.TextDelta({ text: "plain" }), finish)
      const [reply, spent] = yield* Budget.scoped(
        Effect.all([Recovery.run(bare).pipe(Effect.provide(rec.layer)), used])
      )
      assert.strictEqual(reply.text, "plain")
      assert.strictEqual(reply.attempts, 1)
      assert.strictEqual(spent, 1)
      assert.deepStrictEqual((yield* rec.all).map((n) => n._tag), ["AttemptStarted", "Preview", "Preview", "Committed"])
    }))

  it.effect("no attempt left: the sender's reservation fails and recovery ends Exhausted, with no attempt started", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const generation = Stream.unwrap(Effect.as(Budget.reserve, Stream.make(finish)))
      const error = yield* Budget.scoped(Effect.gen(function*() {
        yield* Budget.reserve // the only attempt, spent elsewhere
        return yield* Effect.flip(Recovery.run(generation).pipe(Effect.provide(rec.layer)))
      })).pipe(Effect.provide(Budget.layer({ maxAttempts: 1 })))
      assert.strictEqual(error._tag, "RecoveryExhausted")
      assert.deepStrictEqual((yield* rec.all).map((n) => n._tag), ["Exhausted"])
    }).pipe(Effect.provide(Policy.layer({ jitter: false }))))
})
