/**
 * The simulator speaks the real protocols: the official `openai` and `@anthropic-ai/sdk` clients, pointed at it
 * with retries off, decode its streams (text, tool calls, finish reasons, usage) and surface its errors exactly
 * as they would a real service's.
 */
import Anthropic from "@anthropic-ai/sdk"
import { assert, describe, it } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Effect } from "effect"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import OpenAI from "openai"

const fixturesDir = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../../fixtures")

const apiKey = "sk-simulator-dummy-key"

const openai = (sim: Simulator.Service, route: "openai-chat" | "openai-responses" | "subscription" = "openai-chat") =>
  new OpenAI({ apiKey, baseURL: sim.baseUrl(route), maxRetries: 0 })

const anthropic = (sim: Simulator.Service) =>
  new Anthropic({ apiKey, baseURL: sim.baseUrl("anthropic"), maxRetries: 0 })

const test = (name: string, body: (sim: Simulator.Service) => Effect.Effect<void, unknown>) =>
  it.live(name, () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* body(sim)
    }).pipe(Effect.provide(Simulator.layer({ fixturesDir }))))

const use = (sim: Simulator.Service, route: SimulatorScript.Route, script: SimulatorScript.RouteScript) =>
  sim.setScript({ routes: { [route]: script } })

/** The error a promise rejects with (fails the test if it resolves). */
const rejection = (f: () => Promise<unknown>) =>
  Effect.flatMap(
    Effect.promise(() => f().then(() => ({ ok: true as const }), (error: unknown) => ({ ok: false as const, error }))),
    (r) => r.ok ? Effect.dieMessage("expected a rejection") : Effect.succeed(r.error)
  )

/** Asserts the class of an error and narrows it. */
const expectError = <C extends abstract new(...args: any) => any>(ctor: C, error: unknown): InstanceType<C> => {
  assert.instanceOf(error, ctor as any)
  return error as InstanceType<C>
}

const text = "Streams survive faults when only uncommitted output is replayed."

const weather = { name: "get_weather", arguments: { city: "Paris", unit: "celsius" } }

// -----------------------------------------------------------------------------

describe("openai Chat Completions client", () => {
  const chat = { model: "gpt-sim", messages: [{ role: "user" as const, content: "hi" }], stream: true as const }

  const collect = (sim: Simulator.Service, body: OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming) =>
    Effect.promise(async () => {
      const out: Array<OpenAI.Chat.Completions.ChatCompletionChunk> = []
      for await (const chunk of await openai(sim).chat.completions.create(body)) out.push(chunk)
      return out
    })

  test("decodes a generated text stream, its finish reason and the usage it asked for", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "openai-chat", { reply: { text, usage: { inputTokens: 9, outputTokens: 11 } } })
      const chunks = yield* collect(sim, { ...chat, stream_options: { include_usage: true } })
      assert.strictEqual(chunks.map((c) => c.choices[0]?.delta.content ?? "").join(""), text)
      assert.isAbove(chunks.filter((c) => c.choices[0]?.delta.content).length, 5)
      assert.deepStrictEqual(chunks.flatMap((c) => c.choices.map((choice) => choice.finish_reason)).at(-1), "stop")
      assert.deepStrictEqual(chunks.at(-1)?.usage, { prompt_tokens: 9, completion_tokens: 11, total_tokens: 20 })
      assert.strictEqual(chunks[0]!.model, "gpt-sim")
      const [record] = yield* sim.requests
      assert.strictEqual(record!.headers.authorization, "Bearer <redacted>")
      assert.strictEqual((record!.body as { model: string }).model, "gpt-sim")
    }))

  test("sends the usage chunk only when the request asks for it (stream_options.include_usage)", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "openai-chat", { reply: { text, usage: { inputTokens: 9, outputTokens: 11 } } })
      for (const asked of [undefined, { include_usage: false }]) {
        const chunks = yield* collect(sim, { ...chat, ...(asked === undefined ? {} : { stream_options: asked }) })
        assert.strictEqual(chunks.map((c) => c.choices[0]?.delta.content ?? "").join(""), text)
        assert.isTrue(chunks.every((c) => c.usage === null || c.usage === undefined), JSON.stringify(asked))
        // the finish chunk is the last one
        assert.strictEqual(chunks.at(-1)?.choices[0]?.finish_reason, "stop")
      }
    }))

  test("reports the script's cache figures in prompt_tokens_details", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "openai-chat", {
        reply: { text, usage: { inputTokens: 900, outputTokens: 11, cacheReadTokens: 768, cacheWriteTokens: 100 } }
      })
      const chunks = yield* collect(sim, { ...chat, stream_options: { include_usage: true } })
      assert.deepStrictEqual(chunks.at(-1)?.usage, {
        prompt_tokens: 900,
        completion_tokens: 11,
        total_tokens: 911,
        prompt_tokens_details: { cached_tokens: 768, cache_write_tokens: 100 }
      })
    }))

  test("assembles generated tool calls with the stream helper", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "openai-chat", {
        reply: { text: "Let me check.", toolCalls: [weather, { name: "now", arguments: {} }] }
      })
      const completion = yield* Effect.promise(() =>
        openai(sim).chat.completions.stream({ model: "gpt-sim", messages: chat.messages }).finalChatCompletion()
      )
      const choice = completion.choices[0]!
      assert.strictEqual(choice.finish_reason, "tool_calls")
      assert.strictEqual(choice.message.content, "Let me check.")
      const calls = (choice.message.tool_calls ?? []).map((c) => c.type === "function" ? c.function : undefined)
      assert.deepStrictEqual(calls.map((c) => [c?.name, JSON.parse(c?.arguments ?? "null")]), [
        ["get_weather", { city: "Paris", unit: "celsius" }],
        ["now", {}]
      ])
    }))

  for (
    const [fixture, expected] of [
      ["openai-chat/tool-call.sse", { text: "PRE_TOOL", finish: "tool_calls", calls: [["weather", {}]] }],
      ["openai-chat/parallel-tool-calls.sse", {
        text: "Checking both cities.",
        finish: "tool_calls",
        calls: [["get_weather", { city: "Paris", unit: "celsius" }], ["get_weather", {
          city: "Tokyo",
          unit: "celsius"
        }]]
      }],
      ["openai-chat/text.sse", { text: undefined, finish: "stop", calls: [] }]
    ] as const
  ) {
    test(`decodes the fixture ${fixture}`, (sim) =>
      Effect.gen(function*() {
        yield* use(sim, "openai-chat", { reply: { fixture } })
        const completion = yield* Effect.promise(() =>
          openai(sim).chat.completions.stream({ model: "gpt-sim", messages: chat.messages }).finalChatCompletion()
        )
        const choice = completion.choices[0]!
        assert.strictEqual(choice.finish_reason, expected.finish)
        if (expected.text !== undefined) assert.strictEqual(choice.message.content, expected.text)
        else assert.isAbove(choice.message.content?.length ?? 0, 50)
        const calls = (choice.message.tool_calls ?? []).map((c) => c.type === "function" ? c.function : undefined)
        assert.deepStrictEqual(calls.map((c) => [c?.name, JSON.parse(c?.arguments ?? "null")]), expected.calls as any)
      }))
  }

  test("throws an APIError for an in-band error chunk", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "openai-chat", {
        reply: { text },
        steps: [{ kind: "error", afterEvents: 3, error: { code: "rate_limit_exceeded", message: "slow down" } }]
      })
      const seen: Array<string> = []
      const apiError = expectError(
        OpenAI.APIError,
        yield* rejection(async () => {
          for await (const chunk of await openai(sim).chat.completions.create(chat)) {
            seen.push(chunk.choices[0]?.delta.content ?? "")
          }
        })
      )
      assert.strictEqual(apiError.code, "rate_limit_exceeded")
      assert.strictEqual(apiError.status, undefined)
      assert.strictEqual(seen.length, 3)
    }))

  test("maps error statuses to the SDK's error classes", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "openai-chat", {
        steps: [
          { kind: "status", status: 429, headers: { "retry-after": "7", "retry-after-ms": "6500" } },
          { kind: "status", status: 401 },
          {
            kind: "status",
            status: 400,
            error: { code: "context_length_exceeded", message: "This model's maximum context length is 8 tokens." }
          },
          { kind: "status", status: 503 },
          { kind: "reset" }
        ]
      })
      const create = () => openai(sim).chat.completions.create(chat)
      const limited = expectError(OpenAI.RateLimitError, yield* rejection(create))
      assert.strictEqual(limited.status, 429)
      assert.strictEqual(limited.headers.get("retry-after"), "7")
      assert.strictEqual(limited.headers.get("retry-after-ms"), "6500")
      assert.strictEqual(limited.code, "rate_limit_exceeded")
      assert.strictEqual(limited.requestID, "req_sim_1")
      assert.instanceOf(yield* rejection(create), OpenAI.AuthenticationError)
      const overflow = expectError(OpenAI.BadRequestError, yield* rejection(create))
      assert.strictEqual(overflow.code, "context_length_exceeded")
      assert.instanceOf(yield* rejection(create), OpenAI.InternalServerError)
      assert.instanceOf(yield* rejection(create), OpenAI.APIConnectionError)
      // maxRetries: 0 — one request per call, and the simulator counted each.
      assert.strictEqual(yield* sim.count("openai-chat"), 5)
    }))
})

// -----------------------------------------------------------------------------

describe("openai Responses client", () => {
  const request = { model: "gpt-sim", input: "hi", stream: true as const }

  for (const route of ["openai-responses", "subscription"] as const) {
    test(`${route}: decodes a generated text stream to response.completed`, (sim) =>
      Effect.gen(function*() {
        yield* use(sim, route, { reply: { text, usage: { inputTokens: 5, outputTokens: 8 } } })
        const events = yield* Effect.promise(async () => {
          const out: Array<OpenAI.Responses.ResponseStreamEvent> = []
          for await (const event of await openai(sim, route).responses.create(request)) out.push(event)
          return out
        })
        const deltas = events.flatMap((e) => e.type === "response.output_text.delta" ? [e.delta] : [])
        assert.strictEqual(deltas.join(""), text)
        assert.isAbove(deltas.length, 5)
        const last = events.at(-1)!
        assert.strictEqual(last.type, "response.completed")
        if (last.type === "response.completed") {
          const message = last.response.output[0]
          assert.deepStrictEqual(
            message?.type === "message" ? message.content.map((c) => c.type === "output_text" ? c.text : "") : [],
            [text]
          )
          assert.strictEqual(last.response.usage?.output_tokens, 8)
          assert.deepStrictEqual<unknown>(last.response.usage?.input_tokens_details, { cached_tokens: 0 })
        }
        assert.deepStrictEqual(events.map((e) => e.sequence_number), events.map((_, i) => i))
        const [record] = yield* sim.requests
        assert.strictEqual(record!.path, route === "subscription" ? "/subscription/responses" : "/v1/responses")
      }))

    test(`${route}: assembles function calls with the stream helper`, (sim) =>
      Effect.gen(function*() {
        yield* use(sim, route, { reply: { text: "Checking.", toolCalls: [{ ...weather, id: "call_1" }] } })
        const response = yield* Effect.promise(() =>
          openai(sim, route).responses.stream({ model: "gpt-sim", input: "hi" }).finalResponse()
        )
        assert.strictEqual(response.status, "completed")
        assert.strictEqual(response.output_text, "Checking.")
        const calls = response.output.flatMap((item) => item.type === "function_call" ? [item] : [])
        assert.deepStrictEqual(calls.map((c) => [c.call_id, c.name, JSON.parse(c.arguments)]), [
          ["call_1", "get_weather", { city: "Paris", unit: "celsius" }]
        ])
      }))
  }

  for (
    const [route, fixture, expected] of [
      ["openai-responses", "openai-responses/function-call.sse", { text: "Let me check the weather.", calls: 1 }],
      ["openai-responses", "openai-responses/tool-search-function-call.sse", { text: "", calls: 1 }],
      ["openai-responses", "openai-responses/text.sse", { text: undefined, calls: 0 }],
      ["subscription", "subscription/function-call.sse", { text: "Let me check the weather.", calls: 1 }],
      ["subscription", "subscription/text.sse", { text: undefined, calls: 0 }]
    ] as const
  ) {
    test(`${route}: decodes the fixture ${fixture}`, (sim) =>
      Effect.gen(function*() {
        yield* use(sim, route, { reply: { fixture } })
        const response = yield* Effect.promise(() =>
          openai(sim, route).responses.stream({ model: "gpt-sim", input: "hi" }).finalResponse()
        )
        assert.strictEqual(response.status, "completed")
        if (expected.text !== undefined) assert.strictEqual(response.output_text, expected.text)
        else assert.isAbove(response.output_text.length, 10)
        const calls = response.output.filter((item) => item.type === "function_call")
        assert.strictEqual(calls.length, expected.calls)
      }))
  }

  test("yields in-band error and response.failed events with their codes", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "openai-responses", {
        reply: { text },
        steps: [
          { kind: "error", afterEvents: 4, error: { code: "server_error", message: "boom" } },
          { kind: "error", event: "response.failed", error: { code: "rate_limit_exceeded" } }
        ]
      })
      const collect = () =>
        Effect.promise(async () => {
          const out: Array<OpenAI.Responses.ResponseStreamEvent> = []
          for await (const event of await openai(sim, "openai-responses").responses.create(request)) out.push(event)
          return out
        })
      const first = yield* collect()
      assert.strictEqual(first.length, 5)
      const error = first.at(-1)!
      assert.strictEqual(error.type, "error")
      if (error.type === "error") assert.deepStrictEqual([error.code, error.message], ["server_error", "boom"])
      const second = (yield* collect()).at(-1)!
      assert.strictEqual(second.type, "response.failed")
      if (second.type === "response.failed") {
        assert.strictEqual(second.response.status, "failed")
        assert.strictEqual(second.response.error?.code, "rate_limit_exceeded")
      }
    }))

  test("maps error statuses to the SDK's error classes", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "subscription", {
        steps: [
          { kind: "status", status: 429, error: { type: "insufficient_quota", code: "insufficient_quota" } },
          { kind: "status", status: 403 },
          { kind: "status", status: 404 }
        ]
      })
      const create = () => openai(sim, "subscription").responses.create(request)
      const quota = expectError(OpenAI.RateLimitError, yield* rejection(create))
      assert.strictEqual(quota.code, "insufficient_quota")
      assert.instanceOf(yield* rejection(create), OpenAI.PermissionDeniedError)
      assert.instanceOf(yield* rejection(create), OpenAI.NotFoundError)
    }))
})

// -----------------------------------------------------------------------------

describe("openai Responses client: usage", () => {
  test("the script's cache figures are input_tokens_details.cached_tokens and cache_write_tokens", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "openai-responses", {
        reply: { text, usage: { inputTokens: 500, outputTokens: 8, cacheReadTokens: 256, cacheWriteTokens: 128 } }
      })
      const response = yield* Effect.promise(() =>
        openai(sim, "openai-responses").responses.stream({ model: "gpt-sim", input: "hi" }).finalResponse()
      )
      assert.deepStrictEqual(response.usage, {
        input_tokens: 500,
        input_tokens_details: { cached_tokens: 256, cache_write_tokens: 128 },
        output_tokens: 8,
        output_tokens_details: { reasoning_tokens: 0 },
        total_tokens: 508
      })
    }))
})

describe("@anthropic-ai/sdk Messages client", () => {
  const request = { model: "claude-sim", max_tokens: 256, messages: [{ role: "user" as const, content: "hi" }] }

  test("decodes a generated text stream with finalMessage", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "anthropic", { reply: { text, usage: { inputTokens: 4, outputTokens: 9 } } })
      const stream = anthropic(sim).messages.stream(request)
      const deltas: Array<string> = []
      stream.on("text", (delta) => deltas.push(delta))
      const message = yield* Effect.promise(() => stream.finalMessage())
      assert.strictEqual(message.stop_reason, "end_turn")
      assert.strictEqual(message.model, "claude-sim")
      assert.deepStrictEqual(message.content.map((b) => b.type === "text" ? b.text : b.type), [text])
      assert.strictEqual(deltas.join(""), text)
      assert.isAbove(deltas.length, 5)
      assert.strictEqual(message.usage.output_tokens, 9)
      const [record] = yield* sim.requests
      // This SDK version sends the key as a bearer token; older ones used x-api-key. Either way it is redacted.
      assert.isFalse(JSON.stringify(record).includes(apiKey))
      assert.isTrue(
        record!.headers["x-api-key"] === "<redacted>" || record!.headers.authorization === "Bearer <redacted>"
      )
      assert.isDefined(record!.headers["anthropic-version"])
    }))

  test("message_start carries the input usage, the cache parts in their own fields", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "anthropic", {
        reply: { text, usage: { inputTokens: 1000, outputTokens: 9, cacheReadTokens: 600, cacheWriteTokens: 300 } }
      })
      const stream = anthropic(sim).messages.stream(request)
      const starts: Array<Anthropic.Messages.Usage> = []
      stream.on("streamEvent", (event) => {
        if (event.type === "message_start") starts.push(event.message.usage)
      })
      const message = yield* Effect.promise(() => stream.finalMessage())
      assert.strictEqual(starts.length, 1)
      assert.strictEqual(starts[0].input_tokens, 100)
      assert.strictEqual(starts[0].cache_read_input_tokens, 600)
      assert.strictEqual(starts[0].cache_creation_input_tokens, 300)
      // the SDK's final message: message_start's input counts, message_delta's output
      assert.strictEqual(message.usage.input_tokens, 100)
      assert.strictEqual(message.usage.cache_read_input_tokens, 600)
      assert.strictEqual(message.usage.cache_creation_input_tokens, 300)
      assert.strictEqual(message.usage.output_tokens, 9)
    }))

  test("assembles tool_use input from input_json_delta", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "anthropic", { reply: { text: "Checking.", toolCalls: [{ ...weather, id: "toolu_1" }] } })
      const message = yield* Effect.promise(() => anthropic(sim).messages.stream(request).finalMessage())
      assert.strictEqual(message.stop_reason, "tool_use")
      assert.deepStrictEqual(message.content.map((b) => b.type), ["text", "tool_use"])
      const tool = message.content[1]!
      if (tool.type === "tool_use") {
        assert.deepStrictEqual([tool.id, tool.name, tool.input], ["toolu_1", "get_weather", {
          city: "Paris",
          unit: "celsius"
        }])
      }
    }))

  test("create({ stream: true }) yields the raw events, pings skipped", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "anthropic", { reply: { text: "Hi there." } })
      const types = yield* Effect.promise(async () => {
        const out: Array<string> = []
        for await (const event of await anthropic(sim).messages.create({ ...request, stream: true })) {
          out.push(event.type)
        }
        return out
      })
      assert.deepStrictEqual(types, [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop"
      ])
    }))

  for (
    const [fixture, expected] of [
      ["anthropic/text.sse", { stop: "end_turn", blocks: ["text"], input: undefined }],
      ["anthropic/tool-use.sse", { stop: "tool_use", blocks: ["tool_use"], input: { location: "San Francisco" } }],
      ["anthropic/text-and-tool-use.sse", {
        stop: "tool_use",
        blocks: ["text", "tool_use"],
        input: { path: "notes.txt", line: "hello from the fixture" }
      }],
      ["anthropic/fallback.sse", { stop: "end_turn", blocks: ["text"], input: undefined }]
    ] as const
  ) {
    test(`decodes the fixture ${fixture}`, (sim) =>
      Effect.gen(function*() {
        yield* use(sim, "anthropic", { reply: { fixture } })
        const message = yield* Effect.promise(() => anthropic(sim).messages.stream(request).finalMessage())
        assert.strictEqual(message.stop_reason, expected.stop)
        assert.deepStrictEqual(message.content.map((b) => b.type), expected.blocks as any)
        const tool = message.content.find((b) => b.type === "tool_use")
        if (expected.input !== undefined) {
          assert.deepStrictEqual(tool?.type === "tool_use" && tool.input, expected.input)
        }
      }))
  }

  test("throws an APIError with the type of an in-band error event", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "anthropic", { reply: { text }, steps: [{ kind: "error", afterEvents: 5 }] })
      const error = expectError(
        Anthropic.APIError,
        yield* rejection(() => anthropic(sim).messages.stream(request).finalMessage())
      )
      assert.strictEqual(error.type, "overloaded_error")
    }))

  test("maps error statuses to the SDK's error classes", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "anthropic", {
        steps: [
          { kind: "status", status: 429, headers: { "retry-after": "12" } },
          { kind: "status", status: 529 },
          { kind: "status", status: 401 },
          { kind: "status", status: 400, error: { message: "prompt is too long: 210000 tokens > 200000 maximum" } }
        ]
      })
      const create = () => anthropic(sim).messages.create(request)
      const limited = expectError(Anthropic.RateLimitError, yield* rejection(create))
      assert.strictEqual(limited.headers.get("retry-after"), "12")
      assert.strictEqual(limited.type, "rate_limit_error")
      assert.strictEqual(limited.requestID, "req_sim_1")
      const overloaded = expectError(Anthropic.InternalServerError, yield* rejection(create))
      assert.strictEqual(overloaded.status, 529)
      assert.strictEqual(overloaded.type, "overloaded_error")
      assert.instanceOf(yield* rejection(create), Anthropic.AuthenticationError)
      const tooLong = expectError(Anthropic.BadRequestError, yield* rejection(create))
      assert.match(tooLong.message, /prompt is too long/)
      assert.strictEqual(yield* sim.count("anthropic"), 4)
    }))

  test("a reset mid-stream is a connection error, not a message", (sim) =>
    Effect.gen(function*() {
      yield* use(sim, "anthropic", { reply: { text }, steps: [{ kind: "reset", afterEvents: 4 }] })
      const error = yield* rejection(() => anthropic(sim).messages.stream(request).finalMessage())
      assert.instanceOf(error, Error)
      assert.notInstanceOf(error, Anthropic.APIError, "no HTTP status: a transport failure")
    }))
})
