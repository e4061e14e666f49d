/**
 * Background responses of the Responses API (`"background": true`): the server keeps each one by id with its
 * complete event list, whatever happened to the connection that created it, and serves resume GETs (the events
 * after a `sequence_number`), polls (the response object) and cancels from it. Every event is known when the
 * response is created; `inProgressPolls` only makes it look unfinished to its first polls (and cancellable).
 *
 * The answers follow the real API where it is known (see docs/simulator.md, "Background responses"): a resume
 * carries no `response.created` unless it starts from the beginning, an unknown id is a 404
 * `Response with id '…' not found.`, a response too old to stream a 400 `This response can no longer be streamed
 * because it is more than 5 minutes old.`, a cancel of a finished response a 400 `Cannot cancel a completed
 * response.`, and cancelling twice returns the cancelled response again.
 *
 * @internal
 */
import type * as RecordedRequest from "../RecordedRequest.js"
import type * as SimulatorScript from "../SimulatorScript.js"
import * as Frames from "./frames.js"
import type * as Generate from "./generate.js"
import type * as Load from "./load.js"

/** @internal */
export type Status = RecordedRequest.ResponseStatus

const finished: ReadonlySet<string> = new Set(["completed", "failed", "incomplete", "cancelled"])

/** @internal */
export type Info = RecordedRequest.BackgroundResponse

/** A JSON answer: a status and a body. @internal */
export interface Answer {
  readonly status: number
  readonly body: unknown
}

/** One stored background response. @internal */
export interface Response {
  readonly id: string
  readonly route: SimulatorScript.Route
  readonly requestId: number
  readonly createdAt: number
  /** What its generated events were built from: in-band error events of a resume reuse it. */
  readonly ctx: Generate.Context
  readonly frames: Frames.Frames
  /** The `sequence_number` of each frame (its index where it has none). */
  readonly sequences: ReadonlyArray<number>
  readonly options: Load.Background
  /** The response objects a poll shows: as created, while in progress, and once done (the terminal event's). */
  readonly created: Record<string, unknown>
  readonly running: Record<string, unknown>
  readonly final: Record<string, unknown>
  cancelled: boolean
  expired: boolean
  polls: number
  resumes: number
  cancels: number
}

/**
 * The resource a path names: `/v1/responses/{id}` (a poll or a resume) or `/v1/responses/{id}/cancel`, also
 * without `/v1`.
 *
 * @internal
 */
export const resource = (
  pathname: string
): { readonly id: string; readonly action: "get" | "cancel" } | undefined => {
  const path = pathname.length > 1 && pathname.endsWith("/") ? pathname.slice(0, -1) : pathname
  const match = /^(?:\/v1)?\/responses\/([^/]+)(\/cancel)?$/.exec(path)
  if (match === null) return undefined
  let id: string
  try {
    id = decodeURIComponent(match[1]!)
  } catch {
    return undefined
  }
  return { id, action: match[2] === undefined ? "get" : "cancel" }
}

/** The background response id a send creates: unique across the server's life, like the request ids. @internal */
export const idFor = (requestId: number): string => `resp_sim_${requestId}`

const isObject = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/** A copy of a response object with the background response's id and `background: true` (after `status`). */
const stamp = (object: Record<string, unknown>, id: string): Record<string, unknown> => {
  if (object.id === id && object.background === true) return object
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(object)) {
    if (key === "background") continue
    out[key] = key === "id" ? id : value
    if (key === "status") out.background = true
  }
  if (!("background" in out)) out.background = true
  return out
}

/**
 * The frames a background response keeps: the reply through its first terminal event (one response per id: a
 * recording of several responses in a row keeps the first), with every response object carrying the response's
 * id and `background: true`. Other frames keep their bytes.
 *
 * @internal
 */
export const prepare = (
  route: SimulatorScript.Route,
  reply: Frames.Frames,
  id: string
): Frames.Frames => {
  const through = reply.terminal === undefined ? reply.frames : reply.frames.slice(0, reply.terminal + 1)
  const frames = through.map((frame) => {
    const payload = Frames.json(frame)
    if (!isObject(payload) || !isObject(payload.response)) return frame
    const response = stamp(payload.response, id)
    return response === payload.response ? frame : Frames.jsonFrame(frame.event, { ...payload, response })
  })
  return Frames.make(frames, route)
}

const sequenceOf = (frame: Frames.Frame, index: number): number => {
  const n = Frames.json(frame)?.sequence_number
  return typeof n === "number" ? n : index
}

/** The response objects of the stored events: as created, in progress, and final. */
const objectsOf = (frames: ReadonlyArray<Frames.Frame>) => {
  const objects = frames.flatMap((frame) => {
    const payload = Frames.json(frame)
    return isObject(payload) && isObject(payload.response) ? [payload.response] : []
  })
  const created = objects[0] ?? {}
  return {
    created,
    running: objects.find((o) => o.status === "in_progress") ?? { ...created, status: "in_progress" },
    final: objects.at(-1) ?? created
  }
}

const error = (status: number, message: string, param: string | null = null): Answer => ({
  status,
  body: { error: { message, type: "invalid_request_error", param, code: null } }
})

/** @internal */
export const notFound = (id: string): Answer => error(404, `Response with id '${id}' not found.`)

const age = (ms: number): string => {
  const unit = (n: number, name: string) => `${n} ${name}${n === 1 ? "" : "s"}`
  return ms % 60_000 === 0 && ms > 0
    ? unit(ms / 60_000, "minute")
    : ms % 1000 === 0 && ms > 0
    ? unit(ms / 1000, "second")
    : unit(ms, "millisecond")
}

/** The real API's answer to a resume of a response older than five minutes (the age is the configured one). */
const tooOld = (streamForMs: number): Answer =>
  error(400, `This response can no longer be streamed because it is more than ${age(streamForMs)} old.`)

const statusOf = (object: Record<string, unknown>): Status => {
  const status = object.status
  return typeof status === "string" && ["queued", "in_progress", ...finished].includes(status)
    ? status as Status
    : "in_progress"
}

/**
 * The background responses the server keeps, oldest first; beyond `max` the oldest are forgotten.
 *
 * @internal
 */
export class Responses {
  private byId = new Map<string, Response>()

  constructor(private readonly max: number) {}

  clear(): void {
    this.byId.clear()
  }

  create(input: {
    readonly id: string
    readonly route: SimulatorScript.Route
    readonly requestId: number
    readonly createdAt: number
    readonly ctx: Generate.Context
    readonly frames: Frames.Frames
    readonly options: Load.Background
  }): Response {
    const objects = objectsOf(input.frames.frames)
    const response: Response = {
      ...input,
      ...objects,
      sequences: input.frames.frames.map(sequenceOf),
      cancelled: false,
      expired: false,
      polls: 0,
      resumes: 0,
      cancels: 0
    }
    this.byId.set(input.id, response)
    if (this.byId.size > this.max) {
      const oldest = this.byId.keys().next()
      if (oldest.done !== true) this.byId.delete(oldest.value)
    }
    return response
  }

  get(id: string): Response | undefined {
    return this.byId.get(id)
  }

  /** Marks a response too old to stream (every response when `id` is undefined); false if it is unknown. */
  expire(id: string | undefined): boolean {
    if (id === undefined) {
      for (const response of this.byId.values()) response.expired = true
      return true
    }
    const response = this.byId.get(id)
    if (response === undefined) return false
    response.expired = true
    return true
  }

  info(id: string): Info | undefined {
    const r = this.byId.get(id)
    return r === undefined ? undefined : {
      id: r.id,
      route: r.route,
      requestId: r.requestId,
      createdAt: r.createdAt,
      status: this.status(r),
      events: r.frames.frames.length,
      polls: r.polls,
      resumes: r.resumes,
      cancels: r.cancels,
      expired: r.expired
    }
  }

  all(): ReadonlyArray<Info> {
    return [...this.byId.keys()].flatMap((id) => {
      const info = this.info(id)
      return info === undefined ? [] : [info]
    })
  }

  /** Still running: not cancelled, and in progress for more polls or without a terminal event. */
  private running(r: Response): boolean {
    return !r.cancelled && (r.polls < r.options.inProgressPolls || !finished.has(statusOf(r.final)))
  }

  private status(r: Response): Status {
    return r.cancelled ? "cancelled" : this.running(r) ? "in_progress" : statusOf(r.final)
  }

  private cancelledObject(r: Response): Record<string, unknown> {
    // A cancelled response has no output (as the API shows it).
    return { ...r.running, status: "cancelled", output: [] }
  }

  /**
   * Why a resume is refused, if it is: an unknown id (404), a response too old to stream, a `starting_after` that
   * is not an integer (400).
   */
  refuseResume(id: string, startingAfter: string | null, at: number): Answer | undefined {
    const r = this.byId.get(id)
    if (r === undefined) return notFound(id)
    if (r.expired || at - r.createdAt >= r.options.streamForMs) return tooOld(r.options.streamForMs)
    if (startingAfter !== null && !/^-?\d+$/.test(startingAfter)) {
      return error(400, `Invalid 'starting_after': expected an integer, got '${startingAfter}'.`, "starting_after")
    }
    return undefined
  }

  /**
   * The events a resume serves: those with a `sequence_number` above `starting_after` (all of them without one:
   * the stream from `response.created`), and the sequence number of the first of them.
   */
  resume(r: Response, startingAfter: string | null): { readonly frames: Frames.Frames; readonly sequence: number } {
    r.resumes++
    const after = startingAfter === null ? -Infinity : Number(startingAfter)
    const first = r.sequences.findIndex((n) => n > after)
    const frames = first === -1 ? [] : r.frames.frames.slice(first)
    const sequence = first === -1 ? (r.sequences.at(-1) ?? -1) + 1 : r.sequences[first]!
    return { frames: Frames.make(frames, r.route), sequence }
  }

  /** A poll: the response object, in progress for the first `inProgressPolls` polls. */
  poll(id: string): Answer {
    const r = this.byId.get(id)
    if (r === undefined) return notFound(id)
    const answer = r.cancelled
      ? this.cancelledObject(r)
      : this.running(r)
      ? r.running
      : r.final
    r.polls++
    return { status: 200, body: answer }
  }

  /**
   * A cancel: a running response becomes `cancelled`; cancelling it again returns it again (idempotent); a finished
   * one is the API's 400.
   */
  cancel(id: string): Answer {
    const r = this.byId.get(id)
    if (r === undefined) return notFound(id)
    r.cancels++
    if (r.cancelled) return { status: 200, body: this.cancelledObject(r) }
    if (this.running(r)) {
      r.cancelled = true
      return { status: 200, body: this.cancelledObject(r) }
    }
    const status = statusOf(r.final)
    return error(400, `Cannot cancel ${status === "incomplete" ? "an" : "a"} ${status} response.`)
  }

  /** The answer to a background send without `stream: true`: the response object as created (queued). */
  createdObject(r: Response): Answer {
    return { status: 200, body: r.created }
  }
}
