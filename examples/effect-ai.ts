/**
 * An @effect/ai program with recovery. The program is written against @effect/ai alone (`LanguageModel`, `Chat`,
 * `Toolkit`); the one reprise piece is the Layer that provides `LanguageModel.LanguageModel`, where an app had
 * `OpenAiLanguageModel.layer(...)`. A tool records a line; a Chat turn runs it once, even across a replay.
 *
 *   npx reprise simulate --script SCRIPT.json   # prints the base URL of each route
 *   OPENAI_API_KEY=test OPENAI_BASE_URL=http://127.0.0.1:PORT/v1 REPRISE_MODEL=gpt-4.1-mini node examples/effect-ai.js
 */
import { Chat, LanguageModel, Tool, Toolkit } from "@effect/ai"
import { NodeHttpClient, NodeRuntime } from "@effect/platform-node"
import { RecoveringLanguageModel } from "@reprise/ai"
import { RecoveryNotifications } from "@reprise/core"
import { Effect, Layer, Ref, Schema } from "effect"

const Record = Tool.make("record", {
  description: "Records one line",
  parameters: { line: Schema.String },
  success: Schema.String
})
const Tools = Toolkit.make(Record)

const program = Effect.gen(function*() {
  const recorded = yield* Ref.make<Array<string>>([])
  const handlers = Tools.toLayer({
    record: ({ line }) => Effect.as(Ref.update(recorded, (lines) => [...lines, line]), `recorded ${line}`)
  })
  const chat = yield* Chat.empty
  // one user turn: the model asks for the tool, then answers; both replies share one recovery budget
  const answer = yield* RecoveringLanguageModel.turn(Effect.gen(function*() {
    yield* chat.generateText({ prompt: "Record 'hello', then say so", toolkit: Tools })
    return yield* chat.generateText({ prompt: [], toolkit: Tools })
  })).pipe(Effect.provide(handlers))
  const finish = answer.content.find((part) => part.type === "finish")
  yield* Effect.log(
    `${answer.text} (tool runs: ${
      (yield* Ref.get(recorded)).length
    }, attempts of the last reply: ${finish?.metadata.reprise?.attempts})`
  )
  const again = yield* LanguageModel.generateText({ prompt: "And once more?" })
  yield* Effect.log(`${again.text} (finish ${again.finishReason})`)
})

// was: OpenAiLanguageModel.layer({ model }).pipe(Layer.provide(OpenAiClient.layerConfig({ apiKey })))
const Model = RecoveringLanguageModel.layerConfig({ protocol: "openai-chat" }).pipe(
  Layer.provide(NodeHttpClient.layerUndici)
)

const Notices = RecoveryNotifications.layerCallback((n) =>
  n._tag === "AttemptDiscarded" ? Effect.log(`attempt ${n.attempt} discarded`) : Effect.void
)

program.pipe(Effect.provide(Layer.merge(Model, Notices)), NodeRuntime.runMain)
