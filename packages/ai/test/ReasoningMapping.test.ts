/**
 * Reasoning between `@effect/ai` and reprise: a reply's reasoning parts ride in the `reasoning` part's
 * `metadata.reprise.parts`, and a prompt that gives them back (`options.reprise.parts`, or the keys of
 * `@effect/ai-anthropic` / `@effect/ai-openai`) puts them on the reprise assistant message.
 */
import * as Prompt from "@effect/ai/Prompt"
import { assert, describe, it } from "@effect/vitest"
import * as PromptMapping from "@reprise/ai/PromptMapping"
import * as ResponseMapping from "@reprise/ai/ResponseMapping"
import * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import { Either, Option } from "effect"

const parts: ReadonlyArray<Message.ReasoningPart> = [
  { protocol: "anthropic", kind: "thinking", text: "t", signature: "sig" },
  { protocol: "anthropic", kind: "redacted", data: "d" }
]

const reply = (reasoningParts: ReadonlyArray<Message.ReasoningPart>, reasoning = "t") =>
  new Generation.Reply({
    text: "answer",
    reasoning,
    reasoningParts,
    toolCalls: [],
    finishReason: "stop",
    providerFinishReason: "end_turn",
    usage: Option.none(),
    attempts: 1
  })

const assistant = (content: ReadonlyArray<Prompt.AssistantMessagePart>) =>
  Either.getOrThrow(
    PromptMapping.toMessages(Prompt.make([{ role: "user", content: "q" }, { role: "assistant", content } as any]))
  )[1]

describe("ResponseMapping: reasoning parts", () => {
  it("the reasoning part carries the reply's parts in metadata.reprise.parts, its text unchanged", () => {
    const [part] = ResponseMapping.fromReply(reply(parts), "anthropic")
    assert.deepStrictEqual(part, { type: "reasoning", text: "t", metadata: { reprise: { parts } } })
  })

  it("a reply with only redacted thinking still has its reasoning part, with empty text", () => {
    const [part] = ResponseMapping.fromReply(reply([parts[1]], ""), "anthropic")
    assert.deepStrictEqual(part, { type: "reasoning", text: "", metadata: { reprise: { parts: [parts[1]] } } })
  })

  it("a reply without parts is mapped as before", () => {
    const [part] = ResponseMapping.fromReply(reply([]), "openai-chat")
    assert.deepStrictEqual(part, { type: "reasoning", text: "t" })
  })
})

describe("PromptMapping: reasoning parts", () => {
  it("options.reprise.parts come back whole, and the message carries them", () => {
    const message = assistant([
      Prompt.makePart("reasoning", { text: "t", options: { reprise: { parts } } }),
      Prompt.makePart("text", { text: "answer" })
    ])
    assert.deepStrictEqual(message, { role: "assistant", text: "answer", toolCalls: [], reasoning: parts })
  })

  it("@effect/ai-anthropic's options are read: thinking with its signature, redacted thinking with its data", () => {
    const message = assistant([
      Prompt.makePart("reasoning", { text: "t", options: { anthropic: { type: "thinking", signature: "sig" } } }),
      Prompt.makePart("reasoning", {
        text: "",
        options: { anthropic: { type: "redacted_thinking", redactedData: "d" } }
      })
    ])
    assert.deepStrictEqual((message as Message.AssistantMessage).reasoning, parts)
  })

  it("@effect/ai-openai's options are read, and the parts of one item (one per summary) are one item", () => {
    const message = assistant([
      Prompt.makePart("reasoning", { text: "a", options: { openai: { itemId: "rs_1", encryptedContent: "enc" } } }),
      Prompt.makePart("reasoning", { text: "b", options: { openai: { itemId: "rs_1", encryptedContent: "enc" } } }),
      Prompt.makePart("reasoning", { text: "", options: { openai: { itemId: "rs_2" } } })
    ])
    assert.deepStrictEqual((message as Message.AssistantMessage).reasoning, [
      { protocol: "openai-responses", kind: "reasoning", id: "rs_1", summary: ["a", "b"], encryptedContent: "enc" },
      { protocol: "openai-responses", kind: "reasoning", id: "rs_2", summary: [] }
    ])
  })

  it("reasoning text without provider options, or with malformed reprise parts, is not sent back", () => {
    const message = assistant([
      Prompt.makePart("reasoning", { text: "plain" }),
      Prompt.makePart("reasoning", { text: "x", options: { reprise: { parts: [{ protocol: "anthropic" }] } } }),
      Prompt.makePart("text", { text: "answer" })
    ])
    assert.deepStrictEqual(message, { role: "assistant", text: "answer", toolCalls: [] })
  })

  it("a generateText reply's content, given back as a prompt with its metadata as options, round-trips", () => {
    const content = ResponseMapping.fromReply(reply(parts), "anthropic")
    const reasoning = content[0] as { text: string; metadata: Prompt.ProviderOptions }
    const message = assistant([
      Prompt.makePart("reasoning", { text: reasoning.text, options: reasoning.metadata }),
      Prompt.makePart("text", { text: "answer" })
    ])
    assert.deepStrictEqual((message as Message.AssistantMessage).reasoning, parts)
  })
})
