import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Layer, Option, Ref, Stream } from "effect"
import * as Budget from "../src/Budget.js"
import * as Generation from "../src/Generation.js"
import * as Message from "../src/Message.js"
import * as Overflow from "../src/Overflow.js"
import * as Provider from "../src/Provider.js"
import * as ProviderFailure from "../src/ProviderFailure.js"
import * as Recovery from "../src/Recovery.js"

const overflow = ProviderFailure.fromHttpStatus({
  status: 400,
  type: "invalid_request_error",
  code: "context_length_exceeded"
})

/** A provider that rejects any request over `limit` characters and records every view it was sent. */
const limitedProvider = (limit: number) =>
  Effect.map(Ref.make<Array<ReadonlyArray<Message.Message>>>([]), (seen) => ({
    seen: Ref.get(seen),
    layer: Layer.succeed(
      Provider.Provider,
      Provider.makeFromStream({
        protocol: "test",
        stream: (request) =>
          Stream.unwrap(Effect.gen(function*() {
            yield* Budget.reserve
            yield* Ref.update(seen, (all) => [...all, request.messages])
            return Overflow.size(request.messages) > limit
              ? Stream.fail(overflow)
              : Stream.make(
                Generation.TextDelta({ text: `fit ${request.messages.length}` }),
                Generation.Finish({ reason: "stop", providerReason: "stop" })
              )
          }))
      })
    )
  }))

const conversation: ReadonlyArray<Message.Message> = [
  Message.system("be brief"),
  Message.user("first question ".repeat(10)),
  Message.assistant("first answer ".repeat(10), [{ id: "t1", name: "now", arguments: {} }]),
  Message.toolResult({ toolCallId: "t1", name: "now", content: "x".repeat(5_000) }),
  Message.user("second question ".repeat(10)),
  Message.assistant("second answer ".repeat(10)),
  Message.user("the question now")
]

describe("Overflow", () => {
  it("the default strategy shortens large tool results first, then drops the oldest turns", () => {
    const first = Option.getOrThrow(Overflow.defaultStrategy.shrink(conversation))
    assert.strictEqual(first.length, conversation.length)
    const tool = first[3]
    assert.isTrue(
      tool.role === "tool" && tool.content.length <= 2_000 && /\[30\d\d characters omitted\]$/.test(tool.content)
    )
    const second = Option.getOrThrow(Overflow.defaultStrategy.shrink(first))
    assert.deepStrictEqual(second.map((m) => m.role), ["system", "user", "assistant", "user"])
    const third = Option.getOrThrow(Overflow.defaultStrategy.shrink(second))
    assert.deepStrictEqual(third, [Message.system("be brief"), Message.user("the question now")])
    assert.isTrue(Option.isNone(Overflow.defaultStrategy.shrink(third)), "the system prompt and last turn stay")
  })

  it.effect("retries with smaller views until the input fits, inside one budget", () =>
    Effect.gen(function*() {
      const provider = yield* limitedProvider(800)
      const [reply, used] = yield* Budget.scoped(Effect.gen(function*() {
        const reply = yield* Overflow.generate({ model: "m", messages: conversation })
        return [reply, yield* Effect.flatMap(Budget.Budget, (b) => b.used)] as const
      })).pipe(Effect.provide(provider.layer))
      const seen = yield* provider.seen
      assert.deepStrictEqual(seen.map((v) => v.length), [7, 7, 4])
      assert.strictEqual(reply.text, "fit 4")
      assert.strictEqual(used, 3, "each overflow retry is a physical send of the same scope")
      for (let i = 1; i < seen.length; i++) assert.isBelow(Overflow.size(seen[i]), Overflow.size(seen[i - 1]))
    }))

  it.effect("stops when the scope's attempts are used up", () =>
    Effect.gen(function*() {
      const provider = yield* limitedProvider(10)
      const error = yield* Effect.flip(
        Overflow.generate({ model: "m", messages: conversation }).pipe(
          Effect.provide(Layer.merge(provider.layer, Budget.layer({ maxAttempts: 2, deadline: Duration.seconds(60) })))
        )
      )
      assert.strictEqual(error._tag, "RecoveryExhausted")
      assert.strictEqual((yield* provider.seen).length, 2)
    }))

  it.effect("gives up with the overflow error when nothing smaller exists", () =>
    Effect.gen(function*() {
      const provider = yield* limitedProvider(0)
      const error = yield* Effect.flip(
        Overflow.generate({ model: "m", messages: conversation }).pipe(Effect.provide(provider.layer))
      )
      assert.strictEqual(error._tag === "ProviderRejection" && error.reason, "ContextOverflow")
      assert.strictEqual((yield* provider.seen).length, 4)
    }))

  it.effect("never retries a view that does not shrink", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make(0)
      const error = yield* Effect.flip(
        Overflow.run(conversation, () => Effect.zipRight(Ref.update(calls, (n) => n + 1), Effect.fail(overflow))).pipe(
          Effect.provide(Overflow.layer({ shrink: (messages) => Option.some([...messages]) }))
        )
      )
      assert.strictEqual(error, overflow)
      assert.strictEqual(yield* Ref.get(calls), 1)
    }))

  it.effect("never retries after visible output was emitted", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make(0)
      const late = ProviderFailure.fromInBandError({ code: "context_length_exceeded" })
      const withOutput = Object.assign(Object.create(Object.getPrototypeOf(late)), late, { partialOutputChars: 12 })
      const error = yield* Effect.flip(
        Overflow.run(conversation, () => Effect.zipRight(Ref.update(calls, (n) => n + 1), Effect.fail(withOutput)))
      )
      assert.strictEqual(error, withOutput)
      assert.strictEqual(yield* Ref.get(calls), 1)
    }))

  it.effect("inside Recovery.disabled the overflow surfaces after one send", () =>
    Effect.gen(function*() {
      const provider = yield* limitedProvider(800)
      const error = yield* Effect.flip(
        Recovery.disabled(Overflow.generate({ model: "m", messages: conversation })).pipe(
          Effect.provide(provider.layer)
        )
      )
      assert.strictEqual(error._tag === "ProviderRejection" && error.reason, "ContextOverflow")
      assert.strictEqual((yield* provider.seen).length, 1)
    }))

  it.effect("other errors pass through untouched", () =>
    Effect.gen(function*() {
      const calls = yield* Ref.make(0)
      const auth = ProviderFailure.fromHttpStatus({ status: 401 })
      const error = yield* Effect.flip(
        Overflow.run(conversation, () => Effect.zipRight(Ref.update(calls, (n) => n + 1), Effect.fail(auth)))
      )
      assert.strictEqual(error, auth)
      assert.strictEqual(yield* Ref.get(calls), 1)
    }))
})
