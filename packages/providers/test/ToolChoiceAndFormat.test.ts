/**
 * A request's `toolChoice` and `responseFormat` on the wire, for every protocol: the exact `tool_choice`,
 * `response_format` (Chat Completions), `text.format` (Responses, subscription) or system-text instruction
 * (Anthropic) in the body the loopback simulator records, through the real undici client; none of these fields when
 * the request has neither; the checks made before any send; and a replay that carries the same fields.
 */
import { assert, describe, layer } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import type * as Generation from "@reprise/core/Generation"
import * as Policy from "@reprise/core/Policy"
import * as Provider from "@reprise/core/Provider"
import * as Recovery from "@reprise/core/Recovery"
import * as Simulator from "@reprise/simulator/Simulator"
import { Chunk, Duration, Effect, Either, Fiber, Layer, Redacted, Stream, TestClock, TestContext } from "effect"
import * as AnthropicMessages from "../src/AnthropicMessages.js"
import * as HttpProvider from "../src/HttpProvider.js"
import * as OpenAiChat from "../src/OpenAiChat.js"
import * as OpenAiResponses from "../src/OpenAiResponses.js"
import * as ProviderOptions from "../src/ProviderOptions.js"
import * as Subscription from "../src/Subscription.js"
import { KEY } from "./support/harness.js"

type Json = any

const tools: ReadonlyArray<Generation.ToolDefinition> = [
  { name: "now", description: "The time", parameters: { type: "object", properties: {} } },
  {
    name: "append_file",
    description: "Appends a line",
    parameters: { type: "object", properties: { path: { type: "string" }, line: { type: "string" } } }
  }
]

const Person = {
  type: "object",
  required: ["name", "age"],
  properties: { name: { type: "string" }, age: { type: "number" } },
  additionalProperties: false
}

const base: Generation.GenerationRequest = {
  model: "sim-model",
  system: "Be brief.",
  maxTokens: 64,
  messages: [{ role: "user", text: "hello" }]
}

const requestBody: Record<
  ProviderOptions.Protocol,
  (request: Generation.GenerationRequest) => Record<string, unknown>
> = {
  "openai-chat": OpenAiChat.requestBody,
  "openai-responses": OpenAiResponses.requestBody,
  anthropic: (request) => AnthropicMessages.requestBody(request),
  subscription: Subscription.requestBody
}

/** The `tool_choice` each protocol sends for each choice. */
const wireChoice = (protocol: ProviderOptions.Protocol, choice: Generation.ToolChoice): unknown => {
  if (protocol === "anthropic") {
    return typeof choice === "string"
      ? { type: choice === "required" ? "any" : choice }
      : { type: "tool", name: choice.tool }
  }
  if (typeof choice === "string") return choice
  return protocol === "openai-chat"
    ? { type: "function", function: { name: choice.tool } }
    : { type: "function", name: choice.tool }
}

const choices: ReadonlyArray<Generation.ToolChoice> = ["auto", "none", "required", { tool: "append_file" }]

const providerLayer = (protocol: ProviderOptions.Protocol) =>
  Layer.unwrapEffect(
    Effect.map(
      Simulator.Simulator,
      (sim) => HttpProvider.layerUndici(protocol, { apiKey: Redacted.make(KEY), baseUrl: sim.baseUrl(protocol) })
    )
  )

/** One generation in its own Budget scope: its events, how it ended, and the sends the Budget saw. */
const generate = (request: Generation.GenerationRequest) =>
  Effect.gen(function*() {
    const provider = yield* Provider.Provider
    const budget = yield* Budget.Budget
    const result = yield* provider.stream(request).pipe(Stream.runCollect, Effect.either)
    return {
      events: Either.isRight(result) ? Chunk.toArray(result.right) : [],
      failure: Either.isLeft(result) ? result.left as Json : undefined,
      sends: yield* budget.used
    }
  }).pipe(Budget.scoped)

/** Sends `request` to `protocol`'s route (default replies) and returns the one body the simulator recorded. */
const bodyOf = (protocol: ProviderOptions.Protocol, request: Generation.GenerationRequest) =>
  Effect.gen(function*() {
    const sim = yield* Simulator.Simulator
    yield* sim.clear
    const outcome = yield* generate(request)
    assert.isUndefined(outcome.failure, String(outcome.failure))
    const recorded = yield* sim.requestsTo(protocol)
    assert.strictEqual(recorded.length, 1)
    return recorded[0].body as Json
  }).pipe(Effect.provide(providerLayer(protocol)))

/** Lets socket events and promise callbacks run, without any clock. */
const settle = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve))).pipe(Effect.repeatN(3))

/** Under TestClock: waits until some fiber sleeps until `end` ms, then moves the clock there. */
const passSleepUntil = (end: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 2000; i++) {
      if (Chunk.some(yield* TestClock.sleeps(), (at) => at === end)) {
        return yield* TestClock.adjust(Duration.millis(end - (yield* TestClock.currentTimeMillis)))
      }
      yield* settle
    }
    assert.fail(`no fiber ever slept until ${end} ms on the test clock`)
  })

// One simulator for the file, on the live clock; a test that waits provides its own TestClock.
layer(Simulator.layer(), { excludeTestServices: true })("toolChoice and responseFormat on the wire", (it) => {
  for (const protocol of ProviderOptions.protocols) {
    describe(protocol, () => {
      it.effect("without toolChoice and responseFormat the body has none of their fields, as before", () =>
        Effect.gen(function*() {
          for (const request of [base, { ...base, tools }]) {
            const body = yield* bodyOf(protocol, request)
            for (const field of ["tool_choice", "response_format", "text", "output_config", "output_format"]) {
              assert.notProperty(body, field)
            }
            assert.deepStrictEqual(body, requestBody[protocol](request))
            assert.strictEqual(body.system ?? body.instructions ?? body.messages[0].content, "Be brief.")
          }
          // without tools, "auto" and "none" are what every protocol does anyway: nothing is added
          for (const toolChoice of ["auto", "none"] as const) {
            assert.deepStrictEqual(yield* bodyOf(protocol, { ...base, toolChoice }), requestBody[protocol](base))
          }
        }))

      it.effect("each toolChoice is the protocol's own tool_choice, with the tools (none keeps them)", () =>
        Effect.gen(function*() {
          for (const toolChoice of choices) {
            const body = yield* bodyOf(protocol, { ...base, tools, toolChoice })
            assert.deepStrictEqual(body.tool_choice, wireChoice(protocol, toolChoice), JSON.stringify(toolChoice))
            assert.deepStrictEqual(body, {
              ...requestBody[protocol]({ ...base, tools }),
              tool_choice: wireChoice(protocol, toolChoice)
            })
            assert.strictEqual(body.tools.length, 2)
          }
        }))

      it.effect("a responseFormat is the protocol's structured output (Anthropic: an instruction)", () =>
        Effect.gen(function*() {
          for (const description of [undefined, "A person and their age"]) {
            const responseFormat: Generation.ResponseFormat = {
              type: "json",
              name: "person",
              schema: Person,
              ...(description === undefined ? {} : { description })
            }
            const body = yield* bodyOf(protocol, { ...base, responseFormat })
            const plain = requestBody[protocol](base)
            const native = {
              name: "person",
              ...(description === undefined ? {} : { description }),
              schema: Person,
              strict: false
            }
            switch (protocol) {
              case "openai-chat":
                assert.deepStrictEqual(body.response_format, { type: "json_schema", json_schema: native })
                assert.deepStrictEqual(body, { ...plain, response_format: body.response_format })
                break
              case "openai-responses":
              case "subscription":
                assert.deepStrictEqual(body.text, { format: { type: "json_schema", ...native } })
                assert.deepStrictEqual(body, { ...plain, text: body.text })
                break
              case "anthropic": {
                assert.strictEqual(
                  body.system,
                  "Be brief.\n\nAnswer with one JSON value named \"person\"" +
                    (description === undefined ? "" : ` (${description})`) +
                    " and nothing else (no prose, no code fence). It must match this JSON Schema: " +
                    JSON.stringify(Person)
                )
                assert.deepStrictEqual(body, { ...plain, system: body.system })
                break
              }
            }
          }
        }))

      it.effect("a request whose toolChoice or format name cannot be satisfied fails before any send", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          const cases: ReadonlyArray<readonly [Generation.GenerationRequest, string]> = [
            [
              { ...base, tools, toolChoice: { tool: "missing" } },
              "\"missing\", which is not among the request's tools"
            ],
            [{ ...base, toolChoice: { tool: "now" } }, "the tool \"now\", but the request has no tools"],
            [{ ...base, toolChoice: "required" }, "\"required\" asks for a tool call, but the request has no tools"],
            [{ ...base, toolChoice: "any" as any, tools }, "toolChoice must be"],
            [
              { ...base, responseFormat: { type: "json", name: "a person", schema: Person } },
              "must be 1 to 64 letters, digits, underscores or dashes"
            ]
          ]
          for (const [request, says] of cases) {
            yield* sim.clear
            const outcome = yield* generate(request)
            assert.strictEqual(outcome.failure?._tag, "ProviderRejection")
            assert.strictEqual(outcome.failure?.reason, "BadRequest")
            assert.include(outcome.failure?.message, says)
            assert.include(outcome.failure?.message, protocol)
            assert.strictEqual(outcome.sends, 0)
            assert.strictEqual(yield* sim.count(protocol), 0)
          }
          // inside recovery: permanent, so one failure and still no send
          yield* sim.clear
          const failure: Json = yield* Effect.flip(Recovery.generate({ ...base, tools, toolChoice: { tool: "x" } }))
          assert.strictEqual(failure._tag, "ProviderRejection")
          assert.strictEqual(yield* sim.count(protocol), 0)
        }).pipe(Effect.provide(providerLayer(protocol))))

      it.effect("a fault, then success: the replay carries the same tool_choice and format; the call commits", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* sim.setScript({
            routes: {
              [protocol]: {
                steps: [
                  { kind: "status", status: 503 },
                  { kind: "stream", reply: { toolCalls: [{ id: "call_1", name: "now", arguments: {} }] } }
                ]
              }
            }
          })
          const responseFormat: Generation.ResponseFormat = { type: "json", name: "person", schema: Person }
          const request: Generation.GenerationRequest = { ...base, tools, toolChoice: { tool: "now" }, responseFormat }
          const fiber = yield* Effect.fork(Recovery.generate(request))
          yield* passSleepUntil(1000)
          const reply = yield* Fiber.join(fiber)
          assert.strictEqual(reply.attempts, 2)
          assert.deepStrictEqual(reply.toolCalls, [{ id: "call_1", name: "now", arguments: {} }])
          const [first, second] = yield* sim.requestsTo(protocol)
          assert.deepStrictEqual(second.body, first.body)
          assert.deepStrictEqual((second.body as Json).tool_choice, wireChoice(protocol, { tool: "now" }))
          assert.deepStrictEqual(second.body, requestBody[protocol](request))
        }).pipe(
          Effect.provide(providerLayer(protocol)),
          Effect.provide(Policy.layer({ jitter: false })),
          Effect.provide(TestContext.TestContext)
        ))
    })
  }
})
