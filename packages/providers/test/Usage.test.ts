/**
 * How each protocol's usage blocks become `Usage` events, over the shapes the recorded captures do not hold: a cache
 * count is set only when the provider reported it, Anthropic's partial usage is `message_start`'s, and its final usage
 * is the last report of each count. RecordedUsage.test.ts has the figures of the real captures.
 */
import { HttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import type * as Generation from "@reprise/core/Generation"
import * as AnthropicMessages from "@reprise/providers/AnthropicMessages"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import * as OpenAiResponses from "@reprise/providers/OpenAiResponses"
import { Effect, Either, Redacted } from "effect"
import { fakeClient, KEY, run } from "./support/harness.js"

const options = { apiKey: Redacted.make(KEY), baseUrl: "http://127.0.0.1:9" }

const data = (payload: unknown) => `data: ${JSON.stringify(payload)}\n\n`

/** The usage events of a complete reply, partial ones marked. */
const usages = (
  make: typeof OpenAiChat.make,
  sse: string
): Effect.Effect<Array<{ readonly partial: boolean; readonly usage: Generation.Usage }>> =>
  Effect.gen(function*() {
    const provider = yield* Effect.provideService(make(options), HttpClient.HttpClient, fakeClient(sse))
    const { events, result } = yield* run(provider)
    if (Either.isLeft(result)) assert.fail(String(result.left))
    return events.flatMap((e) => e._tag === "Usage" ? [{ partial: e.partial === true, usage: e.usage }] : [])
  })

describe("openai-chat usage", () => {
  const reply = (usage: unknown) =>
    data({ choices: [{ index: 0, delta: { content: "Hi" }, finish_reason: "stop" }] }) +
    data({ choices: [], usage }) + "data: [DONE]\n\n"

  it.effect("prompt_tokens_details' counts are the cache parts, each only when reported", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [unknown, Generation.Usage]> = [
        [{ prompt_tokens: 3, completion_tokens: 2 }, { inputTokens: 3, outputTokens: 2 }],
        [{ prompt_tokens: 3, completion_tokens: 2, prompt_tokens_details: null }, { inputTokens: 3, outputTokens: 2 }],
        [{ prompt_tokens: 3, completion_tokens: 2, prompt_tokens_details: { cached_tokens: null, audio_tokens: 0 } }, {
          inputTokens: 3,
          outputTokens: 2
        }],
        [
          { prompt_tokens: 900, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 768 } },
          { inputTokens: 900, outputTokens: 2, cacheReadTokens: 768 }
        ],
        [
          {
            prompt_tokens: 900,
            completion_tokens: 2,
            prompt_tokens_details: { cached_tokens: 0, cache_write_tokens: 512 }
          },
          { inputTokens: 900, outputTokens: 2, cacheReadTokens: 0, cacheWriteTokens: 512 }
        ]
      ]
      for (const [usage, expected] of cases) {
        assert.deepStrictEqual(yield* usages(OpenAiChat.make, reply(usage)), [{ partial: false, usage: expected }])
      }
    }))
})

describe("openai-responses usage", () => {
  const reply = (usage: unknown) =>
    data({ type: "response.output_text.delta", item_id: "msg_1", output_index: 0, delta: "Hi" }) +
    data({ type: "response.completed", response: { status: "completed", output: [], usage } })

  it.effect("input_tokens_details' counts are the cache parts, each only when reported", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [unknown, Generation.Usage]> = [
        [{ input_tokens: 3, output_tokens: 2 }, { inputTokens: 3, outputTokens: 2 }],
        [{ input_tokens: 3, output_tokens: 2, input_tokens_details: null }, { inputTokens: 3, outputTokens: 2 }],
        [
          { input_tokens: 3000, output_tokens: 2, input_tokens_details: { cached_tokens: 2048 } },
          { inputTokens: 3000, outputTokens: 2, cacheReadTokens: 2048 }
        ],
        [
          {
            input_tokens: 3000,
            output_tokens: 2,
            input_tokens_details: { cached_tokens: 0, cache_write_tokens: 1024 }
          },
          { inputTokens: 3000, outputTokens: 2, cacheReadTokens: 0, cacheWriteTokens: 1024 }
        ]
      ]
      for (const [usage, expected] of cases) {
        assert.deepStrictEqual(yield* usages(OpenAiResponses.make, reply(usage)), [{ partial: false, usage: expected }])
      }
    }))
})

describe("anthropic usage", () => {
  const reply = (start: unknown, delta: unknown) =>
    data({ type: "message_start", message: { content: [], stop_reason: null, usage: start } }) +
    data({ type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }) +
    data({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hi" } }) +
    data({ type: "content_block_stop", index: 0 }) +
    data({
      type: "message_delta",
      delta: { stop_reason: "end_turn" },
      ...(delta === undefined ? {} : { usage: delta })
    }) +
    data({ type: "message_stop" })

  it.effect("message_start's usage is the partial one; message_delta's counts replace it one by one", () =>
    Effect.gen(function*() {
      const start = {
        input_tokens: 5,
        cache_creation_input_tokens: 100,
        cache_read_input_tokens: 900,
        output_tokens: 1
      }
      const atStart = { inputTokens: 1005, outputTokens: 1, cacheReadTokens: 900, cacheWriteTokens: 100 }
      // the older shape: message_delta reports the output only
      assert.deepStrictEqual(yield* usages(AnthropicMessages.make, reply(start, { output_tokens: 40 })), [
        { partial: true, usage: atStart },
        { partial: false, usage: { ...atStart, outputTokens: 40 } }
      ])
      // the newer shape: every count again, cumulative
      assert.deepStrictEqual(
        yield* usages(
          AnthropicMessages.make,
          reply(start, {
            input_tokens: 7,
            cache_creation_input_tokens: 0,
            cache_read_input_tokens: 1000,
            output_tokens: 40
          })
        ),
        [
          { partial: true, usage: atStart },
          { partial: false, usage: { inputTokens: 1007, outputTokens: 40, cacheReadTokens: 1000, cacheWriteTokens: 0 } }
        ]
      )
      // input_tokens again without the cache counts: the cache counts reported at the start still count
      assert.deepStrictEqual(
        yield* usages(AnthropicMessages.make, reply(start, { input_tokens: 5, output_tokens: 40 })),
        [{ partial: true, usage: atStart }, { partial: false, usage: { ...atStart, outputTokens: 40 } }]
      )
      // no message_delta usage: the final usage is message_start's
      assert.deepStrictEqual(yield* usages(AnthropicMessages.make, reply(start, undefined)), [
        { partial: true, usage: atStart },
        { partial: false, usage: atStart }
      ])
    }))

  it.effect("without cache counts there are none; without input_tokens at the start no partial usage", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(
        yield* usages(AnthropicMessages.make, reply({ input_tokens: 12, output_tokens: 1 }, { output_tokens: 30 })),
        [
          { partial: true, usage: { inputTokens: 12, outputTokens: 1 } },
          { partial: false, usage: { inputTokens: 12, outputTokens: 30 } }
        ]
      )
      assert.deepStrictEqual(
        yield* usages(AnthropicMessages.make, reply({ output_tokens: 1 }, { input_tokens: 12, output_tokens: 30 })),
        [{ partial: false, usage: { inputTokens: 12, outputTokens: 30 } }]
      )
      assert.deepStrictEqual(yield* usages(AnthropicMessages.make, reply(null, undefined)), [])
    }))
})
