/**
 * A provider's `open` is read by `Recovery` through its pull, in a scope per attempt. The reply must be the same as
 * from the stream, a failed attempt is replayed by opening again (one send per attempt), the pull's scope closes when
 * its attempt ends, the backoff runs from when the failure was observed, and a stream built on top of one
 * (`Stream.map`) is read as that stream.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Chunk, Clock, Duration, Effect, Exit, Fiber, Option, Stream, TestClock } from "effect"
import * as Budget from "../src/Budget.js"
import * as Generation from "../src/Generation.js"
import * as Policy from "../src/Policy.js"
import * as Provider from "../src/Provider.js"
import * as ProviderFailure from "../src/ProviderFailure.js"
import * as Recovery from "../src/Recovery.js"
import * as TransportError from "../src/TransportError.js"

const finish = Generation.Finish({ reason: "stop", providerReason: "stop" })

/**
 * A generation whose pull hands out `chunks` in turn; every open reserves a send and is counted, with its close and
 * the TestClock's time at each open. `closing` is how long closing an attempt's scope takes (a body released slowly).
 */
const pulled = (
  attempts: ReadonlyArray<
    {
      readonly chunks: ReadonlyArray<ReadonlyArray<Generation.GenerationEvent>>
      readonly fail?: boolean
      /** How long the failing read takes before it fails. */
      readonly failAfter?: Duration.Duration
    }
  >,
  closing: Duration.Duration = Duration.zero
) => {
  const log: Array<string> = []
  const openedAt: Array<number> = []
  let opened = 0
  const open = Effect.gen(function*() {
    yield* Budget.reserve
    const attempt = attempts[Math.min(opened, attempts.length - 1)]
    opened++
    log.push(`open ${opened}`)
    openedAt.push(yield* Clock.currentTimeMillis)
    yield* Effect.addFinalizer(() =>
      Effect.zipRight(Effect.sleep(closing), Effect.sync(() => log.push(`close ${opened}`)))
    )
    let next = 0
    const pull: Provider.Pull<TransportError.TransportError | Budget.BudgetExhausted> = Effect.suspend(() => {
      if (next < attempt.chunks.length) return Effect.succeed(Chunk.fromIterable(attempt.chunks[next++]))
      return attempt.fail === true
        ? Effect.zipRight(
          Effect.sleep(attempt.failAfter ?? Duration.zero),
          Effect.fail(Option.some(new TransportError.TransportError({ reason: "Reset", detail: "cut" })))
        )
        : Effect.fail(Option.none())
    })
    return pull
  })
  return { open, stream: Provider.toStream(open), log, openedAt, opened: () => opened }
}

const backoff = Policy.layer({ backoffBase: Duration.seconds(1), jitter: false })

describe("Recovery.runOpen", () => {
  it.effect("Recovery commits what the stream holds, through the pull, and closes the pull's scope", () =>
    Effect.gen(function*() {
      const chunks = [[Generation.TextDelta({ text: "hel" })], [], [Generation.TextDelta({ text: "lo" }), finish]]
      const viaPull = pulled([{ chunks }])
      const reply = yield* Recovery.runOpen(viaPull.open)
      const plain = yield* Recovery.run(Stream.fromIterable(chunks.flat()))
      assert.strictEqual(reply.text, "hello")
      assert.strictEqual(reply.text, plain.text)
      assert.strictEqual(reply.finishReason, plain.finishReason)
      assert.strictEqual(reply.attempts, 1)
      assert.deepStrictEqual(viaPull.log, ["open 1", "close 1"])
    }))

  it.effect("a failed attempt is replayed by opening the pull again, its scope closed first", () =>
    Effect.gen(function*() {
      const viaPull = pulled([
        { chunks: [[Generation.TextDelta({ text: "never shown" })]], fail: true },
        { chunks: [[Generation.TextDelta({ text: "the answer" }), finish]] }
      ])
      const fiber = yield* Effect.fork(Recovery.runOpen(viaPull.open).pipe(Effect.provide(backoff)))
      yield* TestClock.adjust("1 second")
      const reply = yield* Fiber.join(fiber)
      assert.strictEqual(reply.text, "the answer")
      assert.strictEqual(reply.attempts, 2)
      assert.deepStrictEqual(viaPull.log, ["open 1", "close 1", "open 2", "close 2"])
    }))

  it.effect("the backoff runs from the pull's failure: closing the attempt's scope is inside it, not added to it", () =>
    Effect.gen(function*() {
      const viaPull = pulled([
        { chunks: [[Generation.TextDelta({ text: "cut" })]], fail: true, failAfter: Duration.millis(500) },
        { chunks: [[Generation.TextDelta({ text: "whole" }), finish]] }
      ], Duration.millis(300))
      const fiber = yield* Effect.fork(Recovery.runOpen(viaPull.open).pipe(Effect.provide(backoff)))
      // the read fails at 500 ms; the close takes until 800 ms
      yield* TestClock.adjust("800 millis")
      assert.deepStrictEqual(viaPull.log, ["open 1", "close 1"])
      yield* TestClock.adjust("699 millis")
      assert.strictEqual(viaPull.opened(), 1)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(viaPull.opened(), 2)
      yield* TestClock.adjust("300 millis")
      const reply = yield* Fiber.join(fiber)
      assert.strictEqual(reply.text, "whole")
      // the second send 1 s after the failure (not after the send, nor after the 300 ms the close took)
      assert.deepStrictEqual(viaPull.openedAt, [0, 1500])
    }))

  /**
   * A provider whose first attempt's read fails 400 ms after it is opened, with a failure marked observed at
   * `mark(openTime)`, and whose second attempt commits; the TestClock's time of each open.
   */
  const markedFailure = (mark: (openedAt: bigint) => bigint) => {
    const openedAt: Array<number> = []
    const open = Effect.gen(function*() {
      yield* Budget.reserve
      openedAt.push(yield* Clock.currentTimeMillis)
      let done = false
      const pull: Provider.Pull<TransportError.TransportError | Budget.BudgetExhausted> = openedAt.length > 1
        ? Effect.suspend(() => {
          if (done) return Effect.fail(Option.none())
          done = true
          return Effect.succeed(Chunk.make(Generation.TextDelta({ text: "whole" }), finish))
        })
        : Effect.flatMap(Clock.currentTimeNanos, (at) =>
          Effect.zipRight(
            Effect.sleep("400 millis"),
            Effect.fail(Option.some(ProviderFailure.withObservedAt(
              new TransportError.TransportError({ reason: "Reset", detail: "cut" }),
              mark(at)
            )))
          ))
      return pull
    })
    return { open, stream: Provider.toStream(open), openedAt }
  }

  it.effect("the backoff runs from when the provider observed the failure, when it says so", () =>
    Effect.gen(function*() {
      // observed as the read began, 400 ms before it reached recovery (the provider took that long over it)
      const { open, openedAt } = markedFailure((at) => at)
      const fiber = yield* Effect.fork(Recovery.runOpen(open).pipe(Effect.provide(backoff)))
      yield* TestClock.adjust("999 millis")
      assert.strictEqual(openedAt.length, 1, "the replay was sent before 1 s from the observation")
      yield* TestClock.adjust("1 millis")
      assert.strictEqual(openedAt.length, 2, "the replay was not sent 1 s after the observation")
      const reply = yield* Fiber.join(fiber)
      assert.strictEqual(reply.text, "whole")
      assert.deepStrictEqual(openedAt, [0, 1000])
    }))

  it.effect("a mark from before the attempt's send is not the attempt's: the backoff runs from the failure", () =>
    Effect.gen(function*() {
      yield* TestClock.adjust("5 seconds")
      // marked 2 s before the send that failed (a failure kept from elsewhere)
      const { open, openedAt } = markedFailure((at) => at - 2_000_000_000n)
      const fiber = yield* Effect.fork(Recovery.runOpen(open).pipe(Effect.provide(backoff)))
      yield* TestClock.adjust("1399 millis")
      assert.strictEqual(openedAt.length, 1, "the replay was sent before 1 s from the failure")
      yield* TestClock.adjust("1 millis")
      const reply = yield* Fiber.join(fiber)
      assert.strictEqual(reply.text, "whole")
      assert.deepStrictEqual(openedAt, [5000, 6400])
    }))

  it.effect("a stream built on one is read as that stream", () =>
    Effect.gen(function*() {
      const viaPull = pulled([{ chunks: [[Generation.TextDelta({ text: "quiet" }), finish]] }])
      const loud = Stream.map(
        viaPull.stream,
        (event) => event._tag === "TextDelta" ? Generation.TextDelta({ text: event.text.toUpperCase() }) : event
      )
      const reply = yield* Recovery.run(loud)
      assert.strictEqual(reply.text, "QUIET")
    }))

  it.effect("an end without the terminal is a failure, as from the stream", () =>
    Effect.gen(function*() {
      const viaPull = pulled([{ chunks: [[Generation.TextDelta({ text: "cut" })]] }])
      const exit = yield* Effect.exit(Recovery.disabled(Recovery.runOpen(viaPull.open)))
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) ? Option.getOrUndefined(Cause.failureOption(exit.cause)) : undefined
      assert.isTrue(TransportError.isTransportError(error) && error.reason === "PrematureEof")
      assert.strictEqual(viaPull.opened(), 1)
    }))
})
