import { assert, describe, it } from "@effect/vitest"
import { Chunk, Duration, Effect, Fiber, PubSub, Queue, Stream, TestClock } from "effect"
import * as Recovery from "../src/Recovery.js"
import * as RecoveryNotifications from "../src/RecoveryNotifications.js"
import { reset, scripted } from "./utils/scripted.js"

describe("RecoveryNotifications", () => {
  it.effect("a Queue receives the notifications in order", () =>
    Effect.gen(function*() {
      const queue = yield* Queue.unbounded<RecoveryNotifications.Notification>()
      const { generation } = yield* scripted([{ text: ["a"], end: "finish" }])
      yield* Recovery.run(generation).pipe(Effect.provide(RecoveryNotifications.layerQueue(queue)))
      const tags = Chunk.toArray(yield* Queue.takeAll(queue)).map((n) => n._tag)
      assert.deepStrictEqual(tags, ["AttemptStarted", "Preview", "Preview", "Committed"])
    }))

  it.scoped("a PubSub fans them out to every subscriber", () =>
    Effect.gen(function*() {
      const pubsub = yield* PubSub.unbounded<RecoveryNotifications.Notification>()
      const one = yield* PubSub.subscribe(pubsub)
      const two = yield* PubSub.subscribe(pubsub)
      const { generation } = yield* scripted([{ text: ["a"], end: "finish" }])
      yield* Recovery.run(generation).pipe(Effect.provide(RecoveryNotifications.layerPubSub(pubsub)))
      assert.strictEqual((yield* Queue.takeAll(one)).length, 4)
      assert.strictEqual((yield* Queue.takeAll(two)).length, 4)
    }))

  it.effect("Recovery.stream emits the notifications and ends after the commit", () =>
    Effect.gen(function*() {
      const { generation } = yield* scripted([{ text: ["x"], end: reset }, { text: ["y"], end: "finish" }])
      const fiber = yield* Effect.fork(Stream.runCollect(Recovery.stream(generation)))
      yield* TestClock.adjust(Duration.seconds(1))
      const tags = Chunk.toArray(yield* Fiber.join(fiber)).map((n) => n._tag)
      assert.deepStrictEqual(tags, [
        "AttemptStarted",
        "Preview",
        "AttemptDiscarded",
        "RetryScheduled",
        "AttemptStarted",
        "Preview",
        "Preview",
        "Committed"
      ])
    }))

  it.effect("Recovery.stream fails with the error after its final notification", () =>
    Effect.gen(function*() {
      const { generation } = yield* scripted([{ end: reset }])
      const seen: Array<string> = []
      const error = yield* Recovery.stream(generation).pipe(
        Stream.runForEach((n) => Effect.sync(() => seen.push(n._tag))),
        Recovery.disabled,
        Effect.flip
      )
      assert.strictEqual(error._tag, "TransportError")
      assert.deepStrictEqual(seen, ["AttemptStarted", "AttemptDiscarded", "Failed"])
    }))
})
