/**
 * `@effect/ai`'s `Chat` keeps a reply's reasoning text in its history but not the part's metadata, so the model
 * recalls the parts of the replies it committed by their reasoning text: the next turn sends Anthropic's signed
 * thinking block (and a Responses reasoning item) back unchanged, through `Chat.generateText` and `Chat.streamText`.
 */
import * as Chat from "@effect/ai/Chat"
import { assert, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import { Effect, Stream } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { fresh, model, script, simulator, sseBody } from "./support.js"

const recorded = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../../../shared/fixtures/recorded")
const lines = (file: string) =>
  Fs.readFileSync(Path.join(recorded, file), "utf8").split("\n").filter((l) => l.trim().length > 0)
const sse = (payloads: ReadonlyArray<string>) =>
  payloads.map((l) => `event: ${JSON.parse(l).type}\ndata: ${l}\n\n`).join("")

const thinkingFixture = lines("anthropic/anthropic-clear-thinking.1.chunks.txt")
const payloads = thinkingFixture.map((l) => JSON.parse(l))
const thinking = payloads.filter((p) => p.delta?.type === "thinking_delta").map((p) => p.delta.thinking).join("")
const signature: string = payloads.find((p) => p.delta?.type === "signature_delta").delta.signature

layer(simulator, { excludeTestServices: true })("Chat sends reasoning back", (it) => {
  it.effect("Chat.generateText: turn 2 starts its assistant turn with turn 1's thinking block, signature intact", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* script("anthropic", { steps: [sseBody(sse(thinkingFixture)), sseBody(sse(thinkingFixture))] })
      const chat = yield* Chat.empty
      const first = yield* chat.generateText({ prompt: "divide the result by 5" })
      assert.strictEqual(first.reasoningText, thinking)
      yield* chat.generateText({ prompt: "and again" })
      const [, second] = yield* sim.requestsTo("anthropic")
      const assistant = (second.body as any).messages[1]
      assert.strictEqual(assistant.role, "assistant")
      assert.deepStrictEqual(assistant.content[0], { type: "thinking", thinking, signature })
      assert.strictEqual(assistant.content[1].type, "text")
    }).pipe(Effect.provide(model("anthropic")), fresh))

  it.effect("Chat.streamText: the same, from a streamed turn", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* script("anthropic", { steps: [sseBody(sse(thinkingFixture)), sseBody(sse(thinkingFixture))] })
      const chat = yield* Chat.empty
      yield* Stream.runDrain(chat.streamText({ prompt: "divide the result by 5" }))
      yield* Stream.runDrain(chat.streamText({ prompt: "and again" }))
      const [, second] = yield* sim.requestsTo("anthropic")
      assert.deepStrictEqual((second.body as any).messages[1].content[0], { type: "thinking", thinking, signature })
    }).pipe(Effect.provide(model("anthropic")), fresh))

  it.effect("reasoning text this model never committed is not sent back (no signature to go with it)", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* script("anthropic", { steps: [sseBody(sse(thinkingFixture))] })
      const chat = yield* Chat.fromPrompt([
        { role: "user", content: "hi" },
        {
          role: "assistant",
          content: [{ type: "reasoning", text: "someone else's thoughts" }, { type: "text", text: "ok" }]
        }
      ])
      yield* chat.generateText({ prompt: "go on" })
      const [request] = yield* sim.requestsTo("anthropic")
      const assistant = (request.body as any).messages[1]
      assert.deepStrictEqual(assistant.content.map((b: any) => b.type), ["text"])
    }).pipe(Effect.provide(model("anthropic")), fresh))
})
