/**
 * Background mode through `@effect/ai`: with `background: true` on the layer, a cut Responses stream is continued as
 * the same response, so `streamText` keeps the parts it has shown (one text part, no discard), even with live
 * previews and no notification consumer, where a replay has to fail the stream. TestClock for the one wait.
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Response from "@effect/ai/Response"
import { assert, describe, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import { Effect, Fiber, Stream } from "effect"
import {
  beforeCut,
  cut,
  exactBackoff,
  fresh,
  longReply,
  model,
  passBackoffUntil,
  script,
  simulator
} from "./support.js"

layer(simulator)("background mode through @effect/ai", (it) => {
  describe("openai-responses", () => {
    it.effect("streamText live, no notifications: a cut stream resumes; its parts go on, nothing discarded", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script("openai-responses", { steps: [cut] })
        const parts: Array<Response.AnyPart> = []
        const fiber = yield* LanguageModel.streamText({ prompt: "hello" }).pipe(
          Stream.runForEach((part) => Effect.sync(() => parts.push(part))),
          Effect.fork
        )
        yield* passBackoffUntil(1000)
        yield* Fiber.join(fiber)
        const text = parts.flatMap((p) => (p.type === "text-delta" ? [p.delta] : [])).join("")
        assert.strictEqual(text, longReply("lost").text)
        assert.isTrue(text.startsWith(beforeCut))
        // one text part from start to end: the resumed attempt's deltas continue the first attempt's part
        assert.deepStrictEqual(parts.filter((p) => p.type === "text-start").map((p) => p.id), ["text-1"])
        const finish = parts.find((p) => p.type === "finish") as any
        assert.strictEqual(finish?.reason, "stop")
        assert.strictEqual(yield* sim.count("openai-responses", "send"), 1)
        assert.strictEqual(yield* sim.count("openai-responses", "resume"), 1)
        const [send] = yield* sim.requestsTo("openai-responses")
        assert.strictEqual((send?.body as any).background, true)
      }).pipe(
        Effect.provide(model("openai-responses", { previews: "live", background: true })),
        Effect.provide(exactBackoff),
        fresh
      ))

    it.effect("generateText: the resumed reply is the whole text, its attempts counted", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        // the cut step's own reply is the one response, whole once resumed
        yield* script("openai-responses", { steps: [cut] })
        const fiber = yield* Effect.fork(LanguageModel.generateText({ prompt: "hello" }))
        yield* passBackoffUntil(1000)
        const response = yield* Fiber.join(fiber)
        assert.strictEqual(response.text, longReply("lost").text)
        assert.strictEqual(yield* sim.count("openai-responses"), 2)
      }).pipe(Effect.provide(model("openai-responses", { background: true })), Effect.provide(exactBackoff), fresh))
  })
})
