/**
 * The Anthropic Messages downstream (`POST /v1/messages`): a client's request decoded into a `GenerationRequest`, and
 * the reply written back as Messages events or as a message object, as `@anthropic-ai/sdk` reads them.
 *
 * The request is read by `anthropicRequest.ts`.
 *
 * A stream is `message_start` (`open`, with the message id and the requested model, and zero usage); then content
 * blocks as the API writes them (`content_block_start`, `content_block_delta` with `text_delta`, `thinking_delta` and
 * `signature_delta`, or `input_json_delta`, `content_block_stop`); then `message_delta` (the `stop_reason` and the
 * usage, input tokens included) and `message_stop`. A failure is `event: error` with
 * `{"type": "error", "error": {"type", "message"}}`, which the SDK throws.
 *
 * @internal
 */
import type * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import * as Option from "effect/Option"
import * as Downstream from "../downstream.js"
import * as Request from "./anthropicRequest.js"
import * as Wire from "./wire.js"

type Block =
  | { readonly type: "text"; readonly index: number; text: string; open: boolean }
  | { readonly type: "thinking"; readonly index: number; text: string; signature: string; open: boolean }
  | { readonly type: "redacted_thinking"; readonly index: number; readonly data: string; open: boolean }
  | {
    readonly type: "tool_use"
    readonly index: number
    /** The `ToolCallDelta` index it shows, in its attempt. */
    readonly ordinal: number
    id: string
    name: string
    json: string
    input: unknown
    open: boolean
    /** Its call is complete (`ToolCallComplete`). */
    complete: boolean
  }

const stopReasons: ReadonlySet<string> = new Set([
  "end_turn",
  "max_tokens",
  "stop_sequence",
  "tool_use",
  "pause_turn",
  "refusal",
  "model_context_window_exceeded"
])

/** The reply's `stop_reason`: the provider's own when it is a Messages one, else the normalised reason's. */
const stopReason = (reply: Generation.Reply): string => {
  if (stopReasons.has(reply.providerFinishReason)) return reply.providerFinishReason
  switch (reply.finishReason) {
    case "tool_calls":
      return "tool_use"
    case "length":
      return "max_tokens"
    case "content_filter":
      return "refusal"
    default:
      return reply.toolCalls.length > 0 ? "tool_use" : "end_turn"
  }
}

/** Anthropic's error `type` for a failure named in another protocol's terms. */
const errorType = (failure: Downstream.Failure): string => {
  switch (failure.type) {
    case "server_error":
      return "api_error"
    case "rate_limit_exceeded":
    case "requests":
    case "tokens":
      return "rate_limit_error"
    case "insufficient_quota":
      return "permission_error"
    default:
      return failure.type
  }
}

const blockJson = (block: Block): Wire.Json => {
  switch (block.type) {
    case "text":
      return { type: "text", text: block.text }
    case "thinking":
      return { type: "thinking", thinking: block.text, signature: block.signature }
    case "redacted_thinking":
      return { type: "redacted_thinking", data: block.data }
    case "tool_use":
      return { type: "tool_use", id: block.id, name: block.name, input: block.input }
  }
}

// Anthropic's `input_tokens` leaves out the cache's reads and writes, which it counts apart
const usageJson = (usage: Option.Option<Generation.Usage>) =>
  Option.match(usage, {
    onNone: () => ({ input_tokens: 0, output_tokens: 0 }),
    onSome: (u) => ({
      input_tokens: u.inputTokens - (u.cacheReadTokens ?? 0) - (u.cacheWriteTokens ?? 0),
      ...(u.cacheWriteTokens === undefined ? {} : { cache_creation_input_tokens: u.cacheWriteTokens }),
      ...(u.cacheReadTokens === undefined ? {} : { cache_read_input_tokens: u.cacheReadTokens }),
      output_tokens: u.outputTokens
    })
  })

/**
 * A reply's encoder. `opened`: as if its opening was written already (the codec's own members, which write one part
 * of a reply each).
 */
const makeEncoder = (opened = false): Downstream.StreamEncoder & {
  /** The whole reply's message, for the non-streaming body. */
  readonly body: (context: Downstream.Context, reply: Generation.Reply) => Wire.Json
} => {
  /** The frame being written's context: its id and time are the reply's; its model may change (a route switch). */
  let context: Downstream.Context = { id: "", created: 0, model: "" }
  const at = (current: Downstream.Context) => {
    context = current
  }
  const suffix = () => Wire.suffixOf(context.id)
  /** The blocks of the attempt being shown. */
  let blocks: Array<Block> = []
  /** Block indices go on across a rollback: the client keeps a discarded attempt's blocks at theirs. */
  let nextIndex = 0
  let counter = 0

  const emit = (type: string, data: Wire.Json): string => Wire.frame(type, { type, ...data })

  const close = (block: Block): string => {
    block.open = false
    if (block.type === "tool_use" && block.json.length > 0) {
      try {
        block.input = JSON.parse(block.json)
      } catch {
        // the complete call, when it comes, says what the input is
      }
    }
    return emit("content_block_stop", { index: block.index })
  }

  /**
   * Closes the open blocks before another starts, as the API writes one block at a time, but a block of type `keep`
   * and a tool call's block that has no arguments yet: its complete call gives them.
   */
  const closeOpen = (keep?: Block["type"]): string => {
    let out = ""
    for (const b of blocks) {
      if (b.open && b.type !== keep && !(b.type === "tool_use" && b.json.length === 0)) out += close(b)
    }
    return out
  }

  const start = (block: Block): string => {
    blocks.push(block)
    const shown = block.type === "text"
      ? { type: "text", text: "" }
      : block.type === "thinking"
      ? { type: "thinking", thinking: "", signature: "" }
      : block.type === "tool_use"
      ? { type: "tool_use", id: block.id, name: block.name, input: {} }
      : blockJson(block)
    return emit("content_block_start", { index: block.index, content_block: shown })
  }

  const text = (delta: string): string => {
    let out = ""
    let block = blocks.find((b) => b.open && b.type === "text")
    if (block === undefined || block.type !== "text") {
      out += closeOpen()
      block = { type: "text", index: nextIndex++, text: "", open: true }
      out += start(block)
    }
    block.text += delta
    return out + emit("content_block_delta", { index: block.index, delta: { type: "text_delta", text: delta } })
  }

  const thinkingBlock = () => {
    const found = blocks.find((b) => b.open && b.type === "thinking")
    if (found !== undefined && found.type === "thinking") return { out: "", block: found }
    const block = { type: "thinking" as const, index: nextIndex++, text: "", signature: "", open: true }
    return { out: closeOpen() + start(block), block }
  }

  const thinking = (delta: string): string => {
    const { block, out } = thinkingBlock()
    block.text += delta
    return out + emit("content_block_delta", { index: block.index, delta: { type: "thinking_delta", thinking: delta } })
  }

  const reasoningComplete = (part: Message.ReasoningPart): string => {
    if (part.protocol !== "anthropic") {
      // another protocol's reasoning means nothing to a Messages client: its text was shown, unsigned
      return closeOpen("text")
    }
    if (part.kind === "redacted") {
      const block = { type: "redacted_thinking" as const, index: nextIndex++, data: part.data, open: true }
      return closeOpen() + start(block) + close(block)
    }
    const { block, out } = thinkingBlock()
    let rest = ""
    // the part's text is the block's: what the deltas did not show comes first
    if (part.text.startsWith(block.text) && part.text.length > block.text.length) {
      rest = emit("content_block_delta", {
        index: block.index,
        delta: { type: "thinking_delta", thinking: part.text.slice(block.text.length) }
      })
      block.text = part.text
    }
    block.signature = part.signature
    return out + rest +
      emit("content_block_delta", {
        index: block.index,
        delta: { type: "signature_delta", signature: part.signature }
      }) +
      close(block)
  }

  const toolBlock = (ordinal: number, id: string | undefined, name: string | undefined) => {
    // a fragment of a call whose block was closed by another (fragments of parallel calls interleaved) still goes to
    // its block
    const found = blocks.find((b) => b.type === "tool_use" && !b.complete && b.ordinal === ordinal)
    if (found !== undefined && found.type === "tool_use") return { out: "", block: found }
    const n = counter++
    const block = {
      type: "tool_use" as const,
      index: nextIndex++,
      ordinal,
      id: id ?? `toolu_${suffix()}_${n}`,
      name: name ?? "",
      json: "",
      input: {} as unknown,
      open: true,
      complete: false
    }
    return { out: closeOpen() + start(block), block }
  }

  const unnamed = new Wire.Unnamed()

  const toolDelta = (fragment: Extract<Generation.GenerationEvent, { _tag: "ToolCallDelta" }>): string => {
    const announced = blocks.some((b) => b.type === "tool_use" && !b.complete && b.ordinal === fragment.index)
    const event = announced ? fragment : unnamed.take(fragment)
    if (event === undefined) return ""
    const { block, out } = toolBlock(event.index, event.id, event.name)
    if (event.argumentsDelta.length === 0) return out
    block.json += event.argumentsDelta
    return out +
      emit("content_block_delta", {
        index: block.index,
        delta: { type: "input_json_delta", partial_json: event.argumentsDelta }
      })
  }

  const toolComplete = (call: Message.ToolCall): string => {
    const calls = blocks.filter((b): b is Extract<Block, { type: "tool_use" }> => b.type === "tool_use" && !b.complete)
    let out = ""
    let block = calls.find((b) => b.id === call.id) ?? calls[0]
    if (block === undefined) {
      unnamed.complete(call.id)
      const made = toolBlock(-1 - counter, call.id, call.name)
      out += made.out
      block = made.block
    }
    block.complete = true
    // a call shown without its arguments gets them whole, as one delta
    const json = JSON.stringify(call.arguments ?? {})
    if (block.open && block.json.length === 0) {
      out += emit("content_block_delta", {
        index: block.index,
        delta: { type: "input_json_delta", partial_json: json }
      })
      block.json = json
    }
    if (block.open) out += close(block)
    block.id = call.id
    block.name = call.name
    block.input = call.arguments ?? {}
    return out
  }

  const delta = Downstream.deltaWith({ text, reasoning: thinking, reasoningComplete, toolDelta, toolComplete })

  /** What of the reply the deltas did not write: all of it when they wrote nothing. */
  const fill = (reply: Generation.Reply): string => {
    let out = ""
    if (blocks.length === 0) {
      const parts = (reply.reasoningParts ?? []).filter((part) => part.protocol === "anthropic")
      if (parts.length > 0) { for (const part of parts) out += reasoningComplete(part) }
      else if (reply.reasoning.length > 0) out += thinking(reply.reasoning) + closeOpen()
    }
    const written = blocks.reduce((s, b) => (b.type === "text" ? s + b.text : s), "")
    if (reply.text.startsWith(written) && reply.text.length > written.length) {
      out += text(reply.text.slice(written.length))
    }
    const done = new Set(blocks.flatMap((b) => (b.type === "tool_use" && b.complete ? [b.id] : [])))
    for (const call of reply.toolCalls) if (!done.has(call.id)) out += toolComplete(call)
    for (const block of blocks) if (block.open) out += close(block)
    return out
  }

  const message = (reply: Generation.Reply): Wire.Json => ({
    id: context.id,
    type: "message",
    role: "assistant",
    model: reply.model ?? context.model,
    content: blocks.map(blockJson),
    stop_reason: stopReason(reply),
    stop_sequence: null,
    usage: usageJson(reply.usage)
  })

  /** `message_start`, once: before any other event, whichever frame comes first. */
  const opening = (): string => {
    if (opened) return ""
    opened = true
    return emit("message_start", {
      message: {
        id: context.id,
        type: "message",
        role: "assistant",
        model: context.model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 0, output_tokens: 0 }
      }
    })
  }

  return {
    open: (current) => {
      at(current)
      return opening()
    },
    delta: (current, event) => {
      at(current)
      if (opened) return delta(event)
      // the reply opens with the first frame that shows something
      const frames = delta(event)
      return frames.length > 0 ? opening() + frames : ""
    },
    rollback: (current) => {
      at(current)
      let out = ""
      for (const block of blocks) if (block.open) out += close(block)
      blocks = []
      unnamed.clear()
      return out
    },
    terminal: (current, reply) => {
      at(current)
      return opening() + fill(reply) +
        emit("message_delta", {
          delta: { stop_reason: stopReason(reply), stop_sequence: null },
          usage: usageJson(reply.usage)
        }) +
        emit("message_stop", {})
    },
    failure: (current, failure) => {
      at(current)
      return opening() + emit("error", { error: { type: errorType(failure), message: failure.message } })
    },
    body: (current, reply) => {
      at(current)
      fill(reply)
      return message(reply)
    }
  }
}

/**
 * The Anthropic Messages codec.
 *
 * @internal
 */
export const codec: Downstream.Codec = {
  protocol: "anthropic",
  decode: (body) => Wire.decodeWith(() => Request.decodeBody(body)),
  encoder: makeEncoder,
  open: (context) => makeEncoder().open(context),
  delta: (context, event) => makeEncoder(true).delta(context, event),
  terminal: (context, reply) => makeEncoder(true).terminal(context, reply),
  failure: (context, failure) => makeEncoder(true).failure(context, failure),
  body: (context, reply) => makeEncoder().body(context, reply),
  errorBody: (failure) => ({ type: "error", error: { type: errorType(failure), message: failure.message } })
}
