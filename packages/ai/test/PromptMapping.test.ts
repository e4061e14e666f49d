import * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import { assert, describe, it } from "@effect/vitest"
import { Either, Option, Schema } from "effect"
import * as PromptMapping from "../src/PromptMapping.js"
import { Record } from "./support.js"

const options = (prompt: Prompt.RawInput, extra: Partial<Parameters<typeof PromptMapping.toRequest>[0]> = {}) => ({
  prompt: Prompt.make(prompt),
  tools: [],
  toolChoice: "auto" as const,
  responseFormat: { type: "text" as const },
  span: undefined as any,
  ...extra
})

const settings = { model: "m", maxTokens: 100 }

describe("PromptMapping", () => {
  it("maps every role: system, user, assistant text and tool calls, tool results; reasoning is not sent back", () => {
    const prompt = Prompt.make([
      { role: "system", content: "be brief" },
      { role: "user", content: [{ type: "text", text: "first" }, { type: "text", text: "second" }] },
      {
        role: "assistant",
        content: [
          { type: "reasoning", text: "thinking it over" },
          { type: "text", text: "Let me " },
          { type: "text", text: "record it." },
          { type: "tool-call", id: "call_1", name: "record", params: { line: "x" } }
        ]
      },
      {
        role: "tool",
        content: [
          {
            type: "tool-result",
            id: "call_1",
            name: "record",
            result: "recorded x",
            isFailure: false,
            providerExecuted: false
          },
          {
            type: "tool-result",
            id: "call_2",
            name: "record",
            result: { error: "no" },
            isFailure: true,
            providerExecuted: false
          }
        ]
      }
    ])
    const messages = Either.getOrThrow(PromptMapping.toMessages(prompt))
    assert.deepStrictEqual(messages, [
      { role: "system", text: "be brief" },
      { role: "user", text: "first\n\nsecond" },
      {
        role: "assistant",
        text: "Let me record it.",
        toolCalls: [{ id: "call_1", name: "record", arguments: { line: "x" } }]
      },
      { role: "tool", toolCallId: "call_1", name: "record", content: "recorded x", isError: false },
      { role: "tool", toolCallId: "call_2", name: "record", content: "{\"error\":\"no\"}", isError: true }
    ])
  })

  it("refuses what no protocol sends: a file part, a provider-executed tool call", () => {
    const file = PromptMapping.toMessages(
      Prompt.make([{ role: "user", content: [{ type: "file", mediaType: "image/png", data: "AAAA" }] }])
    )
    assert.isTrue(Either.isLeft(file))
    assert.strictEqual(Either.isLeft(file) && file.left._tag, "MalformedInput")
    const executed = PromptMapping.toMessages(Prompt.make([{
      role: "assistant",
      content: [{ type: "tool-call", id: "ws", name: "web_search", params: {}, providerExecuted: true }]
    }]))
    assert.isTrue(Either.isLeft(executed))
  })

  it("the toolkit's tools become definitions with their JSON Schema and description", () => {
    const request = Either.getOrThrow(PromptMapping.toRequest(options("hi", { tools: [Record] }), settings))
    assert.deepStrictEqual(request.tools, [{
      name: "record",
      description: "Records one line",
      parameters: Tool.getJsonSchema(Record) as any
    }])
    assert.strictEqual(request.maxTokens, 100)
    assert.deepStrictEqual(request.messages, [{ role: "user", text: "hi" }])
  })

  it("toolChoice: none sends no tools; a choice that forces a tool is refused, not ignored", () => {
    const none = Either.getOrThrow(
      PromptMapping.toRequest(options("hi", { tools: [Record], toolChoice: "none" }), settings)
    )
    assert.isUndefined(none.tools)
    for (const toolChoice of ["required", { tool: "record" }, { mode: "required", oneOf: ["record"] }] as const) {
      const forced = PromptMapping.toRequest(options("hi", { tools: [Record], toolChoice }), settings)
      assert.isTrue(Either.isLeft(forced), JSON.stringify(toolChoice))
    }
  })

  it("a json response format asks for the object in the system text, with its JSON Schema", () => {
    const schema = Schema.Struct({ name: Schema.String })
    const request = Either.getOrThrow(
      PromptMapping.toRequest(
        options("who?", { responseFormat: { type: "json", objectName: "person", schema } }),
        settings
      )
    )
    assert.include(request.system ?? "", "named \"person\"")
    assert.include(request.system ?? "", "\"required\":[\"name\"]")
    assert.isTrue(Option.isNone(Option.fromNullable(request.tools)))
  })
})
