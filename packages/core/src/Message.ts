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
 * An Anthropic `thinking` block as the model produced it: its thinking text and the `signature` that lets Anthropic
 * verify the block when it is sent back (required, unchanged, for the last assistant turn when extended thinking is
 * used with tools).
 *
 * @since 0.1.0
 * @category models
 */
export const AnthropicThinking = Schema.Struct({
  protocol: Schema.Literal("anthropic"),
  kind: Schema.Literal("thinking"),
  text: Schema.String,
  signature: Schema.String
}).annotations({ identifier: "AnthropicThinking" })

/**
 * An Anthropic `redacted_thinking` block: thinking that Anthropic's safety systems encrypted, as the opaque `data`
 * to send back unchanged.
 *
 * @since 0.1.0
 * @category models
 */
export const AnthropicRedactedThinking = Schema.Struct({
  protocol: Schema.Literal("anthropic"),
  kind: Schema.Literal("redacted"),
  data: Schema.String
}).annotations({ identifier: "AnthropicRedactedThinking" })

/**
 * A Responses `reasoning` output item (`openai-responses`, or the `subscription` backend that produced it): its item
 * `id`, its summary texts in order and, when the server sent it, its `encrypted_content` (what a stateless request,
 * `store: false`, needs to send the reasoning back).
 *
 * @since 0.1.0
 * @category models
 */
export const ResponsesReasoning = Schema.Struct({
  protocol: Schema.Literal("openai-responses", "subscription"),
  kind: Schema.Literal("reasoning"),
  id: Schema.String,
  summary: Schema.Array(Schema.String),
  encryptedContent: Schema.optional(Schema.String)
}).annotations({ identifier: "ResponsesReasoning" })

/**
 * One piece of a reply's reasoning as its protocol must receive it back, tagged with that protocol: signatures,
 * item ids and encrypted content are bound to the provider that issued them, so a protocol sends back only its own
 * parts and drops the others. Chat Completions has no reasoning input and has no part.
 *
 * @since 0.1.0
 * @category models
 */
export const ReasoningPart = Schema.Union(AnthropicThinking, AnthropicRedactedThinking, ResponsesReasoning)
  .annotations({ identifier: "ReasoningPart" })

/**
 * @since 0.1.0
 * @category models
 */
export type ReasoningPart = typeof ReasoningPart.Type

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
 * A committed assistant reply: its text, the tool calls it asked for and, when its protocol carries reasoning back,
 * its {@link ReasoningPart}s in the order they came. `reasoning` is optional: a message without it (a reply of a
 * protocol without reasoning, or a transcript line without the field) decodes and sends no reasoning. Reasoning is
 * never part of `text`.
 *
 * @since 0.1.0
 * @category models
 */
export const AssistantMessage = Schema.Struct({
  role: Schema.Literal("assistant"),
  text: Schema.String,
  toolCalls: Schema.Array(ToolCall),
  reasoning: Schema.optional(Schema.Array(ReasoningPart))
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

const reasoningSize = (part: ReasoningPart): number => {
  switch (part.kind) {
    case "thinking":
      return part.text.length + part.signature.length
    case "redacted":
      return part.data.length
    case "reasoning":
      return part.summary.reduce((n, text) => n + text.length, 0) + (part.encryptedContent?.length ?? 0)
  }
}

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
        message.toolCalls.reduce((n, call) => n + call.name.length + JSON.stringify(call.arguments ?? null).length, 0) +
        (message.reasoning ?? []).reduce((n, part) => n + reasoningSize(part), 0)
    case "tool":
      return message.content.length + message.name.length
  }
}
