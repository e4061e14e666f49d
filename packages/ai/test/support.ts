/**
 * Support for the @effect/ai suites: a `RecoveringLanguageModel` over the real undici provider of each protocol,
 * pointed at the loopback simulator; a notification recorder; and the TestClock helpers (wait for a fiber to park on
 * its test-clock sleep, then move the clock).
 */
import * as Tool from "@effect/ai/Tool"
import * as Toolkit from "@effect/ai/Toolkit"
import { assert } from "@effect/vitest"
import * as Policy from "@reprise/core/Policy"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as ProviderOptions from "@reprise/providers/ProviderOptions"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import {
  Cause,
  Chunk,
  Duration,
  Effect,
  Exit,
  Layer,
  Option,
  Redacted,
  Ref,
  Schema,
  TestClock,
  TestContext
} from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import * as RecoveringLanguageModel from "../src/RecoveringLanguageModel.js"

export const KEY = "sk-ai-SECRET-7f3e1a9b5c2d"

export const protocols: ReadonlyArray<ProviderOptions.Protocol> = ProviderOptions.protocols

/** One simulator for a whole file; each test replaces the script (which also clears the counts). */
export const simulator = Simulator.layer()

/** Runs a test with its own TestClock (the simulator layer is shared by the file, its test services are not). */
export const fresh = <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.provide(self, TestContext.TestContext)

/** 1 s, 2 s, 4 s … without jitter, so that a test knows each wait exactly. */
export const exactBackoff = Policy.layer({ jitter: false })

/** The model layer of `protocol` against the simulator: the one Layer an app swaps in. */
export const model = (
  protocol: ProviderOptions.Protocol,
  options: Partial<RecoveringLanguageModel.Options> = {}
) =>
  Layer.unwrapEffect(
    Effect.map(Simulator.Simulator, (sim) =>
      RecoveringLanguageModel.layer({ model: "sim-model", maxTokens: 256, ...options }).pipe(
        Layer.provide(
          HttpProvider.layerUndici(protocol, { apiKey: Redacted.make(KEY), baseUrl: sim.baseUrl(protocol) })
        )
      ))
  )

/** Replaces the simulator's script with one route's. */
export const script = (protocol: ProviderOptions.Protocol, route: SimulatorScript.RouteScript) =>
  Effect.flatMap(Simulator.Simulator, (sim) => sim.setScript({ routes: { [protocol]: route } }))

/**
 * A reply whose fourth word is 6000 characters long: a cut at {@link midEvent} bytes lands inside the event carrying
 * it, after the text {@link beforeCut} (three deltas) was streamed.
 */
export const longReply = (ending: string) => ({ text: `one two three ${"Z".repeat(6000)} ${ending}` })
export const midEvent = 4000
export const beforeCut = "one two three"

/** A cut stream: the reply up to the middle of an event, then a reset. */
export const cut: SimulatorScript.Step = { kind: "reset", afterBytes: midEvent, reply: longReply("lost") }

/** Every notification, in order, and the layer that records them. */
export const recorder = Effect.map(Ref.make<Array<RecoveryNotifications.Notification>>([]), (ref) => ({
  notes: Ref.get(ref),
  layer: RecoveryNotifications.layerCallback((n) => Ref.update(ref, (all) => [...all, n]))
}))

/** The sequence of notification kinds, previews left out. */
export const outline = (notes: ReadonlyArray<RecoveryNotifications.Notification>): Array<string> =>
  notes.filter((n) => n._tag !== "Preview").map((n) => n._tag)

/** Lets promise callbacks and socket events run, without any clock. */
export const settle = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve))).pipe(
  Effect.repeatN(3)
)

/** Under TestClock: waits (without time passing) until some fiber sleeps until `end` (test-clock milliseconds). */
export const awaitSleepUntil = (end: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 2000; i++) {
      if (Chunk.some(yield* TestClock.sleeps(), (at) => at === end)) return
      yield* settle
    }
    assert.fail(`no fiber ever slept until ${end} ms on the test clock`)
  })

/** Waits for a sleep that ends between `from` and `to` ms (a jittered backoff), then moves the test clock to `to`. */
export const passSleepWithin = (from: number, to: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 2000; i++) {
      if (Chunk.some(yield* TestClock.sleeps(), (at) => at >= from && at <= to)) {
        const now = yield* TestClock.currentTimeMillis
        return yield* TestClock.adjust(Duration.millis(to - now))
      }
      yield* settle
    }
    assert.fail(`no fiber ever slept until ${from}–${to} ms on the test clock`)
  })

/** Waits for the recovery loop's sleep until `end` ms, then moves the test clock there. */
export const passBackoffUntil = (end: number) =>
  Effect.gen(function*() {
    yield* awaitSleepUntil(end)
    const now = yield* TestClock.currentTimeMillis
    yield* TestClock.adjust(Duration.millis(end - now))
  })

/** The typed failure of an exit (not a defect or an interruption). */
export const failureOf = <A, E>(exit: Exit.Exit<A, E>): E => {
  if (Exit.isSuccess(exit)) return assert.fail("expected a failure, got a success")
  const error = Cause.failureOption(exit.cause)
  if (Option.isNone(error)) return assert.fail(`expected a typed failure, got ${Cause.pretty(exit.cause)}`)
  return error.value
}

/** A tool with an observable effect: every run is recorded, so running twice (or from a preview) shows. */
export const Record = Tool.make("record", {
  description: "Records one line",
  parameters: { line: Schema.String },
  success: Schema.String
})

export const Tools = Toolkit.make(Record)

/** The toolkit's handlers over a log of the lines recorded, in order. */
export const tools = Effect.map(Ref.make<Array<string>>([]), (runs) => ({
  runs: Ref.get(runs),
  layer: Tools.toLayer({
    record: ({ line }) => Effect.as(Ref.update(runs, (all) => [...all, line]), `recorded ${line}`)
  })
}))

/** A 200 text/event-stream response whose body is `body`, byte for byte. */
export const sseBody = (body: string): SimulatorScript.Step => ({
  kind: "status",
  status: 200,
  headers: { "content-type": "text/event-stream; charset=utf-8" },
  body
})

const fixturesDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../fixtures")

/** The recorded text reply of `protocol` (fixtures/<protocol>/text.sse) with a reasoning event before its text. */
export const withReasoning = (protocol: ProviderOptions.Protocol, reasoning: string): string => {
  const body = fs.readFileSync(path.join(fixturesDir, protocol, "text.sse"), "utf8")
  const blocks = body.split("\n\n")
  const isText = (block: string) =>
    protocol === "anthropic"
      ? block.startsWith("event: content_block_delta")
      : protocol === "openai-chat"
      ? /"delta":\{"content":"[^"]/.test(block)
      : block.startsWith("event: response.output_text.delta")
  const event = protocol === "anthropic"
    ? `event: content_block_delta\ndata: ${
      JSON.stringify({ type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: reasoning } })
    }`
    : protocol === "openai-chat"
    ? `data: ${
      JSON.stringify({ choices: [{ index: 0, delta: { reasoning_content: reasoning }, finish_reason: null }] })
    }`
    : `event: response.reasoning_summary_text.delta\ndata: ${
      JSON.stringify({
        type: "response.reasoning_summary_text.delta",
        item_id: "rs_1",
        output_index: 0,
        summary_index: 0,
        delta: reasoning
      })
    }`
  const at = blocks.findIndex(isText)
  if (at < 0) throw new Error(`no text event in fixtures/${protocol}/text.sse`)
  return [...blocks.slice(0, at), event, ...blocks.slice(at)].join("\n\n")
}
