import { assert, describe, it } from "@effect/vitest"
import * as Generation from "@reprise/core/Generation"
import * as Ledger from "@reprise/core/Ledger"
import { Option } from "effect"
import { AttemptParts } from "../src/internal/attemptParts.js"
import * as ResponseMapping from "../src/ResponseMapping.js"

const reply = new Generation.Reply({
  text: "Hello there",
  reasoning: "greet",
  toolCalls: [{ id: "call_1", name: "record", arguments: { line: "x" } }],
  finishReason: "tool_calls",
  providerFinishReason: "tool_use",
  usage: Option.some({ inputTokens: 10, outputTokens: 4 }),
  attempts: 2
})

const types = (parts: ReadonlyArray<{ readonly type: string }>) => parts.map((p) => p.type)

describe("ResponseMapping", () => {
  it("a committed reply: reasoning, text, tool calls, then a finish with reason, usage and attempts", () => {
    const parts = ResponseMapping.fromReply(reply, "anthropic")
    assert.deepStrictEqual(parts, [
      { type: "reasoning", text: "greet" },
      { type: "text", text: "Hello there" },
      { type: "tool-call", id: "call_1", name: "record", params: { line: "x" }, providerExecuted: false },
      {
        type: "finish",
        reason: "tool-calls",
        usage: { inputTokens: 10, outputTokens: 4, totalTokens: 14 },
        metadata: { reprise: { attempts: 2, providerFinishReason: "tool_use", protocol: "anthropic" } }
      }
    ])
  })

  it("the served model is the response metadata's modelId; the route is on the finish's metadata", () => {
    const served = new Generation.Reply({
      ...reply,
      model: "claude-sonnet-4-5-20250929",
      route: { index: 2, name: "anthropic claude-sonnet-4-5", model: "claude-sonnet-4-5" }
    })
    const parts = ResponseMapping.fromReply(served, "anthropic")
    assert.deepStrictEqual(types(parts), ["reasoning", "text", "tool-call", "response-metadata", "finish"])
    assert.deepStrictEqual(parts[3], { type: "response-metadata", modelId: "claude-sonnet-4-5-20250929" })
    assert.deepStrictEqual(parts[4], {
      type: "finish",
      reason: "tool-calls",
      usage: { inputTokens: 10, outputTokens: 4, totalTokens: 14 },
      metadata: {
        reprise: {
          attempts: 2,
          providerFinishReason: "tool_use",
          protocol: "anthropic",
          route: { index: 2, name: "anthropic claude-sonnet-4-5", model: "claude-sonnet-4-5" }
        }
      }
    })
    // streamText shows them at the commit, the finish last
    const attempt = new AttemptParts(1, 0)
    assert.deepStrictEqual(types(attempt.commit(served, "anthropic")).slice(-2), ["response-metadata", "finish"])
  })

  it("finish reasons and missing usage", () => {
    assert.deepStrictEqual(
      (["stop", "tool_calls", "length", "content_filter", "other"] as const).map(ResponseMapping.finishReason),
      ["stop", "tool-calls", "length", "content-filter", "other"]
    )
    assert.deepStrictEqual(ResponseMapping.usage(Option.none()), {
      inputTokens: undefined,
      outputTokens: undefined,
      totalTokens: undefined
    })
  })

  it("cache reads are cachedInputTokens (cache writes have no field); the ledger is on the finish's metadata", () => {
    const cached = { inputTokens: 1200, outputTokens: 40, cacheReadTokens: 1024, cacheWriteTokens: 100 }
    assert.deepStrictEqual(ResponseMapping.usage(Option.some(cached)), {
      inputTokens: 1200,
      outputTokens: 40,
      totalTokens: 1240,
      cachedInputTokens: 1024
    })
    const ledger = Ledger.make([
      Ledger.entry({ attempt: 1, phase: "content", outcome: "discarded", refused: false, outputChars: 30 }),
      Ledger.entry({
        attempt: 2,
        phase: "terminal",
        outcome: "committed",
        refused: false,
        usage: cached,
        outputChars: 0
      })
    ])
    const parts = ResponseMapping.fromReply(
      new Generation.Reply({ ...reply, usage: Option.some(cached), ledger }),
      "anthropic"
    )
    const finish = parts.at(-1)
    assert.strictEqual(finish?.type, "finish")
    if (finish?.type !== "finish") return
    assert.deepStrictEqual(finish.usage, {
      inputTokens: 1200,
      outputTokens: 40,
      totalTokens: 1240,
      cachedInputTokens: 1024
    })
    assert.strictEqual(finish.metadata?.reprise?.ledger, ledger)
    // the cache writes @effect/ai's usage cannot hold are in the ledger's entry
    assert.deepStrictEqual(ledger.entries[1].tokens, { input: 1200, output: 40, cacheRead: 1024, cacheWrite: 100 })
    // streamText's finish carries it too
    const streamed = new AttemptParts(2, 0).commit(new Generation.Reply({ ...reply, ledger }), "anthropic").at(-1)
    assert.strictEqual(streamed?.type === "finish" && streamed.metadata?.reprise?.ledger, ledger)
  })
})

describe("AttemptParts (the hold window of streamText)", () => {
  const events = [
    Generation.ReasoningDelta({ text: "hmm" }),
    Generation.TextDelta({ text: "Hello" }),
    Generation.TextDelta({ text: " there" }),
    Generation.ToolCallDelta({ index: 0, id: "call_1", name: "record", argumentsDelta: "{\"line\":" }),
    Generation.ToolCallDelta({ index: 0, id: undefined, name: undefined, argumentsDelta: "\"x\"}" }),
    Generation.ToolCallComplete({ call: { id: "call_1", name: "record", arguments: { line: "x" } } })
  ]

  it("committed (hold everything): nothing before the commit, then every part, ends, the tool call, the finish", () => {
    const parts = new AttemptParts(2, Number.POSITIVE_INFINITY)
    for (const event of events) assert.deepStrictEqual(parts.add(event), [])
    assert.isFalse(parts.shown)
    assert.deepStrictEqual(types(parts.commit(reply, "anthropic")), [
      "reasoning-start",
      "reasoning-delta",
      "text-start",
      "text-delta",
      "text-delta",
      "tool-params-start",
      "tool-params-delta",
      "tool-params-delta",
      "reasoning-end",
      "text-end",
      "tool-params-end",
      "tool-call",
      "finish"
    ])
  })

  it("holdChars 5: held until the 6th character, then released in order; tool calls and ends only at commit", () => {
    const parts = new AttemptParts(1, 5)
    assert.deepStrictEqual(parts.add(events[0]), []) // 3 chars
    const released = parts.add(events[1]) // 8 chars > 5
    assert.deepStrictEqual(types(released), ["reasoning-start", "reasoning-delta", "text-start", "text-delta"])
    assert.isTrue(parts.shown)
    assert.deepStrictEqual(types(parts.add(events[2])), ["text-delta"])
    assert.deepStrictEqual(types(parts.add(events[3])), ["tool-params-start", "tool-params-delta"])
    assert.deepStrictEqual(parts.add(events[5]), [])
    assert.deepStrictEqual(released.map((p) => ("id" in p ? p.id : "")), [
      "reasoning-1",
      "reasoning-1",
      "text-1",
      "text-1"
    ])
  })

  it("live (hold 0): the first character is shown", () => {
    const parts = new AttemptParts(1, 0)
    assert.deepStrictEqual(types(parts.add(Generation.TextDelta({ text: "H" }))), ["text-start", "text-delta"])
  })
})
