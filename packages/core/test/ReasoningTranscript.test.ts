/**
 * Reasoning parts on assistant messages: they round-trip through a transcript, a transcript written before they
 * existed still decodes, and a committed reply's message carries them (from the attempt that reached its terminal).
 */
import { FileSystem, Path } from "@effect/platform"
import { NodeContext } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Either, Fiber, Layer, Option, Schema, Stream, TestClock } from "effect"
import * as Generation from "../src/Generation.js"
import * as Message from "../src/Message.js"
import * as Provider from "../src/Provider.js"
import * as Recovery from "../src/Recovery.js"
import * as Transcript from "../src/Transcript.js"
import * as TransportError from "../src/TransportError.js"

const reasoning: ReadonlyArray<Message.ReasoningPart> = [
  { protocol: "anthropic", kind: "thinking", text: "line one\nline \"two\" ÷", signature: "EvQBCkYI+/==" },
  { protocol: "anthropic", kind: "redacted", data: "EmwKAhgBEgy3" },
  { protocol: "openai-responses", kind: "reasoning", id: "rs_1", summary: ["a", "b"], encryptedContent: "gAAAA" },
  { protocol: "subscription", kind: "reasoning", id: "rs_2", summary: [] }
]

const withReasoning: Message.Message = {
  role: "assistant",
  text: "",
  toolCalls: [{ id: "call_1", name: "now", arguments: {} }],
  reasoning
}

describe("reasoning parts in transcripts", () => {
  it.scoped("a message with reasoning round-trips through append and read, field for field", () =>
    Effect.gen(function*() {
      const fs = yield* FileSystem.FileSystem
      const path = yield* Path.Path
      const dir = yield* fs.makeTempDirectoryScoped({ prefix: "reprise-reasoning-" })
      const file = path.join(dir, "session.jsonl")
      const messages = [Message.user("hi"), withReasoning, Message.assistant("plain")]
      yield* Transcript.append(file, messages)
      assert.deepStrictEqual(yield* Transcript.load(file), messages)
      const lines = (yield* fs.readFileString(file)).split("\n")
      assert.deepStrictEqual(JSON.parse(lines[1]).reasoning, reasoning)
      // a message without reasoning is written as before: no field
      assert.deepStrictEqual(JSON.parse(lines[2]), { role: "assistant", text: "plain", toolCalls: [] })
    }).pipe(Effect.provide(NodeContext.layer)))

  it("an old assistant line without the field decodes; a malformed part does not", () => {
    const decode = Schema.decodeUnknownEither(Message.Message)
    assert.deepStrictEqual(
      decode({ role: "assistant", text: "x", toolCalls: [] }),
      Either.right({ role: "assistant", text: "x", toolCalls: [] })
    )
    assert.isTrue(
      Either.isLeft(decode({ role: "assistant", text: "x", toolCalls: [], reasoning: [{ protocol: "anthropic" }] }))
    )
    assert.isTrue(
      Either.isLeft(
        decode({
          role: "assistant",
          text: "x",
          toolCalls: [],
          reasoning: [{ protocol: "openai-chat", kind: "reasoning", id: "r", summary: [] }]
        })
      )
    )
  })
})

describe("Reply.reasoningParts", () => {
  const events = (attempt: number) => [
    Generation.ReasoningDelta({ text: `thinking ${attempt}` }),
    Generation.ReasoningComplete({
      part: { protocol: "anthropic", kind: "thinking", text: `thinking ${attempt}`, signature: `sig-${attempt}` }
    }),
    Generation.TextDelta({ text: "answer" })
  ]
  let sends = 0
  const provider = Layer.succeed(
    Provider.Provider,
    Provider.makeFromStream({
      protocol: "anthropic",
      stream: () =>
        Stream.suspend(() => {
          sends++
          const attempt = sends
          return attempt === 1
            ? Stream.concat(
              Stream.fromIterable(events(1)),
              Stream.fail(new TransportError.TransportError({ reason: "Reset" }))
            )
            : Stream.fromIterable([
              ...events(attempt),
              Generation.Finish({ reason: "stop", providerReason: "end_turn" })
            ])
        })
    }) as unknown as Provider.Service
  )

  it.effect("the committed reply carries the parts of its own attempt only, and its message has them", () =>
    Effect.gen(function*() {
      sends = 0
      const fiber = yield* Recovery.generate({ model: "m", messages: [Message.user("q")] }).pipe(
        Effect.provide(provider),
        Effect.fork
      )
      yield* TestClock.adjust("1 minute")
      const reply = yield* Fiber.join(fiber)
      assert.strictEqual(sends, 2)
      assert.strictEqual(reply.attempts, 2)
      assert.deepStrictEqual(reply.reasoningParts, [
        { protocol: "anthropic", kind: "thinking", text: "thinking 2", signature: "sig-2" }
      ])
      assert.strictEqual(reply.text, "answer")
      assert.deepStrictEqual(reply.message.reasoning, reply.reasoningParts)
    }))

  it("a reply without parts gives a message without the field", () => {
    const reply = new Generation.Reply({
      text: "t",
      reasoning: "",
      toolCalls: [],
      finishReason: "stop",
      providerFinishReason: "end_turn",
      usage: Option.none(),
      attempts: 1
    })
    assert.deepStrictEqual(reply.message, { role: "assistant", text: "t", toolCalls: [] })
  })
})
