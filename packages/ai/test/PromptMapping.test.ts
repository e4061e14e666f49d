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

  it("toolChoice maps to the request's: auto is the default, none keeps the tools, required and { tool } force", () => {
    const tools = [Record]
    const choiceOf = (toolChoice: Parameters<typeof PromptMapping.toRequest>[0]["toolChoice"]) => {
      const request = Either.getOrThrow(PromptMapping.toRequest(options("hi", { tools, toolChoice }), settings))
      assert.deepStrictEqual(request.tools?.map((tool) => tool.name), ["record"], JSON.stringify(toolChoice))
      return request.toolChoice
    }
    assert.isUndefined(choiceOf("auto"))
    assert.isUndefined(choiceOf({ mode: "auto", oneOf: ["record"] }))
    assert.strictEqual(choiceOf("none"), "none")
    assert.strictEqual(choiceOf("required"), "required")
    assert.strictEqual(choiceOf({ mode: "required", oneOf: ["record"] }), "required")
    assert.deepStrictEqual(choiceOf({ tool: "record" }), { tool: "record" })
  })

  it("without tools (no toolkit: @effect/ai's none), the request has neither tools nor a tool choice", () => {
    const request = Either.getOrThrow(PromptMapping.toRequest(options("hi", { toolChoice: "none" }), settings))
    assert.deepStrictEqual(request, { model: "m", messages: [{ role: "user", text: "hi" }], maxTokens: 100 })
  })

  it("a choice that forces a call to a tool not offered, or to no tool, is refused before any send", () => {
    const cases = [
      { tools: [Record], toolChoice: { tool: "missing" } },
      { tools: [], toolChoice: "required" },
      { tools: [Record], toolChoice: { mode: "required", oneOf: ["missing"] } }
    ] as const
    for (const extra of cases) {
      const refused = PromptMapping.toRequest(options("hi", extra), settings)
      assert.isTrue(Either.isLeft(refused), JSON.stringify(extra.toolChoice))
      assert.strictEqual(Either.isLeft(refused) && refused.left._tag, "MalformedInput")
    }
  })

  it("a json response format becomes the request's responseFormat: a name for the wire, the JSON Schema", () => {
    const schema = Schema.Struct({ name: Schema.String }).annotations({ description: "A person" })
    const request = Either.getOrThrow(
      PromptMapping.toRequest(
        options("who?", { responseFormat: { type: "json", objectName: "the person", schema } }),
        settings
      )
    )
    assert.deepStrictEqual(request.responseFormat, {
      type: "json",
      name: "the_person",
      schema: {
        type: "object",
        required: ["name"],
        properties: { name: { type: "string" } },
        additionalProperties: false,
        description: "A person"
      },
      description: "A person"
    })
    assert.isUndefined(request.system)
    assert.isTrue(Option.isNone(Option.fromNullable(request.tools)))
    assert.strictEqual(PromptMapping.formatName(""), "object")
    assert.strictEqual(PromptMapping.formatName("x".repeat(70)), "x".repeat(64))
  })
})
