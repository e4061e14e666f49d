/**
 * Resumption in the recovery loop, with a fake provider stream that offers a response the server keeps: a failed
 * attempt is continued by the continuation the response gives (its preview kept, the reply its whole output), the
 * continuation is asked with the classification and the sends left, and a response recovery leaves behind is
 * cancelled exactly once (replay, exhaustion, a permanent failure, interruption), never one it saw end. TestClock for
 * every wait.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, FastCheck as fc, Fiber, Option, Ref, Stream, TestClock } from "effect"
import * as Budget from "../src/Budget.js"
import * as Generation from "../src/Generation.js"
import * as Policy from "../src/Policy.js"
import * as ProviderRejection from "../src/ProviderRejection.js"
import * as Recovery from "../src/Recovery.js"
import * as Resumption from "../src/Resumption.js"
import * as TransportError from "../src/TransportError.js"
import { recorder } from "./utils/notifications.js"

const finish = Generation.Finish({ reason: "stop", providerReason: "completed" })
const text = (t: string) => Generation.TextDelta({ text: t })
const reset = new TransportError.TransportError({ reason: "Reset", detail: "cut" })
const policy = Policy.layer({ backoffBase: Duration.millis(10), backoffMax: Duration.millis(40), jitter: false })

/**
 * A response the fake server keeps: the first run shows `first` and fails with `failure`; each continuation
 * (`plan` decides which) shows the next piece of `rest` and fails, the last one finishes.
 */
const fake = (options: {
  readonly first: ReadonlyArray<string>
  readonly failure?: TransportError.TransportError | ProviderRejection.ProviderRejection
  readonly continuations: ReadonlyArray<
    { readonly events: ReadonlyArray<string>; readonly fail?: TransportError.TransportError | undefined }
  >
  readonly settled?: boolean
  readonly plan?: (failure: Resumption.Failure) => "stream" | "poll" | "none"
  /** How long the cancel takes (TestClock). */
  readonly cancelTakes?: Duration.DurationInput
}) =>
  Effect.gen(function*() {
    const asked = yield* Ref.make<Array<Resumption.Failure>>([])
    const cancels = yield* Ref.make(0)
    let next = 0
    const continuation = (mode: Resumption.Mode): Resumption.Continuation => {
      const piece = options.continuations[next++]!
      return {
        mode,
        fromSequence: 10 * next,
        immediate: mode === "poll",
        stream: Stream.unwrap(Effect.as(
          Budget.reserve,
          Stream.concat(
            Stream.fromIterable(piece.events.map(text)),
            piece.fail === undefined ? Stream.make(finish) : Stream.fail(piece.fail)
          )
        ))
      }
    }
    const resumable: Resumption.Resumable = {
      responseId: () => "resp_1",
      settled: () => options.settled === true,
      continuation: (failure) => {
        Effect.runSync(Ref.update(asked, (all) => [...all, failure]))
        const mode = options.plan?.(failure) ?? (failure.retryable ? "stream" : "none")
        return mode === "none" || next >= options.continuations.length ? Option.none() : Option.some(continuation(mode))
      },
      cancel: Effect.zipRight(Effect.sleep(options.cancelTakes ?? 0), Ref.update(cancels, (n) => n + 1))
    }
    const generation = Stream.unwrap(Effect.gen(function*() {
      yield* Resumption.offer(resumable)
      yield* Budget.reserve
      return Stream.concat(Stream.fromIterable(options.first.map(text)), Stream.fail(options.failure ?? reset))
    }))
    return { generation, asked: Ref.get(asked), cancels: Ref.get(cancels) }
  })

describe("Resumption in Recovery.run", () => {
  it.effect("a cut attempt is continued: the preview kept, the reply the whole output, attempts counted", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const f = yield* fake({
        first: ["one ", "two "],
        continuations: [{ events: ["three "], fail: reset }, { events: ["four"] }]
      })
      const fiber = yield* Effect.fork(Recovery.run(f.generation).pipe(Effect.provide(rec.layer)))
      yield* TestClock.adjust("10 millis")
      yield* TestClock.adjust("20 millis")
      const reply = yield* Fiber.join(fiber)
      assert.strictEqual(reply.text, "one two three four")
      assert.strictEqual(reply.attempts, 3)
      const notes = (yield* rec.all).filter((n) => n._tag !== "Preview").map((n) => n._tag)
      assert.deepStrictEqual(notes, [
        "AttemptStarted",
        "RetryScheduled",
        "AttemptResumed",
        "RetryScheduled",
        "AttemptResumed",
        "Committed"
      ])
      const retries = (yield* rec.all).flatMap((n) => n._tag === "RetryScheduled" ? [n] : [])
      assert.deepStrictEqual(retries.map((r) => [Duration.toMillis(r.delay), r.resume?.keptChars]), [[10, 8], [20, 14]])
      assert.deepStrictEqual(
        (yield* f.asked).map((a) => [a.retryable, a.remainingAttempts]),
        [[true, 10], [true, 9]]
      )
      assert.strictEqual(yield* f.cancels, 0, "a committed response is not cancelled")
    }).pipe(Effect.provide(policy)))

  it.effect("a continuation that is immediate (a poll) is not waited for", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const f = yield* fake({ first: ["a"], continuations: [{ events: ["b"] }], plan: () => "poll" })
      const reply = yield* Recovery.run(f.generation).pipe(Effect.provide(rec.layer))
      assert.strictEqual(reply.text, "ab")
      const [retry] = (yield* rec.all).flatMap((n) => n._tag === "RetryScheduled" ? [n] : [])
      assert.strictEqual(Duration.toMillis(retry!.delay), 0)
      assert.strictEqual(retry!.resume?.mode, "poll")
    }).pipe(Effect.provide(policy)))

  it.effect("no continuation: discarded, the response cancelled once, then replayed as before", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      let runs = 0
      const f = yield* fake({ first: ["lost"], continuations: [], plan: () => "none" })
      const generation = Stream.suspend(() =>
        ++runs === 1 ? f.generation : Stream.unwrap(Effect.as(Budget.reserve, Stream.make(text("fresh"), finish)))
      )
      const fiber = yield* Effect.fork(Recovery.run(generation).pipe(Effect.provide(rec.layer)))
      yield* TestClock.adjust("10 millis")
      const reply = yield* Fiber.join(fiber)
      assert.strictEqual(reply.text, "fresh")
      assert.strictEqual(yield* f.cancels, 1)
      const tags = (yield* rec.all).filter((n) => n._tag !== "Preview").map((n) => n._tag)
      assert.deepStrictEqual(tags, [
        "AttemptStarted",
        "AttemptDiscarded",
        "RetryScheduled",
        "ResponseCancelled",
        "AttemptStarted",
        "Committed"
      ])
    }).pipe(Effect.provide(policy)))

  it.effect("a permanent failure is asked about (a refusal may poll) and, refused, surfaced with one cancel", () =>
    Effect.gen(function*() {
      const f = yield* fake({
        first: ["x"],
        failure: new ProviderRejection.ProviderRejection({ reason: "Authentication", status: 401 }),
        continuations: [{ events: ["y"] }]
      })
      const exit = yield* Effect.exit(Recovery.run(f.generation))
      assert.isTrue(Exit.isFailure(exit))
      assert.deepStrictEqual((yield* f.asked).map((a) => a.retryable), [false])
      assert.strictEqual(yield* f.cancels, 1)
    }).pipe(Effect.provide(policy)))

  it.effect("exhaustion cancels once; the last send is offered with remainingAttempts 1", () =>
    Effect.gen(function*() {
      const f = yield* fake({ first: ["a"], continuations: [{ events: ["b"], fail: reset }] })
      const fiber = yield* Effect.fork(Effect.exit(Recovery.run(f.generation)))
      yield* TestClock.adjust("10 millis")
      const exit = yield* Fiber.join(fiber)
      assert.isTrue(Exit.isFailure(exit))
      assert.deepStrictEqual((yield* f.asked).map((a) => a.remainingAttempts), [1])
      assert.strictEqual(yield* f.cancels, 1)
    }).pipe(Effect.provide(policy), Effect.provide(Budget.layer({ maxAttempts: 2 }))))

  it.effect("interrupted in the wait before a resume: cancelled once", () =>
    Effect.gen(function*() {
      const f = yield* fake({ first: ["a"], continuations: [{ events: ["b"] }] })
      const fiber = yield* Effect.fork(Recovery.run(f.generation))
      yield* TestClock.adjust("5 millis")
      yield* Fiber.interrupt(fiber)
      assert.strictEqual(yield* f.cancels, 1)
    }).pipe(Effect.provide(policy)))

  it.effect("interrupted while the cancel before a replay is in flight: the cancel completes and is told", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const f = yield* fake({ first: ["a"], continuations: [], plan: () => "none", cancelTakes: "500 millis" })
      const fiber = yield* Effect.fork(Recovery.run(f.generation).pipe(Effect.provide(rec.layer)))
      yield* TestClock.adjust("5 millis") // inside the 10 ms backoff, the cancel under way
      const interrupting = yield* Effect.fork(Fiber.interrupt(fiber))
      yield* TestClock.adjust("500 millis")
      yield* Fiber.join(interrupting)
      assert.strictEqual(yield* f.cancels, 1)
      assert.deepStrictEqual(
        (yield* rec.all).flatMap((n) => n._tag === "ResponseCancelled" ? [n.responseId] : []),
        ["resp_1"]
      )
    }).pipe(Effect.provide(policy)))

  it.effect("what the consumer was shown is passed to the continuation", () =>
    Effect.gen(function*() {
      const f = yield* fake({ first: ["one ", "two"], continuations: [{ events: ["!"] }] })
      const fiber = yield* Effect.fork(Recovery.run(f.generation))
      yield* TestClock.adjust("10 millis")
      yield* Fiber.join(fiber)
      assert.deepStrictEqual((yield* f.asked).map((a) => [a.shownText, a.shownReasoning]), [["one two", ""]])
    }).pipe(Effect.provide(policy)))

  it.effect("a response that ended on the server is neither continued nor cancelled", () =>
    Effect.gen(function*() {
      const f = yield* fake({ first: ["a"], continuations: [{ events: ["b"] }], settled: true })
      const exit = yield* Effect.exit(Recovery.run(f.generation).pipe(Effect.provide(Budget.layer({ maxAttempts: 1 }))))
      assert.isTrue(Exit.isFailure(exit))
      assert.deepStrictEqual(yield* f.asked, [])
      assert.strictEqual(yield* f.cancels, 0)
    }).pipe(Effect.provide(policy)))

  it.effect("replay off (Recovery.disabled): no continuation, surfaced after one send, the response cancelled", () =>
    Effect.gen(function*() {
      const f = yield* fake({ first: ["a"], continuations: [{ events: ["b"] }] })
      const exit = yield* Effect.exit(Recovery.disabled(Recovery.run(f.generation)))
      assert.isTrue(Exit.isFailure(exit))
      assert.deepStrictEqual(yield* f.asked, [])
      assert.strictEqual(yield* f.cancels, 1)
    }).pipe(Effect.provide(policy)))

  it.effect("a chunk hook's effects do not block a continuation", () =>
    Effect.gen(function*() {
      const seen: Array<string> = []
      const f = yield* fake({ first: ["a", "b"], continuations: [{ events: ["c"] }] })
      const fiber = yield* Effect.fork(Recovery.run(f.generation, {
        hooks: { onChunk: (e) => Effect.sync(() => e._tag === "TextDelta" && seen.push(e.text)) }
      }))
      yield* TestClock.adjust("10 millis")
      const reply = yield* Fiber.join(fiber)
      assert.strictEqual(reply.text, "abc")
      assert.deepStrictEqual(seen, ["a", "b", "c"])
    }).pipe(Effect.provide(policy)))
})

/**
 * A response of `pieces` the fake server keeps, numbered 1…n; each read (the send, then each continuation from the
 * cursor the fake keeps as its provider would) shows the pieces up to its cut and fails, the last one finishes.
 * `refusals` marks the continuations the server refuses outright (a poll then completes the response at once).
 */
const kept = (pieces: ReadonlyArray<string>, cuts: ReadonlyArray<number>, refusals: ReadonlySet<number>) =>
  Effect.gen(function*() {
    const sends = yield* Ref.make(0)
    const cancels = yield* Ref.make(0)
    let cursor = 0
    let reads = 0
    const read = (
      poll: boolean
    ): Stream.Stream<
      Generation.GenerationEvent,
      TransportError.TransportError | Budget.BudgetExhausted,
      Budget.Budget
    > =>
      Stream.unwrap(Effect.gen(function*() {
        yield* Budget.reserve
        yield* Ref.update(sends, (n) => n + 1)
        const k = reads++
        if (!poll && k > 0 && refusals.has(k)) {
          return Stream.fail(new TransportError.TransportError({ reason: "ResumeGap", detail: "refused" }))
        }
        const until = poll ? pieces.length : Math.min(pieces.length, Math.max(cursor, cuts[k] ?? pieces.length))
        const shown = pieces.slice(cursor, until).map(text)
        const advance = Stream.fromIterable(shown).pipe(Stream.tap(() => Effect.sync(() => cursor++)))
        return until === pieces.length
          ? Stream.concat(advance, Stream.make(finish))
          : Stream.concat(advance, Stream.fail(reset))
      }))
    let mode: Resumption.Mode = "stream"
    const resumable: Resumption.Resumable = {
      responseId: () => "resp_p",
      settled: () => false,
      continuation: (failure) => {
        mode = failure.error.reason === "ResumeGap" ? "poll" : "stream"
        return Option.some({
          mode,
          fromSequence: cursor,
          immediate: mode === "poll",
          stream: read(mode === "poll")
        })
      },
      cancel: Ref.update(cancels, (n) => n + 1)
    }
    const generation = Stream.unwrap(Effect.as(Resumption.offer(resumable), read(false)))
    return { generation, sends: Ref.get(sends), cancels: Ref.get(cancels) }
  })

describe("Resumption, for any cuts", () => {
  it.effect.prop(
    "the reply is the whole response, shown once; sends ≤ maxAttempts; nothing discarded; cancelled only when given up",
    {
      pieces: fc.array(fc.string({ minLength: 1, maxLength: 4 }), { minLength: 1, maxLength: 12 }),
      cuts: fc.array(fc.integer({ min: 0, max: 12 }), { maxLength: 12 }),
      refusals: fc.uniqueArray(fc.integer({ min: 1, max: 12 }), { maxLength: 3 }),
      maxAttempts: fc.integer({ min: 1, max: 12 })
    },
    ({ cuts, maxAttempts, pieces, refusals }) =>
      Effect.gen(function*() {
        const rec = yield* recorder
        const k = yield* kept(pieces, cuts, new Set(refusals))
        const fiber = yield* Effect.fork(
          Effect.exit(
            Recovery.run(k.generation).pipe(
              Effect.provide(rec.layer),
              Effect.provide(Budget.layer({ maxAttempts }))
            )
          )
        )
        for (let i = 0; i < 100 && Option.isNone(yield* fiber.poll); i++) yield* TestClock.adjust("1 minute")
        const exit = yield* Fiber.join(fiber)
        const notes = yield* rec.all
        const sends = yield* k.sends
        assert.isAtMost(sends, maxAttempts)
        const shown = notes.flatMap((n) => n._tag === "Preview" && n.event._tag === "TextDelta" ? [n.event.text] : [])
        assert.strictEqual(notes.filter((n) => n._tag === "AttemptResumed").length, Math.max(0, sends - 1))
        if (Exit.isSuccess(exit)) {
          assert.strictEqual(exit.value.text, pieces.join(""))
          assert.strictEqual(shown.join(""), pieces.join(""), "every piece shown once, in order")
          assert.strictEqual(exit.value.attempts, sends)
          assert.strictEqual(yield* k.cancels, 0)
          assert.isFalse(notes.some((n) => n._tag === "AttemptDiscarded"))
        } else {
          // out of attempts: what was kept is discarded, the response cancelled, once
          assert.strictEqual(sends, maxAttempts)
          assert.strictEqual(yield* k.cancels, 1)
          assert.isTrue(pieces.join("").startsWith(shown.join("")))
        }
      }),
    { fastCheck: { numRuns: 100 } }
  )
})
