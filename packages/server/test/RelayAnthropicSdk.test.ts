/**
 * The official `@anthropic-ai/sdk` as a downstream client of the relay in `hold` mode, in front of the simulator:
 * `messages.create({stream: true})`, `messages.stream(...).finalMessage()` and the whole `messages.create`, each one
 * whole answer across every recoverable fault class (a 503, a reset mid-stream, a cut after content, a 429 with
 * `Retry-After`, a stall, a malformed chunk), keepalive comments included; a tool call cut mid-arguments upstream
 * reaching the SDK as one complete `tool_use` block; an upstream 400 as the SDK's `BadRequestError`.
 */
import Anthropic from "@anthropic-ai/sdk"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { relay } from "./support.js"
import { SDK_TEXT, sdkFaults, sdkScript } from "./support/relayFaults.js"

const client = (url: string) => new Anthropic({ apiKey: "downstream-key", baseURL: url, maxRetries: 0 })
// keepalives every 100 ms, so that the waits (a Retry-After, a stall) send some before the answer
const harness = () => relay(sdkScript, { keepalive: "100 millis", idleTimeoutMs: 300, keys: ["downstream-key"] })

const params = (model: string) => ({
  model,
  max_tokens: 256,
  messages: [{ role: "user" as const, content: "Say it." }]
})

const tools = [{
  name: "get_weather",
  description: "The weather in a city",
  input_schema: { type: "object" as const, properties: { city: { type: "string" }, unit: { type: "string" } } }
}]

describe("@anthropic-ai/sdk against the relay (hold)", () => {
  for (const model of sdkFaults) {
    it.live(`${model}: messages.create({stream: true}), one whole answer`, () =>
      Effect.gen(function*() {
        const h = yield* harness()
        const result = yield* Effect.promise(async () => {
          const stream = await client(h.url).messages.create({ ...params(model), stream: true })
          const types: Array<string> = []
          let text = ""
          let stop: string | null = null
          let outputTokens = 0
          for await (const event of stream) {
            types.push(event.type)
            if (event.type === "content_block_delta" && event.delta.type === "text_delta") text += event.delta.text
            if (event.type === "message_delta") {
              stop = event.delta.stop_reason
              outputTokens = event.usage.output_tokens
            }
          }
          return { types, text, stop, outputTokens }
        })
        assert.strictEqual(result.text, SDK_TEXT)
        assert.strictEqual(result.types[0], "message_start")
        assert.strictEqual(result.types.at(-1), "message_stop")
        assert.strictEqual(result.types.filter((t) => t === "content_block_start").length, 1)
        assert.strictEqual(result.stop, "end_turn")
        assert.isAbove(result.outputTokens, 0)
        assert.strictEqual((yield* h.sim.requestsFor(model)).length, 2)
      }).pipe(Effect.scoped), 20_000)

    it.live(`${model}: messages.stream(...).finalMessage(), one whole answer`, () =>
      Effect.gen(function*() {
        const h = yield* harness()
        const result = yield* Effect.promise(async () => {
          const stream = client(h.url).messages.stream(params(model))
          const texts: Array<string> = []
          stream.on("text", (delta) => texts.push(delta))
          const message = await stream.finalMessage()
          return { message, texts }
        })
        assert.deepStrictEqual(result.message.content.map((b) => b.type === "text" ? b.text : b.type), [SDK_TEXT])
        assert.strictEqual(result.texts.join(""), SDK_TEXT)
        assert.strictEqual(result.message.stop_reason, "end_turn")
        assert.strictEqual(result.message.model, model)
        assert.isAbove(result.message.usage.output_tokens, 0)
        assert.strictEqual((yield* h.sim.requestsFor(model)).length, 2)
      }).pipe(Effect.scoped), 20_000)

    it.live(`${model}: messages.create, one whole message`, () =>
      Effect.gen(function*() {
        const h = yield* harness()
        const message = yield* Effect.promise(() => client(h.url).messages.create(params(model)))
        assert.strictEqual(message.type, "message")
        assert.deepStrictEqual(message.content.map((b) => b.type === "text" ? b.text : b.type), [SDK_TEXT])
        assert.strictEqual(message.stop_reason, "end_turn")
        assert.strictEqual(message.model, model)
        assert.isAbove(message.usage.output_tokens, 0)
        assert.strictEqual((yield* h.sim.requestsFor(model)).length, 2)
      }).pipe(Effect.scoped), 20_000)
  }

  describe("a tool call cut mid-arguments upstream is one complete tool_use block", () => {
    const assertCall = (content: ReadonlyArray<Anthropic.ContentBlock>) => {
      assert.strictEqual(content.length, 1)
      const block = content[0]!
      assert.strictEqual(block.type, "tool_use")
      if (block.type !== "tool_use") return
      assert.strictEqual(block.name, "get_weather")
      assert.deepStrictEqual(block.input, { city: "Paris", unit: "celsius" })
      assert.isTrue(block.id.length > 0)
    }

    it.live("messages.create({stream: true})", () =>
      Effect.gen(function*() {
        const h = yield* harness()
        const result = yield* Effect.promise(async () => {
          const stream = await client(h.url).messages.create({ ...params("tool-cut"), tools, stream: true })
          const started: Array<string> = []
          let json = ""
          let stop: string | null = null
          for await (const event of stream) {
            if (event.type === "content_block_start") started.push(event.content_block.type)
            if (event.type === "content_block_delta" && event.delta.type === "input_json_delta") {
              json += event.delta.partial_json
            }
            if (event.type === "message_delta") stop = event.delta.stop_reason
          }
          return { started, json, stop }
        })
        assert.deepStrictEqual(result.started, ["tool_use"])
        assert.deepStrictEqual(JSON.parse(result.json), { city: "Paris", unit: "celsius" })
        assert.strictEqual(result.stop, "tool_use")
        assert.strictEqual((yield* h.sim.requestsFor("tool-cut")).length, 2)
      }).pipe(Effect.scoped), 20_000)

    it.live("messages.stream(...).finalMessage()", () =>
      Effect.gen(function*() {
        const h = yield* harness()
        const message = yield* Effect.promise(() =>
          client(h.url).messages.stream({ ...params("tool-cut"), tools }).finalMessage()
        )
        assertCall(message.content)
        assert.strictEqual(message.stop_reason, "tool_use")
      }).pipe(Effect.scoped), 20_000)

    it.live("messages.create", () =>
      Effect.gen(function*() {
        const h = yield* harness()
        const message = yield* Effect.promise(() => client(h.url).messages.create({ ...params("tool-cut"), tools }))
        assertCall(message.content)
        assert.strictEqual(message.stop_reason, "tool_use")
        const [first] = yield* h.sim.requestsFor("tool-cut")
        assert.include(JSON.stringify(first!.body), "get_weather")
      }).pipe(Effect.scoped), 20_000)
  })

  for (const streamed of [true, false]) {
    it.live(
      `an upstream 400 is the SDK's BadRequestError (status 400)${streamed ? ", streamed" : ""}`,
      () =>
        Effect.gen(function*() {
          const h = yield* harness()
          const error = yield* Effect.promise(() =>
            client(h.url).messages.create({ ...params("refused"), stream: streamed }).then(
              () => undefined,
              (e: unknown) => e
            )
          )
          assert.instanceOf(error, Anthropic.BadRequestError)
          const bad = error as InstanceType<typeof Anthropic.BadRequestError>
          assert.strictEqual(bad.status, 400)
          assert.include(bad.message, "too long")
          assert.strictEqual((yield* h.sim.requestsFor("refused")).length, 1)
        }).pipe(Effect.scoped),
      20_000
    )
  }

  it.live(
    "messages.stream(...): an upstream 400 rejects finalMessage() with BadRequestError",
    () =>
      Effect.gen(function*() {
        const h = yield* harness()
        const error = yield* Effect.promise(() =>
          client(h.url).messages.stream(params("refused")).finalMessage().then(() => undefined, (e: unknown) => e)
        )
        assert.instanceOf(error, Anthropic.BadRequestError)
        assert.strictEqual((error as InstanceType<typeof Anthropic.BadRequestError>).status, 400)
      }).pipe(Effect.scoped),
    20_000
  )
})

describe("@anthropic-ai/sdk against the relay (reset)", () => {
  const resetClient = (url: string) =>
    new Anthropic({
      apiKey: "downstream-key",
      baseURL: url,
      maxRetries: 0,
      defaultHeaders: { "x-reprise-preview": "reset" }
    })

  it.live(
    "messages.create({stream: true}) yields the reprise events' data; dropping the blocks before the rollback leaves the answer",
    () =>
      Effect.gen(function*() {
        const h = yield* relay(sdkScript, { idleTimeoutMs: 300 })
        const seen = yield* Effect.promise(async () => {
          const stream = await resetClient(h.url).messages.create({ ...params("reset-mid-stream"), stream: true })
          const out: Array<Record<string, any>> = []
          for await (const event of stream) out.push(event as never)
          return out
        })
        const reprise = seen.filter((e) => e.type === undefined)
        assert.strictEqual(reprise.length, 4)
        assert.strictEqual(reprise[1]!.discardedChars, "The relay held".length)
        const rollback = seen.indexOf(reprise[1]!)
        const dropped = new Set(
          seen.slice(0, rollback).filter((e) => e.type === "content_block_start").map((e) => e.index as number)
        )
        const text = seen.filter((e) =>
          e.type === "content_block_delta" && e.delta.type === "text_delta" && !dropped.has(e.index)
        ).map((e) => e.delta.text).join("")
        assert.strictEqual(text, SDK_TEXT)
        assert.strictEqual(seen.at(-1)!.type, "message_stop")
      }).pipe(Effect.scoped),
    20_000
  )

  it.live(
    "messages.stream(...) ignores the reprise events and keeps every block it was sent, the discarded one first",
    () =>
      Effect.gen(function*() {
        const h = yield* relay(sdkScript, { idleTimeoutMs: 300 })
        const message = yield* Effect.promise(() =>
          resetClient(h.url).messages.stream(params("reset-mid-stream")).finalMessage()
        )
        assert.deepStrictEqual(message.content.map((b) => b.type === "text" ? b.text : b.type), [
          "The relay held",
          SDK_TEXT
        ])
        assert.strictEqual(message.stop_reason, "end_turn")
      }).pipe(Effect.scoped),
    20_000
  )
})
