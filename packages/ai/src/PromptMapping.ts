/**
 * How an `@effect/ai` request becomes a reprise {@link Generation.GenerationRequest}: the `Prompt`'s messages become
 * reprise messages, the `Toolkit`'s tools become tool definitions, and a `generateObject` schema becomes an
 * instruction in the system text.
 *
 * | `Prompt` | reprise `Message` |
 * |---|---|
 * | `system` message | `{ role: "system", text }` |
 * | `user` message, its text parts | `{ role: "user", text }`, the parts joined by a blank line |
 * | `assistant` message, its text parts | `{ role: "assistant", text }`, the parts concatenated |
 * | `assistant` tool-call parts (not provider-executed) | that message's `toolCalls` (`id`, `name`, `arguments` = `params`) |
 * | `assistant` reasoning parts | dropped: a reprise message carries no reasoning, so none is sent back |
 * | `tool` message, each tool-result part | `{ role: "tool", toolCallId, name, content, isError }`; `content` is the result itself when it is a string, else its JSON |
 * | file parts, provider-executed tool calls and results | refused with `AiError.MalformedInput`: no reprise protocol sends them |
 *
 * Provider options on messages and parts are ignored.
 *
 * @since 0.1.0
 */
import * as AiError from "@effect/ai/AiError"
import type * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Prompt from "@effect/ai/Prompt"
import * as Tool from "@effect/ai/Tool"
import type * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import * as Either from "effect/Either"
import * as JSONSchema from "effect/JSONSchema"

/**
 * What a request is made with, besides the prompt: the model and its token limit.
 *
 * @since 0.1.0
 * @category models
 */
export interface RequestSettings {
  readonly model: string
  readonly maxTokens?: number | undefined
}

const refuse = (method: string, description: string): AiError.MalformedInput =>
  new AiError.MalformedInput({ module: "RecoveringLanguageModel", method, description })

const toolResultContent = (result: unknown): string => {
  if (typeof result === "string") return result
  const json = JSON.stringify(result)
  // `undefined` (a handler that returned nothing) has no JSON text
  return json === undefined ? "null" : json
}

/**
 * The reprise messages of a `Prompt`, or a `MalformedInput` naming the first part no protocol can send.
 *
 * @since 0.1.0
 * @category mapping
 */
export const toMessages = (
  prompt: Prompt.Prompt,
  method = "generateText"
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
        for (const part of message.content) {
          switch (part.type) {
            case "text":
              text += part.text
              break
            case "reasoning":
              break
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
        messages.push({ role: "assistant", text, toolCalls })
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
 * The system text that asks for a structured object: reprise's requests carry no response format, so
 * `generateObject` asks in words and `@effect/ai` decodes the committed text against the schema.
 *
 * @since 0.1.0
 * @category mapping
 */
export const objectInstruction = (objectName: string, schema: JSONSchema.JsonSchema7Root): string =>
  `Answer with one JSON value named "${objectName}" and nothing else (no prose, no code fence). ` +
  `It must match this JSON Schema: ${JSON.stringify(schema)}`

/**
 * The reprise request for one `@effect/ai` call.
 *
 * - `toolChoice: "none"` sends no tools; `"auto"` (and `{ oneOf }`, which `@effect/ai` has already narrowed) sends
 *   them; a choice that forces a tool (`"required"`, `{ tool }`, `{ mode: "required" }`) is refused with
 *   `MalformedInput`, since reprise's requests cannot force one and ignoring it would be silent.
 * - `responseFormat: json` adds {@link objectInstruction} to the system text.
 *
 * @since 0.1.0
 * @category mapping
 */
export const toRequest = (
  options: LanguageModel.ProviderOptions,
  settings: RequestSettings,
  method = "generateText"
): Either.Either<Generation.GenerationRequest, AiError.MalformedInput> =>
  Either.gen(function*() {
    const messages = yield* toMessages(options.prompt, method)
    const choice = options.toolChoice
    const forced = choice === "required" || (typeof choice === "object" &&
      ("tool" in choice || ("mode" in choice && choice.mode === "required")))
    if (forced && options.tools.length > 0) {
      return yield* Either.left(
        refuse(method, "a tool choice that forces a tool call cannot be sent by reprise; use \"auto\" or \"none\"")
      )
    }
    const tools = choice === "none" ? [] : yield* toToolDefinitions(options.tools, method)
    const format = options.responseFormat
    const system = format.type === "json"
      ? objectInstruction(
        format.objectName,
        yield* Either.try({
          try: () => JSONSchema.make(format.schema),
          catch: () => refuse(method, `the schema of ${format.objectName} has no JSON Schema`)
        })
      )
      : undefined
    return {
      model: settings.model,
      messages,
      ...(system === undefined ? {} : { system }),
      ...(tools.length === 0 ? {} : { tools }),
      ...(settings.maxTokens === undefined ? {} : { maxTokens: settings.maxTokens })
    }
  })
