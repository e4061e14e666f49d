/**
 * reasoning-roundtrip: a two-turn conversation against the loopback simulator, serving recorded captures byte for
 * byte. The second request carries the first reply's reasoning exactly as received: Anthropic's thinking block with
 * its signature, the Responses reasoning item with its encrypted content.
 */
import { assert, describe, it } from "@effect/vitest"
import type * as Generation from "@reprise/core/Generation"
import * as Simulator from "@reprise/simulator/Simulator"
import { Effect } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { committed, generate, script, simulator, sseBody } from "./support/e2e.js"

const recorded = Path.resolve(__dirname, "../../shared/fixtures/recorded")
const lines = (file: string) =>
  Fs.readFileSync(Path.join(recorded, file), "utf8").split("\n").filter((l) => l.trim().length > 0)
const sse = (payloads: ReadonlyArray<string>) => payloads.map((l) => `data: ${l}\n\n`).join("")

const tools = [{ name: "calculator", description: "calc", parameters: { type: "object" } }]

/** Turn 1, then turn 2 with turn 1's message and a result for each of its tool calls; the recorded request bodies. */
const twoTurns = (protocol: "anthropic" | "openai-responses", first: string) =>
  Effect.gen(function*() {
    const sim = yield* Simulator.Simulator
    yield* script(protocol, {
      steps: [sseBody(first), sseBody(first)]
    })
    const turn1: Generation.GenerationRequest = { model: "m", messages: [{ role: "user", text: "compute" }], tools }
    const reply = committed(yield* generate(protocol, { request: turn1 }))
    const turn2: Generation.GenerationRequest = {
      ...turn1,
      messages: [
        ...turn1.messages,
        reply.message,
        ...reply.toolCalls.map((call) => ({
          role: "tool" as const,
          toolCallId: call.id,
          name: call.name,
          content: "19",
          isError: false
        }))
      ]
    }
    committed(yield* generate(protocol, { request: turn2 }))
    const requests = yield* sim.requestsTo(protocol)
    assert.strictEqual(requests.length, 2)
    return { reply, second: requests[1].body as any }
  })

describe("reasoning goes back to the provider", () => {
  it.live("anthropic: the second request's assistant turn starts with the thinking block, signature intact", () =>
    Effect.gen(function*() {
      const raw = lines("anthropic/anthropic-clear-thinking.1.chunks.txt")
      const payloads = raw.map((l) => JSON.parse(l))
      const thinking = payloads.filter((p) => p.delta?.type === "thinking_delta").map((p) => p.delta.thinking).join("")
      const signature = payloads.find((p) => p.delta?.type === "signature_delta").delta.signature
      const { reply, second } = yield* twoTurns("anthropic", sse(raw))
      assert.deepStrictEqual(reply.reasoningParts, [{
        protocol: "anthropic",
        kind: "thinking",
        text: thinking,
        signature
      }])
      const assistant = second.messages[1]
      assert.strictEqual(assistant.role, "assistant")
      assert.deepStrictEqual(assistant.content[0], { type: "thinking", thinking, signature })
      assert.strictEqual(assistant.content[1].type, "text")
    }).pipe(Effect.provide(simulator)))

  it.live("openai-responses: the reasoning item goes back before the function call, encrypted content intact", () =>
    Effect.gen(function*() {
      const raw = lines("openai-responses/openai-reasoning-encrypted-content.1.chunks.txt")
      const payloads = raw.map((l) => JSON.parse(l))
      const end = payloads.findIndex((p) => p.type === "response.completed") + 1
      const item = payloads.slice(0, end).find((p) =>
        p.type === "response.output_item.done" && p.item.type === "reasoning"
      )
        .item
      const { reply, second } = yield* twoTurns("openai-responses", sse(raw.slice(0, end)))
      assert.strictEqual(reply.toolCalls.length, 1)
      assert.deepStrictEqual(second.input[1], {
        type: "reasoning",
        id: item.id,
        summary: item.summary,
        encrypted_content: item.encrypted_content
      })
      assert.strictEqual(second.input[2].type, "function_call")
      assert.strictEqual(second.input[2].call_id, "call_AB6AaRZ1FYZB2RwS6A5vbdqn")
    }).pipe(Effect.provide(simulator)))
})
