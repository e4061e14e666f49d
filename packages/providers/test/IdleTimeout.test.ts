/**
 * The idle timeout of the body pipeline (`internal/sse.ts`, `idleTimeout`): a reader fiber and a watchdog on the
 * Clock in place of a race per read. Driven by TestClock over a source the test feeds by hand: only the time the
 * consumer waits counts, a slow consumer is never timed out, an empty chunk does not reset the timer, nothing is read
 * ahead of the consumer, and a chunk read for a pull that was interrupted goes to the next pull. In the body pipeline
 * (`run`), a timeout closes the body before the consumer gets the events of the machine's end.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Generation from "@reprise/core/Generation"
import { Chunk, Duration, Effect, Either, Exit, Fiber, Option, Queue, Redacted, Stream, TestClock } from "effect"
import * as Settings from "../src/internal/settings.js"
import { idleTimeout, type Machine, prematureEof, run } from "../src/internal/sse.js"

/** A source stream fed by hand, one chunk per offer; it counts how many chunks were pulled from it. */
const source = Effect.gen(function*() {
  const queue = yield* Queue.unbounded<Chunk.Chunk<number>>()
  let pulled = 0
  const stream = Stream.repeatEffectChunk(Effect.map(Queue.take(queue), (chunk) => {
    pulled++
    return chunk
  }))
  return {
    stream,
    feed: (...values: Array<number>) => Queue.offer(queue, Chunk.fromIterable(values)),
    pulled: () => pulled
  }
})

const yieldAll = Effect.repeatN(Effect.yieldNow(), 20)

/** The reason of the error a pull failed with (`Some(error)`: a pull fails with `None` at the end). */
const reasonOf = (exit: Exit.Exit<unknown, Option.Option<{ readonly reason: string }>>) =>
  Exit.isFailure(exit) && exit.cause._tag === "Fail" && Option.isSome(exit.cause.error)
    ? exit.cause.error.value.reason
    : undefined

describe("idleTimeout", () => {
  it.scoped("fails a wait that reaches the timeout, and no earlier", () =>
    Effect.gen(function*() {
      const { feed, stream } = yield* source
      const pull = yield* Stream.toPull(idleTimeout(stream, Duration.seconds(120)))
      yield* feed(1)
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [1])
      const waiting = yield* Effect.fork(Effect.exit(pull))
      yield* yieldAll
      yield* TestClock.adjust("119 seconds")
      assert.isTrue(Option.isNone(yield* Fiber.poll(waiting)))
      yield* TestClock.adjust("1 second")
      assert.strictEqual(reasonOf(yield* Fiber.join(waiting)), "Timeout")
    }))

  it.scoped("does not count the time the consumer spends between pulls", () =>
    Effect.gen(function*() {
      const { feed, stream } = yield* source
      const pull = yield* Stream.toPull(idleTimeout(stream, Duration.seconds(120)))
      yield* feed(1)
      yield* pull
      // a slow consumer: 300 s before it asks again, the data already there
      yield* TestClock.adjust("300 seconds")
      yield* feed(2)
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [2])
      // and its next wait is timed from when it asked
      const waiting = yield* Effect.fork(Effect.exit(pull))
      yield* yieldAll
      yield* TestClock.adjust("119 seconds")
      assert.isTrue(Option.isNone(yield* Fiber.poll(waiting)))
      yield* feed(3)
      const exit = yield* Fiber.join(waiting)
      assert.isTrue(Exit.isSuccess(exit) && Chunk.toReadonlyArray(exit.value)[0] === 3)
    }))

  it.scoped("times a wait from when the consumer asks, not from the last chunk", () =>
    Effect.gen(function*() {
      const { feed, stream } = yield* source
      const pull = yield* Stream.toPull(idleTimeout(stream, Duration.seconds(120)))
      yield* feed(1)
      yield* pull
      // the consumer is busy for 100 s, then waits 30 s: 130 s since the chunk, 30 s of waiting
      yield* TestClock.adjust("100 seconds")
      const waiting = yield* Effect.fork(Effect.exit(pull))
      yield* yieldAll
      yield* TestClock.adjust("30 seconds")
      yield* yieldAll
      assert.isTrue(Option.isNone(yield* Fiber.poll(waiting)), "timed out 30 s into a wait")
      yield* TestClock.adjust("90 seconds")
      assert.strictEqual(reasonOf(yield* Fiber.join(waiting)), "Timeout")
    }))

  it.scoped("an empty chunk is not progress", () =>
    Effect.gen(function*() {
      const { feed, stream } = yield* source
      const pull = yield* Stream.toPull(idleTimeout(stream, Duration.seconds(120)))
      const waiting = yield* Effect.fork(Effect.exit(pull))
      yield* yieldAll
      yield* TestClock.adjust("60 seconds")
      yield* feed()
      yield* yieldAll
      yield* TestClock.adjust("60 seconds")
      assert.strictEqual(reasonOf(yield* Fiber.join(waiting)), "Timeout")
    }))

  it.scoped("reads nothing ahead of the consumer, and keeps a chunk read for an interrupted pull", () =>
    Effect.gen(function*() {
      const { feed, pulled, stream } = yield* source
      const pull = yield* Stream.toPull(idleTimeout(stream, Duration.seconds(120)))
      yield* feed(1)
      yield* feed(2)
      yield* yieldAll
      assert.strictEqual(pulled(), 0, "nothing read before the first pull")
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [1])
      yield* yieldAll
      assert.strictEqual(pulled(), 1, "the second chunk waits for the second pull")
      // a pull interrupted while the reader waits for the source
      yield* Effect.exit(pull) // 2
      const interrupted = yield* Effect.fork(pull)
      yield* yieldAll
      yield* Fiber.interrupt(interrupted)
      yield* feed(3)
      yield* yieldAll
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [3])
    }))

  it.scoped("a chunk read for an interrupted pull goes to the next pull even when the reader reads on at once", () =>
    Effect.gen(function*() {
      const { feed, stream } = yield* source
      const pull = yield* Stream.toPull(idleTimeout(stream, Duration.seconds(120)))
      // a pull interrupted while the reader waits for the source, then a pull asking while that read is in progress
      const interrupted = yield* Effect.fork(pull)
      yield* yieldAll
      yield* Fiber.interrupt(interrupted)
      const next = yield* Effect.fork(pull)
      yield* yieldAll
      // the read in progress gets 1 and hands it to the waiting pull; the second ask reads 2 at once
      yield* feed(1)
      yield* feed(2)
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* Fiber.join(next)), [1])
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [2])
    }))

  it.scoped("two pulls interrupted while one read is in progress: one read, which the next pull gets", () =>
    Effect.gen(function*() {
      const { feed, pulled, stream } = yield* source
      const pull = yield* Stream.toPull(idleTimeout(stream, Duration.seconds(120)))
      // the first pull asks and is interrupted while the reader waits for the source; so is the second
      for (let i = 0; i < 2; i++) {
        const interrupted = yield* Effect.fork(pull)
        yield* yieldAll
        yield* Fiber.interrupt(interrupted)
      }
      yield* feed(1)
      yield* feed(2)
      yield* yieldAll
      assert.strictEqual(pulled(), 1, "the second interrupted pull asked for a second read")
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [1])
      assert.deepStrictEqual(Chunk.toReadonlyArray(yield* pull), [2])
    }))

  it.scoped("in the body pipeline, a timeout closes the body before the consumer gets what the machine's end gives", () =>
    Effect.gen(function*() {
      const order: Array<string> = []
      const { feed, stream } = yield* source
      const body = stream.pipe(
        Stream.map((n) => new TextEncoder().encode(`data: ${n}\n\n`)),
        Stream.ensuring(Effect.sync(() => order.push("body closed")))
      )
      // a machine whose terminal is event 2 and that reads on after it (as Chat Completions reads on to [DONE])
      let terminal = false
      const machine: Machine<string> = {
        step: (data, out) => {
          if (data === "2") terminal = true
          out.push(Generation.TextDelta({ text: data }))
          return undefined
        },
        done: () => false,
        end: (failure) =>
          terminal
            ? Effect.succeed([Generation.Finish({ reason: "stop", providerReason: "stop" })])
            : Effect.fail(Option.getOrElse(failure, () => prematureEof("test")))
      }
      const settings = Settings.settings("openai-chat", {
        apiKey: Redacted.make("sk-test"),
        idleTimeout: Duration.seconds(120)
      })
      const events = run({ body: Stream.toPull(body), settings, decode: (event) => event.data, machine })
      const consumer = yield* Effect.fork(Stream.runForEach(events, (event) =>
        Effect.sync(() => {
          order.push(event._tag)
        })))
      yield* feed(1)
      yield* feed(2)
      yield* yieldAll
      yield* TestClock.adjust("120 seconds")
      yield* Fiber.join(consumer)
      assert.deepStrictEqual(order, ["TextDelta", "TextDelta", "body closed", "Finish"])
    }))
})
