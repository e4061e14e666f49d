/**
 * The usage every recorded capture of ../shared/fixtures/recorded reports, decoded by its protocol: the figures below
 * are the usage blocks as the provider sent them, read from the files and written out by hand, so that a decoder that
 * drops, renames or miscounts a figure fails here.
 *
 * - Chat Completions: the usage-only chunk after the finish: `prompt_tokens`, `completion_tokens`,
 *   `prompt_tokens_details.cached_tokens`.
 * - Responses: the terminal `response.usage`: `input_tokens`, `output_tokens`, `input_tokens_details.cached_tokens`
 *   (and `cache_write_tokens` where the capture has it).
 * - Anthropic: `message_start`'s `message.usage` is the `partial` Usage (first, before any content), and the final one
 *   is `message_delta`'s cumulative usage; `inputTokens` is `input_tokens` + `cache_creation_input_tokens` +
 *   `cache_read_input_tokens`.
 *
 * Files holding several responses or messages are split at each terminal event, and each part is decoded on its own
 * (as test/Recorded.test.ts does), through an in-memory client.
 */
import { HttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import type * as Generation from "@reprise/core/Generation"
import * as AnthropicMessages from "@reprise/providers/AnthropicMessages"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import * as OpenAiResponses from "@reprise/providers/OpenAiResponses"
import * as Subscription from "@reprise/providers/Subscription"
import { Effect, Either, Redacted } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fakeClient, KEY, run, toSse } from "./support/harness.js"

const root = Path.resolve(__dirname, "../../../../shared/fixtures/recorded")
const lines = (file: string) =>
  Fs.readFileSync(Path.join(root, file), "utf8").split("\n").filter((l) => l.trim().length > 0)

type Json = any

/** Splits the lines after every line that `isTerminal` accepts. */
const split = (raw: ReadonlyArray<string>, isTerminal: (p: Json) => boolean): Array<Array<string>> => {
  const parts: Array<Array<string>> = [[]]
  for (const line of raw) {
    parts[parts.length - 1].push(line)
    if (isTerminal(JSON.parse(line))) parts.push([])
  }
  return parts.filter((part) => part.length > 0)
}

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

const decode = (kind: Kind, sse: string) =>
  Effect.gen(function*() {
    const { events, result } = yield* run(yield* providers[kind](fakeClient(sse)))
    if (Either.isLeft(result)) assert.fail(`decoding failed: ${String(result.left)}`)
    return events
  })

/** The usage events of a decoded reply: the partial ones and the final ones, and where they are. */
const usageOf = (events: ReadonlyArray<Generation.GenerationEvent>) => {
  const partial: Array<Generation.Usage> = []
  const final: Array<Generation.Usage> = []
  events.forEach((e) => {
    if (e._tag === "Usage") (e.partial === true ? partial : final).push(e.usage)
  })
  return { partial, final }
}

/** The final Usage is reported once, right before the Finish that ends the reply. */
const assertFinal = (events: ReadonlyArray<Generation.GenerationEvent>, expected: Generation.Usage) => {
  const { final } = usageOf(events)
  assert.deepStrictEqual(final, [expected])
  assert.deepStrictEqual(events.slice(-2).map((e) => e._tag), ["Usage", "Finish"])
  const last = events[events.length - 2]
  assert.isTrue(last._tag === "Usage" && last.partial === undefined)
}

// ---------------------------------------------------------------------------------------------------------------

describe("recorded usage: openai-chat", () => {
  const captures: ReadonlyArray<readonly [string, Generation.Usage]> = [
    // "usage":{"prompt_tokens":16,"completion_tokens":300,…,"prompt_tokens_details":{"cached_tokens":0,…}}
    ["openai-chat/openai-text.chunks.txt", { inputTokens: 16, outputTokens: 300, cacheReadTokens: 0 }],
    // "usage":{"prompt_tokens":58,"completion_tokens":12,…,"prompt_tokens_details":{"cached_tokens":0,…}}
    ["openai-compatible/issue-15789-step-1.chunks.txt", { inputTokens: 58, outputTokens: 12, cacheReadTokens: 0 }]
  ]

  for (const [file, expected] of captures) {
    it.effect(`${file}: the usage chunk as sent, after the finish, once`, () =>
      Effect.gen(function*() {
        const raw = lines(file)
        for (const sse of [toSse(raw), toSse(raw) + "data: [DONE]\n\n"]) {
          const events = yield* decode("chat", sse)
          assertFinal(events, expected)
          assert.deepStrictEqual(usageOf(events).partial, [])
        }
      }))
  }
})

describe("recorded usage: openai-responses", () => {
  // per file, per response (split at each response.completed): `response.usage` as sent
  const captures: ReadonlyArray<readonly [string, ReadonlyArray<Generation.Usage>]> = [
    ["openai-responses/openai-apply-patch-tool.1.chunks.txt", [{
      inputTokens: 642,
      outputTokens: 67,
      cacheReadTokens: 0
    }]],
    ["openai-responses/openai-client-tool-search.1.chunks.txt", [{
      inputTokens: 65,
      outputTokens: 31,
      cacheReadTokens: 0
    }]],
    ["openai-responses/openai-code-interpreter-tool.1.chunks.txt", [{
      inputTokens: 6047,
      outputTokens: 1623,
      cacheReadTokens: 2944
    }]],
    ["openai-responses/openai-compaction.1.chunks.txt", [{
      inputTokens: 51097,
      outputTokens: 2505,
      cacheReadTokens: 49792
    }]],
    ["openai-responses/openai-file-search-tool.1.chunks.txt", [{
      inputTokens: 3737,
      outputTokens: 621,
      cacheReadTokens: 2304
    }]],
    ["openai-responses/openai-local-shell-tool.1.chunks.txt", [{
      inputTokens: 407,
      outputTokens: 151,
      cacheReadTokens: 0
    }]],
    ["openai-responses/openai-mcp-tool-approval.1.chunks.txt", [{
      inputTokens: 422,
      outputTokens: 48,
      cacheReadTokens: 0
    }]],
    ["openai-responses/openai-mcp-tool-approval.2.chunks.txt", [{
      inputTokens: 553,
      outputTokens: 371,
      cacheReadTokens: 0
    }]],
    ["openai-responses/openai-mcp-tool-approval.3.chunks.txt", [{
      inputTokens: 609,
      outputTokens: 48,
      cacheReadTokens: 0
    }]],
    ["openai-responses/openai-mcp-tool.1.chunks.txt", [{
      inputTokens: 11791,
      outputTokens: 963,
      cacheReadTokens: 0
    }]],
    ["openai-responses/openai-reasoning-encrypted-content.1.chunks.txt", [
      { inputTokens: 134, outputTokens: 28, cacheReadTokens: 0 },
      { inputTokens: 221, outputTokens: 26, cacheReadTokens: 0 },
      { inputTokens: 260, outputTokens: 26, cacheReadTokens: 0 },
      { inputTokens: 299, outputTokens: 12, cacheReadTokens: 0 }
    ]],
    ["openai-responses/openai-shell-container-multiturn.1.chunks.txt", [{
      inputTokens: 802,
      outputTokens: 20,
      cacheReadTokens: 0
    }]],
    ["openai-responses/openai-shell-local-multiturn.1.chunks.txt", [{
      inputTokens: 444,
      outputTokens: 12,
      cacheReadTokens: 0
    }]],
    ["openai-responses/openai-shell-skills.1.chunks.txt", [{
      inputTokens: 1501,
      outputTokens: 314,
      cacheReadTokens: 1024
    }]],
    ["openai-responses/openai-shell-tool.1.chunks.txt", [
      { inputTokens: 145, outputTokens: 41, cacheReadTokens: 0 },
      { inputTokens: 331, outputTokens: 166, cacheReadTokens: 0 }
    ]],
    ["openai-responses/openai-tool-search.1.chunks.txt", [{
      inputTokens: 640,
      outputTokens: 46,
      cacheReadTokens: 0
    }]],
    // these two also report "cache_write_tokens": 0
    ["openai-responses/programmatic-tool-calling.1.chunks.txt", [{
      inputTokens: 631,
      outputTokens: 87,
      cacheReadTokens: 0,
      cacheWriteTokens: 0
    }]],
    ["openai-responses/programmatic-tool-calling.3.chunks.txt", [{
      inputTokens: 757,
      outputTokens: 35,
      cacheReadTokens: 0,
      cacheWriteTokens: 0
    }]]
  ]

  it("covers every capture", () => {
    const files = Fs.readdirSync(Path.join(root, "openai-responses")).filter((f) => f.endsWith(".txt")).sort()
    assert.deepStrictEqual(captures.map(([file]) => file), files.map((f) => `openai-responses/${f}`))
  })

  for (const [file, expected] of captures) {
    it.effect(`${file}: each response's usage as sent, through openai-responses and subscription`, () =>
      Effect.gen(function*() {
        const parts = split(lines(file), (p) => p.type === "response.completed")
        assert.strictEqual(parts.length, expected.length)
        for (let i = 0; i < parts.length; i++) {
          for (const kind of ["responses", "subscription"] as const) {
            const events = yield* decode(kind, toSse(parts[i]))
            assertFinal(events, expected[i])
            assert.deepStrictEqual(usageOf(events).partial, [])
          }
        }
      }))
  }
})

describe("recorded usage: anthropic", () => {
  interface Message {
    /** `message_start`'s `message.usage`: the partial Usage. */
    readonly start: Generation.Usage
    /** `message_delta`'s usage (`message_start`'s where no `message_delta` came): the final Usage. */
    readonly final: Generation.Usage
  }
  /** A message whose every cache count was reported as 0. */
  const uncached = (start: [number, number], final: [number, number]): Message => ({
    start: { inputTokens: start[0], outputTokens: start[1], cacheReadTokens: 0, cacheWriteTokens: 0 },
    final: { inputTokens: final[0], outputTokens: final[1], cacheReadTokens: 0, cacheWriteTokens: 0 }
  })
  // the empty messages of programmatic tool calling: message_start with "usage":{"input_tokens":0,"output_tokens":0},
  // no cache counts, no message_delta
  const empty: Message = { start: { inputTokens: 0, outputTokens: 0 }, final: { inputTokens: 0, outputTokens: 0 } }

  // per file, per message (split at each message_stop): [input_tokens, output_tokens] at message_start and at
  // message_delta, as sent
  const captures: ReadonlyArray<readonly [string, ReadonlyArray<Message>]> = [
    ["anthropic/anthropic-advisor-20250301.1.chunks.txt", [uncached([1051, 35], [4727, 3391])]],
    ["anthropic/anthropic-advisor-stop-reasons.chunks.txt", [uncached([10, 1], [10, 20])]],
    ["anthropic/anthropic-clear-thinking.1.chunks.txt", [uncached([69, 2], [69, 53])]],
    ["anthropic/anthropic-clear-tool-uses.1.chunks.txt", [uncached([859, 8], [859, 122])]],
    ["anthropic/anthropic-code-execution-20250825.1.chunks.txt", [uncached([2263, 8], [8050, 771])]],
    ["anthropic/anthropic-code-execution-20250825.2.chunks.txt", [uncached([2273, 3], [15696, 2479])]],
    ["anthropic/anthropic-code-execution-20260120-prompt-cache.1.chunks.txt", [{
      // "input_tokens":2,"cache_creation_input_tokens":3068,"cache_read_input_tokens":0,…,"output_tokens":69
      start: { inputTokens: 2 + 3068 + 0, outputTokens: 69, cacheReadTokens: 0, cacheWriteTokens: 3068 },
      // "input_tokens":6,"cache_creation_input_tokens":3337,"cache_read_input_tokens":6289,"output_tokens":198
      final: { inputTokens: 6 + 3337 + 6289, outputTokens: 198, cacheReadTokens: 6289, cacheWriteTokens: 3337 }
    }]],
    ["anthropic/anthropic-code-execution-file-upload.1.chunks.txt", [uncached([2264, 7], [11505, 1103])]],
    ["anthropic/anthropic-compaction.1.chunks.txt", [uncached([60385, 5], [612, 2819])]],
    ["anthropic/anthropic-json-other-tool.1.chunks.txt", [uncached([843, 16], [843, 28])]],
    ["anthropic/anthropic-json-output-format.1.chunks.txt", [uncached([313, 1], [313, 305])]],
    ["anthropic/anthropic-json-tool.1.chunks.txt", [uncached([849, 10], [849, 47])]],
    ["anthropic/anthropic-programmatic-tool-calling.1.chunks.txt", [
      uncached([3369, 5], [3369, 725]),
      ...Array.from({ length: 13 }, () => empty),
      uncached([4551, 1], [4551, 197])
    ]],
    ["anthropic/anthropic-text.chunks.txt", [uncached([12, 1], [12, 30])]],
    ["anthropic/anthropic-tool-search-bm25.1.chunks.txt", [
      uncached([699, 5], [1630, 158]),
      uncached([1040, 1], [1040, 41])
    ]],
    ["anthropic/anthropic-tool-search-deferred-bm25.chunks.txt", [
      uncached([879, 5], [879, 177]),
      uncached([1398, 1], [1398, 213]),
      uncached([1639, 6], [1639, 95])
    ]],
    ["anthropic/anthropic-tool-search-regex.1.chunks.txt", [
      uncached([722, 1], [1681, 163]),
      uncached([1071, 1], [1071, 67])
    ]],
    ["anthropic/anthropic-web-fetch-tool.1.chunks.txt", [uncached([868, 5], [4230, 446])]]
  ]

  /** The partial Usage comes first, before any content; the final one right before the Finish. */
  const assertMessage = (events: ReadonlyArray<Generation.GenerationEvent>, expected: Message) => {
    assert.deepStrictEqual(usageOf(events).partial, [expected.start])
    const first = events[0]
    assert.isTrue(first._tag === "Usage" && first.partial === true, `first event: ${first._tag}`)
    assertFinal(events, expected.final)
  }

  it("covers every capture", () => {
    const files = Fs.readdirSync(Path.join(root, "anthropic")).filter((f) => f.endsWith(".txt")).sort()
    assert.deepStrictEqual(captures.map(([file]) => file), files.map((f) => `anthropic/${f}`))
  })

  for (const [file, expected] of captures) {
    it.effect(`${file}: message_start's usage (partial) and message_delta's (final), as sent`, () =>
      Effect.gen(function*() {
        const parts = split(lines(file), (p) => p.type === "message_stop")
        assert.strictEqual(parts.length, expected.length)
        for (let i = 0; i < parts.length; i++) assertMessage(yield* decode("anthropic", toSse(parts[i])), expected[i])
      }))
  }

  // raw wire SSE (event: lines, padded JSON), one message each
  const wire: ReadonlyArray<readonly [string, Message]> = [
    ["wire/stream-a-refusal.sse", uncached([28, 5], [28, 106])],
    // message_start says 612 in / 63 out; its message_delta is the refusal stream's (28 in / 106 out), as recorded
    ["wire/stream-a-toolrefusal.sse", uncached([612, 63], [28, 106])],
    ["wire/stream-b-fallback.sse", uncached([31, 7], [31, 547])]
  ]

  for (const [file, expected] of wire) {
    it.effect(`${file}: message_start's usage (partial) and message_delta's (final), as sent`, () =>
      Effect.gen(function*() {
        assertMessage(yield* decode("anthropic", Fs.readFileSync(Path.join(root, file), "utf8")), expected)
      }))
  }
})
