/**
 * An event whose step fails emits nothing: the outputs of the events before it are emitted, then the failure, and
 * nothing the failing event's own step appended before it failed (`Machine.step` appends to one array per read; the
 * runner drops what a failing step appended). Pinned at the runner with a machine that appends and then fails, and
 * at two protocols whose failing events produce output first: a Chat chunk with text and a call whose arguments are
 * cut, and an Anthropic `message_stop` that completes a thinking block and then a call whose arguments are cut.
 */
import { HttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import * as Generation from "@reprise/core/Generation"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as AnthropicMessages from "@reprise/providers/AnthropicMessages"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import { Chunk, Effect, Either, Option, Redacted, Stream } from "effect"
import * as Settings from "../src/internal/settings.js"
import { type Machine, prematureEof, run as runBody } from "../src/internal/sse.js"
import { fakeClient, run, toSse } from "./support/harness.js"

const event = (name: string, o: unknown) => `event: ${name}\ndata: ${JSON.stringify(o)}\n\n`

describe("a failing event emits nothing", () => {
  it.effect("the runner drops what a failing step appended, after the events before it", () =>
    Effect.gen(function*() {
      const body = Stream.make(new TextEncoder().encode("data: a\n\ndata: b\n\ndata: fail\n\ndata: c\n\n"))
      const failure = new ProviderRejection.ProviderRejection({ reason: "MalformedStream", detail: "test" })
      const machine: Machine<string> = {
        step: (data, out) => {
          out.push(Generation.TextDelta({ text: data }))
          return data === "fail" ? failure : undefined
        },
        done: () => false,
        end: (failed) => Effect.fail(Option.getOrElse(failed, () => prematureEof("test")))
      }
      const settings = Settings.settings("openai-chat", { apiKey: Redacted.make("sk-test") })
      const texts: Array<string> = []
      const result = yield* runBody({ body: Stream.toPull(body), settings, decode: (e) => e.data, machine }).pipe(
        Stream.runForEachChunk((chunk) =>
          Effect.sync(() => {
            for (const e of Chunk.toReadonlyArray(chunk)) if (e._tag === "TextDelta") texts.push(e.text)
          })
        ),
        Effect.either
      )
      assert.deepStrictEqual(texts, ["a", "b"])
      assert.isTrue(Either.isLeft(result))
      assert.deepStrictEqual((result as Either.Left<unknown, void>).left, failure)
    }))

  it.effect("chat: a finishing chunk whose call cannot be completed emits none of its text", () =>
    Effect.gen(function*() {
      const provider = yield* OpenAiChat.make({ apiKey: Redacted.make("sk-test"), baseUrl: "http://127.0.0.1:1/v1" })
      const { events, result } = yield* run(provider)
      assert.isTrue(Either.isLeft(result))
      assert.strictEqual((result as Either.Left<any, void>).left.reason, "TruncatedToolArguments")
      const texts = events.flatMap((e) => e._tag === "TextDelta" ? [e.text] : [])
      assert.deepStrictEqual(texts, ["before "])
    }).pipe(Effect.provideService(
      HttpClient.HttpClient,
      fakeClient(
        toSse([
          JSON.stringify({ choices: [{ index: 0, delta: { content: "before " } }] }),
          JSON.stringify({
            choices: [{
              index: 0,
              delta: {
                content: "in the failing chunk",
                tool_calls: [{ index: 0, id: "call_1", function: { name: "f", arguments: "{\"a\": " } }]
              },
              finish_reason: "tool_calls"
            }]
          })
          // one read: the failing chunk follows an event that made progress in the same read
        ]),
        { chunkSize: 1 << 16 }
      )
    )))

  it.effect("anthropic: a message_stop whose call cannot be completed emits no reasoning it completed first", () =>
    Effect.gen(function*() {
      const provider = yield* AnthropicMessages.make({
        apiKey: Redacted.make("sk-test"),
        baseUrl: "http://127.0.0.1:1/v1"
      })
      const { events, result } = yield* run(provider)
      assert.isTrue(Either.isLeft(result))
      assert.strictEqual((result as Either.Left<any, void>).left.reason, "TruncatedToolArguments")
      assert.deepStrictEqual(events.map((e) => e._tag), ["ReasoningDelta", "ToolCallDelta", "ToolCallDelta"])
    }).pipe(Effect.provideService(
      HttpClient.HttpClient,
      fakeClient(
        event("message_start", { type: "message_start", message: { content: [], stop_reason: null } }) +
          event("content_block_start", {
            type: "content_block_start",
            index: 0,
            content_block: { type: "thinking", thinking: "", signature: "" }
          }) +
          event("content_block_delta", {
            type: "content_block_delta",
            index: 0,
            delta: { type: "thinking_delta", thinking: "thought" }
          }) +
          event("content_block_delta", {
            type: "content_block_delta",
            index: 0,
            delta: { type: "signature_delta", signature: "sig" }
          }) +
          event("content_block_start", {
            type: "content_block_start",
            index: 1,
            content_block: { type: "tool_use", id: "toolu_1", name: "f", input: {} }
          }) +
          event("content_block_delta", {
            type: "content_block_delta",
            index: 1,
            delta: { type: "input_json_delta", partial_json: "{\"a\": " }
          }) +
          event("message_stop", { type: "message_stop" })
      )
    )))
})
