/**
 * How what reprise commits becomes `@effect/ai` `Response` parts: a committed {@link Generation.Reply} for
 * `generateText`/`generateObject`, and the events of one attempt for `streamText`.
 *
 * | reprise | `Response` part (`generateText`) | `Response` parts (`streamText`) |
 * |---|---|---|
 * | `Reply.reasoning` / `ReasoningDelta` (`Reply.reasoningParts` in `metadata.reprise.parts`) | `reasoning` | `reasoning-start`, `reasoning-delta`…, `reasoning-end` (at commit) |
 * | `Reply.text` / `TextDelta` | `text` | `text-start`, `text-delta`…, `text-end` (at commit) |
 * | `ToolCallDelta` | — | `tool-params-start`, `tool-params-delta`…, `tool-params-end` (at commit) |
 * | `Reply.toolCalls` / `ToolCallComplete` | `tool-call` (`providerExecuted: false`) | `tool-call`, at commit only |
 * | `Reply.model` (the model the provider named in its response) | `response-metadata` (`modelId`) | `response-metadata`, at commit |
 * | `Reply.finishReason`, `usage`, `attempts`, `ledger` | `finish` | `finish`, at commit |
 *
 * Finish reasons: `stop` → `stop`, `tool_calls` → `tool-calls`, `length` → `length`, `content_filter` →
 * `content-filter`, `other` → `other`. Usage is the committed attempt's: `inputTokens`, `outputTokens` and their sum
 * as `totalTokens`, all `undefined` when the provider reported none, and `cachedInputTokens` when the provider reported
 * cache reads (`Usage` of `@effect/ai` has no field for cache writes: they are in the ledger). The finish part's
 * `metadata.reprise` holds `attempts` (physical sends of the reply), `providerFinishReason` and `protocol`, `route`
 * (`{index, name, model}`) when the reply was served by a plan of routes (see `Routes`), and `ledger` (every attempt's
 * entry with the committed and discarded totals: `Ledger` of `@reprise/core`, plain JSON) when recovery made the
 * reply. A reply whose response named no model has no `response-metadata` part.
 *
 * The reasoning part of `generateText` carries the reply's protocol-tagged reasoning parts (Anthropic thinking blocks
 * with their signatures, redacted thinking, Responses reasoning items with their encrypted content) in
 * `metadata.reprise.parts`; a prompt that gives them back in the part's `options.reprise.parts` sends them back
 * (`PromptMapping.reasoningParts`). A reply with parts and no reasoning text (only redacted thinking) still has the
 * part, with empty text.
 *
 * @since 0.1.0
 */
import type * as Response from "@effect/ai/Response"
import type * as Generation from "@reprise/core/Generation"
import * as Option from "effect/Option"

/**
 * @since 0.1.0
 * @category mapping
 */
export const finishReason = (reason: Generation.FinishReason): Response.FinishReason => {
  switch (reason) {
    case "stop":
      return "stop"
    case "tool_calls":
      return "tool-calls"
    case "length":
      return "length"
    case "content_filter":
      return "content-filter"
    case "other":
      return "other"
  }
}

/**
 * @since 0.1.0
 * @category mapping
 */
export const usage = (usage: Option.Option<Generation.Usage>): typeof Response.Usage.Encoded =>
  Option.match(usage, {
    onNone: () => ({ inputTokens: undefined, outputTokens: undefined, totalTokens: undefined }),
    onSome: (u) => ({
      inputTokens: u.inputTokens,
      outputTokens: u.outputTokens,
      totalTokens: u.inputTokens + u.outputTokens,
      ...(u.cacheReadTokens === undefined ? {} : { cachedInputTokens: u.cacheReadTokens })
    })
  })

/**
 * The finish part of a committed reply: its reason, the committed attempt's usage, and reprise's facts in
 * `metadata.reprise` (see the module's description).
 *
 * @since 0.1.0
 * @category mapping
 */
export const finishPart = (reply: Generation.Reply, protocol: string): Response.FinishPartEncoded => ({
  type: "finish",
  reason: finishReason(reply.finishReason),
  usage: usage(reply.usage),
  metadata: {
    reprise: {
      attempts: reply.attempts,
      providerFinishReason: reply.providerFinishReason,
      protocol,
      ...(reply.route === undefined ? {} : { route: { ...reply.route } }),
      ...(reply.ledger === undefined ? {} : { ledger: reply.ledger })
    }
  }
})

/**
 * The `response-metadata` part of a committed reply: the model the provider named in its response (`modelId`), or
 * nothing when it named none.
 *
 * @since 0.1.0
 * @category mapping
 */
export const metadataParts = (reply: Generation.Reply): Array<Response.ResponseMetadataPartEncoded> =>
  reply.model === undefined ? [] : [{ type: "response-metadata", modelId: reply.model }]

/**
 * The tool-call parts of a committed reply, in order.
 *
 * @since 0.1.0
 * @category mapping
 */
export const toolCallParts = (reply: Generation.Reply): Array<Response.ToolCallPartEncoded> =>
  reply.toolCalls.map((call) => ({
    type: "tool-call",
    id: call.id,
    name: call.name,
    params: call.arguments,
    providerExecuted: false
  }))

/**
 * The parts `generateText` returns for a committed reply: reasoning, text, tool calls, response metadata, finish
 * (empty reasoning and text, and metadata without a model, are left out).
 *
 * @since 0.1.0
 * @category mapping
 */
export const fromReply = (reply: Generation.Reply, protocol: string): Array<Response.PartEncoded> => {
  const parts: Array<Response.PartEncoded> = []
  const reasoningParts = reply.reasoningParts ?? []
  if (reasoningParts.length > 0) {
    parts.push({ type: "reasoning", text: reply.reasoning, metadata: { reprise: { parts: reasoningParts } } })
  } else if (reply.reasoning.length > 0) parts.push({ type: "reasoning", text: reply.reasoning })
  if (reply.text.length > 0) parts.push({ type: "text", text: reply.text })
  parts.push(...toolCallParts(reply))
  parts.push(...metadataParts(reply))
  parts.push(finishPart(reply, protocol))
  return parts
}
