/**
 * The Anthropic Messages codec: requests reprise's own provider encodes decode back to the same request; bad
 * requests are refused naming their field; the frames and bodies it writes are read by `@anthropic-ai/sdk` (events,
 * `finalMessage`, the non-streaming message, errors) and by reprise's own Messages decoder, into the same reply.
 */
import Anthropic from "@anthropic-ai/sdk"
import { HttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import * as Generation from "@reprise/core/Generation"
import * as TransportError from "@reprise/core/TransportError"
import * as AnthropicMessages from "@reprise/providers/AnthropicMessages"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import * as OpenAiResponses from "@reprise/providers/OpenAiResponses"
import { Effect, Either, Option, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { codec } from "../src/internal/codec/anthropic.js"
import type * as Downstream from "../src/internal/downstream.js"
import { clientOf, decodeWith, fetchOf, reply, replyOf, streamed } from "./support/codecSupport.js"

const context: Downstream.Context = { id: "msg_test0001", created: 1767225600, model: "claude-test" }

const sdk = (body: string, init: { readonly status?: number; readonly json?: boolean } = {}) => {
  const { fetch, requests } = fetchOf(body, init)
  return { client: new Anthropic({ apiKey: "sk-test", baseURL: "http://relay.test", fetch, maxRetries: 0 }), requests }
}

const params = { model: "claude-test", max_tokens: 100, messages: [{ role: "user" as const, content: "hi" }] }

const decoded = (body: unknown) => {
  const result = codec.decode(body)
  if (Either.isLeft(result)) throw new Error(`refused: ${result.left.message}`)
  return result.right
}

const refusal = (body: unknown) => {
  const result = codec.decode(body)
  if (Either.isRight(result)) throw new Error("accepted")
  return result.left
}

const weather: Generation.ToolDefinition = {
  name: "get_weather",
  description: "The weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] }
}

const call = { id: "toolu_1", name: "get_weather", arguments: { city: "Paris" } }

const toolReplyEvents: ReadonlyArray<Generation.GenerationEvent> = [
  Generation.TextDelta({ text: "Let me " }),
  Generation.TextDelta({ text: "check." }),
  Generation.ToolCallDelta({ index: 0, id: "toolu_1", name: "get_weather", argumentsDelta: "" }),
  Generation.ToolCallDelta({ index: 0, id: "toolu_1", name: "get_weather", argumentsDelta: "{\"city\":" }),
  Generation.ToolCallDelta({ index: 0, id: "toolu_1", name: "get_weather", argumentsDelta: "\"Paris\"}" }),
  Generation.ToolCallComplete({ call }),
  Generation.UsageEvent({ usage: { inputTokens: 30, outputTokens: 12 } }),
  Generation.Finish({ reason: "tool_calls", providerReason: "tool_use", model: "claude-served" })
]

const toolReply = reply({
  text: "Let me check.",
  toolCalls: [call],
  providerFinishReason: "tool_use",
  usage: { inputTokens: 30, outputTokens: 12 },
  model: "claude-served"
})

describe("Anthropic codec: decode", () => {
  it("decodes what reprise's Messages provider encodes back to the same request", () => {
    const request: Generation.GenerationRequest = {
      model: "claude-test",
      system: "Be brief.",
      maxTokens: 300,
      messages: [
        { role: "user", text: "Weather in Paris?" },
        { role: "user", text: "And be quick." },
        {
          role: "assistant",
          text: "Checking.",
          toolCalls: [call],
          reasoning: [
            { protocol: "anthropic", kind: "thinking", text: "they want weather", signature: "sig" },
            { protocol: "anthropic", kind: "redacted", data: "opaque" }
          ]
        },
        { role: "tool", toolCallId: "toolu_1", name: "get_weather", content: "18C, clear", isError: false },
        {
          role: "assistant",
          text: "",
          toolCalls: [{ id: "toolu_2", name: "get_weather", arguments: { city: "Oslo" } }]
        },
        { role: "tool", toolCallId: "toolu_2", name: "get_weather", content: "no such city", isError: true },
        { role: "assistant", text: "Paris is 18C.", toolCalls: [] },
        { role: "user", text: "Thanks" }
      ],
      tools: [weather],
      toolChoice: "required"
    }
    const result = decoded(AnthropicMessages.requestBody(request))
    assert.deepStrictEqual(result.request, request)
    assert.isTrue(result.stream)
  })

  it("reads system blocks, tool_result blocks, tool choices and the output format", () => {
    const result = decoded({
      model: "m",
      max_tokens: 10,
      system: [{ type: "text", text: "a", cache_control: { type: "ephemeral" } }, { type: "text", text: "b" }],
      messages: [
        { role: "assistant", content: [{ type: "tool_use", id: "t1", name: "f", input: { x: 1 } }] },
        {
          role: "user",
          content: [{ type: "tool_result", tool_use_id: "t1", content: [{ type: "text", text: "done" }] }]
        },
        {
          role: "assistant",
          content: [{ type: "thinking", thinking: "unsigned", signature: "" }, { type: "text", text: "ok" }]
        }
      ],
      tools: [{ name: "f", input_schema: { type: "object" } }],
      tool_choice: { type: "tool", name: "f" },
      output_config: { format: { type: "json_schema", schema: { type: "object" } } },
      temperature: 0.3,
      stream: false
    })
    assert.deepStrictEqual(result, {
      request: {
        model: "m",
        maxTokens: 10,
        system: "a\n\nb",
        messages: [
          { role: "assistant", text: "", toolCalls: [{ id: "t1", name: "f", arguments: { x: 1 } }] },
          { role: "tool", toolCallId: "t1", name: "f", content: "done", isError: false },
          { role: "assistant", text: "ok", toolCalls: [] }
        ],
        tools: [{ name: "f", description: "", parameters: { type: "object" } }],
        toolChoice: { tool: "f" },
        responseFormat: { type: "json", name: "output", schema: { type: "object" } }
      },
      stream: false
    })
  })

  it("refuses what the relay cannot honour, naming the field", () => {
    assert.strictEqual(refusal({ model: "m", messages: [{ role: "user", content: "x" }] }).param, "max_tokens")
    assert.strictEqual(refusal({ max_tokens: 1, messages: [] }).param, "model")
    assert.strictEqual(refusal({ model: "m", max_tokens: 1, messages: [] }).param, "messages")
    assert.strictEqual(
      refusal({
        model: "m",
        max_tokens: 1,
        messages: [{ role: "user", content: [{ type: "image", source: {} }] }]
      }).param,
      "messages[0].content[0]"
    )
    assert.strictEqual(
      refusal({ model: "m", max_tokens: 1, messages: [{ role: "system", content: "x" }] }).param,
      "messages[0].role"
    )
    assert.strictEqual(
      refusal({
        model: "m",
        max_tokens: 1,
        messages: [{ role: "user", content: "x" }],
        tools: [{ type: "web_search_20250305", name: "web_search" }]
      }).param,
      "tools[0].type"
    )
    assert.strictEqual(
      refusal({ model: "m", max_tokens: 1, messages: [{ role: "user", content: "x" }], tool_choice: { type: "x" } })
        .param,
      "tool_choice.type"
    )
    assert.strictEqual(
      refusal({ model: "m", max_tokens: 1, messages: [{ role: "user", content: "x" }], tool_choice: { type: "any" } })
        .param,
      "tool_choice"
    )
  })
})

describe("Anthropic codec: the SDK reads the stream", () => {
  it("messages.create({stream: true}) yields the text, the tool input, the stop reason and the usage", async () => {
    const { client } = sdk(streamed(codec, context, toolReplyEvents, toolReply))
    const stream = await client.messages.create({ ...params, stream: true })
    let text = ""
    let json = ""
    let stop: string | null = null
    let usage: { input_tokens?: number | null; output_tokens: number } | undefined
    const types: Array<string> = []
    for await (const event of stream) {
      types.push(event.type)
      if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text
      if (event.type === "content_block_delta" && event.delta.type === "input_json_delta") {
        json += event.delta.partial_json
      }
      if (event.type === "message_delta") {
        stop = event.delta.stop_reason
        usage = event.usage
      }
    }
    assert.strictEqual(text, "Let me check.")
    assert.deepStrictEqual(JSON.parse(json), { city: "Paris" })
    assert.strictEqual(stop, "tool_use")
    assert.strictEqual(usage?.input_tokens, 30)
    assert.strictEqual(usage?.output_tokens, 12)
    assert.strictEqual(types[0], "message_start")
    assert.strictEqual(types[types.length - 1], "message_stop")
  })

  it("messages.stream(...).finalMessage() assembles the message", async () => {
    const { client } = sdk(streamed(codec, context, toolReplyEvents, toolReply))
    const stream = client.messages.stream(params)
    const texts: Array<string> = []
    stream.on("text", (delta) => texts.push(delta))
    const message = await stream.finalMessage()
    assert.deepStrictEqual(texts, ["Let me ", "check."])
    assert.strictEqual(message.id, "msg_test0001")
    assert.deepStrictEqual(message.content, [
      { type: "text", text: "Let me check." },
      { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }
    ] as never)
    assert.strictEqual(message.stop_reason, "tool_use")
    assert.strictEqual(message.usage.input_tokens, 30)
    assert.strictEqual(message.usage.output_tokens, 12)
  })

  it("a call is announced with its name, and the relay's fragments without id and name go to it", async () => {
    const events = [
      Generation.ToolCallDelta({ index: 0, id: "toolu_1", name: undefined, argumentsDelta: "{\"ci" }),
      Generation.ToolCallDelta({ index: 0, id: undefined, name: "get_weather", argumentsDelta: "ty\":" }),
      Generation.ToolCallDelta({ index: 0, id: undefined, name: undefined, argumentsDelta: "\"Paris\"}" }),
      Generation.ToolCallComplete({ call })
    ]
    const stream = sdk(streamed(codec, context, events, reply({ toolCalls: [call] }))).client.messages.stream(params)
    const started: Array<unknown> = []
    stream.on("streamEvent", (e) => {
      if (e.type === "content_block_start") started.push(e.content_block)
    })
    const message = await stream.finalMessage()
    assert.deepStrictEqual(started, [{ type: "tool_use", id: "toolu_1", name: "get_weather", input: {} }])
    assert.deepStrictEqual(message.content, [
      { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }
    ] as never)
  })

  it("a held reply (open, then the terminal with the whole reply) reads the same", async () => {
    const encoder = codec.encoder!()
    // the relay's keepalive comments come first
    const { client } = sdk(
      ": reprise hold\n\n: reprise hold\n\n" + encoder.open(context) + encoder.terminal(context, toolReply)
    )
    const message = await client.messages.stream(params).finalMessage()
    assert.deepStrictEqual(message.content, [
      { type: "text", text: "Let me check." },
      { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }
    ] as never)
    assert.strictEqual(message.stop_reason, "tool_use")
  })

  it("the codec's own members write a reply at once: open, then the terminal with the whole reply", async () => {
    const message = await sdk(codec.open(context) + codec.terminal(context, toolReply)).client.messages.stream(params)
      .finalMessage()
    assert.deepStrictEqual(message.content, [
      { type: "text", text: "Let me check." },
      { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }
    ] as never)
  })

  it("thinking streams as a thinking block with its signature", async () => {
    const part = { protocol: "anthropic" as const, kind: "thinking" as const, text: "Hmm.", signature: "sig-1" }
    const events = [
      Generation.ReasoningDelta({ text: "Hmm." }),
      Generation.ReasoningComplete({ part }),
      Generation.TextDelta({ text: "Hi." })
    ]
    const { client } = sdk(
      streamed(
        codec,
        context,
        events,
        reply({ text: "Hi.", reasoning: "Hmm.", reasoningParts: [part], providerFinishReason: "end_turn" })
      )
    )
    const message = await client.messages.stream(params).finalMessage()
    assert.deepStrictEqual(message.content, [
      { type: "thinking", thinking: "Hmm.", signature: "sig-1" },
      { type: "text", text: "Hi." }
    ] as never)
    assert.strictEqual(message.stop_reason, "end_turn")
  })

  it("a reply of another protocol gets the Messages stop reason of its finish", async () => {
    const cut = reply({ text: "partial", finishReason: "length", providerFinishReason: "length" })
    const { client } = sdk(streamed(codec, context, [Generation.TextDelta({ text: "partial" })], cut))
    const message = await client.messages.stream(params).finalMessage()
    assert.strictEqual(message.stop_reason, "max_tokens")
  })

  it("a failure makes the SDK throw, with its type and message", async () => {
    const frames = streamed(codec, context, [Generation.TextDelta({ text: "Hel" })], {
      status: 529,
      type: "overloaded_error",
      message: "upstream overloaded after 3 attempts"
    })
    const stream = await sdk(frames).client.messages.create({ ...params, stream: true })
    const error = await (async () => {
      try {
        for await (const _ of stream) {
          // read to the error
        }
      } catch (e) {
        return e
      }
      return undefined
    })()
    assert.instanceOf(error, Anthropic.APIError)
    assert.include((error as Error).message, "upstream overloaded after 3 attempts")
    assert.strictEqual((error as InstanceType<typeof Anthropic.APIError>).type, "overloaded_error")
    const thrown = await sdk(frames).client.messages.stream(params).finalMessage().then(() => undefined, (e) => e)
    assert.instanceOf(thrown, Anthropic.APIError)
  })
})

describe("Anthropic codec: bodies", () => {
  it("the non-streaming body is a message the SDK reads", async () => {
    const { client } = sdk(JSON.stringify(codec.body(context, toolReply)), { json: true })
    const message = await client.messages.create(params)
    assert.deepStrictEqual(message, {
      id: "msg_test0001",
      type: "message",
      role: "assistant",
      model: "claude-served",
      content: [
        { type: "text", text: "Let me check." },
        { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }
      ],
      stop_reason: "tool_use",
      stop_sequence: null,
      usage: { input_tokens: 30, output_tokens: 12 }
    } as never)
  })

  it("the error body is the API's error, which the SDK raises with its status", async () => {
    const body = codec.errorBody({ status: 429, type: "rate_limit_error", message: "slow down" })
    assert.deepStrictEqual(body, { type: "error", error: { type: "rate_limit_error", message: "slow down" } })
    const { client } = sdk(JSON.stringify(body), { status: 429, json: true })
    const error = await client.messages.create(params).then(() => undefined, (e) => e)
    assert.instanceOf(error, Anthropic.RateLimitError)
    assert.include((error as Error).message, "slow down")
  })
})

describe("Anthropic codec: reprise's own Messages decoder reads it back", () => {
  const provider = (body: string) =>
    Effect.provideService(
      AnthropicMessages.make({ apiKey: Redacted.make("sk-test"), baseUrl: "http://127.0.0.1:9" }),
      HttpClient.HttpClient,
      clientOf(body)
    )
  const request: Generation.GenerationRequest = { model: "claude-test", messages: [{ role: "user", text: "hi" }] }

  it.effect("into the same reply", () =>
    Effect.gen(function*() {
      const { events, result } = yield* decodeWith(
        yield* provider(streamed(codec, context, toolReplyEvents, toolReply)),
        request
      )
      assert.isTrue(Either.isRight(result))
      const back = replyOf(events)
      assert.strictEqual(back.text, toolReply.text)
      assert.deepStrictEqual(back.toolCalls, toolReply.toolCalls)
      assert.strictEqual(back.finishReason, "tool_calls")
      assert.deepStrictEqual(back.usage, Option.some({ inputTokens: 30, outputTokens: 12 }))
    }))

  it.effect("a failure reads as the upstream failure", () =>
    Effect.gen(function*() {
      const frames = streamed(codec, context, [], { status: 529, type: "overloaded_error", message: "busy" })
      const { result } = yield* decodeWith(yield* provider(frames), request)
      // a relay behind a relay: the in-band error is a transient provider error, retried there
      assert.isTrue(Either.isLeft(result) && TransportError.isTransportError(result.left))
      const error = (result as Either.Left<TransportError.TransportError, void>).left
      assert.strictEqual(error.reason, "ProviderError")
      assert.strictEqual(error.providerCode, "overloaded_error")
      assert.strictEqual(error.detail, "busy")
    }))

  for (const file of ["text.sse", "tool-use.sse", "text-and-tool-use.sse", "fallback.sse"]) {
    it.effect(`the recorded ${file} survives a relay`, () =>
      Effect.gen(function*() {
        const recorded = Fs.readFileSync(Path.resolve(__dirname, "../../../fixtures/anthropic", file), "utf8")
        const first = yield* decodeWith(yield* provider(recorded), request)
        assert.isTrue(Either.isRight(first.result))
        const committed = replyOf(first.events)
        const second = yield* decodeWith(yield* provider(streamed(codec, context, first.events, committed)), request)
        assert.isTrue(Either.isRight(second.result))
        const again = replyOf(second.events)
        assert.strictEqual(again.text, committed.text)
        assert.deepStrictEqual(again.toolCalls, committed.toolCalls)
        assert.strictEqual(again.finishReason, committed.finishReason)
        assert.strictEqual(again.providerFinishReason, committed.providerFinishReason)
        assert.deepStrictEqual(again.usage, committed.usage)
        const { client } = sdk(streamed(codec, context, first.events, committed))
        const message = yield* Effect.promise(() => client.messages.stream(params).finalMessage())
        assert.strictEqual(
          message.content.flatMap((block) => block.type === "text" ? [block.text] : []).join(""),
          committed.text
        )
        assert.strictEqual(
          message.content.filter((block) => block.type === "tool_use").length,
          committed.toolCalls.length
        )
      }))
  }
})

describe("Anthropic codec: the reset mode", () => {
  const resetFrame = (name: string, data: unknown) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`
  const committed = reply({ text: "Hello", toolCalls: [call], providerFinishReason: "tool_use" })
  const frames = () => {
    const encoder = codec.encoder!()
    let out = encoder.open(context) + resetFrame("reprise.attempt", { attempt: 1, maxAttempts: 3 })
    out += encoder.delta(context, Generation.TextDelta({ text: "Hel" }))
    out += encoder.delta(
      context,
      Generation.ToolCallDelta({ index: 0, id: "toolu_0", name: "get_weather", argumentsDelta: "{\"ci" })
    )
    out += resetFrame("reprise.rollback", { attempt: 1, discardedChars: 3, discardedToolCalls: 1, reason: "HTTP 529" })
    out += encoder.rollback(context)
    out += resetFrame("reprise.attempt", { attempt: 2, maxAttempts: 3 })
    out += encoder.delta(context, Generation.TextDelta({ text: "Hello" }))
    out += encoder.delta(
      context,
      Generation.ToolCallDelta({ index: 0, id: "toolu_1", name: "get_weather", argumentsDelta: "" })
    )
    out += encoder.delta(context, Generation.ToolCallComplete({ call }))
    out += resetFrame("reprise.commit", { attempt: 2, attempts: 2 })
    return out + encoder.terminal(context, committed)
  }

  it("the discarded attempt's blocks are closed, and the next attempt's content goes to new blocks", async () => {
    const message = await sdk(frames()).client.messages.stream(params).finalMessage()
    // the SDK keeps every block it was sent: a reset-aware client drops those started before the rollback
    assert.deepStrictEqual(message.content.slice(2), [
      { type: "text", text: "Hello" },
      { type: "tool_use", id: "toolu_1", name: "get_weather", input: { city: "Paris" } }
    ] as never)
    assert.deepStrictEqual(message.content[0], { type: "text", text: "Hel" } as never)
    assert.strictEqual(message.stop_reason, "tool_use")
  })
})

describe("Anthropic codec: replies of every upstream protocol", () => {
  const options = { apiKey: Redacted.make("sk-test"), baseUrl: "http://127.0.0.1:9" }
  const upstreams = {
    "openai-chat": OpenAiChat.make(options),
    "openai-responses": OpenAiResponses.make(options),
    anthropic: AnthropicMessages.make(options)
  } as const
  const request: Generation.GenerationRequest = { model: "m", messages: [{ role: "user", text: "hi" }] }
  const cases: ReadonlyArray<readonly [keyof typeof upstreams, string]> = [
    ["openai-chat", "openai-chat/parallel-tool-calls.sse"],
    ["openai-chat", "openai-chat/tool-call.sse"],
    ["openai-chat", "openai-chat/text.sse"],
    ["openai-responses", "openai-responses/function-call.sse"],
    ["anthropic", "anthropic/text-and-tool-use.sse"]
  ]
  for (const [protocol, file] of cases) {
    it.effect(`${file} (${protocol}), relayed, reads back as the same reply`, () =>
      Effect.gen(function*() {
        const recorded = Fs.readFileSync(Path.resolve(__dirname, "../../../fixtures", file), "utf8")
        const upstream = yield* Effect.provideService(upstreams[protocol], HttpClient.HttpClient, clientOf(recorded))
        const first = yield* decodeWith(upstream, request)
        assert.isTrue(Either.isRight(first.result))
        const committed = replyOf(first.events)
        const frames = streamed(codec, context, first.events, committed)
        const downstream = yield* Effect.provideService(upstreams["anthropic"], HttpClient.HttpClient, clientOf(frames))
        const second = yield* decodeWith(downstream, request)
        assert.isTrue(Either.isRight(second.result))
        const again = replyOf(second.events)
        assert.strictEqual(again.text, committed.text)
        assert.deepStrictEqual(again.toolCalls, committed.toolCalls)
        assert.strictEqual(again.finishReason, committed.finishReason)
        assert.deepStrictEqual(again.usage, committed.usage)
        const { client } = sdk(frames)
        const message = yield* Effect.promise(() => client.messages.stream(params).finalMessage())
        assert.strictEqual(
          message.content.flatMap((block) => block.type === "text" ? [block.text] : []).join(""),
          committed.text
        )
        assert.deepStrictEqual(
          message.content.flatMap((block) =>
            block.type === "tool_use" ? [{ id: block.id, name: block.name, arguments: block.input }] : []
          ),
          committed.toolCalls as never
        )
      }))
  }
})
