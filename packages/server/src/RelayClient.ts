/**
 * A client of the relay's `reset` mode (`X-Reprise-Preview: reset`) over Chat Completions: it reads the SSE response
 * of `POST /v1/chat/completions` with `"stream": true` and keeps what a user interface shows — the preview of the
 * attempt being streamed, the rollbacks that voided earlier attempts, and the committed answer once the relay sent
 * `reprise.commit` and then `data: [DONE]`.
 *
 * It has no dependency and no Node import, so it runs in a browser as it runs in Node. `make` is self-contained (it
 * refers to nothing outside its own body): the relay's chat page inlines its source, so the page and this module
 * parse with the same code. docs/relay-protocol.md is the reference of the events.
 *
 * @example
 * ```ts
 * import { states } from "@reprise/server/RelayClient"
 *
 * const response = await fetch("http://127.0.0.1:8787/v1/chat/completions", {
 *   method: "POST",
 *   headers: { "content-type": "application/json", "x-reprise-preview": "reset" },
 *   body: JSON.stringify({ model: "gpt-4o-mini", stream: true, messages: [{ role: "user", content: "Hi" }] })
 * })
 * for await (const state of states(response.body!)) {
 *   console.log(state.committed ?? state.preview)
 * }
 * ```
 *
 * @since 0.1.0
 */
import type { AttemptEvent, CommitEvent, RollbackEvent } from "./RelayProtocol.js"

/**
 * Why a stream ended without an answer.
 *
 * - `relay`: the relay sent an `{"error": …}` chunk (the reply failed; `type` and `code` are the relay's).
 * - `protocol`: the stream broke the protocol: data that is not a JSON object, an event over the size bound, or the
 *   terminal `[DONE]` without a `reprise.commit` before it (the request was not served in `reset` mode).
 * - `truncated`: the body ended before the terminal (the connection closed early).
 *
 * @since 0.1.0
 * @category models
 */
export interface StreamError {
  readonly kind: "relay" | "protocol" | "truncated"
  readonly message: string
  readonly type?: string | undefined
  readonly code?: string | undefined
}

/**
 * What the stream said so far. Every change makes a new object; an unchanged stream keeps the same one.
 *
 * @since 0.1.0
 * @category models
 */
export interface State {
  /** The answer: the committed attempt's text, set only once `reprise.commit` and then the terminal arrived. */
  readonly committed: string | undefined
  /** The text the current attempt streamed so far; emptied when that attempt is rolled back. */
  readonly preview: string
  /** The last `reprise.attempt` (the attempt being streamed or the last one sent). */
  readonly attempt: AttemptEvent | undefined
  /** Every `reprise.rollback`, in order. */
  readonly rollbacks: ReadonlyArray<RollbackEvent>
  /** The `reprise.commit`, once it arrived. */
  readonly commit?: CommitEvent | undefined
  /** Why the stream ended without an answer. */
  readonly error?: StreamError | undefined
  /** The stream ended: with an answer (`committed`), or with an `error`. Later input is ignored. */
  readonly done: boolean
}

/**
 * An incremental parser of one response. `feed` takes the decoded text in chunks cut anywhere (inside a line, between
 * `\r` and `\n`) and returns the state after them; `end` says the body ended.
 *
 * @since 0.1.0
 * @category models
 */
export interface Parser {
  readonly feed: (text: string) => State
  readonly end: () => State
  readonly state: () => State
}

/**
 * A parser. `onState`, when given, is called with each new state as it happens, event by event, so a caller that
 * renders it sees an attempt's text before the rollback that voids it even when both arrive in one chunk.
 *
 * Self-contained: its source (`make.toString()`) is a function expression that runs anywhere, and the chat page
 * inlines it.
 *
 * @since 0.1.0
 * @category constructors
 */
export function make(onState?: (state: State) => void): Parser {
  // An event's size bound: a relay never sends one near it; a stream that does is not a relay's.
  const maxEventSize = 1 << 20
  let state: State = { committed: undefined, preview: "", attempt: undefined, rollbacks: [], done: false }
  let pending = ""
  let started = false
  let afterCR = false
  let eventName = ""
  let data = ""
  let hasData = false

  const set = (next: State): void => {
    state = next
    if (onState !== undefined) onState(state)
  }
  const fail = (kind: StreamError["kind"], message: string, type?: string, code?: string): void => {
    const error: StreamError = { kind, message, type, code }
    set({ ...state, error, done: true })
  }
  const object = (text: string): Record<string, unknown> | undefined => {
    try {
      const value: unknown = JSON.parse(text)
      return typeof value === "object" && value !== null && !Array.isArray(value)
        ? value as Record<string, unknown>
        : undefined
    } catch {
      return undefined
    }
  }
  // the reprise event without its `"choices": []`, which is there only for Chat Completions parsers
  const event = (text: string): Record<string, unknown> | undefined => {
    const value = object(text)
    if (value === undefined || typeof value.attempt !== "number") return undefined
    const { choices: _choices, ...rest } = value
    return rest
  }

  const dispatch = (name: string, text: string): void => {
    if (name === "reprise.attempt" || name === "reprise.rollback" || name === "reprise.commit") {
      const value = event(text)
      if (value === undefined) return fail("protocol", `${name} without a JSON object with an attempt`)
      if (name === "reprise.attempt") return set({ ...state, attempt: value as unknown as AttemptEvent, preview: "" })
      if (name === "reprise.rollback") {
        return set({ ...state, preview: "", rollbacks: [...state.rollbacks, value as unknown as RollbackEvent] })
      }
      return set({ ...state, commit: value as unknown as CommitEvent })
    }
    // other named events are not Chat Completions' nor reprise's: a later protocol version's, skipped
    if (name !== "message") return
    if (text === "[DONE]") {
      if (state.commit === undefined) return fail("protocol", "the stream ended without reprise.commit")
      return set({ ...state, committed: state.preview, done: true })
    }
    const chunk = object(text)
    if (chunk === undefined) return fail("protocol", "a data line that is not a JSON object")
    if (chunk.error !== undefined) {
      const error = typeof chunk.error === "object" && chunk.error !== null
        ? chunk.error as Record<string, unknown>
        : { message: chunk.error }
      return fail(
        "relay",
        typeof error.message === "string" ? error.message : "the relay reported an error",
        typeof error.type === "string" ? error.type : undefined,
        typeof error.code === "string" ? error.code : undefined
      )
    }
    const choices = chunk.choices
    if (!Array.isArray(choices)) return
    let content = ""
    for (const choice of choices as Array<Record<string, unknown> | null>) {
      if (choice === null || typeof choice !== "object" || (choice.index !== undefined && choice.index !== 0)) continue
      const delta = choice.delta as Record<string, unknown> | null | undefined
      if (delta !== null && typeof delta === "object" && typeof delta.content === "string") content += delta.content
    }
    if (content !== "") set({ ...state, preview: state.preview + content })
  }

  const line = (text: string): void => {
    if (text === "") {
      if (hasData) dispatch(eventName === "" ? "message" : eventName, data)
      eventName = ""
      data = ""
      hasData = false
      return
    }
    if (text.charCodeAt(0) === 58) return // ":" a comment (keepalive)
    const colon = text.indexOf(":")
    const field = colon === -1 ? text : text.slice(0, colon)
    let value = colon === -1 ? "" : text.slice(colon + 1)
    if (value.charCodeAt(0) === 32) value = value.slice(1)
    if (field === "event") {
      eventName = value
    } else if (field === "data") {
      data = hasData ? data + "\n" + value : value
      hasData = true
    }
  }

  const feed = (text: string): State => {
    if (state.done || text === "") return state
    let input = text
    if (!started) {
      started = true
      if (input.charCodeAt(0) === 0xfeff) input = input.slice(1)
    }
    // a "\r" that ended the previous chunk already ended its line: a "\n" right after it is part of that ending
    if (afterCR && input.charCodeAt(0) === 10) input = input.slice(1)
    afterCR = false
    input = pending + input
    let from = 0
    let cr = input.indexOf("\r")
    let lf = input.indexOf("\n")
    while (!state.done) {
      if (cr !== -1 && cr < from) cr = input.indexOf("\r", from)
      if (lf !== -1 && lf < from) lf = input.indexOf("\n", from)
      if (cr === -1 && lf === -1) break
      const end = cr !== -1 && (lf === -1 || cr < lf) ? cr : lf
      let next = end + 1
      if (end === cr) {
        if (next === input.length) afterCR = true
        else if (input.charCodeAt(next) === 10) next++
      }
      line(input.slice(from, end))
      from = next
    }
    pending = state.done ? "" : input.slice(from)
    if (pending.length + data.length > maxEventSize) fail("protocol", `an event over ${maxEventSize} characters`)
    return state
  }

  const end = (): State => {
    if (!state.done) fail("truncated", "the stream ended before its terminal")
    return state
  }

  return { feed, end, state: () => state }
}

/**
 * The states of a response body, one per change, the last one `done` (a body that ends early ends as `truncated`).
 * The body is cancelled once the stream is done or the caller leaves the loop.
 *
 * @since 0.1.0
 * @category constructors
 */
export async function* states(body: ReadableStream<Uint8Array>): AsyncGenerator<State, void, undefined> {
  const queue: Array<State> = []
  const parser = make((state) => queue.push(state))
  const decoder = new TextDecoder()
  const reader = body.getReader()
  try {
    while (!parser.state().done) {
      const { done, value } = await reader.read()
      if (done) {
        parser.feed(decoder.decode())
        parser.end()
      } else {
        parser.feed(decoder.decode(value, { stream: true }))
      }
      while (queue.length > 0) yield queue.shift()!
    }
  } finally {
    // after the terminal, or when the caller left the loop: nothing more is read
    await reader.cancel().catch(() => undefined)
  }
}

/**
 * The final state of a response body.
 *
 * @since 0.1.0
 * @category constructors
 */
export const read = async (body: ReadableStream<Uint8Array>): Promise<State> => {
  let last: State | undefined
  for await (const state of states(body)) last = state
  return last ?? make().end()
}
