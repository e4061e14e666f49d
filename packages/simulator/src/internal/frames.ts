/**
 * SSE frames: one event of a reply as the bytes that carry it, with its `event:` name and `data:` text. A reply
 * is a list of frames plus the index of the protocol's terminal event, which the fault plans cut around.
 *
 * @internal
 */
import type * as SimulatorScript from "../SimulatorScript.js"

/** @internal */
export interface Frame {
  /** The bytes of the event on the wire, its blank line included. */
  readonly text: string
  readonly event: string | undefined
  readonly data: string | undefined
}

/** @internal */
export interface Frames {
  readonly frames: ReadonlyArray<Frame>
  /** The index of the first terminal event, if the reply has one. */
  readonly terminal: number | undefined
}

/** @internal */
export const frame = (event: string | undefined, data: string): Frame => ({
  text: `${event === undefined ? "" : `event: ${event}\n`}data: ${data}\n\n`,
  event,
  data
})

/** @internal */
export const jsonFrame = (event: string | undefined, payload: unknown): Frame => frame(event, JSON.stringify(payload))

/** @internal */
export const done: Frame = frame(undefined, "[DONE]")

/** @internal */
export const json = (self: Frame): any => {
  if (self.data === undefined || self.data === "[DONE]") return undefined
  try {
    return JSON.parse(self.data)
  } catch {
    return undefined
  }
}

const fieldOf = (line: string, name: string): string | undefined => {
  if (!line.startsWith(name + ":")) return undefined
  const value = line.slice(name.length + 1)
  return value.startsWith(" ") ? value.slice(1) : value
}

const parseBlock = (text: string): Frame => {
  let event: string | undefined
  const data: Array<string> = []
  for (const raw of text.split(/\r?\n|\r/)) {
    const e = fieldOf(raw, "event")
    if (e !== undefined) event = e
    const d = fieldOf(raw, "data")
    if (d !== undefined) data.push(d)
  }
  return { text, event, data: data.length === 0 ? undefined : data.join("\n") }
}

/**
 * Splits raw SSE into frames, keeping every byte: extra blank lines stay with the frame before them.
 *
 * @internal
 */
export const parseWire = (text: string): ReadonlyArray<Frame> => {
  const frames: Array<Frame> = []
  let start = 0
  let lineStart = 0
  let blockHasContent = false
  const push = (end: number) => {
    const block = text.slice(start, end)
    if (blockHasContent) frames.push(parseBlock(block))
    else if (frames.length > 0) {
      const last = frames[frames.length - 1]!
      frames[frames.length - 1] = { ...last, text: last.text + block }
    } else if (block.length > 0) frames.push({ text: block, event: undefined, data: undefined })
    start = end
    blockHasContent = false
  }
  let i = 0
  while (i < text.length) {
    const c = text[i]
    if (c === "\n" || c === "\r") {
      const end = c === "\r" && text[i + 1] === "\n" ? i + 2 : i + 1
      const empty = i === lineStart
      i = end
      lineStart = end
      if (empty) push(end)
    } else {
      blockHasContent = true
      i++
    }
  }
  if (start < text.length) push(text.length)
  return frames
}

/**
 * Frames a file of one JSON payload per line for a protocol: `event:` lines named after each payload's `type` for
 * Anthropic and Responses, a final `data: [DONE]` for Chat Completions and subscription.
 *
 * @internal
 */
export const fromChunks = (text: string, route: SimulatorScript.Route): ReadonlyArray<Frame> => {
  const frames: Array<Frame> = []
  for (const line of text.split(/\r?\n/)) {
    const trimmed = line.trim()
    if (trimmed.length === 0) continue
    if (trimmed === "[DONE]") {
      frames.push(done)
      continue
    }
    if (route === "openai-chat") {
      frames.push(frame(undefined, trimmed))
    } else {
      let type: unknown
      try {
        type = (JSON.parse(trimmed) as { type?: unknown }).type
      } catch {
        type = undefined
      }
      frames.push(frame(typeof type === "string" ? type : undefined, trimmed))
    }
  }
  if ((route === "openai-chat" || route === "subscription") && frames.at(-1)?.data !== "[DONE]") frames.push(done)
  return frames
}

const responsesTerminals = new Set(["response.completed", "response.done", "response.incomplete"])

/**
 * Whether a frame is the protocol's terminal event (DESIGN §3).
 *
 * @internal
 */
export const isTerminal = (self: Frame, route: SimulatorScript.Route): boolean => {
  if (route === "subscription" && self.data === "[DONE]") return true
  const payload = json(self)
  if (payload === undefined || payload === null || typeof payload !== "object") return false
  switch (route) {
    case "openai-chat":
      return Array.isArray(payload.choices) &&
        payload.choices.some((choice: any) =>
          choice !== null && typeof choice === "object" && typeof choice.finish_reason === "string"
        )
    case "anthropic":
      return (self.event ?? payload.type) === "message_stop"
    case "openai-responses":
    case "subscription":
      return responsesTerminals.has(self.event ?? payload.type)
  }
}

/**
 * Whether a frame carries a content token: a non-empty text delta of the protocol.
 *
 * @internal
 */
export const isToken = (self: Frame, route: SimulatorScript.Route): boolean => {
  const payload = json(self)
  if (payload === undefined || payload === null || typeof payload !== "object") return false
  switch (route) {
    case "openai-chat":
      return Array.isArray(payload.choices) &&
        payload.choices.some((choice: any) => typeof choice?.delta?.content === "string" && choice.delta.content !== "")
    case "anthropic":
      return payload.type === "content_block_delta" && payload.delta?.type === "text_delta"
    case "openai-responses":
    case "subscription":
      return payload.type === "response.output_text.delta"
  }
}

/** @internal */
export const make = (frames: ReadonlyArray<Frame>, route: SimulatorScript.Route): Frames => {
  const index = frames.findIndex((f) => isTerminal(f, route))
  return { frames, terminal: index === -1 ? undefined : index }
}
