/**
 * The served model: each protocol's `Finish` names the model its response names (Chat Completions: the chunks'
 * `model`; Anthropic: `message_start`'s `message.model`; Responses and subscription: `response.model`), which may differ
 * from the model asked for. Over the loopback simulator, with the real undici client.
 */
import { assert, describe, layer } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import type * as Generation from "@reprise/core/Generation"
import * as Provider from "@reprise/core/Provider"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as ProviderOptions from "@reprise/providers/ProviderOptions"
import * as Simulator from "@reprise/simulator/Simulator"
import { Chunk, Effect, Layer, Redacted, Stream } from "effect"
import { KEY } from "./support/harness.js"

const request: Generation.GenerationRequest = {
  model: "asked-model",
  messages: [{ role: "user", text: "Hello" }],
  maxTokens: 64
}

const providerLayer = (protocol: ProviderOptions.Protocol) =>
  Layer.unwrapEffect(
    Effect.map(
      Simulator.Simulator,
      (sim) => HttpProvider.layerUndici(protocol, { apiKey: Redacted.make(KEY), baseUrl: sim.baseUrl(protocol) })
    )
  )

const finishOf = Effect.gen(function*() {
  const provider = yield* Provider.Provider
  const events = Chunk.toArray(yield* provider.stream(request).pipe(Stream.runCollect, Budget.scoped))
  const last = events[events.length - 1]
  assert.strictEqual(last._tag, "Finish")
  return last as Extract<Generation.GenerationEvent, { _tag: "Finish" }>
})

layer(Simulator.layer(), { excludeTestServices: true })("the served model", (it) => {
  for (const protocol of ProviderOptions.protocols) {
    describe(protocol, () => {
      it.effect("the Finish names the model the response names, not the one asked for", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* sim.setScript({ routes: { [protocol]: { reply: { text: "Hi there", model: "served-model-7" } } } })
          assert.strictEqual((yield* finishOf).model, "served-model-7")
          // a tool call's finish names it too
          yield* sim.setScript({
            routes: { [protocol]: { reply: { toolCalls: [{ name: "now", arguments: {} }], model: "served-model-8" } } }
          })
          const finish = yield* finishOf
          assert.strictEqual(finish.reason, "tool_calls")
          assert.strictEqual(finish.model, "served-model-8")
        }).pipe(Effect.provide(providerLayer(protocol))))
    })
  }
})
