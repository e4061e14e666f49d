/**
 * A truncated tool call whose name echoes the key: the TruncatedToolArguments error never shows the key.
 */
import { HttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import * as AnthropicMessages from "@reprise/providers/AnthropicMessages"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import * as OpenAiResponses from "@reprise/providers/OpenAiResponses"
import { Effect, Either, Redacted } from "effect"
import { inspect } from "node:util"
import { fakeClient, KEY, run, toSse } from "./support/harness.js"

const event = (name: string, o: unknown) => `event: ${name}\ndata: ${JSON.stringify(o)}\n\n`

// A tool call whose name is server text echoing the key, with arguments cut inside the JSON at the terminal.
const truncatedToolNamedKey = {
  chat: {
    make: OpenAiChat.make,
    body: toSse([
      JSON.stringify({
        choices: [{
          index: 0,
          delta: { tool_calls: [{ index: 0, id: "call_1", function: { name: KEY, arguments: "{\"a\": " } }] },
          finish_reason: "tool_calls"
        }]
      })
    ])
  },
  responses: {
    make: OpenAiResponses.make,
    body: toSse([
      JSON.stringify({
        type: "response.output_item.added",
        output_index: 0,
        item: { type: "function_call", id: "fc_1", call_id: "call_1", name: KEY, arguments: "" }
      }),
      JSON.stringify({ type: "response.function_call_arguments.delta", item_id: "fc_1", delta: "{\"a\": " }),
      JSON.stringify({ type: "response.completed", response: { status: "completed", output: [] } })
    ])
  },
  anthropic: {
    make: AnthropicMessages.make,
    body: event("message_start", { type: "message_start", message: { content: [], stop_reason: null } }) +
      event("content_block_start", {
        type: "content_block_start",
        index: 0,
        content_block: { type: "tool_use", id: "toolu_1", name: KEY, input: {} }
      }) +
      event("content_block_delta", {
        type: "content_block_delta",
        index: 0,
        delta: { type: "input_json_delta", partial_json: "{\"a\": " }
      }) +
      event("content_block_stop", { type: "content_block_stop", index: 0 }) +
      event("message_delta", { type: "message_delta", delta: { stop_reason: "tool_use" } }) +
      event("message_stop", { type: "message_stop" })
  }
}

describe("review: the key never reaches an error", () => {
  for (const [name, subject] of Object.entries(truncatedToolNamedKey)) {
    it.effect(`${name}: TruncatedToolArguments does not repeat a tool name that echoes the key`, () =>
      Effect.gen(function*() {
        const provider = yield* subject.make({ apiKey: Redacted.make(KEY), baseUrl: "http://127.0.0.1:1/v1" })
        const { events, result } = yield* run(provider)
        assert.isTrue(Either.isLeft(result))
        const error = (result as Either.Left<any, void>).left
        assert.strictEqual(error.reason, "TruncatedToolArguments")
        assert.isFalse(events.some((e) => e._tag === "ToolCallComplete"))
        assert.notInclude(inspect(error, { depth: 20 }), KEY)
        assert.notInclude(JSON.stringify(error), KEY)
      }).pipe(Effect.provideService(HttpClient.HttpClient, fakeClient(subject.body))))
  }
})
