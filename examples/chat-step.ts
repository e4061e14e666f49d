/**
 * A conversation turn with a tool of your own and a JSONL transcript: the reply asks for `add`, the tool runs once
 * from the committed reply, its result is committed, and the next reply answers. Every commit is appended to the
 * transcript as it happens (`Chat.persistTo`), the prompt with the first reply; a discarded attempt never reaches it. The simulator plays the model,
 * with the reply after the tool result cut once and replayed: the tool still runs exactly once.
 *
 *   node examples/chat-step.js [transcript.jsonl]
 */
import { NodeContext, NodeHttpClient, NodeRuntime } from "@effect/platform-node"
import { Budget, Chat, Policy, Tool, Transcript } from "@reprise/core"
import { HttpProvider } from "@reprise/providers"
import { Simulator } from "@reprise/simulator"
import { Console, Duration, Effect, Layer, Redacted, Schema } from "effect"
import * as Os from "node:os"
import * as Path from "node:path"

let runs = 0
const add = Tool.make("add", {
  description: "Adds two numbers",
  parameters: Schema.Struct({ a: Schema.Number, b: Schema.Number }),
  handler: ({ a, b }) => Effect.sync(() => String((runs++, a + b)))
})

const transcript = process.argv[2] ?? Path.join(Os.tmpdir(), `reprise-chat-step-${process.pid}.jsonl`)

const program = Effect.gen(function*() {
  const simulator = yield* Simulator.Simulator
  yield* simulator.setScript({
    routes: {
      "openai-chat": {
        steps: [
          { kind: "stream", reply: { toolCalls: [{ id: "call_1", name: "add", arguments: { a: 2, b: 3 } }] } },
          { kind: "reset", afterEvents: 2, reply: { text: "2 + 3 = 5" } },
          { kind: "stream", reply: { text: "2 + 3 = 5" } }
        ]
      }
    }
  })
  const provider = HttpProvider.layer("openai-chat", {
    apiKey: Redacted.make("sk-example"),
    baseUrl: simulator.baseUrl("openai-chat")
  }).pipe(Layer.provide(NodeHttpClient.layerUndici))
  // The turn resumes the transcript; the prompt is committed with the first reply, then each commit after it.
  const history = yield* Transcript.load(transcript)
  const result = yield* Chat.turn(history, "What is 2 + 3?", {
    model: "gpt-4.1-mini",
    persist: Chat.persistTo(transcript)
  }).pipe(
    Effect.provide(
      Layer.mergeAll(provider, Tool.layer([add]), Budget.layer({}), Policy.layer({ backoffBase: Duration.millis(10) }))
    )
  )
  yield* Console.log(
    JSON.stringify({
      text: result.reply.text,
      replies: result.replies,
      committed: result.messages.length,
      toolRuns: runs,
      requests: yield* simulator.count("openai-chat"),
      transcript
    })
  )
})

program.pipe(Effect.provide(Layer.merge(Simulator.layer(), NodeContext.layer)), NodeRuntime.runMain)
