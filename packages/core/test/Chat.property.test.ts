/**
 * The tool invariant as a property: for any sequence of provider outcomes, a tool call runs at most once, and only
 * when the reply that asked for it was committed.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, FastCheck as fc, Fiber, Layer, Option, Ref, Schema, Stream, TestClock } from "effect"
import * as Budget from "../src/Budget.js"
import * as Chat from "../src/Chat.js"
import * as Generation from "../src/Generation.js"
import * as Message from "../src/Message.js"
import * as Policy from "../src/Policy.js"
import * as Provider from "../src/Provider.js"
import * as ProviderFailure from "../src/ProviderFailure.js"
import * as Tool from "../src/Tool.js"
import * as TransportError from "../src/TransportError.js"

/** What one physical send does. Every send that carries a tool call carries its own, `call-<n>`. */
type Send =
  | "tool then terminal" // committed: its tool must run, once
  | "text then terminal" // committed: ends the step
  | "tool then reset" // the drain after a complete tool call fails: the call must never run
  | "tool then eof" // the stream ends without its terminal after the call
  | "reset" // fails before anything
  | "401" // permanent: ends the step with an error

const send: fc.Arbitrary<Send> = fc.constantFrom(
  "tool then terminal",
  "text then terminal",
  "tool then reset",
  "tool then eof",
  "reset",
  "401"
)

const streamOf = (
  kind: Send,
  n: number
): Stream.Stream<Generation.GenerationEvent, ProviderFailure.ProviderFailure> => {
  const call = Generation.ToolCallComplete({
    call: { id: `call-${n}`, name: "record", arguments: { value: `call-${n}` } }
  })
  const terminal = (reason: Generation.FinishReason) => Generation.Finish({ reason, providerReason: reason })
  switch (kind) {
    case "tool then terminal":
      return Stream.make(Generation.TextDelta({ text: `send ${n}` }), call, terminal("tool_calls"))
    case "text then terminal":
      return Stream.make(Generation.TextDelta({ text: `send ${n}` }), terminal("stop"))
    case "tool then reset":
      return Stream.concat(Stream.make(call), Stream.fail(new TransportError.TransportError({ reason: "Reset" })))
    case "tool then eof":
      return Stream.make(call)
    case "reset":
      return Stream.fail(new TransportError.TransportError({ reason: "Reset" }))
    case "401":
      return Stream.fail(ProviderFailure.fromHttpStatus({ status: 401 }))
  }
}

describe("Chat.step properties", () => {
  it.effect.prop(
    "a tool runs at most once, and only from a committed reply",
    {
      sends: fc.array(send, { minLength: 0, maxLength: 16 }),
      maxAttempts: fc.integer({ min: 1, max: 5 }),
      earlyBreak: fc.boolean()
    },
    ({ earlyBreak, maxAttempts, sends }) =>
      Effect.gen(function*() {
        const count = yield* Ref.make(0)
        const runs = yield* Ref.make<ReadonlyArray<string>>([])
        const committedCalls: Array<string> = []
        const provider: Provider.Service = Provider.makeFromStream({
          protocol: "property",
          stream: () =>
            Stream.unwrap(Effect.gen(function*() {
              yield* Budget.reserve
              const n = yield* Ref.getAndUpdate(count, (k) => k + 1)
              // Past the script, the model answers without tools and the step ends.
              return streamOf(sends[n] ?? "text then terminal", n)
            }))
        })
        const tool = Tool.make("record", {
          description: "Records the call it was run for.",
          parameters: Schema.Struct({ value: Schema.String }),
          handler: ({ value }) => Effect.as(Ref.update(runs, (all) => [...all, value]), "ok")
        })
        const fiber = yield* Effect.fork(
          Chat.step([Message.user("go")], {
            model: "m",
            maxSteps: 100,
            earlyBreakOnToolCall: earlyBreak,
            onCommit: (commit) =>
              Effect.sync(() => {
                if (commit._tag === "Reply") committedCalls.push(...commit.reply.toolCalls.map((c) => c.id))
              })
          }).pipe(
            Effect.provide(Layer.mergeAll(
              Layer.succeed(Provider.Provider, provider),
              Tool.layer([tool]),
              Budget.layer({ maxAttempts, deadline: Duration.hours(1) }),
              Policy.layer({ jitter: false })
            ))
          )
        )
        for (let i = 0; i < 50 && Option.isNone(yield* fiber.poll); i++) yield* TestClock.adjust(Duration.hours(1))
        yield* Fiber.await(fiber)

        const ran = yield* Ref.get(runs)
        // At most once each.
        assert.strictEqual(new Set(ran).size, ran.length, `a tool ran twice: ${ran.join(", ")}`)
        // Only from committed replies, and every committed call ran, in order.
        assert.deepStrictEqual(ran, committedCalls)
        // Only sends that reached their terminal can have been committed.
        const sent = yield* Ref.get(count)
        for (const id of ran) {
          const n = Number(id.slice("call-".length))
          assert.isBelow(n, sent)
          assert.strictEqual(sends[n], "tool then terminal")
        }
      }),
    { fastCheck: { numRuns: 200 } }
  )
})
