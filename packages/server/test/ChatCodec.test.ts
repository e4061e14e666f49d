/**
 * The Chat Completions codec: an OpenAI request decoded into reprise's request (the reverse of the provider's
 * encoding), refusals with the field at fault, and the chunks and body encoded as OpenAI writes them; then a tool call
 * streamed through the relay from the simulator, as openai-node would accumulate it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Generation from "@reprise/core/Generation"
import { Effect, Either, Option } from "effect"
import { codec } from "../src/internal/codec/chat.js"
import { chat, events, post, relay } from "./support.js"

const context = { id: "chatcmpl-1", created: 1, model: "m" }

describe("Chat codec: decode", () => {
  it("a conversation with instructions, parts, tool calls and their results", () => {
    const decoded = codec.decode({
      model: "gpt-x",
      stream: true,
      stream_options: { include_usage: true },
      max_completion_tokens: 50,
      messages: [
        { role: "developer", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "Weather " }, { type: "text", text: "in Paris?" }] },
        {
          role: "assistant",
          content: null,
          tool_calls: [{
            id: "call_1",
            type: "function",
            function: { name: "weather", arguments: "{\"city\":\"Paris\"}" }
          }]
        },
        { role: "tool", tool_call_id: "call_1", content: "sunny" },
        { role: "system", content: "Answer in French." }
      ],
      tools: [{ type: "function", function: { name: "weather", parameters: { type: "object" } } }],
      tool_choice: { type: "function", function: { name: "weather" } },
      response_format: { type: "json_schema", json_schema: { name: "answer", schema: { type: "object" } } },
      temperature: 0.2
    })
    assert.isTrue(Either.isRight(decoded))
    const { includeUsage, request, stream } = Either.getOrThrow(decoded)
    assert.isTrue(stream)
    assert.isTrue(includeUsage)
    assert.deepStrictEqual(request, {
      model: "gpt-x",
      system: "Be brief.",
      messages: [
        { role: "user", text: "Weather in Paris?" },
        { role: "assistant", text: "", toolCalls: [{ id: "call_1", name: "weather", arguments: { city: "Paris" } }] },
        { role: "tool", toolCallId: "call_1", name: "weather", content: "sunny", isError: false },
        { role: "system", text: "Answer in French." }
      ],
      tools: [{ name: "weather", description: "", parameters: { type: "object" } }],
      maxTokens: 50,
      toolChoice: { tool: "weather" },
      responseFormat: { type: "json", name: "answer", schema: { type: "object" } }
    })
  })

  it("refuses what it cannot carry, naming the field", () => {
    const refused = (body: unknown) => Either.getLeft(codec.decode(body)).pipe(Option.getOrUndefined)
    assert.strictEqual(refused([])?.message, "the request body must be a JSON object")
    assert.strictEqual(refused({ messages: [{ role: "user", content: "x" }] })?.param, "model")
    assert.strictEqual(
      refused({ model: "m", messages: [{ role: "user", content: [{ type: "image_url" }] }] })?.param,
      "messages[0].content[0].type"
    )
    assert.strictEqual(
      refused({ model: "m", messages: [{ role: "function", content: "x" }] })?.param,
      "messages[0].role"
    )
    assert.strictEqual(
      refused({ model: "m", messages: [{ role: "user", content: "x" }], max_tokens: 0 })?.param,
      "max_tokens"
    )
    assert.strictEqual(refused({ model: "m", messages: [{ role: "user", content: "x" }], n: 2 })?.param, "n")
    assert.strictEqual(
      refused({ model: "m", messages: [{ role: "user", content: "x" }], tool_choice: "sometimes" })?.param,
      "tool_choice"
    )
  })
})

describe("Chat codec: encode", () => {
  it("tool-call deltas with index, id, name and arguments; the body with tool_calls", () => {
    const first = codec.delta(
      context,
      Generation.ToolCallDelta({ index: 0, id: "call_1", name: "weather", argumentsDelta: "" })
    )
    const next = codec.delta(
      context,
      Generation.ToolCallDelta({ index: 0, id: undefined, name: undefined, argumentsDelta: "{\"a\":1}" })
    )
    assert.deepStrictEqual(JSON.parse(first.slice(6)).choices[0].delta, {
      tool_calls: [{ index: 0, id: "call_1", type: "function", function: { name: "weather", arguments: "" } }]
    })
    assert.deepStrictEqual(JSON.parse(next.slice(6)).choices[0].delta, {
      tool_calls: [{ index: 0, function: { arguments: "{\"a\":1}" } }]
    })
    assert.strictEqual(codec.delta(context, Generation.UsageEvent({ usage: { inputTokens: 1, outputTokens: 1 } })), "")
    const reply = new Generation.Reply({
      text: "",
      reasoning: "",
      toolCalls: [{ id: "call_1", name: "weather", arguments: { a: 1 } }],
      finishReason: "tool_calls",
      providerFinishReason: "tool_calls",
      usage: Option.some({ inputTokens: 3, outputTokens: 4 }),
      attempts: 1
    })
    const body = codec.body(context, reply) as any
    assert.strictEqual(body.choices[0].message.content, null)
    assert.deepStrictEqual(body.choices[0].message.tool_calls, [
      { id: "call_1", type: "function", function: { name: "weather", arguments: "{\"a\":1}" } }
    ])
    assert.strictEqual(body.choices[0].finish_reason, "tool_calls")
    assert.deepStrictEqual(body.usage, { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 })
    // the terminal: the finish chunk, the usage chunk only when asked for, then [DONE]
    const without = codec.terminal(context, reply)
    assert.strictEqual(without.split("\n\n").filter((b) => b.length > 0).length, 2)
    const withUsage = codec.terminal({ ...context, includeUsage: true }, reply)
    const blocks = withUsage.split("\n\n").filter((b) => b.length > 0)
    assert.strictEqual(blocks.length, 3)
    assert.deepStrictEqual(JSON.parse(blocks[1]!.slice(6)).choices, [])
    assert.strictEqual(blocks[2], "data: [DONE]")
  })

  it.live("a tool call through the relay: deltas by index, finish_reason tool_calls", () =>
    Effect.gen(function*() {
      const h = yield* relay({
        models: {
          tools: {
            reply: { toolCalls: [{ name: "get_weather", arguments: { city: "Paris", unit: "celsius" } }] },
            steps: [{ kind: "truncated-tool-call" }],
            then: { kind: "stream" }
          }
        }
      })
      const r = yield* post(
        `${h.url}/v1/chat/completions`,
        chat("tools", {
          stream: true,
          tools: [{ type: "function", function: { name: "get_weather", parameters: { type: "object" } } }]
        })
      )
      assert.strictEqual(r.status, 200)
      const chunks = events(r.text).filter((e) => e.data.startsWith("{")).map((e) => JSON.parse(e.data))
      let name = ""
      let args = ""
      let id: string | undefined
      for (const c of chunks) {
        for (const call of c.choices[0]?.delta?.tool_calls ?? []) {
          assert.strictEqual(call.index, 0)
          id ??= call.id
          name += call.function?.name ?? ""
          args += call.function?.arguments ?? ""
        }
      }
      assert.isString(id)
      assert.strictEqual(name, "get_weather")
      assert.deepStrictEqual(JSON.parse(args), { city: "Paris", unit: "celsius" })
      assert.strictEqual(chunks.at(-1)!.choices[0].finish_reason, "tool_calls")
      // the truncated first attempt was replayed, and none of its arguments reached the client
      assert.strictEqual((yield* h.sim.requestsFor("tools")).length, 2)
    }).pipe(Effect.scoped), 20_000)
})
