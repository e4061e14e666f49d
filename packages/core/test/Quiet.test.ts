/**
 * With nobody listening and no chunk hook, `Recovery.run` records each chunk of the stream in one step instead of
 * surfacing its events one by one (no effect, no `Preview` per event). The reply must not depend on it: over random
 * streams cut into random chunks, with and without an early break on a tool call, the reply of a quiet run equals the
 * reply of a run whose listener sees every event, and that listener saw the events the reply is made of.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, FastCheck as fc, Stream } from "effect"
import * as Generation from "../src/Generation.js"
import * as Recovery from "../src/Recovery.js"
import * as RecoveryNotifications from "../src/RecoveryNotifications.js"

const event: fc.Arbitrary<Generation.GenerationEvent> = fc.oneof(
  { weight: 6, arbitrary: fc.string({ maxLength: 6 }).map((text) => Generation.TextDelta({ text })) },
  { weight: 2, arbitrary: fc.string({ maxLength: 6 }).map((text) => Generation.ReasoningDelta({ text })) },
  {
    weight: 1,
    arbitrary: fc.nat(3).map((index) =>
      Generation.ToolCallDelta({ index, id: `call_${index}`, name: "f", argumentsDelta: "{" })
    )
  },
  {
    weight: 1,
    arbitrary: fc.nat(3).map((i) =>
      Generation.ToolCallComplete({ call: { id: `call_${i}`, name: "f", arguments: {} } })
    )
  },
  {
    weight: 1,
    arbitrary: fc.nat(100).map((n) => Generation.UsageEvent({ usage: { inputTokens: n, outputTokens: n + 1 } }))
  }
)

const finish = Generation.Finish({ reason: "stop", providerReason: "stop" })

describe("Recovery without a listener", () => {
  it("commits the same reply as with one, however the stream is chunked", async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(event, { maxLength: 40 }),
        fc.integer({ min: 1, max: 8 }),
        fc.boolean(),
        async (events, chunkSize, earlyBreakOnToolCall) => {
          const stream = Stream.fromIterable([...events, finish]).pipe(Stream.rechunk(chunkSize))
          const seen: Array<Generation.GenerationEvent> = []
          const quiet = await Effect.runPromise(Recovery.run(stream, { earlyBreakOnToolCall }))
          const heard = await Effect.runPromise(
            Recovery.run(stream, { earlyBreakOnToolCall }).pipe(
              Effect.provide(RecoveryNotifications.layerCallback((n) =>
                Effect.sync(() => {
                  if (n._tag === "Preview") seen.push(n.event)
                })
              ))
            )
          )
          // as JSON: chai's deep equality takes Option.none() for Option.some(x), JSON tells them apart
          assert.deepStrictEqual(JSON.parse(JSON.stringify(quiet)), JSON.parse(JSON.stringify(heard)))
          const shown = seen.filter((e) => e._tag === "TextDelta").map((e) => e.text).join("")
          assert.strictEqual(heard.text, shown)
        }
      ),
      { numRuns: 300 }
    )
  })

  it("the default service is the silent one; a listener's is not", () => {
    assert.isTrue(RecoveryNotifications.isSilent(RecoveryNotifications.RecoveryNotifications.defaultValue()))
    assert.isFalse(RecoveryNotifications.isSilent({ notify: () => Effect.void }))
  })
})
