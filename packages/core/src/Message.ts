/**
 * The conversation model shared by every protocol: what is sent to a provider and what a transcript stores. Each
 * message is a plain, JSON-safe struct described by a Schema, so transcripts round-trip through JSONL.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"

/**
 * A tool call as committed in a reply: its id, the tool's name and the decoded JSON arguments.
 *
 * @since 0.1.0
 * @category models
 */
export const ToolCall = Schema.Struct({
  id: Schema.String,
  name: Schema.String,
  arguments: Schema.Unknown
})

/**
 * @since 0.1.0
 * @category models
 */
export interface ToolCall extends Schema.Schema.Type<typeof ToolCall> {}

/**
 * @since 0.1.0
 * @category models
 */
export const SystemMessage = Schema.Struct({
  role: Schema.Literal("system"),
  text: Schema.String
})

/**
 * @since 0.1.0
 * @category models
 */
export const UserMessage = Schema.Struct({
  role: Schema.Literal("user"),
  text: Schema.String
})

/**
 * A committed assistant reply: its text and the tool calls it asked for.
 *
 * @since 0.1.0
 * @category models
 */
export const AssistantMessage = Schema.Struct({
  role: Schema.Literal("assistant"),
  text: Schema.String,
  toolCalls: Schema.Array(ToolCall)
})

/**
 * The committed result of one tool call.
 *
 * @since 0.1.0
 * @category models
 */
export const ToolResultMessage = Schema.Struct({
  role: Schema.Literal("tool"),
  toolCallId: Schema.String,
  name: Schema.String,
  content: Schema.String,
  isError: Schema.Boolean
})

/**
 * @since 0.1.0
 * @category models
 */
export const Message = Schema.Union(SystemMessage, UserMessage, AssistantMessage, ToolResultMessage)

/**
 * @since 0.1.0
 * @category models
 */
export type Message = typeof Message.Type

/**
 * @since 0.1.0
 * @category models
 */
export type AssistantMessage = typeof AssistantMessage.Type

/**
 * @since 0.1.0
 * @category models
 */
export type UserMessage = typeof UserMessage.Type

/**
 * @since 0.1.0
 * @category models
 */
export type ToolResultMessage = typeof ToolResultMessage.Type

/**
 * @since 0.1.0
 * @category constructors
 */
export const user = (text: string): Message => ({ role: "user", text })

/**
 * @since 0.1.0
 * @category constructors
 */
export const system = (text: string): Message => ({ role: "system", text })

/**
 * @since 0.1.0
 * @category constructors
 */
export const assistant = (text: string, toolCalls: ReadonlyArray<ToolCall> = []): Message => ({
  role: "assistant",
  text,
  toolCalls
})

/**
 * @since 0.1.0
 * @category constructors
 */
export const toolResult = (options: {
  readonly toolCallId: string
  readonly name: string
  readonly content: string
  readonly isError?: boolean | undefined
}): Message => ({
  role: "tool",
  toolCallId: options.toolCallId,
  name: options.name,
  content: options.content,
  isError: options.isError ?? false
})

/**
 * The size of a message in characters, as sent to a provider. {@link Overflow} uses it to check that a smaller
 * context view really is smaller.
 *
 * @since 0.1.0
 * @category utils
 */
export const size = (message: Message): number => {
  switch (message.role) {
    case "system":
    case "user":
      return message.text.length
    case "assistant":
      return message.text.length +
        message.toolCalls.reduce((n, call) => n + call.name.length + JSON.stringify(call.arguments ?? null).length, 0)
    case "tool":
      return message.content.length + message.name.length
  }
}
