/**
 * How an `@effect/ai` request becomes a reprise {@link Generation.GenerationRequest}: the `Prompt`'s messages become
 * reprise messages, the `Toolkit`'s tools become tool definitions, its `toolChoice` the request's `toolChoice`, and a
 * `generateObject` schema the request's `responseFormat` (a JSON Schema), which OpenAI's protocols send natively and
 * Anthropic's as an instruction in the system text.
 *
 * | `Prompt` | reprise `Message` |
 * |---|---|
 * | `system` message | `{ role: "system", text }` |
 * | `user` message, its text parts | `{ role: "user", text }`, the parts joined by a blank line |
 * | `assistant` message, its text parts | `{ role: "assistant", text }`, the parts concatenated |
 * | `assistant` tool-call parts (not provider-executed) | that message's `toolCalls` (`id`, `name`, `arguments` = `params`) |
 * | `assistant` reasoning parts | the message's `reasoning` ({@link reasoningParts}): the reprise parts in `options.reprise.parts` (what `generateText` puts in a reasoning part's `metadata.reprise`), else `@effect/ai-anthropic`'s `options.anthropic` (`{type: "thinking", signature}`, `{type: "redacted_thinking", redactedData}`) or `@effect/ai-openai`'s `options.openai` (`{itemId, encryptedContent}`); a part with none of them is dropped (its text alone cannot be sent back) |
 * | `tool` message, each tool-result part | `{ role: "tool", toolCallId, name, content, isError }`; `content` is the result itself when it is a string, else its JSON |
 * | file parts, provider-executed tool calls and results | refused with `AiError.MalformedInput`: no reprise protocol sends them |
 *
 * | `ProviderOptions` | reprise request |
 * |---|---|
 * | `toolChoice: "auto"`, `{ mode: "auto", oneOf }` | the (narrowed) tools, no `toolChoice` (every protocol's default) |
 * | `toolChoice: "none"` | the tools, `toolChoice: "none"` (the model sees them and may not call one) |
 * | `toolChoice: "required"`, `{ mode: "required", oneOf }` | the (narrowed) tools, `toolChoice: "required"` |
 * | `toolChoice: { tool }` | the tools, `toolChoice: { tool }`; a tool not offered is refused (`MalformedInput`) |
 * | `responseFormat: { type: "json", objectName, schema }` | `responseFormat: { type: "json", name, schema, description? }` |
 *
 * Other provider options on messages and parts are ignored.
 *
 * @since 0.1.0
 */
import * as AiError from "@effect/ai/AiError"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import type * as Generation from "@reprise/core/Generation"
import * as Message from "@reprise/core/Message"
import * as Either from "effect/Either"
import * as Schema from "effect/Schema"

/**
 * What a request is made with, besides the prompt: the model and its token limit.
 *
 * @since 0.1.0
 * @category models
 */
export interface RequestSettings {
  readonly model: string
  readonly maxTokens?: number | undefined
  /** Every request in the provider's background mode (see `Generation.GenerationRequest.background`). */
  readonly background?: boolean | undefined
}

const refuse = (method: string, description: string): AiError.MalformedInput =>
  new AiError.MalformedInput({ module: "RecoveringLanguageModel", method, description })

const toolResultContent = (result: unknown): string => {
  if (typeof result === "string") return result
  const json = JSON.stringify(result)
  // `undefined` (a handler that returned nothing) has no JSON text
  return json === undefined ? "null" : json
}

const isParts = Schema.is(Schema.Array(Message.ReasoningPart))

const record = (u: unknown): Record<string, unknown> | undefined =>
  typeof u === "object" && u !== null ? (u as Record<string, unknown>) : undefined

/**
 * The reprise reasoning parts an assistant `reasoning` part carries, in its options:
 *
 * - `options.reprise.parts`: reprise's own, protocol-tagged parts (what {@link ResponseMapping.fromReply} puts in
 *   `metadata.reprise.parts`), taken whole;
 * - else `options.anthropic` as `@effect/ai-anthropic` writes it: `{type: "thinking", signature}` (the part's text is
 *   the thinking) or `{type: "redacted_thinking", redactedData}`;
 * - else `options.openai` as `@effect/ai-openai` writes it: `{itemId, encryptedContent?}`, the part's text one summary
 *   text ({@link toMessages} joins consecutive parts of one item, as `@effect/ai-openai` splits an item by summary);
 * - else none: reasoning text without what its provider needs to verify it is not sent back.
 *
 * @since 0.1.0
 * @category mapping
 */
export const reasoningParts = (part: Prompt.ReasoningPart, recall?: Recall): Array<Message.ReasoningPart> => {
  const options = part.options as Record<string, unknown>
  const reprise = record(options.reprise)?.parts
  if (isParts(reprise)) return [...reprise]
  const anthropic = record(options.anthropic)
  if (anthropic?.type === "thinking" && typeof anthropic.signature === "string") {
    return [{ protocol: "anthropic", kind: "thinking", text: part.text, signature: anthropic.signature }]
  }
  if (anthropic?.type === "redacted_thinking" && typeof anthropic.redactedData === "string") {
    return [{ protocol: "anthropic", kind: "redacted", data: anthropic.redactedData }]
  }
  const openai = record(options.openai)
  if (typeof openai?.itemId === "string") {
    const summary = part.text.length > 0 ? [part.text] : []
    const encrypted = openai.encryptedContent
    return [{
      protocol: "openai-responses",
      kind: "reasoning",
      id: openai.itemId,
      summary,
      ...(typeof encrypted === "string" ? { encryptedContent: encrypted } : {})
    }]
  }
  return recall === undefined || part.text.length === 0 ? [] : [...(recall(part.text) ?? [])]
}

/**
 * The reasoning parts of a reply this model committed, by the reply's reasoning text: what a `reasoning` part with
 * no options can still be sent back with. `@effect/ai`'s `Chat` keeps a reply's reasoning text in its history but
 * not the part's metadata (`Prompt.fromResponseParts`), so without it a signed thinking block or an encrypted item
 * would be lost on the next turn.
 *
 * @since 0.1.0
 * @category models
 */
export type Recall = (text: string) => ReadonlyArray<Message.ReasoningPart> | undefined

/**
 * The reprise messages of a `Prompt`, or a `MalformedInput` naming the first part no protocol can send.
 *
 * @since 0.1.0
 * @category mapping
 */
export const toMessages = (
  prompt: Prompt.Prompt,
  method = "generateText",
  recall?: Recall
): Either.Either<Array<Message.Message>, AiError.MalformedInput> => {
  const messages: Array<Message.Message> = []
  for (const message of prompt.content) {
    switch (message.role) {
      case "system": {
        messages.push({ role: "system", text: message.content })
        break
      }
      case "user": {
        const texts: Array<string> = []
        for (const part of message.content) {
          if (part.type !== "text") {
            return Either.left(refuse(method, `a user message has a ${part.type} part, which reprise cannot send`))
          }
          texts.push(part.text)
        }
        messages.push({ role: "user", text: texts.join("\n\n") })
        break
      }
      case "assistant": {
        let text = ""
        const toolCalls: Array<Message.ToolCall> = []
        const reasoning: Array<Message.ReasoningPart> = []
        for (const part of message.content) {
          switch (part.type) {
            case "text":
              text += part.text
              break
            case "reasoning": {
              for (const next of reasoningParts(part, recall)) {
                const last = reasoning[reasoning.length - 1]
                // one Responses item split into parts by summary text (as `@effect/ai-openai` does) is one item again
                if (last?.kind === "reasoning" && next.kind === "reasoning" && last.id === next.id) {
                  const encryptedContent = last.encryptedContent ?? next.encryptedContent
                  reasoning[reasoning.length - 1] = {
                    ...last,
                    summary: [...last.summary, ...next.summary],
                    ...(encryptedContent !== undefined ? { encryptedContent } : {})
                  }
                } else reasoning.push(next)
              }
              break
            }
            case "tool-call":
              if (part.providerExecuted) {
                return Either.left(
                  refuse(method, `the provider-executed tool call ${part.name} cannot be sent by reprise`)
                )
              }
              toolCalls.push({ id: part.id, name: part.name, arguments: part.params })
              break
            case "tool-result":
              return Either.left(
                refuse(method, `the provider-executed tool result of ${part.name} cannot be sent by reprise`)
              )
            case "file":
              return Either.left(refuse(method, "an assistant message has a file part, which reprise cannot send"))
          }
        }
        messages.push(
          reasoning.length > 0
            ? { role: "assistant", text, toolCalls, reasoning }
            : { role: "assistant", text, toolCalls }
        )
        break
      }
      case "tool": {
        for (const part of message.content) {
          messages.push({
            role: "tool",
            toolCallId: part.id,
            name: part.name,
            content: toolResultContent(part.result),
            isError: part.isFailure
          })
        }
        break
      }
    }
  }
  return Either.right(messages)
}

/**
 * The tool definitions of the tools `@effect/ai` offers for this request (already narrowed by a `oneOf` tool
 * choice), or a `MalformedInput` for a provider-defined tool (reprise's protocols have none).
 *
 * @since 0.1.0
 * @category mapping
 */
export const toToolDefinitions = (
  tools: ReadonlyArray<Tool.Any>,
  method = "generateText"
): Either.Either<Array<Generation.ToolDefinition>, AiError.MalformedInput> => {
  const definitions: Array<Generation.ToolDefinition> = []
  for (const tool of tools) {
    if (Tool.isProviderDefined(tool)) {
      return Either.left(refuse(method, `the provider-defined tool ${tool.name} is not available through reprise`))
    }
    definitions.push({
      name: tool.name,
      description: tool.description ?? Tool.getDescriptionFromSchemaAst(tool.parametersSchema.ast) ?? "",
      parameters: Tool.getJsonSchemaFromSchemaAst(tool.parametersSchema.ast) as unknown as Record<string, unknown>
    })
  }
  return Either.right(definitions)
}

/**
 * A name for the wire from `@effect/ai`'s `objectName`, which may be any string: reprise's (OpenAI's) format names
 * are 1 to 64 letters, digits, `_` or `-`, so every other character becomes `_` and the name is cut at 64 (an empty
 * name is `object`).
 *
 * @since 0.1.0
 * @category mapping
 */
export const formatName = (objectName: string): string => {
  const name = objectName.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 64)
  return name.length === 0 ? "object" : name
}

/**
 * The response format of a `generateObject` call: its object's name ({@link formatName}), the JSON Schema of its
 * Schema (as `@effect/ai` makes a tool's, `$defs` at the root) and the Schema's description. `undefined` for text.
 * A Schema without a JSON Schema is refused with `MalformedInput`.
 *
 * @since 0.1.0
 * @category mapping
 */
export const toResponseFormat = (
  format: LanguageModel.ProviderOptions["responseFormat"],
  method = "generateObject"
): Either.Either<Generation.ResponseFormat | undefined, AiError.MalformedInput> => {
  if (format.type !== "json") return Either.right(undefined)
  return Either.map(
    Either.try({
      try: () => Tool.getJsonSchemaFromSchemaAst(format.schema.ast) as unknown as Record<string, unknown>,
      catch: () => refuse(method, `the schema of ${format.objectName} has no JSON Schema`)
    }),
    (schema): Generation.ResponseFormat => {
      const description = Tool.getDescriptionFromSchemaAst(format.schema.ast)
      return {
        type: "json",
        name: formatName(format.objectName),
        schema,
        ...(description === undefined ? {} : { description })
      }
    }
  )
}

/**
 * The tool choice of a request with these `tools` (those `@effect/ai` offers, already narrowed by a `oneOf`):
 *
 * - `"auto"` and `{ mode: "auto", oneOf }`: none (`"auto"` is every protocol's default with tools);
 * - `"none"`: `"none"` when there are tools (they are sent, and the model may not call them), else none;
 * - `"required"` and `{ mode: "required", oneOf }`: `"required"`;
 * - `{ tool }`: `{ tool }`.
 *
 * A choice that forces a call to no tool (no tools are offered) or to a tool that is not offered is refused with
 * `MalformedInput`, before any send.
 *
 * @since 0.1.0
 * @category mapping
 */
export const toToolChoice = (
  choice: LanguageModel.ProviderOptions["toolChoice"],
  tools: ReadonlyArray<Generation.ToolDefinition>,
  method = "generateText"
): Either.Either<Generation.ToolChoice | undefined, AiError.MalformedInput> => {
  if (choice === "auto") return Either.right(undefined)
  if (choice === "none") return Either.right(tools.length === 0 ? undefined : "none")
  if (choice === "required" || ("oneOf" in choice && choice.mode === "required")) {
    return tools.length === 0
      ? Either.left(refuse(method, "the tool choice requires a tool call, but no tools are offered"))
      : Either.right("required")
  }
  if ("tool" in choice) {
    return tools.some((tool) => tool.name === choice.tool)
      ? Either.right({ tool: choice.tool })
      : Either.left(refuse(method, `the tool choice names the tool ${choice.tool}, which is not offered`))
  }
  return Either.right(undefined)
}

/**
 * The reprise request for one `@effect/ai` call: the prompt's messages, the tools (narrowed by a `oneOf` tool
 * choice), the tool choice ({@link toToolChoice}) and the response format of `generateObject`
 * ({@link toResponseFormat}), each protocol sending the last two its own way (natively on OpenAI's, the format as a
 * system-text instruction on Anthropic's).
 *
 * @since 0.1.0
 * @category mapping
 */
export const toRequest = (
  options: LanguageModel.ProviderOptions,
  settings: RequestSettings,
  method = "generateText",
  recall?: Recall
): Either.Either<Generation.GenerationRequest, AiError.MalformedInput> =>
  Either.gen(function*() {
    const messages = yield* toMessages(options.prompt, method, recall)
    const choice = options.toolChoice
    // `@effect/ai` has narrowed the tools to a `oneOf` already; narrowing again keeps this true for any caller
    const offered = typeof choice === "object" && "oneOf" in choice
      ? options.tools.filter((tool) => choice.oneOf.includes(tool.name))
      : options.tools
    const tools = yield* toToolDefinitions(offered, method)
    const toolChoice = yield* toToolChoice(choice, tools, method)
    const responseFormat = yield* toResponseFormat(options.responseFormat, method)
    return {
      model: settings.model,
      messages,
      ...(tools.length === 0 ? {} : { tools }),
      ...(toolChoice === undefined ? {} : { toolChoice }),
      ...(responseFormat === undefined ? {} : { responseFormat }),
      ...(settings.maxTokens === undefined ? {} : { maxTokens: settings.maxTokens }),
      ...(settings.background === true ? { background: true } : {})
    }
  })
