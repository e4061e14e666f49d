/**
 * The official `openai` SDK's Responses client as a downstream client of the relay in `hold` mode, in front of the
 * simulator: `responses.create({stream: true})`, `responses.stream(...).finalResponse()` and the whole
 * `responses.create`, each one whole answer across every recoverable fault class (a 503, a reset mid-stream, a cut
 * after content, a 429 with `Retry-After`, a stall, a malformed chunk), keepalive comments included; a tool call cut
 * mid-arguments upstream reaching the SDK as one complete call; an upstream 400 as the SDK's `BadRequestError`.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import { relay } from "./support.js"
import { SDK_TEXT, sdkFaults, sdkScript } from "./support/relayFaults.js"

const client = (url: string) => new OpenAI({ apiKey: "downstream-key", baseURL: `${url}/v1`, maxRetries: 0 })
// keepalives every 100 ms, so that the waits (a Retry-After, a stall) send some before the answer
const harness = () => relay(sdkScript, { keepalive: "100 millis", idleTimeoutMs: 300, keys: ["downstream-key"] })

const tools = [{
  type: "function" as const,
  name: "get_weather",
  description: "The weather in a city",
  parameters: { type: "object", properties: { city: { type: "string" }, unit: { type: "string" } } },
  strict: false
}]

describe("openai SDK Responses against the relay (hold)", () => {
  for (const model of sdkFaults) {
    it.live(`${model}: responses.create({stream: true}), one whole answer`, () =>
      Effect.gen(function*() {
        const h = yield* harness()
        const result = yield* Effect.promise(async () => {
          const stream = await client(h.url).responses.create({ model, input: "Say it.", stream: true })
          const types: Array<string> = []
          let text = ""
          let completed: OpenAI.Responses.Response | undefined
          for await (const event of stream) {
            types.push(event.type)
            if (event.type === "response.output_text.delta") text += event.delta
            if (event.type === "response.completed") completed = event.response
          }
          return { types, text, completed }
        })
        assert.strictEqual(result.text, SDK_TEXT)
        assert.strictEqual(result.types[0], "response.created")
        assert.strictEqual(result.types.at(-1), "response.completed")
        assert.notInclude(result.types, "error")
        assert.strictEqual(result.completed!.status, "completed")
        assert.strictEqual(result.completed!.output_text ?? SDK_TEXT, SDK_TEXT)
        assert.strictEqual(result.completed!.output.length, 1)
        assert.isAbove(result.completed!.usage!.output_tokens, 0)
        assert.strictEqual((yield* h.sim.requestsFor(model)).length, 2)
      }).pipe(Effect.scoped), 20_000)

    it.live(`${model}: responses.stream(...).finalResponse(), one whole answer`, () =>
      Effect.gen(function*() {
        const h = yield* harness()
        const result = yield* Effect.promise(async () => {
          const stream = client(h.url).responses.stream({ model, input: "Say it." })
          const snapshots: Array<string> = []
          stream.on("response.output_text.delta", (e) => snapshots.push(e.snapshot))
          const final = await stream.finalResponse()
          return { final, snapshots }
        })
        assert.strictEqual(result.final.output_text, SDK_TEXT)
        assert.strictEqual(result.final.status, "completed")
        assert.strictEqual(result.final.model, model)
        assert.strictEqual(result.snapshots.at(-1), SDK_TEXT)
        // every snapshot a prefix of the answer: nothing discarded was ever shown
        for (const snapshot of result.snapshots) assert.isTrue(SDK_TEXT.startsWith(snapshot))
        assert.strictEqual((yield* h.sim.requestsFor(model)).length, 2)
      }).pipe(Effect.scoped), 20_000)

    it.live(`${model}: responses.create, one whole response`, () =>
      Effect.gen(function*() {
        const h = yield* harness()
        const response = yield* Effect.promise(() => client(h.url).responses.create({ model, input: "Say it." }))
        assert.strictEqual(response.output_text, SDK_TEXT)
        assert.strictEqual(response.status, "completed")
        assert.strictEqual(response.model, model)
        assert.isAbove(response.usage!.output_tokens, 0)
        assert.strictEqual((yield* h.sim.requestsFor(model)).length, 2)
      }).pipe(Effect.scoped), 20_000)
  }

  describe("a tool call cut mid-arguments upstream is one complete call", () => {
    const assertCall = (output: ReadonlyArray<OpenAI.Responses.ResponseOutputItem>) => {
      assert.strictEqual(output.length, 1)
      const call = output[0]!
      assert.strictEqual(call.type, "function_call")
      if (call.type !== "function_call") return
      assert.strictEqual(call.name, "get_weather")
      assert.deepStrictEqual(JSON.parse(call.arguments), { city: "Paris", unit: "celsius" })
      assert.isTrue(call.call_id.length > 0)
    }

    it.live("responses.create({stream: true})", () =>
      Effect.gen(function*() {
        const h = yield* harness()
        const result = yield* Effect.promise(async () => {
          const stream = await client(h.url).responses.create({
            model: "tool-cut",
            input: "Weather in Paris?",
            tools,
            stream: true
          })
          const added: Array<string> = []
          const done: Array<string> = []
          let completed: OpenAI.Responses.Response | undefined
          for await (const event of stream) {
            if (event.type === "response.output_item.added") added.push(event.item.type)
            if (event.type === "response.function_call_arguments.done") done.push(event.arguments)
            if (event.type === "response.completed") completed = event.response
          }
          return { added, done, completed }
        })
        assert.deepStrictEqual(result.added, ["function_call"])
        assert.strictEqual(result.done.length, 1)
        assert.deepStrictEqual(JSON.parse(result.done[0]!), { city: "Paris", unit: "celsius" })
        assertCall(result.completed!.output)
        assert.strictEqual((yield* h.sim.requestsFor("tool-cut")).length, 2)
      }).pipe(Effect.scoped), 20_000)

    it.live("responses.stream(...).finalResponse()", () =>
      Effect.gen(function*() {
        const h = yield* harness()
        const final = yield* Effect.promise(() =>
          client(h.url).responses.stream({ model: "tool-cut", input: "Weather in Paris?", tools }).finalResponse()
        )
        assertCall(final.output)
        assert.strictEqual(final.output_text, "")
      }).pipe(Effect.scoped), 20_000)

    it.live("responses.create", () =>
      Effect.gen(function*() {
        const h = yield* harness()
        const response = yield* Effect.promise(() =>
          client(h.url).responses.create({ model: "tool-cut", input: "Weather in Paris?", tools })
        )
        assertCall(response.output)
        // the upstream request carried the tool
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
            client(h.url).responses.create({ model: "refused", input: "Say it.", stream: streamed }).then(
              () => undefined,
              (e: unknown) => e
            )
          )
          assert.instanceOf(error, OpenAI.BadRequestError)
          const bad = error as InstanceType<typeof OpenAI.BadRequestError>
          assert.strictEqual(bad.status, 400)
          assert.strictEqual(bad.code, "context_length_exceeded")
          assert.strictEqual((yield* h.sim.requestsFor("refused")).length, 1)
        }).pipe(Effect.scoped),
      20_000
    )
  }

  it.live(
    "responses.stream(...): an upstream 400 rejects finalResponse() with BadRequestError",
    () =>
      Effect.gen(function*() {
        const h = yield* harness()
        const error = yield* Effect.promise(() =>
          client(h.url).responses.stream({ model: "refused", input: "Say it." }).finalResponse().then(
            () => undefined,
            (e: unknown) => e
          )
        )
        assert.instanceOf(error, OpenAI.BadRequestError)
        assert.strictEqual((error as InstanceType<typeof OpenAI.BadRequestError>).status, 400)
      }).pipe(Effect.scoped),
    20_000
  )
})

describe("openai SDK Responses against the relay (reset)", () => {
  const resetClient = (url: string) =>
    new OpenAI({
      apiKey: "downstream-key",
      baseURL: `${url}/v1`,
      maxRetries: 0,
      defaultHeaders: { "x-reprise-preview": "reset" }
    })

  it.live(
    "responses.create({stream: true}) yields the reprise events' data among the events and does not throw on a rollback",
    () =>
      Effect.gen(function*() {
        const h = yield* relay(sdkScript, { idleTimeoutMs: 300 })
        const seen = yield* Effect.promise(async () => {
          const stream = await resetClient(h.url).responses.create({
            model: "reset-mid-stream",
            input: "Say it.",
            stream: true
          })
          const out: Array<Record<string, any>> = []
          for await (const event of stream) out.push(event as never)
          return out
        })
        // the reprise events are objects without a `type`: attempt, rollback, attempt, commit
        const reprise = seen.filter((e) => e.type === undefined)
        assert.strictEqual(reprise.length, 4)
        assert.strictEqual(reprise[1]!.discardedChars, "The relay held".length)
        // a client that drops what came before the rollback keeps the answer alone
        const rollback = seen.indexOf(reprise[1]!)
        const text = (events: ReadonlyArray<Record<string, any>>) =>
          events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("")
        assert.strictEqual(text(seen.slice(0, rollback)), "The relay held")
        assert.strictEqual(text(seen.slice(rollback)), SDK_TEXT)
        const completed = seen.at(-1)!
        assert.strictEqual(completed.type, "response.completed")
        assert.strictEqual(completed.response.output.length, 1)
        assert.strictEqual(completed.response.output[0].content[0].text, SDK_TEXT)
      }).pipe(Effect.scoped),
    20_000
  )
})
