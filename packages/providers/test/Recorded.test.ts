/**
 * Every recorded stream of ../shared/fixtures/recorded decodes through its protocol into the text, tool calls and
 * finish reason that a reference reading of the file gives, and its truncated variants fail with the right typed
 * error. The reference reading below is deliberately simple and independent of the decoders: it reads the JSON
 * payloads directly (for Responses, the text comes from the terminal event's final output, not from the deltas).
 *
 * Files holding several responses back to back are split at each terminal event; every part is decoded on its own.
 * The whole file decodes to its first part: reading stops at the first terminal.
 */
import { HttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import * as AnthropicMessages from "@reprise/providers/AnthropicMessages"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import * as OpenAiResponses from "@reprise/providers/OpenAiResponses"
import * as Subscription from "@reprise/providers/Subscription"
import { Effect, Either, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fakeClient, KEY, run, summarize, toSse } from "./support/harness.js"

const root = Path.resolve(__dirname, "../../../../shared/fixtures/recorded")
const list = (dir: string, ext: string) =>
  Fs.readdirSync(Path.join(root, dir)).filter((f) => f.endsWith(ext)).map((f) => Path.join(dir, f)).sort()
const lines = (file: string) =>
  Fs.readFileSync(Path.join(root, file), "utf8").split("\n").filter((l) => l.trim().length > 0)

type Json = any

interface Expected {
  readonly text: string
  readonly toolCalls: ReadonlyArray<{ readonly id: string; readonly name: string; readonly arguments: unknown }>
  readonly finish: string
  readonly providerReason: string
  /** The model the response names. */
  readonly model: string | undefined
}

// ---------------------------------------------------------------------------------------------------------------
// reference readings

const chatReference = (payloads: ReadonlyArray<Json>): Expected => {
  let text = ""
  let finish = ""
  const calls: Array<{ id: string; name: string; args: string }> = []
  for (const p of payloads) {
    for (const c of p.choices ?? []) {
      if (typeof c.delta?.content === "string") text += c.delta.content
      for (const t of c.delta?.tool_calls ?? []) {
        calls[t.index] ??= { id: "", name: "", args: "" }
        if (t.id) calls[t.index].id = t.id
        if (t.function?.name) calls[t.index].name = t.function.name
        calls[t.index].args += t.function?.arguments ?? ""
      }
      if (c.finish_reason) finish = c.finish_reason
    }
  }
  const table: Record<string, string> = { stop: "stop", tool_calls: "tool_calls", length: "length" }
  return {
    text,
    toolCalls: calls.map((c) => ({ id: c.id, name: c.name, arguments: JSON.parse(c.args) })),
    finish: table[finish],
    providerReason: finish,
    model: payloads.find((p) => typeof p.model === "string")?.model
  }
}

const responsesReference = (payloads: ReadonlyArray<Json>): Expected => {
  const terminal = payloads[payloads.length - 1]
  assert.strictEqual(terminal.type, "response.completed")
  const output: Array<Json> = terminal.response.output
  const text = output.filter((o) => o.type === "message").flatMap((o) => o.content)
    .filter((c: Json) => c.type === "output_text").map((c: Json) => c.text).join("")
  const toolCalls = output.filter((o) => o.type === "function_call")
    .map((o) => ({ id: o.call_id, name: o.name, arguments: JSON.parse(o.arguments) }))
  return {
    text,
    toolCalls,
    finish: toolCalls.length > 0 ? "tool_calls" : "stop",
    providerReason: "completed",
    model: terminal.response.model
  }
}

const anthropicReference = (payloads: ReadonlyArray<Json>): Expected => {
  let text = ""
  let stop: string | null = null
  const blocks = new Map<number, { id: string; name: string; input: unknown; json: string }>()
  const calls: Array<{ id: string; name: string; arguments: unknown }> = []
  for (const p of payloads) {
    if (p.type === "message_start") {
      stop = p.message.stop_reason ?? stop
      for (const b of p.message.content ?? []) {
        if (b.type === "tool_use") calls.push({ id: b.id, name: b.name, arguments: b.input })
        if (b.type === "text") text += b.text
      }
    }
    if (p.type === "content_block_start") {
      if (p.content_block.type === "text") text += p.content_block.text ?? ""
      if (p.content_block.type === "tool_use") {
        blocks.set(p.index, {
          id: p.content_block.id,
          name: p.content_block.name,
          input: p.content_block.input,
          json: ""
        })
      }
    }
    if (p.type === "content_block_delta") {
      if (p.delta.type === "text_delta") text += p.delta.text
      if (p.delta.type === "input_json_delta" && blocks.has(p.index)) blocks.get(p.index)!.json += p.delta.partial_json
    }
    if (p.type === "content_block_stop" && blocks.has(p.index)) {
      const b = blocks.get(p.index)!
      calls.push({ id: b.id, name: b.name, arguments: b.json === "" ? b.input : JSON.parse(b.json) })
      blocks.delete(p.index)
    }
    if (p.type === "message_delta" && p.delta.stop_reason) stop = p.delta.stop_reason
  }
  const table: Record<string, string> = {
    end_turn: "stop",
    tool_use: "tool_calls",
    max_tokens: "length",
    refusal: "content_filter"
  }
  return {
    text,
    toolCalls: calls,
    finish: stop === null ? "other" : table[stop],
    providerReason: stop ?? "unknown",
    model: payloads.find((p) => p.type === "message_start")?.message.model
  }
}

/** Splits payloads after every payload that `isTerminal` accepts. */
const split = (payloads: ReadonlyArray<Json>, isTerminal: (p: Json) => boolean): Array<Array<Json>> => {
  const parts: Array<Array<Json>> = [[]]
  for (const p of payloads) {
    parts[parts.length - 1].push(p)
    if (isTerminal(p)) parts.push([])
  }
  return parts.filter((part) => part.length > 0)
}

/** Raw Anthropic wire SSE: (event name, JSON data) pairs. */
const wireEvents = (file: string): Array<{ event: string; data: string }> =>
  Fs.readFileSync(Path.join(root, file), "utf8").split(/\n\n/).map((block) => {
    const event = /^event: (.*)$/m.exec(block)?.[1] ?? ""
    const data = block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n")
    return { event, data }
  }).filter((e) => e.data.length > 0)

// ---------------------------------------------------------------------------------------------------------------
// providers over an in-memory client

const options = { apiKey: Redacted.make(KEY), baseUrl: "http://127.0.0.1:9" }
const providers = {
  chat: (client: HttpClient.HttpClient) =>
    Effect.provideService(OpenAiChat.make(options), HttpClient.HttpClient, client),
  responses: (client: HttpClient.HttpClient) =>
    Effect.provideService(OpenAiResponses.make(options), HttpClient.HttpClient, client),
  subscription: (client: HttpClient.HttpClient) =>
    Effect.provideService(Subscription.make(options), HttpClient.HttpClient, client),
  anthropic: (client: HttpClient.HttpClient) =>
    Effect.provideService(AnthropicMessages.make(options), HttpClient.HttpClient, client)
}
type Kind = keyof typeof providers

const decode = (kind: Kind, sse: string, chunkSize?: number) =>
  Effect.flatMap(
    providers[kind](fakeClient(sse, chunkSize === undefined ? {} : { chunkSize })),
    (provider) => run(provider)
  )

const assertDecodes = (kind: Kind, sse: string, expected: Expected) =>
  Effect.gen(function*() {
    // byte-by-byte delivery for small files, a few odd sizes for the large ones: every chunk boundary is exercised
    for (const chunkSize of sse.length < 16_384 ? [1, 7, 4096] : [13, 1024, 65_536]) {
      const { events, result } = yield* decode(kind, sse, chunkSize)
      if (Either.isLeft(result)) assert.fail(`decoding failed: ${String(result.left)}`)
      const summary = summarize(events)
      assert.strictEqual(summary.text, expected.text)
      assert.deepStrictEqual(summary.toolCalls, expected.toolCalls)
      assert.deepStrictEqual(summary.finish, { reason: expected.finish, providerReason: expected.providerReason })
      assert.strictEqual(summary.model, expected.model)
      assert.strictEqual(events[events.length - 1]._tag, "Finish")
    }
  })

const assertFails = (kind: Kind, sse: string, reason: string) =>
  Effect.gen(function*() {
    const { events, result } = yield* decode(kind, sse)
    if (Either.isRight(result)) assert.fail(`expected ${reason}, got a complete stream`)
    assert.strictEqual((result.left as Json).reason, reason, String(result.left))
    assert.isFalse(events.some((e) => e._tag === "Finish"), "no Finish before a failure")
    return events
  })

// ---------------------------------------------------------------------------------------------------------------

describe("recorded openai-chat streams", () => {
  const files = [...list("openai-chat", ".txt"), ...list("openai-compatible", ".txt")]

  it("finds the fixtures", () => {
    assert.deepStrictEqual(files, [
      "openai-chat/openai-text.chunks.txt",
      "openai-compatible/issue-15789-step-1.chunks.txt"
    ])
  })

  for (const file of files) {
    describe(file, () => {
      const raw = lines(file)
      const payloads = raw.map((l) => JSON.parse(l))
      const expected = chatReference(payloads)
      const finishAt = payloads.findIndex((p) => p.choices?.some((c: Json) => c.finish_reason))

      it.effect("decodes to the reference reading", () => assertDecodes("chat", toSse(raw), expected))
      it.effect("decodes with a trailing [DONE] too", () =>
        assertDecodes("chat", toSse(raw) + "data: [DONE]\n\n", expected))
      it.effect("without its terminal chunk: PrematureEof", () =>
        assertFails("chat", toSse(raw.filter((_, i) => i !== finishAt)), "PrematureEof"))
      it.effect("without its terminal chunk but with [DONE]: PrematureEof", () =>
        assertFails("chat", toSse(raw.slice(0, finishAt)) + "data: [DONE]\n\n", "PrematureEof"))
      it.effect("cut in the middle of the terminal event: PrematureEof", () => {
        const sse = toSse(raw.slice(0, finishAt + 1))
        return assertFails("chat", sse.slice(0, sse.length - Math.floor(raw[finishAt].length / 2)), "PrematureEof")
      })
      it.effect("cut in the middle of an early event: PrematureEof", () => {
        const sse = toSse(raw.slice(0, 3))
        return assertFails("chat", sse.slice(0, sse.length - 20), "PrematureEof")
      })
    })
  }

  it("the reference reading of the recorded files", () => {
    const tool = chatReference(lines("openai-compatible/issue-15789-step-1.chunks.txt").map((l) => JSON.parse(l)))
    assert.deepStrictEqual(tool, {
      text: "PRE_TOOL",
      toolCalls: [{ id: "call_NZa7xqfefoaMI2YYHowVXVlU", name: "weather", arguments: {} }],
      finish: "tool_calls",
      providerReason: "tool_calls",
      model: "gpt-4o-2024-08-06"
    })
    const text = chatReference(lines("openai-chat/openai-text.chunks.txt").map((l) => JSON.parse(l)))
    assert.isTrue(text.text.startsWith("**Holiday Name"))
    assert.strictEqual(text.finish, "stop")
    assert.strictEqual(text.model, "gpt-4.1-nano-2025-04-14")
  })

  it.effect("usage after the finish is reported, and Finish comes last", () =>
    Effect.gen(function*() {
      const { events } = yield* decode("chat", toSse(lines("openai-chat/openai-text.chunks.txt")))
      const summary = summarize(events)
      assert.deepStrictEqual(summary.usage, { inputTokens: 16, outputTokens: 300, cacheReadTokens: 0 })
      assert.strictEqual(summary.model, "gpt-4.1-nano-2025-04-14")
    }))

  it.effect("a stream that ends without [DONE] after its finish and usage chunks completes, with its usage", () =>
    Effect.gen(function*() {
      const raw = lines("openai-chat/openai-text.chunks.txt")
      const usageAt = raw.findIndex((l) => JSON.parse(l).usage != null)
      const finishAt = raw.findIndex((l) => JSON.parse(l).choices?.some((c: Json) => c.finish_reason))
      // the recording: the finish chunk, then the usage chunk, then the body's end (no [DONE] in the file)
      assert.isAbove(usageAt, finishAt)
      assert.notInclude(raw.join("\n"), "[DONE]")
      const { events, result } = yield* decode("chat", toSse(raw))
      assert.isTrue(Either.isRight(result), String(Either.isLeft(result) ? result.left : ""))
      assert.deepStrictEqual(events.slice(-2).map((e) => e._tag), ["Usage", "Finish"])
      assert.deepStrictEqual(summarize(events).usage, { inputTokens: 16, outputTokens: 300, cacheReadTokens: 0 })
    }))

  it.effect("cut inside the tool-call JSON: PrematureEof, no tool call emitted", () =>
    Effect.gen(function*() {
      const raw = lines("openai-compatible/issue-15789-step-1.chunks.txt")
      const argsAt = raw.findIndex((l) => l.includes(`"arguments":"{}"`))
      const cut = [...raw.slice(0, argsAt), raw[argsAt].replace(`"arguments":"{}"`, `"arguments":"{"`)]
      const events = yield* assertFails("chat", toSse(cut), "PrematureEof")
      assert.isFalse(events.some((e) => e._tag === "ToolCallComplete"))
      // mid-event inside the JSON
      const sse = toSse(raw.slice(0, argsAt + 1))
      yield* assertFails("chat", sse.slice(0, sse.indexOf(`"arguments":"{}"`) + 15), "PrematureEof")
    }))

  it.effect("incomplete tool-call JSON at the terminal: TruncatedToolArguments, never emitted", () =>
    Effect.gen(function*() {
      const raw = lines("openai-compatible/issue-15789-step-1.chunks.txt")
      const truncated = raw.map((l) => l.replace(`"arguments":"{}"`, `"arguments":"{\\"city\\":\\"Par"`))
      const events = yield* assertFails("chat", toSse(truncated), "TruncatedToolArguments")
      assert.isFalse(events.some((e) => e._tag === "ToolCallComplete"))
    }))
})

describe("recorded openai-responses streams", () => {
  const files = list("openai-responses", ".txt")

  it("finds the fixtures", () => {
    assert.strictEqual(files.length, 18)
  })

  for (const file of files) {
    describe(file, () => {
      const raw = lines(file)
      const parts = split(raw.map((l) => JSON.parse(l)), (p) => p.type === "response.completed")
      const rawParts = split(raw, (l) => JSON.parse(l).type === "response.completed")

      rawParts.forEach((part, i) => {
        const expected = responsesReference(parts[i])
        it.effect(`response ${i + 1}/${parts.length} decodes to the reference reading`, () =>
          assertDecodes("responses", toSse(part), expected))
        it.effect(`response ${i + 1}/${parts.length} decodes through subscription too`, () =>
          assertDecodes("subscription", toSse(part), expected))
      })

      it.effect("the whole file decodes to its first response", () =>
        assertDecodes("responses", toSse(raw), responsesReference(parts[0])))

      const first = rawParts[0]
      it.effect("without its terminal event: PrematureEof", () =>
        assertFails("responses", toSse(first.slice(0, -1)), "PrematureEof"))
      it.effect("without its terminal event, [DONE] is not a terminal: PrematureEof", () =>
        assertFails("responses", toSse(first.slice(0, -1)) + "data: [DONE]\n\n", "PrematureEof"))
      it.effect("cut in the middle of the terminal event: PrematureEof", () => {
        const sse = toSse(first)
        return assertFails(
          "responses",
          sse.slice(0, sse.length - Math.floor(first[first.length - 1].length / 2)),
          "PrematureEof"
        )
      })

      const argsAt = first.findIndex((l) => JSON.parse(l).type === "response.function_call_arguments.delta")
      if (argsAt >= 0) {
        it.effect("cut inside the tool-call JSON: PrematureEof, no tool call emitted", () =>
          Effect.gen(function*() {
            const events = yield* assertFails("responses", toSse(first.slice(0, argsAt + 1)), "PrematureEof")
            assert.isFalse(events.some((e) => e._tag === "ToolCallComplete"))
            assert.isTrue(events.some((e) => e._tag === "ToolCallDelta"))
            const sse = toSse(first.slice(0, argsAt + 1))
            yield* assertFails("responses", sse.slice(0, sse.length - 10), "PrematureEof")
          }))
        it.effect("terminal with incomplete tool-call JSON: TruncatedToolArguments, never emitted", () =>
          Effect.gen(function*() {
            const cut = first.map((l) => {
              const p = JSON.parse(l)
              const chop = (item: Json) => {
                if (item?.type === "function_call") item.arguments = item.arguments.slice(0, -2)
              }
              chop(p.item)
              for (const o of p.response?.output ?? []) chop(o)
              if (p.type === "response.function_call_arguments.done") p.arguments = p.arguments.slice(0, -2)
              return JSON.stringify(p)
            })
            const events = yield* assertFails("responses", toSse(cut), "TruncatedToolArguments")
            assert.isFalse(events.some((e) => e._tag === "ToolCallComplete"))
          }))
      }
    })
  }

  it.effect("the served model is the response's: the Finish names it", () =>
    Effect.gen(function*() {
      const raw = lines("openai-responses/openai-tool-search.1.chunks.txt")
      const { events } = yield* decode("responses", toSse(raw))
      assert.strictEqual(summarize(events).model, "gpt-5.4-2026-03-05")
    }))

  it("the reference reading of a recorded function call", () => {
    const parts = split(
      lines("openai-responses/openai-tool-search.1.chunks.txt").map((l) => JSON.parse(l)),
      (p) => p.type === "response.completed"
    )
    assert.deepStrictEqual(responsesReference(parts[0]).toolCalls.map((c) => [c.name, c.arguments]), [
      ["get_weather", { location: "San Francisco, CA", unit: "fahrenheit" }]
    ])
  })
})

describe("recorded anthropic streams", () => {
  const files = list("anthropic", ".txt")

  it("finds the fixtures", () => {
    assert.strictEqual(files.length, 18)
  })

  for (const file of files) {
    describe(file, () => {
      const raw = lines(file)
      const parts = split(raw.map((l) => JSON.parse(l)), (p) => p.type === "message_stop")
      const rawParts = split(raw, (l) => JSON.parse(l).type === "message_stop")

      rawParts.forEach((part, i) => {
        const expected = anthropicReference(parts[i])
        it.effect(`message ${i + 1}/${parts.length} decodes to the reference reading`, () =>
          assertDecodes("anthropic", toSse(part), expected))
      })

      it.effect("the whole file decodes to its first message", () =>
        assertDecodes("anthropic", toSse(raw), anthropicReference(parts[0])))

      const first = rawParts[0]
      it.effect("without message_stop: PrematureEof", () =>
        assertFails("anthropic", toSse(first.slice(0, -1)), "PrematureEof"))
      it.effect("cut in the middle of message_stop: PrematureEof", () => {
        const sse = toSse(first)
        return assertFails("anthropic", sse.slice(0, sse.length - 12), "PrematureEof")
      })

      const jsonAt = first.findIndex((l) => {
        const p = JSON.parse(l)
        return p.type === "content_block_delta" && p.delta.type === "input_json_delta" &&
          first.some((m) => {
            const q = JSON.parse(m)
            return q.type === "content_block_start" && q.index === p.index && q.content_block.type === "tool_use"
          })
      })
      if (jsonAt >= 0) {
        it.effect("cut inside the tool-call JSON: PrematureEof, no tool call emitted", () =>
          Effect.gen(function*() {
            const events = yield* assertFails("anthropic", toSse(first.slice(0, jsonAt + 1)), "PrematureEof")
            assert.isFalse(events.some((e) => e._tag === "ToolCallComplete"))
            const sse = toSse(first.slice(0, jsonAt + 1))
            yield* assertFails("anthropic", sse.slice(0, sse.length - 8), "PrematureEof")
          }))
        it.effect("terminal with incomplete tool-call JSON: TruncatedToolArguments, never emitted", () =>
          Effect.gen(function*() {
            const index = JSON.parse(first[jsonAt]).index
            const lastDelta = first.reduce((at, l, i) => {
              const p = JSON.parse(l)
              return p.type === "content_block_delta" && p.index === index ? i : at
            }, -1)
            const cut = first.filter((_, i) => i !== lastDelta)
            const events = yield* assertFails("anthropic", toSse(cut), "TruncatedToolArguments")
            assert.isFalse(events.some((e) => e._tag === "ToolCallComplete"))
          }))
      }
    })
  }

  it.effect("the served model is message_start's: the Finish names it", () =>
    Effect.gen(function*() {
      const { events } = yield* decode("anthropic", toSse(lines("anthropic/anthropic-text.chunks.txt")))
      assert.strictEqual(summarize(events).model, "claude-sonnet-4-5-20250929")
    }))

  it("the reference reading of recorded tool calls", () => {
    const read = (file: string) => anthropicReference(lines(file).map((l) => JSON.parse(l)))
    const json = read("anthropic/anthropic-json-other-tool.1.chunks.txt")
    assert.strictEqual(json.toolCalls.length, 1)
    assert.strictEqual(json.toolCalls[0].name, "weather")
    assert.strictEqual(json.finish, "tool_calls")
    const parts = split(
      lines("anthropic/anthropic-programmatic-tool-calling.1.chunks.txt").map((l) => JSON.parse(l)),
      (p) => p.type === "message_stop"
    )
    assert.strictEqual(parts.length, 15)
    assert.deepStrictEqual(anthropicReference(parts[1]).toolCalls.map((c) => [c.name, c.arguments]), [
      ["rollDie", { player: "player2" }]
    ])
  })
})

describe("recorded anthropic wire streams", () => {
  const files = list("wire", ".sse")

  it("finds the fixtures", () => {
    assert.strictEqual(files.length, 3)
  })

  for (const file of files) {
    describe(file, () => {
      const sse = Fs.readFileSync(Path.join(root, file), "utf8")
      const events = wireEvents(file)
      const expected = anthropicReference(events.filter((e) => e.event !== "ping").map((e) => JSON.parse(e.data)))

      it.effect("decodes the raw bytes to the reference reading", () => assertDecodes("anthropic", sse, expected))
      it.effect("without message_stop: PrematureEof", () =>
        assertFails("anthropic", sse.slice(0, sse.lastIndexOf("event: message_stop")), "PrematureEof"))
      it.effect("cut in the middle of message_stop: PrematureEof", () =>
        assertFails("anthropic", sse.slice(0, sse.lastIndexOf("event: message_stop") + 30), "PrematureEof"))
      it.effect("cut in the middle of the stream: PrematureEof", () =>
        assertFails("anthropic", sse.slice(0, Math.floor(sse.length / 2)), "PrematureEof"))
    })
  }

  it("the reference reading of the refusal stream", () => {
    const expected = anthropicReference(
      wireEvents("wire/stream-a-refusal.sse").filter((e) => e.event !== "ping").map((e) => JSON.parse(e.data))
    )
    assert.strictEqual(expected.finish, "content_filter")
    assert.strictEqual(expected.providerReason, "refusal")
    assert.isTrue(expected.text.length > 0)
  })
})
