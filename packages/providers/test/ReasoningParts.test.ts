/**
 * Reasoning that goes back to the provider: the recorded Anthropic `thinking` block (with its `signature_delta`) and
 * the recorded Responses `reasoning` item (with its `encrypted_content`) decode to exactly the parts a plain reading
 * of the file gives, and an assistant message's parts are sent back unchanged, each protocol taking only its own.
 */
import { HttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import type * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import * as AnthropicMessages from "@reprise/providers/AnthropicMessages"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import * as OpenAiResponses from "@reprise/providers/OpenAiResponses"
import * as Subscription from "@reprise/providers/Subscription"
import { Effect, Either, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fakeClient, KEY, run, toSse } from "./support/harness.js"

const root = Path.resolve(__dirname, "../../../../shared/fixtures/recorded")
const lines = (file: string) =>
  Fs.readFileSync(Path.join(root, file), "utf8").split("\n").filter((l) => l.trim().length > 0)

const options = { apiKey: Redacted.make(KEY), baseUrl: "http://127.0.0.1:9" }

const decode = (make: typeof AnthropicMessages.make, sse: string) =>
  Effect.gen(function*() {
    const provider = yield* Effect.provideService(make(options), HttpClient.HttpClient, fakeClient(sse))
    const outcome = yield* run(provider)
    if (Either.isLeft(outcome.result)) assert.fail(String(outcome.result.left))
    return outcome.events
  })

const partsOf = (events: ReadonlyArray<Generation.GenerationEvent>) =>
  events.flatMap((e) => (e._tag === "ReasoningComplete" ? [e.part] : []))

const textOf = (events: ReadonlyArray<Generation.GenerationEvent>) =>
  events.map((e) => (e._tag === "TextDelta" ? e.text : "")).join("")

const anthropicThinking: Message.ReasoningPart = {
  protocol: "anthropic",
  kind: "thinking",
  text: "think",
  signature: "sig-A"
}
const anthropicRedacted: Message.ReasoningPart = { protocol: "anthropic", kind: "redacted", data: "opaque==" }
const responsesItem: Message.ReasoningPart = {
  protocol: "openai-responses",
  kind: "reasoning",
  id: "rs_1",
  summary: ["first", "second"],
  encryptedContent: "gAAA-enc"
}
const storedItem: Message.ReasoningPart = { protocol: "openai-responses", kind: "reasoning", id: "rs_2", summary: [] }
const subscriptionItem: Message.ReasoningPart = {
  protocol: "subscription",
  kind: "reasoning",
  id: "rs_3",
  summary: ["s"],
  encryptedContent: "gAAA-sub"
}
const subscriptionStored: Message.ReasoningPart = {
  protocol: "subscription",
  kind: "reasoning",
  id: "rs_4",
  summary: []
}

const history: Generation.GenerationRequest = {
  model: "m",
  messages: [
    { role: "user", text: "go" },
    {
      role: "assistant",
      text: "calling",
      toolCalls: [{ id: "call_1", name: "calc", arguments: { a: 1 } }],
      reasoning: [anthropicThinking, responsesItem, anthropicRedacted, storedItem, subscriptionItem, subscriptionStored]
    },
    { role: "tool", toolCallId: "call_1", name: "calc", content: "2", isError: false }
  ]
}

describe("anthropic: thinking blocks", () => {
  it.effect("the recorded thinking block decodes to its text and signature, exactly", () =>
    Effect.gen(function*() {
      const raw = lines("anthropic/anthropic-clear-thinking.1.chunks.txt")
      const payloads = raw.map((l) => JSON.parse(l))
      const text = payloads.filter((p) => p.delta?.type === "thinking_delta").map((p) => p.delta.thinking).join("")
      const signature = payloads.filter((p) => p.delta?.type === "signature_delta").map((p) => p.delta.signature)
      assert.strictEqual(signature.length, 1)
      const events = yield* decode(AnthropicMessages.make, toSse(raw))
      assert.deepStrictEqual(partsOf(events), [{
        protocol: "anthropic",
        kind: "thinking",
        text,
        signature: signature[0]
      }])
      assert.strictEqual(text, "The previous result was 925. Now I need to divide that by 5.\n\n925 ÷ 5 = 185")
      assert.isTrue(signature[0].startsWith("EvQBCkYICxgCKkAxhD4N"))
      // the part comes at the block's end, after its deltas, and is never text
      const at = events.findIndex((e) => e._tag === "ReasoningComplete")
      assert.isTrue(events.slice(0, at).some((e) => e._tag === "ReasoningDelta"))
      assert.notInclude(textOf(events), "I need to divide")
    }))

  it.effect("redacted_thinking blocks keep their data; a thinking block without a signature is text only", () =>
    Effect.gen(function*() {
      const sse = toSse([
        `{"type":"message_start","message":{"content":[],"usage":{"input_tokens":1}}}`,
        `{"type":"content_block_start","index":0,"content_block":{"type":"redacted_thinking","data":"EmwKAhgBEgy3"}}`,
        `{"type":"content_block_stop","index":0}`,
        `{"type":"content_block_start","index":1,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
        `{"type":"content_block_delta","index":1,"delta":{"type":"thinking_delta","thinking":"unsigned"}}`,
        `{"type":"content_block_stop","index":1}`,
        `{"type":"content_block_start","index":2,"content_block":{"type":"thinking","thinking":"","signature":""}}`,
        `{"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"a"}}`,
        `{"type":"content_block_delta","index":2,"delta":{"type":"thinking_delta","thinking":"b"}}`,
        `{"type":"content_block_delta","index":2,"delta":{"type":"signature_delta","signature":"SIG/+="}}`,
        `{"type":"content_block_stop","index":2}`,
        `{"type":"content_block_start","index":3,"content_block":{"type":"text","text":""}}`,
        `{"type":"content_block_delta","index":3,"delta":{"type":"text_delta","text":"hi"}}`,
        `{"type":"content_block_stop","index":3}`,
        `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`,
        `{"type":"message_stop"}`
      ])
      const events = yield* decode(AnthropicMessages.make, sse)
      assert.deepStrictEqual(partsOf(events), [
        { protocol: "anthropic", kind: "redacted", data: "EmwKAhgBEgy3" },
        { protocol: "anthropic", kind: "thinking", text: "ab", signature: "SIG/+=" }
      ])
      assert.strictEqual(textOf(events), "hi")
    }))

  it("an assistant turn sends its anthropic parts first, unchanged and in order; other protocols' are dropped", () => {
    const body = AnthropicMessages.requestBody(history) as any
    assert.deepStrictEqual(body.messages[1], {
      role: "assistant",
      content: [
        { type: "thinking", thinking: "think", signature: "sig-A" },
        { type: "redacted_thinking", data: "opaque==" },
        { type: "text", text: "calling" },
        { type: "tool_use", id: "call_1", name: "calc", input: { a: 1 } }
      ]
    })
  })
})

describe("openai-responses: reasoning items", () => {
  it.effect("the recorded reasoning item decodes to its id, summary and encrypted content, exactly", () =>
    Effect.gen(function*() {
      const raw = lines("openai-responses/openai-reasoning-encrypted-content.1.chunks.txt")
      const payloads = raw.map((l) => JSON.parse(l))
      const end = payloads.findIndex((p) => p.type === "response.completed") + 1
      const first = payloads.slice(0, end)
      const done = first.find((p) => p.type === "response.output_item.done" && p.item.type === "reasoning").item
      const added = first.find((p) => p.type === "response.output_item.added" && p.item.type === "reasoning").item
      // the item's encrypted content grows between `added` and `done`: the part is the `done` one
      assert.notStrictEqual(added.encrypted_content, done.encrypted_content)
      const expected: Array<Message.ReasoningPart> = [{
        protocol: "openai-responses",
        kind: "reasoning",
        id: "rs_01830d662ab3856501693c321405c88190be3ab04d5782d5f9",
        summary: done.summary.map((s: any) => s.text),
        encryptedContent: done.encrypted_content
      }]
      const events = yield* decode(OpenAiResponses.make, toSse(raw.slice(0, end)))
      assert.deepStrictEqual(partsOf(events), expected)
      const sub = yield* decode(Subscription.make, toSse(raw.slice(0, end)))
      assert.deepStrictEqual(partsOf(sub), [{ ...expected[0], protocol: "subscription" } as Message.ReasoningPart])
      assert.strictEqual(done.encrypted_content.length, 1060)
    }))

  it.effect("a reasoning item listed only in the terminal's output is a part too, once", () =>
    Effect.gen(function*() {
      const item = `{"type":"reasoning","id":"rs_t","summary":[{"type":"summary_text","text":"S"}]}`
      const events = yield* decode(
        OpenAiResponses.make,
        toSse([
          `{"type":"response.output_text.delta","delta":"ok"}`,
          `{"type":"response.completed","response":{"status":"completed","output":[${item}]}}`
        ])
      )
      assert.deepStrictEqual(partsOf(events), [
        { protocol: "openai-responses", kind: "reasoning", id: "rs_t", summary: ["S"] }
      ])
      const twice = yield* decode(
        OpenAiResponses.make,
        toSse([
          `{"type":"response.output_item.done","output_index":0,"item":${item}}`,
          `{"type":"response.completed","response":{"status":"completed","output":[${item}]}}`
        ])
      )
      assert.strictEqual(partsOf(twice).length, 1)
    }))

  it("an assistant message sends its own protocol's items before its message and function calls", () => {
    const body = OpenAiResponses.requestBody(history) as any
    assert.deepStrictEqual(body.input.slice(1, 5), [
      {
        type: "reasoning",
        id: "rs_1",
        summary: [{ type: "summary_text", text: "first" }, { type: "summary_text", text: "second" }],
        encrypted_content: "gAAA-enc"
      },
      { type: "reasoning", id: "rs_2", summary: [] },
      { role: "assistant", content: "calling" },
      { type: "function_call", call_id: "call_1", name: "calc", arguments: "{\"a\":1}" }
    ])
  })

  it("subscription sends only its items with encrypted content (nothing is stored), and no include", () => {
    const body = Subscription.requestBody(history) as any
    assert.deepStrictEqual(body.input.slice(1, 3), [
      { type: "reasoning", id: "rs_3", summary: [{ type: "summary_text", text: "s" }], encrypted_content: "gAAA-sub" },
      { role: "assistant", content: "calling" }
    ])
    assert.strictEqual(body.store, false)
    assert.notProperty(body, "include")
  })

  it("a message with neither text nor tool calls sends no reasoning item (it must precede its output)", () => {
    const body = OpenAiResponses.requestBody({
      model: "m",
      messages: [{ role: "assistant", text: "", toolCalls: [], reasoning: [responsesItem] }]
    }) as any
    assert.deepStrictEqual(body.input, [])
  })
})

describe("openai-chat: no reasoning input", () => {
  it("an assistant message's reasoning is not sent", () => {
    const body = OpenAiChat.requestBody(history) as any
    assert.deepStrictEqual(Object.keys(body.messages[1]).sort(), ["content", "role", "tool_calls"])
    assert.notInclude(JSON.stringify(body), "sig-A")
    assert.notInclude(JSON.stringify(body), "gAAA")
  })
})
