/**
 * subscription-terminal-recovery: the `subscription` protocol (Responses events, with `data: [DONE]` accepted as a
 * terminal) over real loopback HTTP with recovery. Streams that end with `[DONE]` commit; a stream cut before both
 * `response.completed` and `[DONE]` is replayed and only the last attempt's text is committed; `error` and
 * `response.failed` events are classified by code; function calls are withheld until the terminal and reconciled
 * with it.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Classification from "@reprise/core/Classification"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Effect } from "effect"
import {
  beforeCut,
  committed,
  failure,
  fastBackoff,
  fixture,
  generate,
  longReply,
  midEvent,
  ofTag,
  outline,
  previews,
  previewText,
  script,
  simulator,
  sseBody,
  withoutEvents
} from "./support/e2e.js"

const protocol = "subscription"
const fixtureText = "`arm64` (Apple Silicon)."
const replayedOnce = ["AttemptStarted", "AttemptDiscarded", "RetryScheduled", "AttemptStarted", "Committed"]

const isTerminal = (data: string) => data.includes("\"type\":\"response.completed\"")

/** `fixtures/subscription/<name>` without its `response.completed` event: `[DONE]` is its only terminal. */
const doneOnly = (name: string) => {
  const body = withoutEvents(fixture(`subscription/${name}`), isTerminal)
  assert.isTrue(body.endsWith("data: [DONE]\n\n"))
  assert.notInclude(body, "response.completed")
  return body
}

describe("subscription: [DONE] terminals", () => {
  it.live("Responses events ending with response.completed and data: [DONE] commit after one request", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* script(protocol, { steps: [{ kind: "stream", reply: { fixture: "subscription/text.sse" } }] })
      const outcome = yield* generate(protocol)
      const reply = committed(outcome)
      assert.strictEqual(reply.text, fixtureText)
      assert.strictEqual(reply.finishReason, "stop")
      assert.strictEqual(reply.providerFinishReason, "completed")
      assert.strictEqual(yield* sim.count(protocol), 1)
      const [request] = yield* sim.requestsTo(protocol)
      assert.strictEqual(request.path, "/subscription/responses")
      assert.strictEqual((request.body as any).store, false)
    }).pipe(Effect.provide(simulator)))

  it.live("Responses events ending with data: [DONE] alone commit, with provider reason [DONE]", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* script(protocol, { steps: [sseBody(doneOnly("text.sse"))] })
      const outcome = yield* generate(protocol)
      const reply = committed(outcome)
      assert.strictEqual(reply.text, fixtureText)
      assert.strictEqual(reply.finishReason, "stop")
      assert.strictEqual(reply.providerFinishReason, "[DONE]")
      assert.strictEqual(reply.attempts, 1)
      assert.strictEqual(yield* sim.count(protocol), 1)
    }).pipe(Effect.provide(simulator)))
})

describe("subscription: a stream cut before response.completed and [DONE] is replayed", () => {
  it.live("a clean EOF before both terminals: replayed, and the commit is the last attempt's text alone", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* script(protocol, {
        steps: [
          { kind: "eof", reply: { fixture: "subscription/text.sse" } },
          { kind: "stream", reply: { text: "the second attempt's answer" } }
        ]
      })
      const outcome = yield* generate(protocol)
      const reply = committed(outcome)
      assert.strictEqual(reply.text, "the second attempt's answer")
      assert.strictEqual(reply.attempts, 2)
      assert.strictEqual(yield* sim.count(protocol), 2)
      assert.deepStrictEqual(outline(outcome.notes), replayedOnce)
      const [discarded] = ofTag(outcome.notes, "AttemptDiscarded")
      assert.strictEqual(discarded.discardedText, fixtureText)
      assert.strictEqual((discarded.error as any).reason, "PrematureEof")
      assert.strictEqual(previewText(outcome.notes, 2), "the second attempt's answer")
    }).pipe(Effect.provide(simulator), Effect.provide(fastBackoff)))

  it.live("cut mid-event, then reset mid-event, then a [DONE]-only stream: three sends, the third committed", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* script(protocol, {
        steps: [
          { kind: "eof", afterBytes: midEvent, reply: longReply("first") },
          { kind: "reset", afterBytes: midEvent, reply: longReply("second") },
          sseBody(doneOnly("text.sse"))
        ]
      })
      const outcome = yield* generate(protocol)
      const reply = committed(outcome)
      assert.strictEqual(reply.text, fixtureText)
      assert.strictEqual(reply.providerFinishReason, "[DONE]")
      assert.strictEqual(reply.attempts, 3)
      assert.strictEqual(yield* sim.count(protocol), 3)
      assert.deepStrictEqual(
        ofTag(outcome.notes, "AttemptDiscarded").map((d) => [d.attempt, d.discardedText, (d.error as any).reason]),
        [[1, beforeCut, "PrematureEof"], [2, beforeCut, "Reset"]]
      )
      assert.strictEqual(previewText(outcome.notes, 3), fixtureText)
    }).pipe(Effect.provide(simulator), Effect.provide(fastBackoff)))
})

describe("subscription: error and response.failed events are classified by code", () => {
  const cases: ReadonlyArray<
    readonly [event: "error" | "response.failed", code: string, replayed: boolean, tag: string, reason: string]
  > = [
    ["error", "server_error", true, "TransportError", "ProviderError"],
    ["error", "rate_limit_exceeded", true, "TransportError", "ProviderError"],
    ["response.failed", "server_error", true, "TransportError", "ProviderError"],
    ["response.failed", "rate_limit_exceeded", true, "TransportError", "ProviderError"],
    ["error", "invalid_prompt", false, "TransportError", "ProviderError"],
    ["response.failed", "invalid_prompt", false, "TransportError", "ProviderError"],
    ["error", "insufficient_quota", false, "ProviderRejection", "Quota"],
    ["response.failed", "context_length_exceeded", false, "ProviderRejection", "ContextOverflow"]
  ]
  for (const [event, code, replayed, tag, reason] of cases) {
    it.live(`${event} ${code}: ${replayed ? "replayed" : "not replayed, one request"}`, () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        const step: SimulatorScript.Step = {
          kind: "error",
          event,
          error: { code, message: `failed with ${code}` },
          reply: { text: "words before the failure" }
        }
        yield* script(protocol, { steps: [step], reply: { text: "the committed answer" } })
        const outcome = yield* generate(protocol)
        const [discarded] = ofTag(outcome.notes, "AttemptDiscarded")
        const error = discarded.error as any
        assert.strictEqual(error._tag, tag)
        assert.strictEqual(error.reason, reason)
        assert.strictEqual(error.providerCode, code)
        assert.include(error.message, `failed with ${code}`)
        assert.strictEqual(Classification.classify(error)._tag, replayed ? "Retryable" : "Permanent")
        if (replayed) {
          assert.strictEqual(committed(outcome).text, "the committed answer")
          assert.strictEqual(yield* sim.count(protocol), 2)
          assert.deepStrictEqual(outline(outcome.notes), replayedOnce)
        } else {
          const surfaced = failure(outcome)
          assert.strictEqual(surfaced._tag, tag)
          assert.strictEqual(surfaced.providerCode, code)
          assert.strictEqual(surfaced.partialOutputChars, discarded.discardedText.length)
          assert.strictEqual(yield* sim.count(protocol), 1)
          assert.deepStrictEqual(outline(outcome.notes), ["AttemptStarted", "AttemptDiscarded", "Failed"])
        }
      }).pipe(Effect.provide(simulator), Effect.provide(fastBackoff)))
  }
})

describe("subscription: function calls are withheld until the terminal and reconciled with it", () => {
  const paris = { id: "call_fixture_0001", name: "get_weather", arguments: { city: "Paris" } }

  /** Tags of the attempt's previews with consecutive repeats collapsed. */
  const shape = (notes: Parameters<typeof previews>[0], attempt: number) =>
    previews(notes, attempt).map((e) => e._tag).filter((tag, i, all) => tag !== all[i - 1])

  it.live("the call is emitted at response.completed only, after every delta", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* script(protocol, { steps: [{ kind: "stream", reply: { fixture: "subscription/function-call.sse" } }] })
      const outcome = yield* generate(protocol)
      const reply = committed(outcome)
      assert.deepStrictEqual(reply.toolCalls, [paris])
      assert.strictEqual(reply.text, "Let me check the weather.")
      assert.strictEqual(reply.finishReason, "tool_calls")
      assert.strictEqual(reply.providerFinishReason, "completed")
      assert.deepStrictEqual(shape(outcome.notes, 1), [
        "TextDelta",
        "ToolCallDelta",
        "ToolCallComplete",
        "Usage",
        "Finish"
      ])
      assert.strictEqual(yield* sim.count(protocol), 1)
    }).pipe(Effect.provide(simulator)))

  it.live("the terminal's output wins over the streamed items", () =>
    Effect.gen(function*() {
      // the streamed item says Paris; response.completed lists the call with Lyon
      const body = fixture("subscription/function-call.sse").split("\n\n").map((block) =>
        isTerminal(block) ? block.replace("{\\\"city\\\":\\\"Paris\\\"}", "{\\\"city\\\":\\\"Lyon\\\"}") : block
      ).join("\n\n")
      assert.include(body, "Lyon")
      yield* script(protocol, { steps: [sseBody(body)] })
      const reply = committed(yield* generate(protocol))
      assert.deepStrictEqual(reply.toolCalls, [{ ...paris, arguments: { city: "Lyon" } }])
    }).pipe(Effect.provide(simulator)))

  it.live("with [DONE] as the only terminal, the streamed items are the reply's calls", () =>
    Effect.gen(function*() {
      yield* script(protocol, { steps: [sseBody(doneOnly("function-call.sse"))] })
      const outcome = yield* generate(protocol)
      const reply = committed(outcome)
      assert.deepStrictEqual(reply.toolCalls, [paris])
      assert.strictEqual(reply.finishReason, "tool_calls")
      assert.strictEqual(reply.providerFinishReason, "[DONE]")
      assert.deepStrictEqual(shape(outcome.notes, 1), ["TextDelta", "ToolCallDelta", "ToolCallComplete", "Finish"])
    }).pipe(Effect.provide(simulator)))

  it.live("a stream cut before the terminal never emits its call; the replay commits it exactly once", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* script(protocol, {
        reply: { fixture: "subscription/function-call.sse" },
        steps: [{ kind: "eof" }, { kind: "stream" }]
      })
      const outcome = yield* generate(protocol)
      const reply = committed(outcome)
      assert.deepStrictEqual(reply.toolCalls, [paris])
      assert.strictEqual(yield* sim.count(protocol), 2)
      // the first attempt had streamed the whole call, arguments complete, but no terminal
      assert.deepStrictEqual(shape(outcome.notes, 1), ["TextDelta", "ToolCallDelta"])
      const [discarded] = ofTag(outcome.notes, "AttemptDiscarded")
      assert.deepStrictEqual(discarded.discardedToolCalls, [])
      assert.strictEqual((discarded.error as any).reason, "PrematureEof")
      assert.lengthOf(ofTag(outcome.notes, "Preview").filter((n) => n.event._tag === "ToolCallComplete"), 1)
    }).pipe(Effect.provide(simulator), Effect.provide(fastBackoff)))
})
