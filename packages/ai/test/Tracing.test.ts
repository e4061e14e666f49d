/**
 * The span tree an @effect/ai app sees with the real OpenTelemetry SDK: @effect/ai's own `LanguageModel.generateText`
 * span, reprise's `reprise.reply` under it, and one `reprise.attempt` per physical send under that.
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import { assert, layer } from "@effect/vitest"
import { InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import { Effect, Fiber } from "effect"
import { cut, exactBackoff, fresh, KEY, model, passBackoffUntil, script, simulator } from "./support.js"

layer(simulator, { excludeTestServices: true })("tracing through @effect/ai", (it) => {
  it.effect("generateText → reprise.reply → reprise.attempt × 2, one trace, no key in any attribute", () => {
    const exporter = new InMemorySpanExporter()
    const tracing = NodeSdk.layer(() => ({
      resource: { serviceName: "reprise-ai-test" },
      spanProcessor: new SimpleSpanProcessor(exporter)
    }))
    return Effect.gen(function*() {
      yield* script("openai-responses", { steps: [cut, { kind: "stream", reply: { text: "traced" } }] })
      const fiber = yield* Effect.fork(LanguageModel.generateText({ prompt: "hello" }))
      yield* passBackoffUntil(1000)
      assert.strictEqual((yield* Fiber.join(fiber)).text, "traced")

      const spans = exporter.getFinishedSpans()
      const outer = spans.find((s) => s.name === "LanguageModel.generateText")
      const reply = spans.find((s) => s.name === "reprise.reply")
      const attempts = spans.filter((s) => s.name === "reprise.attempt")
      assert.isDefined(outer)
      assert.isDefined(reply)
      assert.strictEqual(reply!.parentSpanContext?.spanId, outer!.spanContext().spanId)
      assert.deepStrictEqual(
        attempts.map((a) => [a.parentSpanContext?.spanId, a.attributes["reprise.outcome"]]),
        [[reply!.spanContext().spanId, "retried"], [reply!.spanContext().spanId, "committed"]]
      )
      assert.deepInclude(reply!.attributes, {
        "gen_ai.system": "openai",
        "gen_ai.request.model": "sim-model",
        "reprise.protocol": "openai-responses",
        "reprise.attempts": 2
      })
      assert.isTrue(new Set(spans.map((s) => s.spanContext().traceId)).size === 1)
      assert.notInclude(JSON.stringify(spans.map((s) => [s.name, s.attributes, s.events, s.status])), KEY)
    }).pipe(Effect.provide(model("openai-responses")), Effect.provide(exactBackoff), Effect.provide(tracing), fresh)
  })
})
