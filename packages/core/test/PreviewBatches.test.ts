/**
 * A listener that takes previews in batches (`RecoveryNotifications.Service.previews`) is told exactly what a listener
 * of one `Preview` per event is told: over random attempts (replayed after a reset, or ended by the terminal), cut
 * into random chunks, with and without an early break on a tool call, with and without a chunk hook (that may fail),
 * the two listeners see the same notifications, the same preview events in the same order with the same attempts, and
 * the reply or the failure is the same. Without a hook, each batch is the surfaced events of one chunk (one call per
 * chunk that surfaces anything); with one, each surfaced event is a batch of its own.
 */
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Effect, Exit, FastCheck as fc, Fiber, Layer, Option, Ref, Stream, TestClock } from "effect"
import * as Generation from "../src/Generation.js"
import * as Policy from "../src/Policy.js"
import * as Recovery from "../src/Recovery.js"
import * as RecoveryNotifications from "../src/RecoveryNotifications.js"
import * as TransportError from "../src/TransportError.js"

/** An event to build afresh for every send, so that each send's events are objects of their own. */
type Spec =
  | { readonly kind: "text" | "reasoning"; readonly text: string }
  | { readonly kind: "toolDelta" | "toolComplete"; readonly index: number }
  | { readonly kind: "usage"; readonly n: number }

const spec: fc.Arbitrary<Spec> = fc.oneof(
  { weight: 6, arbitrary: fc.string({ maxLength: 5 }).map((text) => ({ kind: "text", text } as const)) },
  { weight: 2, arbitrary: fc.string({ maxLength: 5 }).map((text) => ({ kind: "reasoning", text } as const)) },
  { weight: 1, arbitrary: fc.nat(2).map((index) => ({ kind: "toolDelta", index } as const)) },
  { weight: 1, arbitrary: fc.nat(2).map((index) => ({ kind: "toolComplete", index } as const)) },
  { weight: 1, arbitrary: fc.nat(50).map((n) => ({ kind: "usage", n } as const)) }
)

const build = (s: Spec): Generation.GenerationEvent => {
  switch (s.kind) {
    case "text":
      return Generation.TextDelta({ text: s.text })
    case "reasoning":
      return Generation.ReasoningDelta({ text: s.text })
    case "toolDelta":
      return Generation.ToolCallDelta({ index: s.index, id: `call_${s.index}`, name: "f", argumentsDelta: "{}" })
    case "toolComplete":
      return Generation.ToolCallComplete({ call: { id: `call_${s.index}`, name: "f", arguments: {} } })
    case "usage":
      return Generation.UsageEvent({ usage: { inputTokens: s.n, outputTokens: s.n + 1 } })
  }
}

/** One send: its events, then the terminal or a reset. */
interface Send {
  readonly events: ReadonlyArray<Spec>
  readonly ends: "finish" | "reset"
}

const send: fc.Arbitrary<Send> = fc.record({
  events: fc.array(spec, { maxLength: 12 }),
  ends: fc.constantFrom("finish" as const, "reset" as const)
})

/** `events` cut into chunks of the sizes in `sizes`, taken in turn. */
const cut = <A>(events: ReadonlyArray<A>, sizes: ReadonlyArray<number>): Array<Array<A>> => {
  const chunks: Array<Array<A>> = []
  for (let i = 0, k = 0; i < events.length; k++) {
    const size = sizes[k % sizes.length]!
    chunks.push(events.slice(i, i + size))
    i += size
  }
  return chunks
}

interface Script {
  readonly sends: ReadonlyArray<Send>
  readonly sizes: ReadonlyArray<number>
  readonly earlyBreakOnToolCall: boolean
  /** No hook; a hook that succeeds; or one that fails on its call of this number (from 1). */
  readonly hook: "none" | "ok" | number
}

const runScript = (script: Script, batched: boolean) =>
  Effect.gen(function*() {
    const told = yield* Ref.make<Array<RecoveryNotifications.Notification>>([])
    const batches = yield* Ref.make<Array<{ attempt: number; events: ReadonlyArray<Generation.GenerationEvent> }>>([])
    // the chunks each send yielded (send k is attempt k + 1), to find each batch's chunk by its events' identity
    const chunksOf: Array<Array<Array<Generation.GenerationEvent>>> = []
    const generation = Stream.unwrap(Effect.sync(() => {
      const n = chunksOf.length
      const s = script.sends[Math.min(n, script.sends.length - 1)]!
      const events = s.events.map(build)
      if (s.ends === "finish") events.push(Generation.Finish({ reason: "stop", providerReason: "stop" }))
      const chunks = cut(events, script.sizes)
      chunksOf.push(chunks)
      const body = Stream.fromChunks(...chunks.map((c) => Chunk.fromIterable(c)))
      return s.ends === "finish"
        ? body
        : Stream.concat(body, Stream.fail(new TransportError.TransportError({ reason: "Reset" })))
    }))
    let hookCalls = 0
    const hook = script.hook
    const options: Recovery.Options = {
      earlyBreakOnToolCall: script.earlyBreakOnToolCall,
      ...(hook === "none" ? {} : {
        hooks: {
          onChunk: () => Effect.suspend(() => ++hookCalls === hook ? Effect.fail("unplugged") : Effect.void)
        }
      })
    }
    const notify = (n: RecoveryNotifications.Notification) => Ref.update(told, (all) => [...all, n])
    const service: RecoveryNotifications.Service = batched
      ? {
        notify,
        previews: (attempt, events) =>
          Effect.zipRight(
            Ref.update(batches, (all) => [...all, { attempt, events }]),
            Ref.update(told, (all) => [
              ...all,
              ...events.map((event) => RecoveryNotifications.Notification.Preview({ attempt, event }))
            ])
          )
      }
      : { notify }
    const fiber = yield* Effect.fork(
      Recovery.run(generation, options).pipe(
        Effect.provide(Layer.succeed(RecoveryNotifications.RecoveryNotifications, service)),
        Effect.provide(Policy.layer({ jitter: false }))
      )
    )
    for (let i = 0; i < 30 && Option.isNone(yield* fiber.poll); i++) yield* TestClock.adjust("10 minutes")
    const exit = yield* Fiber.await(fiber)
    return { exit, told: yield* Ref.get(told), batches: yield* Ref.get(batches), chunksOf }
  })

// as JSON: chai's deep equality takes Option.none() for Option.some(x), JSON tells them apart
const json = (value: unknown) => JSON.parse(JSON.stringify(value))

describe("previews in batches", () => {
  it.effect.prop(
    "tell what a Preview per event tells, a chunk at a time",
    {
      sends: fc.array(send, { minLength: 1, maxLength: 4 }),
      sizes: fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 4 }),
      earlyBreakOnToolCall: fc.boolean(),
      hook: fc.oneof(fc.constantFrom("none" as const, "ok" as const), fc.integer({ min: 1, max: 8 }))
    },
    (script) =>
      Effect.gen(function*() {
        const each = yield* runScript(script, false)
        const batched = yield* runScript(script, true)

        assert.deepStrictEqual(json(batched.exit), json(each.exit))
        assert.deepStrictEqual(json(batched.told), json(each.told))
        // the batched listener's notify never sees a Preview
        assert.isTrue(each.batches.length === 0)

        const used = new Set<string>()
        for (const { attempt, events } of batched.batches) {
          assert.isAbove(events.length, 0)
          if (script.hook !== "none") {
            assert.strictEqual(events.length, 1)
            continue
          }
          // one chunk per batch, one batch per chunk
          const chunks = batched.chunksOf[attempt - 1]!
          const at = chunks.findIndex((chunk) => chunk.includes(events[0]!))
          assert.isAtLeast(at, 0)
          for (const event of events) assert.include(chunks[at]!, event)
          const key = `${attempt}/${at}`
          assert.isFalse(used.has(key))
          used.add(key)
        }
      }),
    { fastCheck: { numRuns: 300 } }
  )

  it.effect("a listener without previews gets a Preview per event through notify", () =>
    Effect.gen(function*() {
      const script: Script = {
        sends: [{ events: [{ kind: "text", text: "a" }, { kind: "text", text: "b" }], ends: "finish" }],
        sizes: [3],
        earlyBreakOnToolCall: false,
        hook: "none"
      }
      const each = yield* runScript(script, false)
      const batched = yield* runScript(script, true)
      assert.deepStrictEqual(each.told.map((n) => n._tag), [
        "AttemptStarted",
        "Preview",
        "Preview",
        "Preview",
        "Committed"
      ])
      assert.deepStrictEqual(batched.batches.map((b) => b.events.length), [3])
      assert.deepStrictEqual(batched.batches.map((b) => b.attempt), [1])
    }))
})
