/**
 * The Responses codec: requests reprise's own provider encodes decode back to the same request; bad requests are
 * refused naming their field; the frames and bodies it writes are read by the `openai` SDK (events, `finalResponse`,
 * the non-streaming response, errors) and by reprise's own Responses decoder, into the same reply.
 */
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
import OpenAI from "openai"
import { codec } from "../src/internal/codec/responses.js"
import type * as Downstream from "../src/internal/downstream.js"
import { clientOf, decodeWith, fetchOf, reply, replyOf, streamed } from "./support/codecSupport.js"

const context: Downstream.Context = { id: "resp_test0001", created: 1767225600, model: "gpt-test" }

const sdk = (body: string, init: { readonly status?: number; readonly json?: boolean } = {}) => {
  const { fetch, requests } = fetchOf(body, init)
  return { client: new OpenAI({ apiKey: "sk-test", baseURL: "http://relay.test/v1", fetch, maxRetries: 0 }), requests }
}

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

const call = { id: "call_1", name: "get_weather", arguments: { city: "Paris" } }

/** A usage as the Responses protocol writes it: `cached_tokens` is required, 0 when the upstream reported none. */
const withCachedReads = (usage: Generation.Usage): Generation.Usage => ({
  ...usage,
  cacheReadTokens: usage.cacheReadTokens ?? 0
})

// the events an upstream reply yields: text, then one tool call in fragments, then usage and the finish
const toolReplyEvents: ReadonlyArray<Generation.GenerationEvent> = [
  Generation.TextDelta({ text: "Let me " }),
  Generation.TextDelta({ text: "check." }),
  Generation.ToolCallDelta({ index: 0, id: "call_1", name: "get_weather", argumentsDelta: "" }),
  Generation.ToolCallDelta({ index: 0, id: "call_1", name: "get_weather", argumentsDelta: "{\"city\":" }),
  Generation.ToolCallDelta({ index: 0, id: "call_1", name: "get_weather", argumentsDelta: "\"Paris\"}" }),
  Generation.ToolCallComplete({ call }),
  Generation.UsageEvent({ usage: { inputTokens: 30, outputTokens: 12 } }),
  Generation.Finish({ reason: "tool_calls", providerReason: "completed", model: "gpt-served" })
]

const toolReply = reply({
  text: "Let me check.",
  toolCalls: [call],
  providerFinishReason: "completed",
  usage: { inputTokens: 30, outputTokens: 12 },
  model: "gpt-served"
})

describe("Responses codec: decode", () => {
  it("decodes what reprise's Responses provider encodes back to the same request", () => {
    const request: Generation.GenerationRequest = {
      model: "gpt-test",
      system: "Be brief.",
      messages: [
        { role: "user", text: "Weather in Paris?" },
        { role: "assistant", text: "Checking.", toolCalls: [call] },
        { role: "tool", toolCallId: "call_1", name: "get_weather", content: "18C, clear", isError: false },
        {
          role: "assistant",
          text: "",
          toolCalls: [{ id: "call_2", name: "get_weather", arguments: { city: "Oslo" } }]
        },
        { role: "tool", toolCallId: "call_2", name: "get_weather", content: "3C", isError: false },
        {
          role: "assistant",
          text: "Paris is warmer.",
          toolCalls: [],
          reasoning: [{
            protocol: "openai-responses",
            kind: "reasoning",
            id: "rs_1",
            summary: ["compared"],
            encryptedContent: "gAAA"
          }]
        },
        { role: "system", text: "Answer in French from now on." },
        { role: "user", text: "Thanks" }
      ],
      tools: [weather],
      toolChoice: { tool: "get_weather" },
      responseFormat: { type: "json", name: "answer", schema: { type: "object" }, description: "the answer" },
      maxTokens: 300
    }
    const result = decoded(OpenAiResponses.requestBody(request))
    assert.deepStrictEqual(result.request, request)
    assert.isTrue(result.stream)
  })

  it("reads input as a string, content parts, developer messages and tool choices", () => {
    assert.deepStrictEqual(decoded({ model: "m", input: "hi" }), {
      request: { model: "m", messages: [{ role: "user", text: "hi" }] },
      stream: false
    })
    const result = decoded({
      model: "m",
      input: [
        { role: "developer", content: [{ type: "input_text", text: "rules" }] },
        {
          type: "message",
          role: "user",
          content: [{ type: "input_text", text: "a" }, { type: "input_text", text: "b" }]
        },
        { type: "reasoning", id: "rs_stored", summary: [] }
      ],
      tool_choice: "required",
      tools: [{ type: "function", name: "f" }],
      text: { format: { type: "text" } },
      store: true,
      temperature: 0.2
    })
    assert.deepStrictEqual(result.request, {
      model: "m",
      messages: [{ role: "system", text: "rules" }, { role: "user", text: "ab" }],
      tools: [{ name: "f", description: "", parameters: { type: "object", properties: {} } }],
      toolChoice: "required"
    })
  })

  it("refuses what the relay cannot honour, naming the field", () => {
    assert.strictEqual(
      refusal({ model: "m", input: "x", previous_response_id: "resp_1" }).param,
      "previous_response_id"
    )
    assert.strictEqual(refusal({ model: "m", input: "x", background: true }).param, "background")
    assert.strictEqual(refusal({ input: "x" }).param, "model")
    assert.strictEqual(refusal({ model: "m" }).param, "input")
    assert.strictEqual(
      refusal({ model: "m", input: [{ role: "user", content: [{ type: "input_image", image_url: "x" }] }] }).param,
      "input[0].content[0]"
    )
    assert.strictEqual(
      refusal({ model: "m", input: [{ type: "function_call", call_id: "c", name: "f", arguments: "{" }] }).param,
      "input[0].arguments"
    )
    assert.strictEqual(refusal({ model: "m", input: [{ type: "item_reference", id: "x" }] }).param, "input[0].type")
    assert.strictEqual(refusal({ model: "m", input: "x", tools: [{ type: "web_search" }] }).param, "tools[0].type")
    assert.strictEqual(refusal({ model: "m", input: "x", max_output_tokens: 0 }).param, "max_output_tokens")
    assert.strictEqual(
      refusal({ model: "m", input: "x", text: { format: { type: "json_object" } } }).param,
      "text.format.type"
    )
    assert.strictEqual(refusal("not an object").param, "body")
    assert.strictEqual(refusal({ model: "m", input: "x", tool_choice: "required" }).param, "tool_choice")
    assert.strictEqual(
      refusal({
        model: "m",
        input: "x",
        tools: [{ type: "function", name: "f" }],
        tool_choice: { type: "function", name: "g" }
      })
        .param,
      "tool_choice"
    )
  })
})

describe("Responses codec: the openai SDK reads the stream", () => {
  const client = (body: string) => sdk(body).client.responses.stream({ model: "gpt-test", input: "hi" })

  it("responses.create({stream: true}) yields the text, the call and the completed response", async () => {
    const { client } = sdk(streamed(codec, context, toolReplyEvents, toolReply))
    const stream = await client.responses.create({ model: "gpt-test", input: "hi", stream: true })
    let text = ""
    let args = ""
    const types: Array<string> = []
    let completed: OpenAI.Responses.Response | undefined
    for await (const event of stream) {
      types.push(event.type)
      if (event.type === "response.output_text.delta") text += event.delta
      if (event.type === "response.function_call_arguments.delta") args += event.delta
      if (event.type === "response.completed") completed = event.response
    }
    assert.strictEqual(text, "Let me check.")
    assert.strictEqual(args, "{\"city\":\"Paris\"}")
    assert.strictEqual(types[0], "response.created")
    assert.strictEqual(types[types.length - 1], "response.completed")
    assert.isDefined(completed)
    assert.strictEqual(completed!.id, "resp_test0001")
    assert.strictEqual(completed!.model, "gpt-served")
    assert.deepStrictEqual(completed!.usage?.input_tokens, 30)
    assert.deepStrictEqual(completed!.usage?.total_tokens, 42)
  })

  it("responses.stream(...).finalResponse() assembles the reply", async () => {
    const { client } = sdk(streamed(codec, context, toolReplyEvents, toolReply))
    const stream = client.responses.stream({ model: "gpt-test", input: "hi" })
    const deltas: Array<string> = []
    stream.on("response.output_text.delta", (e) => deltas.push(e.snapshot))
    const final = await stream.finalResponse()
    assert.strictEqual(final.output_text, "Let me check.")
    assert.deepStrictEqual(deltas, ["Let me ", "Let me check."])
    const calls = final.output.filter((item) => item.type === "function_call")
    assert.strictEqual(calls.length, 1)
    assert.deepStrictEqual(
      calls.map((c) => c.type === "function_call" ? [c.call_id, c.name, JSON.parse(c.arguments)] : []),
      [["call_1", "get_weather", { city: "Paris" }]]
    )
    assert.strictEqual(final.status, "completed")
    assert.deepStrictEqual(final.usage?.output_tokens, 12)
  })

  it("a call is announced with its name, and the relay's fragments without id and name go to it", async () => {
    const events = [
      Generation.ToolCallDelta({ index: 0, id: "call_1", name: undefined, argumentsDelta: "{\"ci" }),
      Generation.ToolCallDelta({ index: 0, id: undefined, name: "get_weather", argumentsDelta: "ty\":" }),
      Generation.ToolCallDelta({ index: 0, id: undefined, name: undefined, argumentsDelta: "\"Paris\"}" }),
      Generation.ToolCallComplete({ call })
    ]
    const stream = client(streamed(codec, context, events, reply({ toolCalls: [call] })))
    const added: Array<unknown> = []
    stream.on("response.output_item.added", (e) => added.push(e.item))
    const final = await stream.finalResponse()
    assert.deepStrictEqual(added, [
      {
        id: "fc_test0001_0",
        type: "function_call",
        status: "in_progress",
        arguments: "",
        call_id: "call_1",
        name: "get_weather"
      }
    ])
    assert.deepStrictEqual(
      final.output.map((item) =>
        item.type === "function_call" ? [item.call_id, item.name, JSON.parse(item.arguments)] : []
      ),
      [["call_1", "get_weather", { city: "Paris" }]]
    )
  })

  it("a held reply (open, then the terminal with the whole reply) reads the same", async () => {
    const encoder = codec.encoder!()
    // the relay's keepalive comments come first
    const { client } = sdk(
      ": reprise hold\n\n: reprise hold\n\n" + encoder.open(context) + encoder.terminal(context, toolReply)
    )
    const final = await client.responses.stream({ model: "gpt-test", input: "hi" }).finalResponse()
    assert.strictEqual(final.output_text, "Let me check.")
    assert.deepStrictEqual(
      final.output.map((item) => item.type),
      ["message", "function_call"]
    )
  })

  it("the codec's own members write a reply at once: open, then the terminal with the whole reply", async () => {
    const frames = codec.open(context) + codec.terminal(context, toolReply)
    const sequence = frames.trim().split("\n\n").map((f) => JSON.parse(f.split("\n")[1]!.slice(6)).sequence_number)
    assert.deepStrictEqual(sequence, sequence.map((_, i) => i))
    const final = await client(frames).finalResponse()
    assert.strictEqual(final.output_text, "Let me check.")
    assert.strictEqual(final.output.length, 2)
  })

  it("a reply cut by its token limit is response.incomplete", async () => {
    const cut = reply({ text: "partial", finishReason: "length", providerFinishReason: "max_tokens" })
    const { client } = sdk(streamed(codec, context, [Generation.TextDelta({ text: "partial" })], cut))
    const final = await client.responses.stream({ model: "gpt-test", input: "hi" }).finalResponse()
    assert.strictEqual(final.status, "incomplete")
    assert.strictEqual(final.incomplete_details?.reason, "max_output_tokens")
    assert.strictEqual(final.output_text, "partial")
  })

  it("reasoning streams as a reasoning item; an upstream item keeps its id and encrypted content", async () => {
    const part = {
      protocol: "openai-responses" as const,
      kind: "reasoning" as const,
      id: "rs_up",
      summary: ["Thinking."],
      encryptedContent: "gAAA"
    }
    const events = [
      Generation.ReasoningDelta({ text: "Thinking." }),
      Generation.ReasoningComplete({ part }),
      Generation.TextDelta({ text: "Done." })
    ]
    const { client } = sdk(
      streamed(codec, context, events, reply({ text: "Done.", reasoning: "Thinking.", reasoningParts: [part] }))
    )
    const final = await client.responses.stream({ model: "gpt-test", input: "hi" }).finalResponse()
    assert.deepStrictEqual(final.output[0], {
      id: "rs_up",
      type: "reasoning",
      summary: [{ type: "summary_text", text: "Thinking." }],
      encrypted_content: "gAAA"
    } as never)
    assert.strictEqual(final.output_text, "Done.")
  })

  it("a failure makes the SDK throw, with the message", async () => {
    const { client } = sdk(streamed(codec, context, [Generation.TextDelta({ text: "Hel" })], {
      status: 503,
      type: "overloaded_error",
      message: "upstream overloaded after 3 attempts"
    }))
    const stream = await client.responses.create({ model: "gpt-test", input: "hi", stream: true })
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
    assert.instanceOf(error, OpenAI.APIError)
    assert.include((error as Error).message, "upstream overloaded after 3 attempts")
    const helper = sdk(streamed(codec, context, [], { status: 500, type: "api_error", message: "boom" }))
    const thrown = await helper.client.responses.stream({ model: "gpt-test", input: "hi" }).finalResponse().then(
      () => undefined,
      (e) => e
    )
    assert.instanceOf(thrown, OpenAI.APIError)
  })

  it("the failure frames are an error event, then response.failed; the first frame of a reply opens it", () => {
    const frames = codec.encoder!().failure(context, { status: 429, type: "rate_limit_error", message: "slow down" })
    const events = frames.trim().split("\n\n").map((f) => JSON.parse(f.split("\n")[1]!.slice(6)))
    assert.deepStrictEqual(events.map((e) => e.type), [
      "response.created",
      "response.in_progress",
      "error",
      "response.failed"
    ])
    assert.deepStrictEqual(events.map((e) => e.sequence_number), [0, 1, 2, 3])
    assert.strictEqual(events[2].code, "rate_limit_exceeded")
    assert.strictEqual(events[3].response.status, "failed")
    assert.deepStrictEqual(events[3].response.error, { code: "rate_limit_exceeded", message: "slow down" })
  })

  it("a delta before open carries the opening, numbered first; open then writes nothing", () => {
    const encoder = codec.encoder!()
    assert.strictEqual(
      encoder.delta(context, Generation.UsageEvent({ usage: { inputTokens: 1, outputTokens: 1 } })),
      ""
    )
    const frames = encoder.delta(context, Generation.TextDelta({ text: "Hi" }))
    assert.strictEqual(encoder.open(context), "")
    const events = frames.trim().split("\n\n").map((f) => JSON.parse(f.split("\n")[1]!.slice(6)))
    assert.deepStrictEqual(events.map((e) => [e.type, e.sequence_number]), [
      ["response.created", 0],
      ["response.in_progress", 1],
      ["response.output_item.added", 2],
      ["response.content_part.added", 3],
      ["response.output_text.delta", 4]
    ])
  })
})

describe("Responses codec: bodies", () => {
  it("the non-streaming body is a response the SDK reads, output_text included", async () => {
    const { client } = sdk(JSON.stringify(codec.body(context, toolReply)), { json: true })
    const response = await client.responses.create({ model: "gpt-test", input: "hi" })
    assert.strictEqual(response.output_text, "Let me check.")
    assert.strictEqual(response.model, "gpt-served")
    assert.strictEqual(response.status, "completed")
    assert.deepStrictEqual(response.usage?.total_tokens, 42)
    const fc = response.output.find((item) => item.type === "function_call")
    assert.deepStrictEqual(fc?.type === "function_call" ? JSON.parse(fc.arguments) : undefined, { city: "Paris" })
  })

  it("the error body is the API's error, which the SDK raises with its status", async () => {
    const body = codec.errorBody({
      status: 400,
      type: "invalid_request_error",
      code: "context_length_exceeded",
      message: "too long"
    })
    assert.deepStrictEqual(body, {
      error: { message: "too long", type: "invalid_request_error", param: null, code: "context_length_exceeded" }
    })
    const { client } = sdk(JSON.stringify(body), { status: 400, json: true })
    const error = await client.responses.create({ model: "gpt-test", input: "hi" }).then(() => undefined, (e) => e)
    assert.instanceOf(error, OpenAI.BadRequestError)
    assert.strictEqual((error as InstanceType<typeof OpenAI.BadRequestError>).code, "context_length_exceeded")
  })
})

describe("Responses codec: reprise's own Responses decoder reads it back", () => {
  const provider = (body: string) =>
    Effect.provideService(
      OpenAiResponses.make({ apiKey: Redacted.make("sk-test"), baseUrl: "http://127.0.0.1:9" }),
      HttpClient.HttpClient,
      clientOf(body)
    )
  const request: Generation.GenerationRequest = { model: "gpt-test", messages: [{ role: "user", text: "hi" }] }

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
      assert.strictEqual(back.model, "gpt-served")
      // the protocol's `cached_tokens` is required: 0 when the upstream reported none
      assert.deepStrictEqual(back.usage, Option.some({ inputTokens: 30, outputTokens: 12, cacheReadTokens: 0 }))
    }))

  it.effect("a failure reads as the upstream failure", () =>
    Effect.gen(function*() {
      const frames = streamed(codec, context, [], { status: 503, type: "overloaded_error", message: "busy" })
      const { result } = yield* decodeWith(yield* provider(frames), request)
      // a relay behind a relay: the in-band error is a transient provider error, retried there
      assert.isTrue(Either.isLeft(result) && TransportError.isTransportError(result.left))
      const error = (result as Either.Left<TransportError.TransportError, void>).left
      assert.strictEqual(error.reason, "ProviderError")
      assert.strictEqual(error.providerCode, "server_error")
      assert.strictEqual(error.detail, "busy")
    }))

  // a recorded stream, decoded by the upstream provider, re-encoded, and decoded again: the same reply
  for (const file of ["function-call.sse", "text.sse", "tool-search-function-call.sse"]) {
    it.effect(`the recorded ${file} survives a relay`, () =>
      Effect.gen(function*() {
        const recorded = Fs.readFileSync(Path.resolve(__dirname, "../../../fixtures/openai-responses", file), "utf8")
        const first = yield* decodeWith(yield* provider(recorded), request)
        assert.isTrue(Either.isRight(first.result))
        const committed = replyOf(first.events)
        const second = yield* decodeWith(yield* provider(streamed(codec, context, first.events, committed)), request)
        assert.isTrue(Either.isRight(second.result))
        const again = replyOf(second.events)
        assert.strictEqual(again.text, committed.text)
        assert.deepStrictEqual(again.toolCalls, committed.toolCalls)
        assert.strictEqual(again.finishReason, committed.finishReason)
        assert.strictEqual(again.model, committed.model)
        assert.deepStrictEqual(again.usage, Option.map(committed.usage, withCachedReads))
        const { client } = sdk(streamed(codec, context, first.events, committed))
        const final = yield* Effect.promise(() => client.responses.stream({ model: "m", input: "hi" }).finalResponse())
        assert.strictEqual(final.output_text, committed.text)
        assert.strictEqual(
          final.output.filter((item) => item.type === "function_call").length,
          committed.toolCalls.length
        )
      }))
  }
})

describe("Responses codec: the reset mode", () => {
  // what the relay writes beside the protocol's events
  const resetFrame = (name: string, data: unknown) => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`
  const committed = reply({ text: "Hello", toolCalls: [call], providerFinishReason: "completed" })
  const frames = (withResetEvents: boolean) => {
    const encoder = codec.encoder!()
    let out = encoder.open(context)
    if (withResetEvents) out += resetFrame("reprise.attempt", { attempt: 1, maxAttempts: 3 })
    out += encoder.delta(context, Generation.TextDelta({ text: "Hel" }))
    out += encoder.delta(
      context,
      Generation.ToolCallDelta({ index: 0, id: "call_0", name: "get_weather", argumentsDelta: "{\"ci" })
    )
    if (withResetEvents) {
      out += resetFrame("reprise.rollback", {
        attempt: 1,
        discardedChars: 3,
        discardedToolCalls: 1,
        reason: "HTTP 503"
      })
    }
    out += encoder.rollback(context)
    if (withResetEvents) out += resetFrame("reprise.attempt", { attempt: 2, maxAttempts: 3 })
    out += encoder.delta(context, Generation.TextDelta({ text: "Hello" }))
    out += encoder.delta(
      context,
      Generation.ToolCallDelta({ index: 0, id: "call_1", name: "get_weather", argumentsDelta: "" })
    )
    out += encoder.delta(context, Generation.ToolCallComplete({ call }))
    if (withResetEvents) out += resetFrame("reprise.commit", { attempt: 2, attempts: 2 })
    return out + encoder.terminal(context, committed)
  }

  it("the next attempt's items are new, and the completed response lists the committed attempt's only", async () => {
    const { client } = sdk(frames(true))
    const stream = await client.responses.create({ model: "gpt-test", input: "hi", stream: true })
    const sequence: Array<number> = []
    const indices: Array<number> = []
    let completed: OpenAI.Responses.Response | undefined
    for await (const event of stream) {
      if (typeof event.sequence_number === "number") sequence.push(event.sequence_number)
      if (event.type === "response.output_item.added") indices.push(event.output_index)
      if (event.type === "response.completed") completed = event.response
    }
    assert.deepStrictEqual(sequence, sequence.map((_, i) => i))
    assert.deepStrictEqual(indices, [0, 1, 2, 3])
    assert.deepStrictEqual(
      completed?.output.map((item) =>
        item.type === "message" ? item.content : item.type === "function_call" ? item.call_id : item.type
      ),
      [[{ type: "output_text", annotations: [], logprobs: [], text: "Hello" }], "call_1"] as never
    )
  })

  it("finalResponse() is the committed reply", async () => {
    const final = await sdk(frames(false)).client.responses.stream({ model: "gpt-test", input: "hi" }).finalResponse()
    assert.strictEqual(final.output_text, "Hello")
    assert.strictEqual(final.output.length, 2)
  })
})

describe("Responses codec: replies of every upstream protocol", () => {
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
        const downstream = yield* Effect.provideService(
          upstreams["openai-responses"],
          HttpClient.HttpClient,
          clientOf(frames)
        )
        const second = yield* decodeWith(downstream, request)
        assert.isTrue(Either.isRight(second.result))
        const again = replyOf(second.events)
        assert.strictEqual(again.text, committed.text)
        assert.deepStrictEqual(again.toolCalls, committed.toolCalls)
        assert.strictEqual(again.finishReason, committed.finishReason)
        assert.deepStrictEqual(again.usage, Option.map(committed.usage, withCachedReads))
        const { client } = sdk(frames)
        const final = yield* Effect.promise(() => client.responses.stream({ model: "m", input: "hi" }).finalResponse())
        assert.strictEqual(final.output_text, committed.text)
        assert.deepStrictEqual(
          final.output.flatMap((item) =>
            item.type === "function_call"
              ? [{ id: item.call_id, name: item.name, arguments: JSON.parse(item.arguments) }]
              : []
          ),
          committed.toolCalls as never
        )
      }))
  }
})
