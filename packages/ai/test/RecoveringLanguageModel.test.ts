/**
 * The @effect/ai API (`LanguageModel.generateText`, `generateObject`, `streamText`, `Chat`, `Toolkit`) over
 * `RecoveringLanguageModel.layer` and the real undici provider of each protocol, against the loopback simulator with
 * faults. Every wait runs on the TestClock: a test waits for the recovery loop to park on its test-clock sleep, then
 * moves the clock; the simulator keeps its own sockets on the real clock.
 */
import * as AiError from "@effect/ai/AiError"
import * as Chat from "@effect/ai/Chat"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Response from "@effect/ai/Response"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, layer } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import * as Recovery from "@reprise/core/Recovery"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as Simulator from "@reprise/simulator/Simulator"
import { Chunk, ConfigProvider, Duration, Effect, Exit, Fiber, Layer, Option, Schema, Stream, TestClock } from "effect"
import * as RecoveringLanguageModel from "../src/RecoveringLanguageModel.js"
import * as RecoveryAiError from "../src/RecoveryAiError.js"
import {
  awaitSleepUntil,
  beforeCut,
  cut,
  exactBackoff,
  failureOf,
  fresh,
  model,
  outline,
  passBackoffUntil,
  passSleepWithin,
  protocols,
  recorder,
  script,
  settle,
  simulator,
  sseBody,
  Tools,
  tools,
  withReasoning
} from "./support.js"

const replayedOnce = ["AttemptStarted", "AttemptDiscarded", "RetryScheduled", "AttemptStarted", "Committed"]

const textOf = (parts: ReadonlyArray<Response.StreamPart<any>>): string =>
  parts.map((p) => (p.type === "text-delta" ? p.delta : "")).join("")

const idsOf = (parts: ReadonlyArray<Response.StreamPart<any>>): Array<string> => [
  ...new Set(parts.flatMap((p) => ("id" in p && typeof p.id === "string" && p.type.startsWith("text") ? [p.id] : [])))
]

const attemptsOf = (finish: Response.FinishPart | undefined): unknown => finish?.metadata.reprise?.attempts

// One simulator for the file; a fresh TestClock for every test (see `fresh`).
layer(simulator, { excludeTestServices: true })("RecoveringLanguageModel against the simulator", (it) => {
  for (const protocol of protocols) {
    describe(protocol, () => {
      it.effect("generateText: a cut stream is replayed and only the committed attempt becomes the response", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* script(protocol, { steps: [cut, { kind: "stream", reply: { text: "the committed answer" } }] })
          const rec = yield* recorder
          const fiber = yield* Effect.fork(
            LanguageModel.generateText({ prompt: "hello" }).pipe(Effect.provide(rec.layer))
          )
          yield* passBackoffUntil(1000)
          const response = yield* Fiber.join(fiber)
          assert.strictEqual(response.text, "the committed answer")
          assert.strictEqual(response.finishReason, "stop")
          assert.strictEqual(attemptsOf(response.content.find((p) => p.type === "finish")), 2)
          assert.deepStrictEqual(response.content.map((p) => p.type), ["text", "response-metadata", "finish"])
          // the model the provider named in its response (the simulator names the one asked for)
          const metadata = response.content.find((p) => p.type === "response-metadata")
          assert.deepStrictEqual(metadata?.type === "response-metadata" && metadata.modelId, Option.some("sim-model"))
          assert.strictEqual(yield* sim.count(protocol), 2)
          const notes = yield* rec.notes
          assert.deepStrictEqual(outline(notes), replayedOnce)
          const discarded = notes.find((n) => n._tag === "AttemptDiscarded")
          assert.strictEqual(discarded?._tag === "AttemptDiscarded" && discarded.discardedText, beforeCut)
        }).pipe(Effect.provide(model(protocol)), Effect.provide(exactBackoff), fresh))

      it.effect("streamText (committed, the default): the cut attempt never shows; one finish, after the commit", () =>
        Effect.gen(function*() {
          yield* script(protocol, { steps: [cut, { kind: "stream", reply: { text: "the committed answer" } }] })
          const fiber = yield* Effect.fork(Stream.runCollect(LanguageModel.streamText({ prompt: "hello" })))
          yield* passBackoffUntil(1000)
          const parts = Chunk.toArray(yield* Fiber.join(fiber))
          assert.strictEqual(textOf(parts), "the committed answer")
          assert.deepStrictEqual(idsOf(parts), ["text-2"])
          assert.deepStrictEqual(parts.map((p) => p.type).filter((t) => t !== "text-delta"), [
            "text-start",
            "text-end",
            "response-metadata",
            "finish"
          ])
          assert.strictEqual(attemptsOf(parts.at(-1) as Response.FinishPart), 2)
        }).pipe(Effect.provide(model(protocol)), Effect.provide(exactBackoff), fresh))

      it.effect("generateObject: the object is decoded from the committed attempt alone", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* script(protocol, {
            steps: [
              { kind: "eof", reply: { text: "{\"name\": \"Bob\", " } },
              { kind: "stream", reply: { text: "{\"name\": \"Ada\", \"age\": 36}" } }
            ]
          })
          const Person = Schema.Struct({ name: Schema.String, age: Schema.Number })
          const fiber = yield* Effect.fork(
            LanguageModel.generateObject({ prompt: "who?", schema: Person, objectName: "person" })
          )
          yield* passBackoffUntil(1000)
          const response = yield* Fiber.join(fiber)
          assert.deepStrictEqual(response.value, { name: "Ada", age: 36 })
          const [, second] = yield* sim.requestsTo(protocol)
          // OpenAI's protocols ask natively (StructuredOutput.test.ts checks the exact fields); Anthropic in words
          assert.include(
            JSON.stringify(second.body),
            protocol === "anthropic" ? "named \\\"person\\\"" : "\"json_schema\""
          )
        }).pipe(Effect.provide(model(protocol)), Effect.provide(exactBackoff), fresh))

      it.effect("429 with Retry-After: 30: no second request before 30 s on the clock, one right after", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* script(protocol, {
            steps: [
              { kind: "status", status: 429, headers: { "retry-after": "30" } },
              { kind: "stream", reply: { text: "after the wait" } }
            ]
          })
          const rec = yield* recorder
          const fiber = yield* Effect.fork(
            LanguageModel.generateText({ prompt: "hello" }).pipe(Effect.provide(rec.layer))
          )
          yield* awaitSleepUntil(30_000)
          yield* TestClock.adjust("29999 millis")
          yield* settle
          assert.strictEqual(yield* sim.count(protocol), 1)
          yield* TestClock.adjust("1 millis")
          const response = yield* Fiber.join(fiber)
          assert.strictEqual(response.text, "after the wait")
          assert.strictEqual(yield* sim.count(protocol), 2)
          const retry = (yield* rec.notes).find((n) => n._tag === "RetryScheduled")
          assert.strictEqual(retry?._tag === "RetryScheduled" && retry.delaySource, "retry-after")
          assert.isTrue(retry?._tag === "RetryScheduled" && Duration.equals(retry.delay, Duration.seconds(30)))
        }).pipe(Effect.provide(model(protocol)), Effect.provide(exactBackoff), fresh))

      it.effect("401: sent once, never replayed; an HttpResponseError with the status, the code and the cause", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* script(protocol, { steps: [{ kind: "status", status: 401 }], afterLast: "repeat-last" })
          const exit = yield* Effect.exit(LanguageModel.generateText({ prompt: "hello" }))
          const error = failureOf(exit)
          assert.strictEqual(error._tag, "HttpResponseError")
          assert.strictEqual(error._tag === "HttpResponseError" && error.response.status, 401)
          const facts = Option.getOrThrow(RecoveryAiError.facts(error))
          assert.strictEqual(facts.status, 401)
          assert.strictEqual(facts.providerCode, protocol === "anthropic" ? "authentication_error" : "invalid_api_key")
          assert.strictEqual(facts.attempts, 1)
          assert.strictEqual((error.cause as any)._tag, "ProviderRejection")
          assert.strictEqual((error.cause as any).reason, "Authentication")
          assert.strictEqual(yield* sim.count(protocol), 1)
          assert.strictEqual(yield* TestClock.currentTimeMillis, 0)
        }).pipe(Effect.provide(model(protocol)), Effect.provide(exactBackoff), fresh))

      it.effect("truncated tool JSON: that call is never run; the replay's call runs once", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* script(protocol, {
            steps: [
              {
                kind: "truncated-tool-call",
                reply: { toolCalls: [{ id: "call_lost", name: "record", arguments: { line: "from the cut attempt" } }] }
              },
              {
                kind: "stream",
                reply: { toolCalls: [{ id: "call_kept", name: "record", arguments: { line: "kept" } }] }
              }
            ]
          })
          const handlers = yield* tools
          const fiber = yield* Effect.fork(
            LanguageModel.generateText({ prompt: "record it", toolkit: Tools }).pipe(Effect.provide(handlers.layer))
          )
          yield* passBackoffUntil(1000)
          const response = yield* Fiber.join(fiber)
          assert.deepStrictEqual(yield* handlers.runs, ["kept"])
          assert.deepStrictEqual(response.toolCalls.map((c) => [c.id, c.params]), [["call_kept", { line: "kept" }]])
          assert.deepStrictEqual(response.toolResults.map((r) => r.result), ["recorded kept"])
          assert.strictEqual(response.finishReason, "tool-calls")
          assert.strictEqual(yield* sim.count(protocol), 2)
        }).pipe(Effect.provide(model(protocol)), Effect.provide(exactBackoff), fresh))

      it.effect("a Chat turn with a 503 between its steps: the tool result is in the replay, nothing runs twice", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* script(protocol, {
            steps: [
              { kind: "stream", reply: { toolCalls: [{ id: "call_1", name: "record", arguments: { line: "x" } }] } },
              { kind: "status", status: 503 },
              { kind: "stream", reply: { text: "recorded it" } }
            ]
          })
          const handlers = yield* tools
          const chat = yield* Chat.empty
          const fiber = yield* Effect.fork(
            RecoveringLanguageModel.turn(Effect.gen(function*() {
              const first = yield* chat.generateText({ prompt: "record x", toolkit: Tools })
              assert.strictEqual(first.toolResults.length, 1)
              return yield* chat.generateText({ prompt: [], toolkit: Tools })
            })).pipe(Effect.provide(handlers.layer))
          )
          yield* passBackoffUntil(1000)
          const last = yield* Fiber.join(fiber)
          assert.strictEqual(last.text, "recorded it")
          assert.deepStrictEqual(yield* handlers.runs, ["x"])
          const requests = yield* sim.requestsTo(protocol)
          assert.deepStrictEqual(requests.map((r) => r.step), ["stream", "status", "stream"])
          for (const request of requests.slice(1)) assert.include(JSON.stringify(request.body), "recorded x")
          const history = yield* chat.history
          assert.deepStrictEqual(history.content.map((m) => m.role), ["user", "assistant", "tool", "assistant"])
        }).pipe(Effect.provide(model(protocol)), Effect.provide(exactBackoff), fresh))

      it.effect("a Chat turn shares one budget: the second step cannot replay what the first step used up", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* script(protocol, {
            steps: [
              { kind: "stream", reply: { toolCalls: [{ id: "call_1", name: "record", arguments: { line: "x" } }] } },
              { kind: "status", status: 503 },
              { kind: "stream", reply: { text: "never sent" } }
            ]
          })
          const handlers = yield* tools
          const chat = yield* Chat.empty
          const exit = yield* RecoveringLanguageModel.turn(Effect.gen(function*() {
            yield* chat.generateText({ prompt: "record x", toolkit: Tools })
            return yield* chat.generateText({ prompt: [], toolkit: Tools })
          })).pipe(Effect.provide(handlers.layer), Effect.exit)
          const error = failureOf(exit)
          assert.strictEqual(error._tag, "HttpResponseError")
          const facts = Option.getOrThrow(RecoveryAiError.facts(error as AiError.AiError))
          assert.strictEqual((facts.error as any)._tag, "RecoveryExhausted")
          assert.strictEqual((facts.error as any).reason, "Attempts")
          assert.strictEqual(facts.attempts, 2)
          assert.strictEqual(facts.status, 503)
          assert.strictEqual(yield* sim.count(protocol), 2)
          // the committed first step survives the failed second one, and its tool is not run again
          assert.deepStrictEqual(yield* handlers.runs, ["x"])
          const history = yield* chat.history
          assert.deepStrictEqual(history.content.map((m) => m.role), ["user", "assistant", "tool"])
        }).pipe(
          Effect.provide(model(protocol)),
          Effect.provide(Budget.layer({ maxAttempts: 2 })),
          Effect.provide(exactBackoff),
          fresh
        ))

      it.effect("interruption during the backoff: no second request, nothing committed, for both APIs", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          for (
            const run of [
              Effect.asVoid(LanguageModel.generateText({ prompt: "hello" })),
              Stream.runDrain(LanguageModel.streamText({ prompt: "hello" }))
            ]
          ) {
            yield* script(protocol, { steps: [{ kind: "status", status: 503 }, { kind: "stream" }] })
            const start = yield* TestClock.currentTimeMillis
            const fiber = yield* Effect.fork(run)
            yield* awaitSleepUntil(start + 1000)
            const exit = yield* Fiber.interrupt(fiber)
            assert.isTrue(Exit.isInterrupted(exit))
            yield* TestClock.adjust("2 minutes")
            yield* settle
            assert.strictEqual(yield* sim.count(protocol), 1)
          }
        }).pipe(Effect.provide(model(protocol)), Effect.provide(exactBackoff), fresh))

      it.effect("Chat.streamText live, notifications bound: attempt 1 shown, its discard in order, history committed", () =>
        Effect.gen(function*() {
          yield* script(protocol, { steps: [cut, { kind: "stream", reply: { text: "the committed answer" } }] })
          // parts and notifications in the order the consumer meets them
          const log: Array<string> = []
          const parts: Array<Response.StreamPart<any>> = []
          const chat = yield* Chat.empty
          const fiber = yield* Effect.fork(
            chat.streamText({ prompt: "hello" }).pipe(
              RecoveringLanguageModel.withPreviews("live"),
              Stream.runForEach((part) =>
                Effect.sync(() => {
                  parts.push(part)
                  log.push(`${part.type}:${"id" in part ? part.id : ""}`)
                })
              ),
              Effect.provide(RecoveryNotifications.layerCallback((n) =>
                Effect.sync(() => {
                  if (n._tag !== "Preview") log.push(n._tag)
                })
              ))
            )
          )
          yield* passBackoffUntil(1000)
          yield* Fiber.join(fiber)
          assert.deepStrictEqual(log.filter((entry) => !entry.includes(":")), replayedOnce)
          // attempt 1 was shown live, without its end; the consumer hears of its discard after its last part and
          // before attempt 2's first
          assert.strictEqual(textOf(parts.filter((p) => "id" in p && p.id === "text-1")), beforeCut)
          assert.isFalse(log.includes("text-end:text-1"))
          const discard = log.indexOf("AttemptDiscarded")
          assert.isTrue(log.lastIndexOf("text-delta:text-1") < discard)
          assert.isTrue(discard < log.indexOf("text-start:text-2"))
          assert.strictEqual(textOf(parts.filter((p) => "id" in p && p.id === "text-2")), "the committed answer")
          assert.deepStrictEqual(parts.filter((p) => p.type === "finish").length, 1)
          assert.strictEqual(log.at(-1), "Committed")
          // Chat keeps a streamed text only once it ends: the discarded attempt never enters the history
          const history = yield* chat.history
          const assistant = history.content.find((m) => m.role === "assistant")
          assert.deepStrictEqual(
            assistant?.role === "assistant" && assistant.content.map((p) => (p.type === "text" ? p.text : p.type)),
            ["the committed answer"]
          )
        }).pipe(Effect.provide(model(protocol)), Effect.provide(exactBackoff), fresh))

      it.effect("streamText live, no notifications: a failure after shown parts fails the stream, not replayed", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* script(protocol, { steps: [cut, { kind: "stream", reply: { text: "the committed answer" } }] })
          const shown: Array<string> = []
          const exit = yield* LanguageModel.streamText({ prompt: "hello" }).pipe(
            Stream.runForEach((part) => Effect.sync(() => part.type === "text-delta" && shown.push(part.delta))),
            Effect.exit
          )
          const error = failureOf(exit)
          assert.strictEqual(error._tag, "HttpResponseError")
          assert.strictEqual(error._tag === "HttpResponseError" && error.reason, "Decode")
          const cause = Option.getOrThrow(RecoveryAiError.recoveryError(error)) as any
          assert.strictEqual(cause.reason, "Reset")
          assert.strictEqual(cause.replayBlocked, "ExternalEffects")
          assert.strictEqual(cause.partialOutputChars, beforeCut.length)
          assert.strictEqual(shown.join(""), beforeCut)
          yield* TestClock.adjust("2 minutes")
          yield* settle
          assert.strictEqual(yield* sim.count(protocol), 1)
        }).pipe(Effect.provide(model(protocol, { previews: "live" })), Effect.provide(exactBackoff), fresh))

      it.effect("streamText { holdChars }: a failure inside the window replays invisibly, one past it fails", () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          yield* script(protocol, { steps: [cut, { kind: "stream", reply: { text: "the committed answer" } }] })
          const fiber = yield* Effect.fork(
            Stream.runCollect(
              LanguageModel.streamText({ prompt: "hello" }).pipe(
                RecoveringLanguageModel.withPreviews({ holdChars: beforeCut.length })
              )
            )
          )
          yield* passBackoffUntil(1000)
          const parts = Chunk.toArray(yield* Fiber.join(fiber))
          assert.deepStrictEqual(idsOf(parts), ["text-2"])
          assert.strictEqual(textOf(parts), "the committed answer")

          yield* script(protocol, { steps: [cut, { kind: "stream", reply: { text: "the committed answer" } }] })
          const exit = yield* LanguageModel.streamText({ prompt: "hello" }).pipe(
            RecoveringLanguageModel.withPreviews({ holdChars: beforeCut.length - 1 }),
            Stream.runDrain,
            Effect.exit
          )
          assert.strictEqual((failureOf(exit).cause as any).replayBlocked, "ExternalEffects")
          assert.strictEqual(yield* sim.count(protocol), 1)
        }).pipe(Effect.provide(model(protocol)), Effect.provide(exactBackoff), fresh))

      it.effect("streamText live with a toolkit: a truncated tool call is never run; the replay's runs once", () =>
        Effect.gen(function*() {
          yield* script(protocol, {
            steps: [
              {
                kind: "truncated-tool-call",
                reply: {
                  text: "Recording",
                  toolCalls: [{ id: "call_lost", name: "record", arguments: { line: "lost" } }]
                }
              },
              {
                kind: "stream",
                reply: { toolCalls: [{ id: "call_kept", name: "record", arguments: { line: "kept" } }] }
              }
            ]
          })
          const handlers = yield* tools
          const rec = yield* recorder
          const fiber = yield* Effect.fork(
            Stream.runCollect(LanguageModel.streamText({ prompt: "record it", toolkit: Tools })).pipe(
              Effect.provide(handlers.layer),
              Effect.provide(rec.layer)
            )
          )
          yield* passBackoffUntil(1000)
          const parts = Chunk.toArray(yield* Fiber.join(fiber))
          assert.deepStrictEqual(yield* handlers.runs, ["kept"])
          assert.deepStrictEqual(parts.filter((p) => p.type === "tool-call").map((p) => p.id), ["call_kept"])
          assert.deepStrictEqual(parts.filter((p) => p.type === "tool-result").map((p) => p.result), ["recorded kept"])
          // attempt 1 was shown live (its text), and discarded: the app was told
          assert.strictEqual(textOf(parts.filter((p) => "id" in p && p.id === "text-1")), "Recording")
          assert.deepStrictEqual(outline(yield* rec.notes), replayedOnce)
        }).pipe(Effect.provide(model(protocol, { previews: "live" })), Effect.provide(exactBackoff), fresh))

      it.effect("streamText live with a toolkit: a complete call of an attempt cut before its terminal never runs", () =>
        Effect.gen(function*() {
          // `eof` ends the body just before the terminal event: Anthropic has completed the tool_use block by then
          yield* script(protocol, {
            steps: [
              {
                kind: "eof",
                reply: {
                  text: "Recording",
                  toolCalls: [{ id: "call_lost", name: "record", arguments: { line: "lost" } }]
                }
              },
              {
                kind: "stream",
                reply: { toolCalls: [{ id: "call_kept", name: "record", arguments: { line: "kept" } }] }
              }
            ]
          })
          const handlers = yield* tools
          const rec = yield* recorder
          const fiber = yield* Effect.fork(
            Stream.runCollect(LanguageModel.streamText({ prompt: "record it", toolkit: Tools })).pipe(
              Effect.provide(handlers.layer),
              Effect.provide(rec.layer)
            )
          )
          yield* passBackoffUntil(1000)
          const parts = Chunk.toArray(yield* Fiber.join(fiber))
          assert.deepStrictEqual(yield* handlers.runs, ["kept"])
          assert.deepStrictEqual(parts.filter((p) => p.type === "tool-call").map((p) => p.id), ["call_kept"])
          const discarded = (yield* rec.notes).find((n) => n._tag === "AttemptDiscarded")
          if (protocol === "anthropic") {
            assert.deepStrictEqual(
              discarded?._tag === "AttemptDiscarded" && discarded.discardedToolCalls.map((c) => c.id),
              ["call_lost"]
            )
          }
        }).pipe(Effect.provide(model(protocol, { previews: "live" })), Effect.provide(exactBackoff), fresh))

      it.effect("reasoning: a reasoning part in generateText, reasoning-start/delta/end in streamText", () =>
        Effect.gen(function*() {
          const body = withReasoning(protocol, "Let me think.")
          yield* script(protocol, { steps: [sseBody(body), sseBody(body)] })
          const response = yield* LanguageModel.generateText({ prompt: "think" })
          assert.strictEqual(response.reasoningText, "Let me think.")
          assert.isAbove(response.text.length, 0)
          assert.strictEqual(response.content[0].type, "reasoning")
          const parts = Chunk.toArray(yield* Stream.runCollect(LanguageModel.streamText({ prompt: "think" })))
          const reasoning = parts.filter((p) => p.type.startsWith("reasoning"))
          assert.deepStrictEqual(reasoning.map((p) => p.type).filter((t) => t !== "reasoning-delta"), [
            "reasoning-start",
            "reasoning-end"
          ])
          assert.strictEqual(
            reasoning.map((p) => (p.type === "reasoning-delta" ? p.delta : "")).join(""),
            "Let me think."
          )
        }).pipe(Effect.provide(model(protocol)), Effect.provide(exactBackoff), fresh))
    })
  }

  describe("layers and settings", () => {
    it.effect("layerConfig: provider, model, budget and waits from the environment; the endpoint in the AiError", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script("anthropic", {
          steps: [{ kind: "status", status: 503 }, { kind: "status", status: 503 }, { kind: "stream" }]
        })
        const env = ConfigProvider.fromMap(
          new Map([
            ["REPRISE_PROVIDER", "anthropic"],
            ["ANTHROPIC_API_KEY", "sk-ant-from-env"],
            ["ANTHROPIC_BASE_URL", sim.baseUrl("anthropic")],
            ["REPRISE_MODEL", "claude-from-env"],
            ["REPRISE_MAX_ATTEMPTS", "2"],
            ["REPRISE_BACKOFF_BASE", "10"],
            ["REPRISE_PRICES", `{"claude-from-env": {"input": 3, "output": 15}}`]
          ])
        )
        const fiber = yield* Effect.fork(
          LanguageModel.generateText({ prompt: "hello" }).pipe(
            Effect.provide(RecoveringLanguageModel.layerConfig().pipe(Layer.provide(NodeHttpClient.layerUndici))),
            Effect.withConfigProvider(env),
            Effect.exit
          )
        )
        // REPRISE_BACKOFF_BASE=10 with the default jitter, which only shortens: 7.5 to 10 ms
        yield* passSleepWithin(7, 10)
        const error = failureOf(yield* Fiber.join(fiber))
        assert.strictEqual(error._tag, "HttpResponseError")
        assert.strictEqual(error._tag === "HttpResponseError" && error.request.url, `${sim.url}/v1/messages`)
        const facts = Option.getOrThrow(RecoveryAiError.facts(error as AiError.AiError))
        assert.strictEqual((facts.error as any).reason, "Attempts")
        assert.strictEqual(facts.attempts, 2)
        // priced by REPRISE_PRICES: two 503s, not billed, cost nothing (without prices there is no cost at all)
        assert.strictEqual(facts.ledger?.discarded.cost, 0)
        assert.strictEqual(facts.ledger?.discarded.billed, 0)
        const requests = yield* sim.requestsTo("anthropic")
        assert.strictEqual(requests.length, 2)
        assert.strictEqual((requests[0].body as any).model, "claude-from-env")

        const missing = yield* Effect.exit(
          Effect.provide(
            Effect.void,
            RecoveringLanguageModel.layerConfig().pipe(Layer.provide(NodeHttpClient.layerUndici))
          )
            .pipe(Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["OPENAI_API_KEY", "sk"]]))))
        )
        assert.include(String(failureOf(missing)), "REPRISE_MODEL")
      }).pipe(fresh))

    it.effect("settings: the layer's Budget is the default, one provided where the call runs wins", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        const steps = { steps: [{ kind: "status" as const, status: 503 }, { kind: "stream" as const }] }
        yield* script("openai-chat", steps)
        const once = yield* Effect.exit(LanguageModel.generateText({ prompt: "hello" }))
        assert.strictEqual((Option.getOrThrow(RecoveryAiError.facts(failureOf(once))).error as any).reason, "Attempts")
        assert.strictEqual(yield* sim.count("openai-chat"), 1)

        yield* script("openai-chat", steps)
        const fiber = yield* Effect.fork(
          LanguageModel.generateText({ prompt: "hello" }).pipe(Effect.provide(Budget.layer({ maxAttempts: 2 })))
        )
        yield* passBackoffUntil(1000)
        assert.strictEqual((yield* Fiber.join(fiber)).finishReason, "stop")
        assert.strictEqual(yield* sim.count("openai-chat"), 2)
      }).pipe(
        Effect.provide(model("openai-chat").pipe(Layer.provide(Budget.layer({ maxAttempts: 1 })))),
        Effect.provide(exactBackoff),
        fresh
      ))

    it.effect("turn: the layer's Budget bounds the whole turn when the caller provides none", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script("openai-chat", {
          steps: [
            { kind: "stream", reply: { toolCalls: [{ id: "call_1", name: "record", arguments: { line: "x" } }] } },
            { kind: "status", status: 503 },
            { kind: "stream", reply: { text: "never sent" } }
          ]
        })
        const handlers = yield* tools
        const chat = yield* Chat.empty
        const exit = yield* RecoveringLanguageModel.turn(Effect.gen(function*() {
          yield* chat.generateText({ prompt: "record x", toolkit: Tools })
          return yield* chat.generateText({ prompt: [], toolkit: Tools })
        })).pipe(Effect.provide(handlers.layer), Effect.exit)
        const facts = Option.getOrThrow(RecoveryAiError.facts(failureOf(exit) as AiError.AiError))
        assert.strictEqual((facts.error as any).reason, "Attempts")
        assert.strictEqual(facts.attempts, 2)
        assert.strictEqual(yield* sim.count("openai-chat"), 2)
      }).pipe(
        Effect.provide(model("openai-chat").pipe(Layer.provide(Budget.layer({ maxAttempts: 2 })))),
        Effect.provide(exactBackoff),
        fresh
      ))

    it.effect("Recovery.disabled where the call runs: a cut stream surfaces after one attempt", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script("openai-responses", { steps: [cut, { kind: "stream" }] })
        const exit = yield* Effect.exit(Recovery.disabled(LanguageModel.generateText({ prompt: "hello" })))
        const cause = Option.getOrThrow(RecoveryAiError.recoveryError(failureOf(exit))) as any
        assert.strictEqual(cause.reason, "Reset")
        assert.strictEqual(yield* sim.count("openai-responses"), 1)
      }).pipe(Effect.provide(model("openai-responses")), Effect.provide(exactBackoff), fresh))
  })
})
