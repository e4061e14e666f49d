/**
 * The OpenAI Responses API downstream (`POST /v1/responses`): a client's request decoded into a `GenerationRequest`,
 * and the reply written back as Responses events or as a response object, as the `openai` SDK reads them.
 *
 * The request is read by `responsesRequest.ts`.
 *
 * A stream is `response.created` and `response.in_progress` (`open`); then output items as the API writes them: a
 * `message` item (`response.output_item.added`, `response.content_part.added`, `response.output_text.delta`…,
 * `response.output_text.done`, `response.content_part.done`, `response.output_item.done`), `reasoning` items (summary
 * parts and `response.reasoning_summary_text.delta`), `function_call` items
 * (`response.function_call_arguments.delta`…, `.done`); then `response.completed` or, for a reply cut by its token
 * limit or a content filter, `response.incomplete`, whose `response` lists the output, the usage and the serving
 * model. Every event carries its `sequence_number`. A failure is an `error` event (`code`, `message`, `param`, and
 * the same in an `error` object, which makes the `openai` SDK throw) followed by `response.failed`.
 *
 * @internal
 */
import type * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import * as Option from "effect/Option"
import * as Downstream from "../downstream.js"
import * as Request from "./responsesRequest.js"
import * as Wire from "./wire.js"

interface MessageItem {
  readonly type: "message"
  readonly id: string
  readonly index: number
  text: string
  open: boolean
}

interface ReasoningItem {
  readonly type: "reasoning"
  id: string
  readonly index: number
  text: string
  encrypted: string | undefined
  /** The summary texts of a complete part, in place of the streamed text. */
  summary: ReadonlyArray<string> | undefined
  open: boolean
}

interface CallItem {
  readonly type: "function_call"
  readonly id: string
  readonly index: number
  /** The `ToolCallDelta` index it shows, in its attempt. */
  readonly ordinal: number
  callId: string
  name: string
  args: string
  open: boolean
  /** Its call is complete (`ToolCallComplete`): the item holds the call's arguments. */
  complete: boolean
}

type Item = MessageItem | ReasoningItem | CallItem

const usageOf = (usage: Option.Option<Generation.Usage>) =>
  Option.match(usage, {
    onNone: () => null,
    onSome: (u) => ({
      input_tokens: u.inputTokens,
      // required by the protocol: 0 when the upstream reported no cache reads
      input_tokens_details: {
        cached_tokens: u.cacheReadTokens ?? 0,
        ...(u.cacheWriteTokens === undefined ? {} : { cache_write_tokens: u.cacheWriteTokens })
      },
      output_tokens: u.outputTokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: u.inputTokens + u.outputTokens
    })
  })

const itemJson = (item: Item): Wire.Json => {
  const status = item.open ? "in_progress" : "completed"
  switch (item.type) {
    case "message":
      return {
        id: item.id,
        type: "message",
        status,
        content: item.open && item.text.length === 0 ? [] : [outputText(item.text)],
        role: "assistant"
      }
    case "reasoning":
      return {
        id: item.id,
        type: "reasoning",
        summary: (item.summary ?? (item.text.length > 0 ? [item.text] : [])).map(summaryText),
        ...(item.encrypted !== undefined ? { encrypted_content: item.encrypted } : {})
      }
    case "function_call":
      return { id: item.id, type: "function_call", status, arguments: item.args, call_id: item.callId, name: item.name }
  }
}

const outputText = (text: string) => ({ type: "output_text", annotations: [], logprobs: [], text })
const summaryText = (text: string) => ({ type: "summary_text", text })

/** OpenAI's error `type` for a failure named in another protocol's terms. */
const errorType = (type: string): string => {
  switch (type) {
    case "api_error":
    case "overloaded_error":
      return "server_error"
    case "rate_limit_error":
      return "rate_limit_exceeded"
    case "authentication_error":
      return "invalid_request_error"
    default:
      return type
  }
}

/** A failed response's `error.code`: the provider's code, or one of the API's codes for the kind of failure. */
const failedCode = (failure: Downstream.Failure): string =>
  failure.code ?? (failure.status === 429 ? "rate_limit_exceeded" : "server_error")

type Status = "in_progress" | "completed" | "incomplete" | "failed"

/**
 * A reply's encoder. `opened`: as if its opening was written already (the codec's own members, which write one part
 * of a reply each).
 */
const makeEncoder = (opened = false): Downstream.StreamEncoder & {
  /** The whole reply's response object, for the non-streaming body. */
  readonly body: (context: Downstream.Context, reply: Generation.Reply) => Wire.Json
} => {
  /** The frame being written's context: its id and time are the reply's; its model may change (a route switch). */
  let context: Downstream.Context = { id: "", created: 0, model: "" }
  const at = (current: Downstream.Context) => {
    context = current
  }
  const suffix = () => Wire.suffixOf(context.id)
  // the opening is two events
  let sequence = opened ? 2 : 0
  let counter = 0
  /** The items of the attempt being shown, in output order. */
  let items: Array<Item> = []
  /** Output indices go on across a rollback: a discarded attempt's items keep theirs. */
  let nextIndex = 0

  const emit = (type: string, data: Wire.Json): string =>
    Wire.frame(type, { type, sequence_number: sequence++, ...data })

  /** The item being written: one at a time, as the API writes them. */
  const open = (): Item | undefined => items.find((item) => item.open)

  const closeMessage = (item: MessageItem): string => {
    item.open = false
    const at = { item_id: item.id, output_index: item.index, content_index: 0 }
    return emit("response.output_text.done", { ...at, text: item.text, logprobs: [] }) +
      emit("response.content_part.done", { ...at, part: outputText(item.text) }) +
      emit("response.output_item.done", { output_index: item.index, item: itemJson(item) })
  }

  const closeReasoning = (item: ReasoningItem): string => {
    item.open = false
    const at = { item_id: item.id, output_index: item.index, summary_index: 0 }
    const streamed = item.text.length > 0
      ? emit("response.reasoning_summary_text.done", { ...at, text: item.text }) +
        emit("response.reasoning_summary_part.done", { ...at, part: summaryText(item.text) })
      : ""
    return streamed + emit("response.output_item.done", { output_index: item.index, item: itemJson(item) })
  }

  const closeCall = (item: CallItem): string => {
    item.open = false
    return emit("response.function_call_arguments.done", {
      item_id: item.id,
      output_index: item.index,
      arguments: item.args
    }) + emit("response.output_item.done", { output_index: item.index, item: itemJson(item) })
  }

  const closeOpen = (): string => {
    const item = open()
    if (item === undefined) return ""
    return item.type === "message"
      ? closeMessage(item)
      : item.type === "reasoning"
      ? closeReasoning(item)
      : closeCall(item)
  }

  const addItem = (item: Item): string => {
    items.push(item)
    return emit("response.output_item.added", { output_index: item.index, item: itemJson(item) })
  }

  const text = (delta: string): string => {
    let out = ""
    let item = open()
    if (item?.type !== "message") {
      out += closeOpen()
      item = { type: "message", id: `msg_${suffix()}_${counter++}`, index: nextIndex++, text: "", open: true }
      out += addItem(item)
      out += emit("response.content_part.added", {
        item_id: item.id,
        output_index: item.index,
        content_index: 0,
        part: outputText("")
      })
    }
    item.text += delta
    return out + emit("response.output_text.delta", {
      item_id: item.id,
      output_index: item.index,
      content_index: 0,
      delta,
      logprobs: []
    })
  }

  const reasoningItem = (): { out: string; item: ReasoningItem } => {
    const current = open()
    if (current?.type === "reasoning") return { out: "", item: current }
    const out = closeOpen()
    const item: ReasoningItem = {
      type: "reasoning",
      id: `rs_${suffix()}_${counter++}`,
      index: nextIndex++,
      text: "",
      encrypted: undefined,
      summary: undefined,
      open: true
    }
    return { out: out + addItem(item), item }
  }

  const reasoning = (delta: string): string => {
    const { item, out } = reasoningItem()
    const at = { item_id: item.id, output_index: item.index, summary_index: 0 }
    const part = item.text.length === 0
      ? emit("response.reasoning_summary_part.added", { ...at, part: summaryText("") })
      : ""
    item.text += delta
    return out + part + emit("response.reasoning_summary_text.delta", { ...at, delta })
  }

  const reasoningComplete = (part: Message.ReasoningPart): string => {
    const current = open()
    // another protocol's part (an Anthropic signature) means nothing to a Responses client: its text was shown
    if (part.kind !== "reasoning") return current?.type === "reasoning" ? closeReasoning(current) : ""
    const { item, out } = reasoningItem()
    // the item as the upstream issued it: a client sends it back with its id and encrypted content
    item.id = part.id
    item.summary = part.summary
    item.encrypted = part.encryptedContent
    return out + closeReasoning(item)
  }

  const callItem = (
    ordinal: number,
    id: string | undefined,
    name: string | undefined
  ): { out: string; item: CallItem } => {
    // a fragment of a call whose item was closed by another item (fragments of parallel calls interleaved) still
    // goes to its item
    const found = items.find((item): item is CallItem =>
      item.type === "function_call" && !item.complete && item.ordinal === ordinal
    )
    if (found !== undefined) return { out: "", item: found }
    const n = counter++
    const item: CallItem = {
      type: "function_call",
      id: `fc_${suffix()}_${n}`,
      index: nextIndex++,
      ordinal,
      callId: id ?? `call_${suffix()}_${n}`,
      name: name ?? "",
      args: "",
      open: true,
      complete: false
    }
    return { out: closeOpen() + addItem(item), item }
  }

  const unnamed = new Wire.Unnamed()

  const toolDelta = (fragment: Extract<Generation.GenerationEvent, { _tag: "ToolCallDelta" }>): string => {
    const announced = items.some((item) =>
      item.type === "function_call" && !item.complete && item.ordinal === fragment.index
    )
    const event = announced ? fragment : unnamed.take(fragment)
    if (event === undefined) return ""
    const { item, out } = callItem(event.index, event.id, event.name)
    if (event.argumentsDelta.length === 0) return out
    item.args += event.argumentsDelta
    return out + emit("response.function_call_arguments.delta", {
      item_id: item.id,
      output_index: item.index,
      delta: event.argumentsDelta
    })
  }

  const toolComplete = (call: Message.ToolCall): string => {
    const calls = items.filter((item): item is CallItem => item.type === "function_call" && !item.complete)
    let out = ""
    let item = calls.find((c) => c.callId === call.id) ?? calls[0]
    if (item === undefined) {
      unnamed.complete(call.id)
      const made = callItem(-1 - counter, call.id, call.name)
      out += made.out
      item = made.item
    }
    item.complete = true
    item.callId = call.id
    item.name = call.name
    // the item was closed with the arguments streamed, which were the call's; it lists the call's own
    const wasOpen = item.open
    item.args = JSON.stringify(call.arguments ?? {})
    return wasOpen ? out + closeCall(item) : out
  }

  const delta = Downstream.deltaWith({ text, reasoning, reasoningComplete, toolDelta, toolComplete })

  /** What of the reply the deltas did not write: all of it when they wrote nothing. */
  const fill = (reply: Generation.Reply): string => {
    let out = ""
    if (items.length === 0) {
      const parts = (reply.reasoningParts ?? []).filter((part) => part.kind === "reasoning")
      if (parts.length > 0) { for (const part of parts) out += reasoningComplete(part) }
      else if (reply.reasoning.length > 0) out += reasoning(reply.reasoning) + closeOpen()
    }
    const written = items.reduce((s, item) => (item.type === "message" ? s + item.text : s), "")
    if (reply.text.startsWith(written) && reply.text.length > written.length) {
      out += text(reply.text.slice(written.length))
    }
    const done = new Set(items.flatMap((item) => item.type === "function_call" && item.complete ? [item.callId] : []))
    for (const call of reply.toolCalls) if (!done.has(call.id)) out += toolComplete(call)
    return out + closeOpen()
  }

  const response = (status: Status, reply?: Generation.Reply, failure?: Downstream.Failure): Wire.Json => {
    const incomplete = status === "incomplete" && reply !== undefined
      ? {
        reason: reply.providerFinishReason === "max_output_tokens" || reply.providerFinishReason === "content_filter"
          ? reply.providerFinishReason
          : reply.finishReason === "content_filter"
          ? "content_filter"
          : "max_output_tokens"
      }
      : null
    return {
      id: context.id,
      object: "response",
      created_at: context.created,
      status,
      background: false,
      error: failure === undefined ? null : { code: failedCode(failure), message: failure.message },
      incomplete_details: incomplete,
      model: reply?.model ?? context.model,
      output: items.map(itemJson),
      parallel_tool_calls: true,
      previous_response_id: null,
      store: false,
      usage: reply === undefined ? null : usageOf(reply.usage),
      metadata: {}
    }
  }

  /** `response.created` and `response.in_progress`, once: before any other event, whichever frame comes first. */
  const opening = (): string => {
    if (opened) return ""
    opened = true
    return emit("response.created", { response: response("in_progress") }) +
      emit("response.in_progress", { response: response("in_progress") })
  }

  const statusOf = (reply: Generation.Reply): Status =>
    reply.finishReason === "length" || reply.finishReason === "content_filter" ? "incomplete" : "completed"

  return {
    open: (current) => {
      at(current)
      return opening()
    },
    delta: (current, event) => {
      at(current)
      if (opened) return delta(event)
      // the reply opens with the first frame that shows something, numbered before it
      const mark = sequence
      const head = opening()
      const frames = delta(event)
      if (frames.length > 0) return head + frames
      sequence = mark
      opened = false
      return ""
    },
    rollback: (current) => {
      at(current)
      items = []
      unnamed.clear()
      return ""
    },
    terminal: (current, reply) => {
      at(current)
      const out = opening() + fill(reply)
      const status = statusOf(reply)
      return out + emit(`response.${status}`, { response: response(status, reply) })
    },
    failure: (current, failure) => {
      at(current)
      const type = errorType(failure.type)
      const code = failure.code ?? type
      return opening() + emit("error", {
        code,
        message: failure.message,
        param: null,
        error: { type, code, message: failure.message, param: null }
      }) + emit("response.failed", { response: response("failed", undefined, failure) })
    },
    body: (current, reply) => {
      at(current)
      fill(reply)
      return response(statusOf(reply), reply)
    }
  }
}

/**
 * The Responses codec.
 *
 * @internal
 */
export const codec: Downstream.Codec = {
  protocol: "openai-responses",
  decode: (body) => Wire.decodeWith(() => Request.decodeBody(body)),
  encoder: makeEncoder,
  open: (context) => makeEncoder().open(context),
  delta: (context, event) => makeEncoder(true).delta(context, event),
  terminal: (context, reply) => makeEncoder(true).terminal(context, reply),
  failure: (context, failure) => makeEncoder(true).failure(context, failure),
  body: (context, reply) => makeEncoder().body(context, reply),
  errorBody: (failure) => {
    const type = errorType(failure.type)
    return { error: { message: failure.message, type, param: null, code: failure.code ?? null } }
  }
}
