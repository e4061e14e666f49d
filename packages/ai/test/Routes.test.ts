/**
 * A `LanguageModel` that follows a plan of routes (`RecoveringLanguageModel.layerRoutes`, `layerPlan`, or `layer`
 * built where a `Routes` layer is provided): its calls generate through `Recovery.generate` with the plan, and the
 * response names the model that served (`response-metadata`) and the route (the finish part's metadata). Against the
 * loopback simulator, each route a protocol of it, with the real undici client.
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, layer } from "@effect/vitest"
import * as Routes from "@reprise/core/Routes"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as Simulator from "@reprise/simulator/Simulator"
import { Effect, Layer, Redacted } from "effect"
import * as RecoveringLanguageModel from "../src/RecoveringLanguageModel.js"
import { exactBackoff, fresh, KEY, simulator } from "./support.js"

/** A primary that refuses the key (401) and a second route that answers, as the simulator's two routes. */
const refusedThenServed = Effect.flatMap(Simulator.Simulator, (sim) =>
  sim.setScript({
    routes: {
      "openai-chat": { steps: [{ kind: "status", status: 401 }], afterLast: "repeat-last" },
      anthropic: { reply: { text: "from the second route", model: "claude-served-1" } }
    }
  }))

const specs = (sim: Simulator.Service) =>
  [
    { protocol: "openai-chat", apiKey: Redacted.make(KEY), baseUrl: sim.baseUrl("openai-chat"), model: "gpt-primary" },
    {
      protocol: "anthropic",
      apiKey: Redacted.make(KEY),
      baseUrl: sim.baseUrl("anthropic"),
      model: "claude-second",
      maxTokens: 256
    }
  ] as const

const viaSpecs = Layer.unwrapEffect(
  Effect.map(Simulator.Simulator, (sim) => RecoveringLanguageModel.layerRoutes([...specs(sim)], { maxTokens: 256 }))
)

const viaPlan = Layer.unwrapEffect(
  Effect.gen(function*() {
    const sim = yield* Simulator.Simulator
    const [first, second] = specs(sim)
    const plan = Routes.make(
      yield* HttpProvider.route(first.protocol, first),
      yield* HttpProvider.route(second.protocol, second)
    )
    return RecoveringLanguageModel.layerPlan(plan, { maxTokens: 256 })
  })
).pipe(Layer.provide(NodeHttpClient.layerUndici))

const servedBySecond = Effect.gen(function*() {
  const sim = yield* Simulator.Simulator
  yield* refusedThenServed
  const response = yield* LanguageModel.generateText({ prompt: "hello" })
  assert.strictEqual(response.text, "from the second route")
  const metadata = response.content.find((part) => part.type === "response-metadata")
  assert.strictEqual(
    metadata?.type === "response-metadata" && metadata.modelId._tag === "Some" && metadata.modelId.value,
    "claude-served-1"
  )
  const finish = response.content.find((part) => part.type === "finish")
  assert.deepStrictEqual(finish?.metadata.reprise?.route, {
    index: 2,
    name: "anthropic claude-second",
    model: "claude-second"
  })
  // the primary was sent to once (a 401 leaves the route), the second route asked for its own model
  assert.strictEqual(yield* sim.count("openai-chat"), 1)
  const [sent] = yield* sim.requestsTo("anthropic")
  assert.strictEqual((sent.body as any).model, "claude-second")
})

layer(simulator, { excludeTestServices: true })("RecoveringLanguageModel with a plan of routes", (it) => {
  it.effect("layerRoutes: the primary's 401 moves the reply to the second route, which serves it", () =>
    servedBySecond.pipe(Effect.provide(viaSpecs), Effect.provide(exactBackoff), fresh))

  it.effect("layerPlan: the same, from a Routes.Plan", () =>
    servedBySecond.pipe(Effect.provide(viaPlan), Effect.provide(exactBackoff), fresh))

  it.scoped("layer built where a Routes layer is provided follows that plan; a caller's plan is not followed", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      const planLayer = HttpProvider.layerRoutes([...specs(sim)])
      const model = RecoveringLanguageModel.layer({ model: "gpt-primary", maxTokens: 256 }).pipe(
        Layer.provide(planLayer)
      )
      yield* servedBySecond.pipe(Effect.provide(model))
      // a model built without a plan sends to its own provider only, whatever plan the caller has
      yield* refusedThenServed
      const plain = RecoveringLanguageModel.layer({ model: "gpt-primary" }).pipe(
        Layer.provide(
          HttpProvider.layerUndici("openai-chat", { apiKey: Redacted.make(KEY), baseUrl: sim.baseUrl("openai-chat") })
        )
      )
      const built = yield* Layer.build(plain)
      const exit = yield* Effect.exit(
        LanguageModel.generateText({ prompt: "hello" }).pipe(Effect.provide(built), Effect.provide(planLayer))
      )
      assert.strictEqual(exit._tag, "Failure")
      assert.strictEqual(yield* sim.count("openai-chat"), 1)
      assert.strictEqual(yield* sim.count("anthropic"), 0)
    }).pipe(Effect.provide(exactBackoff), fresh))
})
