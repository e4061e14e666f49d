/**
 * stream-terminal: each protocol's terminal enforcement over real loopback HTTP, through the real provider layers
 * and the undici client. A reply is committed only when the protocol's terminal event arrives; a body that ends
 * without it is `TransportError{PrematureEof}`; incomplete finishes are terminals; tool-call JSON is only ever
 * surfaced complete; in-band errors are told apart by code.
 *
 * Single-attempt facts run inside `Recovery.disabled`, so the failure surfaces unchanged after exactly one request;
 * replay itself is shown with recovery on. Replies come from the wire-format fixtures in `fixtures/` where they help.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Classification from "@reprise/core/Classification"
import type * as Generation from "@reprise/core/Generation"
import type * as ProviderOptions from "@reprise/providers/ProviderOptions"
import * as Simulator from "@reprise/simulator/Simulator"
import { Effect, Option } from "effect"
import {
  committed,
  failure,
  fastBackoff,
  fixture,
  generate,
  ofTag,
  outline,
  previews,
  previewText,
  protocols,
  script,
  simulator,
  sseBody,
  withoutEvents
} from "./support/e2e.js"

interface Expected {
  readonly text: string
  readonly providerReason: string
  readonly usage: Generation.Usage
  readonly lengthReason: string
  readonly inBandTransient: string
}

/** What `fixtures/<protocol>/text.sse` holds, and how each protocol names an incomplete finish. */
const expected: Record<ProviderOptions.Protocol, Expected> = {
  "openai-chat": {
    text: "**Holiday Name:** Harmony Day\n\n**Date:** Celebrated annually on the first Saturday of May\n\n" +
      "**Purpose:** Harmony Day is dedicated to fostering understanding, kindness, and unity among diverse communities.",
    providerReason: "stop",
    usage: { inputTokens: 16, outputTokens: 300, cacheReadTokens: 0 },
    lengthReason: "length",
    inBandTransient: "server_error"
  },
  "openai-responses": {
    text: "`arm64` (Apple Silicon).",
    providerReason: "completed",
    usage: { inputTokens: 444, outputTokens: 12, cacheReadTokens: 0 },
    lengthReason: "max_output_tokens",
    inBandTransient: "server_error"
  },
  anthropic: {
    text:
      "Hello! I'm doing well, thank you for asking. How are you doing today? Is there anything I can help you with?",
    providerReason: "end_turn",
    usage: { inputTokens: 12, outputTokens: 30, cacheReadTokens: 0, cacheWriteTokens: 0 },
    lengthReason: "max_tokens",
    inBandTransient: "overloaded_error"
  },
  subscription: {
    text: "`arm64` (Apple Silicon).",
    providerReason: "completed",
    usage: { inputTokens: 444, outputTokens: 12, cacheReadTokens: 0 },
    lengthReason: "max_output_tokens",
    inBandTransient: "server_error"
  }
}

/** What starts the data of an event carrying text. */
const textMarker: Record<ProviderOptions.Protocol, string> = {
  "openai-chat": "\"delta\":{\"content\":\"",
  "openai-responses": "\"type\":\"response.output_text.delta\"",
  anthropic: "\"type\":\"text_delta\"",
  subscription: "\"type\":\"response.output_text.delta\""
}

const weatherCall = { name: "get_weather", arguments: { city: "Paris" } }

const hasToolCallComplete = (events: ReadonlyArray<{ readonly _tag: string }>) =>
  events.some((e) => e._tag === "ToolCallComplete")

for (const protocol of protocols) {
  const textFixture = `${protocol}/text.sse`
  const want = expected[protocol]

  describe(`${protocol}: terminal enforcement`, () => {
    it.live("a full stream (fixture) commits its text, finish reason and usage after one request", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, { steps: [{ kind: "stream", reply: { fixture: textFixture } }] })
        const outcome = yield* generate(protocol)
        const reply = committed(outcome)
        assert.strictEqual(reply.text, want.text)
        assert.strictEqual(reply.finishReason, "stop")
        assert.strictEqual(reply.providerFinishReason, want.providerReason)
        assert.deepStrictEqual(Option.getOrUndefined(reply.usage), want.usage)
        assert.strictEqual(reply.attempts, 1)
        assert.strictEqual(yield* sim.count(protocol), 1)
        assert.deepStrictEqual(outline(outcome.notes), ["AttemptStarted", "Committed"])
        // Finish is the attempt's last event
        assert.strictEqual(previews(outcome.notes, 1).at(-1)?._tag, "Finish")
      }).pipe(Effect.provide(simulator)))

    it.live("the same stream without its terminal event is TransportError{PrematureEof}", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, { steps: [{ kind: "eof", reply: { fixture: textFixture } }] })
        const outcome = yield* generate(protocol, { disabled: true })
        const error = failure(outcome)
        assert.strictEqual(error._tag, "TransportError")
        assert.strictEqual(error.reason, "PrematureEof")
        assert.strictEqual(error.partialOutputChars, want.text.length)
        // the whole text was previewed, and none of it committed
        assert.strictEqual(previewText(outcome.notes, 1), want.text)
        assert.isFalse(previews(outcome.notes, 1).some((e) => e._tag === "Finish"))
        assert.deepStrictEqual(outline(outcome.notes), ["AttemptStarted", "AttemptDiscarded", "Failed"])
        assert.strictEqual(yield* sim.count(protocol), 1)
      }).pipe(Effect.provide(simulator)))

    it.live("the stream cut in the middle of an event, then a clean end, is TransportError{PrematureEof}", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        const body = fixture(textFixture)
        // a byte inside the second event that carries text
        const marker = textMarker[protocol]
        const cut = body.indexOf(marker, body.indexOf(marker) + 1) + marker.length + 1
        assert.isAbove(cut, marker.length + 1)
        yield* script(protocol, { steps: [{ kind: "eof", afterBytes: cut, reply: { fixture: textFixture } }] })
        const outcome = yield* generate(protocol, { disabled: true })
        const error = failure(outcome)
        assert.strictEqual(error._tag, "TransportError")
        assert.strictEqual(error.reason, "PrematureEof")
        // the events before the cut were previewed; the cut one never was
        const shown = previewText(outcome.notes, 1)
        assert.isAbove(shown.length, 0)
        assert.isBelow(shown.length, want.text.length)
        assert.isTrue(want.text.startsWith(shown))
        const [request] = yield* sim.requestsTo(protocol)
        assert.strictEqual((yield* sim.awaitClose(request.id)).bytesWritten, cut)
        assert.strictEqual(yield* sim.count(protocol), 1)
      }).pipe(Effect.provide(simulator)))

    it.live("an incomplete finish is a terminal: committed with finishReason \"length\"", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, {
          steps: [{ kind: "stream", reply: { text: "cut short by the token limit", finishReason: "length" } }]
        })
        const outcome = yield* generate(protocol)
        const reply = committed(outcome)
        assert.strictEqual(reply.text, "cut short by the token limit")
        assert.strictEqual(reply.finishReason, "length")
        assert.strictEqual(reply.providerFinishReason, want.lengthReason)
        assert.isTrue(reply.incomplete)
        assert.strictEqual(yield* sim.count(protocol), 1)
      }).pipe(Effect.provide(simulator)))
  })

  describe(`${protocol}: tool-call JSON`, () => {
    it.live("incomplete arguments at the terminal: TransportError{TruncatedToolArguments}, no ToolCallComplete", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, {
          steps: [{
            kind: "stream",
            reply: { text: "Checking.", toolCalls: [{ name: "get_weather", arguments: "{\"city\": \"Par" }] }
          }]
        })
        const outcome = yield* generate(protocol, { disabled: true })
        const error = failure(outcome)
        assert.strictEqual(error._tag, "TransportError")
        assert.strictEqual(error.reason, "TruncatedToolArguments")
        assert.strictEqual(Classification.classify(error)._tag, "Retryable")
        assert.isFalse(hasToolCallComplete(previews(outcome.notes, 1)))
        // the arguments were previewed as deltas, never as a call
        assert.isTrue(previews(outcome.notes, 1).some((e) => e._tag === "ToolCallDelta"))
        assert.deepStrictEqual(ofTag(outcome.notes, "AttemptDiscarded")[0].discardedToolCalls, [])
        assert.strictEqual(yield* sim.count(protocol), 1)
      }).pipe(Effect.provide(simulator)))

    it.live("a stream cut inside the arguments: PrematureEof, no ToolCallComplete", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, {
          steps: [{ kind: "truncated-tool-call", reply: { text: "Checking.", toolCalls: [weatherCall] } }]
        })
        const outcome = yield* generate(protocol, { disabled: true })
        const error = failure(outcome)
        assert.strictEqual(error._tag, "TransportError")
        assert.strictEqual(error.reason, "PrematureEof")
        assert.isFalse(hasToolCallComplete(previews(outcome.notes, 1)))
        assert.deepStrictEqual(ofTag(outcome.notes, "AttemptDiscarded")[0].discardedToolCalls, [])
        assert.strictEqual(yield* sim.count(protocol), 1)
      }).pipe(Effect.provide(simulator)))

    it.live("with recovery, truncated tool JSON is replayed and the commit holds the one complete call", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, {
          reply: { text: "Checking.", toolCalls: [weatherCall] },
          steps: [{ kind: "truncated-tool-call" }, { kind: "stream" }]
        })
        const outcome = yield* generate(protocol)
        const reply = committed(outcome)
        assert.strictEqual(reply.finishReason, "tool_calls")
        assert.lengthOf(reply.toolCalls, 1)
        assert.strictEqual(reply.toolCalls[0].name, "get_weather")
        assert.deepStrictEqual(reply.toolCalls[0].arguments, { city: "Paris" })
        assert.strictEqual(reply.text, "Checking.")
        assert.strictEqual(yield* sim.count(protocol), 2)
        assert.isFalse(hasToolCallComplete(previews(outcome.notes, 1)))
        assert.strictEqual(previews(outcome.notes, 2).filter((e) => e._tag === "ToolCallComplete").length, 1)
      }).pipe(Effect.provide(simulator), Effect.provide(fastBackoff)))
  })

  describe(`${protocol}: in-band errors`, () => {
    it.live(`a transient in-band error (${want.inBandTransient}) is replayed`, () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, {
          steps: [
            { kind: "error", reply: { text: "words before the error event" } },
            { kind: "stream", reply: { text: "the committed answer" } }
          ]
        })
        const outcome = yield* generate(protocol)
        assert.strictEqual(committed(outcome).text, "the committed answer")
        assert.strictEqual(yield* sim.count(protocol), 2)
        const [discarded] = ofTag(outcome.notes, "AttemptDiscarded")
        const error = discarded.error as any
        assert.strictEqual(error._tag, "TransportError")
        assert.strictEqual(error.reason, "ProviderError")
        assert.strictEqual(error.providerCode, want.inBandTransient)
        assert.isTrue("words before the error event".startsWith(discarded.discardedText))
        assert.isAbove(discarded.discardedText.length, 0)
      }).pipe(Effect.provide(simulator), Effect.provide(fastBackoff)))

    it.live("a permanent in-band error is not replayed: one request", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, {
          steps: [{
            kind: "error",
            reply: { text: "words before the error event" },
            error: { type: "invalid_request_error", code: "invalid_prompt", message: "Invalid prompt" }
          }],
          reply: { text: "never committed" }
        })
        const outcome = yield* generate(protocol)
        const error = failure(outcome)
        assert.include(["TransportError", "ProviderRejection"], error._tag)
        assert.strictEqual(Classification.classify(error)._tag, "Permanent")
        assert.include(error.message, "Invalid prompt")
        assert.strictEqual(yield* sim.count(protocol), 1)
        assert.deepStrictEqual(outline(outcome.notes), ["AttemptStarted", "AttemptDiscarded", "Failed"])
      }).pipe(Effect.provide(simulator), Effect.provide(fastBackoff)))
  })
}

describe("[DONE] is a terminal for subscription only", () => {
  const isDone = (data: string) => data === "[DONE]"

  it.live("openai-chat: text chunks then [DONE], without a finish_reason, is PrematureEof", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      const body = withoutEvents(
        fixture("openai-chat/text.sse"),
        (data) => data.includes("\"finish_reason\":\"stop\"") || data.includes("\"choices\":[]")
      )
      assert.isTrue(body.endsWith("data: [DONE]\n\n"))
      yield* script("openai-chat", { steps: [sseBody(body)] })
      const outcome = yield* generate("openai-chat", { disabled: true })
      const error = failure(outcome)
      assert.strictEqual(error._tag, "TransportError")
      assert.strictEqual(error.reason, "PrematureEof")
      assert.strictEqual(previewText(outcome.notes, 1), expected["openai-chat"].text)
      assert.strictEqual(yield* sim.count("openai-chat"), 1)
    }).pipe(Effect.provide(simulator)))

  it.live("openai-responses: events then [DONE], without response.completed, is PrematureEof", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      const body = withoutEvents(fixture("openai-responses/text.sse"), (data) => data.includes("response.completed")) +
        "data: [DONE]\n\n"
      yield* script("openai-responses", { steps: [sseBody(body)] })
      const outcome = yield* generate("openai-responses", { disabled: true })
      const error = failure(outcome)
      assert.strictEqual(error._tag, "TransportError")
      assert.strictEqual(error.reason, "PrematureEof")
      assert.strictEqual(yield* sim.count("openai-responses"), 1)
    }).pipe(Effect.provide(simulator)))

  it.live("subscription: events then [DONE], without response.completed, commits (provider reason [DONE])", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      const body = withoutEvents(fixture("subscription/text.sse"), (data) => data.includes("response.completed"))
      assert.isTrue(body.endsWith("data: [DONE]\n\n"))
      yield* script("subscription", { steps: [sseBody(body)] })
      const reply = committed(yield* generate("subscription", { disabled: true }))
      assert.strictEqual(reply.text, expected.subscription.text)
      assert.strictEqual(reply.finishReason, "stop")
      assert.strictEqual(reply.providerFinishReason, "[DONE]")
      assert.strictEqual(yield* sim.count("subscription"), 1)
    }).pipe(Effect.provide(simulator)))

  it.live("subscription: without response.completed and without [DONE] it is PrematureEof", () =>
    Effect.gen(function*() {
      const body = withoutEvents(
        fixture("subscription/text.sse"),
        (data) => data.includes("response.completed") || isDone(data)
      )
      yield* script("subscription", { steps: [sseBody(body)] })
      const error = failure(yield* generate("subscription", { disabled: true }))
      assert.strictEqual(error.reason, "PrematureEof")
    }).pipe(Effect.provide(simulator)))
})
