/**
 * Fault plans: what exactly goes on the wire for one request, computed from its script step and the frames of its
 * reply. A plan is plain data; `wire.ts` carries it out on a socket.
 *
 * @internal
 */
import type * as SimulatorScript from "../SimulatorScript.js"
import * as Frames from "./frames.js"
import * as Generate from "./generate.js"

/** @internal */
export type Then = "resume" | "reset" | "eof"

/** @internal */
export interface Pace {
  readonly everyMs: number
  readonly bytes: number | undefined
  readonly events: number
}

/** @internal */
export interface Response {
  readonly status: number
  readonly headers: Readonly<Record<string, string>>
  readonly body: Uint8Array
  /** Byte offsets where events end, ascending; for pacing by events and aligning keepalives. */
  readonly boundaries: ReadonlyArray<number>
  readonly pace: Pace | undefined
  /** Where the body pauses, for how long, with or without keepalive comments, and what follows. */
  readonly stall:
    | {
      readonly at: number
      readonly durationMs: number
      readonly keepaliveMs: number | undefined
      readonly then: Then
    }
    | undefined
  /** How many body bytes are sent before `ending` (when not stalled first). */
  readonly sendUntil: number
  readonly ending: "end" | "reset"
}

/** @internal */
export type Plan =
  | { readonly _tag: "ResetBeforeHeaders" }
  | {
    readonly _tag: "StallBeforeHeaders"
    readonly durationMs: number
    readonly then: Then
    readonly response: Response
  }
  | { readonly _tag: "Respond"; readonly response: Response }

/** @internal */
export const maxStallMs = 600_000

const encoder = new TextEncoder()

const sseHeaders = (requestId: string): Record<string, string> => ({
  "content-type": "text/event-stream; charset=utf-8",
  "cache-control": "no-cache",
  "x-request-id": requestId,
  "request-id": requestId
})

const lower = (headers: Readonly<Record<string, string>> | undefined): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [key, value] of Object.entries(headers ?? {})) out[key.toLowerCase()] = value
  return out
}

const encodeFrames = (frames: ReadonlyArray<Frames.Frame>) => {
  const parts = frames.map((f) => encoder.encode(f.text))
  const boundaries: Array<number> = []
  let total = 0
  for (const part of parts) {
    total += part.length
    boundaries.push(total)
  }
  const body = new Uint8Array(total)
  let offset = 0
  for (const part of parts) {
    body.set(part, offset)
    offset += part.length
  }
  return { body, boundaries }
}

/** The byte offset after the first `events` frames. */
const eventOffset = (boundaries: ReadonlyArray<number>, events: number) =>
  events <= 0 ? 0 : boundaries[Math.min(events, boundaries.length) - 1] ?? 0

/**
 * The byte offset after the event of the `tokens`th content token: before the first token for 0, after the last
 * one when the reply has fewer, before the first event when it has none.
 */
const tokenOffset = (
  route: SimulatorScript.Route,
  frames: ReadonlyArray<Frames.Frame>,
  boundaries: ReadonlyArray<number>,
  tokens: number
): number => {
  const indexes = frames.flatMap((f, i) => Frames.isToken(f, route) ? [i] : [])
  if (indexes.length === 0) return 0
  return tokens === 0
    ? eventOffset(boundaries, indexes[0]!)
    : eventOffset(boundaries, indexes[Math.min(tokens, indexes.length) - 1]! + 1)
}

interface Cut {
  readonly afterBytes?: number | undefined
  readonly afterEvents?: number | undefined
  readonly afterTokens?: number | undefined
}

const cutOffset = (
  boundaries: ReadonlyArray<number>,
  total: number,
  step: Cut,
  tokenAt: (tokens: number) => number
): number | undefined =>
  step.afterBytes !== undefined
    ? Math.min(step.afterBytes, total)
    : step.afterEvents !== undefined
    ? eventOffset(boundaries, step.afterEvents)
    : step.afterTokens !== undefined
    ? tokenAt(step.afterTokens)
    : undefined

/**
 * Whether a step resets the connection before any response byte.
 *
 * @internal
 */
export const resetsBeforeHeaders = (step: SimulatorScript.Step): boolean =>
  step.kind === "reset" && step.afterBytes === undefined && step.afterEvents === undefined &&
  step.afterTokens === undefined

/** The `data:` of a malformed event by default: a chunk cut short. @internal */
export const defaultMalformed = `{"choices":[{"delta":`

const paceOf = (pace: SimulatorScript.Pace | undefined): Pace | undefined =>
  pace === undefined ? undefined : { everyMs: pace.everyMs, bytes: pace.bytes, events: pace.events ?? 1 }

/** @internal */
export interface Input {
  readonly route: SimulatorScript.Route
  readonly step: SimulatorScript.Step
  /** The reply the step serves (absent for status steps). */
  readonly reply: () => Frames.Frames
  readonly ctx: Generate.Context
  readonly requestId: string
  /**
   * Responses: the `sequence_number` of the reply's first event, so an in-band error event takes the next one. 0
   * for a send; a resume serves the events after `starting_after`.
   */
  readonly sequence?: number | undefined
}

/**
 * A step that cannot be carried out with its reply (a truncated tool call of a reply without tool calls).
 *
 * @internal
 */
export class PlanError {
  readonly _tag = "PlanError"
  constructor(readonly message: string) {}
}

/** @internal */
export const make = (input: Input): Plan | PlanError => {
  const { route, step } = input
  if (step.kind === "status") return status(input, step)
  if (resetsBeforeHeaders(step)) return { _tag: "ResetBeforeHeaders" }
  const headers = { ...sseHeaders(input.requestId), ...lower(step.headers) }
  const source = input.reply()
  let frames = source.frames
  const terminal = source.terminal ?? frames.length

  if (step.kind === "error") {
    const at = Math.min(step.afterEvents ?? Math.floor(terminal / 2), frames.length)
    const before = frames.slice(0, at)
    const sequence = before.reduce(
      (n, f) => Frames.json(f)?.sequence_number === undefined ? n : n + 1,
      input.sequence ?? 0
    )
    frames = [...before, Generate.errorFrame(route, step.error, step.event ?? "error", { ...input.ctx, sequence })]
  } else if (step.kind === "truncated-tool-call") {
    const truncated = truncateToolCall(route, frames, step.afterChars)
    if (truncated === undefined) {
      return new PlanError(
        `a truncated-tool-call step needs a reply with a tool call whose arguments are at least 2 characters long`
      )
    }
    frames = truncated
  } else if (step.kind === "malformed") {
    const at = Math.min(step.afterEvents ?? 9, terminal)
    frames = [
      ...frames.slice(0, at),
      Frames.frame(frames[at]?.event, step.data ?? defaultMalformed),
      ...frames.slice(at)
    ]
  } else if (step.kind === "no-done") {
    frames = frames.filter((f) => f.data !== "[DONE]")
  }

  const { body, boundaries } = encodeFrames(frames)
  const tokenAt = (tokens: number) => tokenOffset(route, frames, boundaries, tokens)
  const base: Response = {
    status: 200,
    headers,
    body,
    boundaries,
    pace: step.kind === "drip"
      ? { everyMs: step.everyMs, bytes: step.bytes, events: step.events ?? 1 }
      : paceOf(step.pace),
    stall: undefined,
    sendUntil: body.length,
    ending: "end"
  }

  switch (step.kind) {
    case "stream":
    case "drip":
    case "error":
    case "truncated-tool-call":
    case "malformed":
    case "no-done":
      return { _tag: "Respond", response: base }
    case "slow-first-token":
      return {
        _tag: "Respond",
        response: {
          ...base,
          stall: { at: tokenAt(0), durationMs: step.delayMs, keepaliveMs: step.keepaliveMs, then: "resume" }
        }
      }
    case "reset":
      return {
        _tag: "Respond",
        response: { ...base, sendUntil: cutOffset(boundaries, body.length, step, tokenAt) ?? 0, ending: "reset" }
      }
    case "eof": {
      const at = cutOffset(boundaries, body.length, step, tokenAt) ?? eventOffset(boundaries, terminal)
      return { _tag: "Respond", response: { ...base, sendUntil: at } }
    }
    case "stall": {
      const durationMs = step.durationMs ?? maxStallMs
      const then = step.then ?? "resume"
      const at = cutOffset(boundaries, body.length, step, tokenAt)
      if (at === undefined) return { _tag: "StallBeforeHeaders", durationMs, then, response: base }
      // Comments between the bytes of one event would corrupt it: a stall with keepalives starts at an event
      // boundary.
      const aligned = step.keepaliveMs === undefined ? at : [0, ...boundaries].filter((b) => b <= at).at(-1) ?? 0
      return {
        _tag: "Respond",
        response: { ...base, stall: { at: aligned, durationMs, keepaliveMs: step.keepaliveMs, then } }
      }
    }
  }
}

/**
 * The plan of a status step.
 *
 * @internal
 */
export const status = (
  input: Pick<Input, "route" | "requestId">,
  step: typeof SimulatorScript.StatusStep.Type
): Plan => {
  const headers = lower(step.headers)
  let body: Uint8Array
  let contentType: string | undefined
  if (typeof step.body === "string") {
    body = encoder.encode(step.body)
    contentType = "text/plain; charset=utf-8"
  } else if (step.body !== undefined) {
    body = encoder.encode(JSON.stringify(step.body))
    contentType = "application/json"
  } else if (step.status >= 400) {
    body = encoder.encode(JSON.stringify(Generate.errorBody(input.route, step.status, step.error)))
    contentType = "application/json"
  } else {
    body = new Uint8Array(0)
  }
  return {
    _tag: "Respond",
    response: {
      status: step.status,
      headers: {
        ...(contentType === undefined ? {} : { "content-type": contentType }),
        "content-length": String(body.length),
        "x-request-id": input.requestId,
        "request-id": input.requestId,
        ...headers
      },
      body,
      boundaries: [body.length],
      pace: undefined,
      stall: undefined,
      sendUntil: body.length,
      ending: "end"
    }
  }
}

// -----------------------------------------------------------------------------
// truncated tool calls
// -----------------------------------------------------------------------------

interface ArgumentDelta {
  /** Which tool call the delta belongs to. */
  readonly key: string
  readonly delta: string
  /** The frame with the delta replaced. */
  readonly rewrite: (delta: string) => Frames.Frame
}

const rewriteFrame = (self: Frames.Frame, payload: unknown): Frames.Frame => Frames.jsonFrame(self.event, payload)

const argumentDeltas = (route: SimulatorScript.Route, self: Frames.Frame): ReadonlyArray<ArgumentDelta> => {
  const payload = Frames.json(self)
  if (payload === undefined || payload === null || typeof payload !== "object") return []
  switch (route) {
    case "openai-chat": {
      const out: Array<ArgumentDelta> = []
      const choices: Array<any> = Array.isArray(payload.choices) ? payload.choices : []
      choices.forEach((choice, c) => {
        const calls: Array<any> = Array.isArray(choice?.delta?.tool_calls) ? choice.delta.tool_calls : []
        calls.forEach((call, t) => {
          const args = call?.function?.arguments
          if (typeof args !== "string") return
          out.push({
            key: `${c}:${call.index ?? t}`,
            delta: args,
            rewrite: (delta) => {
              const copy = structuredClone(payload)
              copy.choices[c].delta.tool_calls[t].function.arguments = delta
              return rewriteFrame(self, copy)
            }
          })
        })
      })
      return out
    }
    case "anthropic": {
      if (payload.type !== "content_block_delta" || payload.delta?.type !== "input_json_delta") return []
      if (typeof payload.delta.partial_json !== "string") return []
      return [{
        key: String(payload.index),
        delta: payload.delta.partial_json,
        rewrite: (delta) => rewriteFrame(self, { ...payload, delta: { ...payload.delta, partial_json: delta } })
      }]
    }
    case "openai-responses":
    case "subscription": {
      if (payload.type !== "response.function_call_arguments.delta" || typeof payload.delta !== "string") return []
      return [{
        key: String(payload.item_id ?? payload.output_index),
        delta: payload.delta,
        rewrite: (delta) => rewriteFrame(self, { ...payload, delta })
      }]
    }
  }
}

/**
 * The frames up to the middle of the first tool call's arguments: `afterChars` characters of them (default half),
 * never all of them, so the arguments received are never complete JSON. Undefined when the reply has no tool call
 * with at least two characters of arguments.
 *
 * @internal
 */
export const truncateToolCall = (
  route: SimulatorScript.Route,
  frames: ReadonlyArray<Frames.Frame>,
  afterChars: number | undefined
): ReadonlyArray<Frames.Frame> | undefined => {
  const deltas = frames.map((f) => argumentDeltas(route, f))
  const key = deltas.flat()[0]?.key
  if (key === undefined) return undefined
  const total = deltas.flat().filter((d) => d.key === key).reduce((n, d) => n + d.delta.length, 0)
  if (total < 2) return undefined
  const cut = Math.max(1, Math.min(afterChars ?? Math.floor(total / 2), total - 1))
  let sent = 0
  for (let i = 0; i < frames.length; i++) {
    for (const d of deltas[i]!) {
      if (d.key !== key) continue
      if (sent + d.delta.length >= cut) {
        const keep = cut - sent
        return [...frames.slice(0, i), keep === d.delta.length ? frames[i]! : d.rewrite(d.delta.slice(0, keep))]
      }
      sent += d.delta.length
    }
  }
  return undefined
}
