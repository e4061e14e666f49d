/**
 * The simulator's memory: the loaded script, each route's position in it (one for its sends, one for the resumes
 * of its background responses), the recorded requests and the background responses. It is mutated only from the
 * simulator's own fibers (JavaScript runs them one at a time); waiters are woken through a version counter kept by
 * the caller.
 *
 * @internal
 */
import * as Headers from "@effect/platform/Headers"
import * as Redacted from "effect/Redacted"
import type * as Http from "node:http"
import type * as RecordedRequest from "../RecordedRequest.js"
import type * as SimulatorScript from "../SimulatorScript.js"
import * as Background from "./background.js"
import * as Load from "./load.js"

type Mutable<A> = { -readonly [K in keyof A]: A[K] }

const routes: ReadonlyArray<SimulatorScript.Route> = ["openai-chat", "openai-responses", "anthropic", "subscription"]

const zero = (): Record<SimulatorScript.Route, number> => ({
  "openai-chat": 0,
  "openai-responses": 0,
  anthropic: 0,
  subscription: 0
})

const secret = ["authorization", "x-api-key", "api-key", "proxy-authorization", "cookie"]

/**
 * Lower-cased headers with credentials redacted by `@effect/platform`'s `Headers.redact`. An `authorization` value
 * keeps its scheme (`Bearer <redacted>`) so tests can check the scheme without seeing the key.
 *
 * @internal
 */
export const redact = (headers: Http.IncomingHttpHeaders): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [key, value] of Object.entries(Headers.redact(Headers.fromInput(headers), secret))) {
    if (!Redacted.isRedacted(value)) {
      out[key] = value
      continue
    }
    const original = Redacted.value(value)
    const space = original.indexOf(" ")
    out[key] = key.endsWith("authorization") && space > 0 ? `${original.slice(0, space)} <redacted>` : "<redacted>"
  }
  return out
}

/** @internal */
export interface Arrival {
  readonly record: RecordedRequest.RecordedRequest
  readonly step: SimulatorScript.Step
  readonly source: Load.Source
}

const zeroKinds = (): Record<SimulatorScript.Route, Record<RecordedRequest.RequestKind, number>> => ({
  "openai-chat": { send: 0, resume: 0, poll: 0, cancel: 0 },
  "openai-responses": { send: 0, resume: 0, poll: 0, cancel: 0 },
  anthropic: { send: 0, resume: 0, poll: 0, cancel: 0 },
  subscription: { send: 0, resume: 0, poll: 0, cancel: 0 }
})

const zeroLanes = (): Record<Load.Lane, Record<SimulatorScript.Route, number>> => ({ send: zero(), resume: zero() })

/** @internal */
export class Store {
  private records: Array<Mutable<RecordedRequest.RecordedRequest>> = []
  private index = new Map<number, Mutable<RecordedRequest.RecordedRequest>>()
  /** Exchanges not yet ended, kept even when the records are cleared, so `awaitClose` still resolves. */
  private open = new Map<number, Mutable<RecordedRequest.RecordedRequest>>()
  /** Each route's position in its steps, per lane (sends, resumes). */
  private cursors = zeroLanes()
  /** When the held step (one with `forMs`) at each route's cursor served its first request, per lane. */
  private heldSince: Record<Load.Lane, Partial<Record<SimulatorScript.Route, number>>> = { send: {}, resume: {} }
  private kindCounts = zeroKinds()
  counts = zero()
  nextId = 1
  /** Background responses, kept until the script is replaced. */
  readonly background: Background.Responses

  constructor(private script: Load.LoadedScript, private readonly maxRecords: number) {
    this.background = new Background.Responses(maxRecords)
  }

  get loaded(): Load.LoadedScript {
    return this.script
  }

  setScript(script: Load.LoadedScript): void {
    this.script = script
    this.cursors = zeroLanes()
    this.heldSince = { send: {}, resume: {} }
    this.background.clear()
    this.clear()
  }

  setRoute(route: SimulatorScript.Route, loaded: Load.LoadedRoute): void {
    this.script = { ...this.script, [route]: loaded }
    for (const lane of ["send", "resume"] as const) {
      this.cursors[lane] = { ...this.cursors[lane], [route]: 0 }
      this.heldSince[lane] = { ...this.heldSince[lane], [route]: undefined }
    }
  }

  clear(): void {
    this.records = []
    this.index.clear()
    this.counts = zero()
    this.kindCounts = zeroKinds()
  }

  arrive(request: {
    readonly route: SimulatorScript.Route | undefined
    readonly method: string
    readonly path: string
    readonly headers: Readonly<Record<string, string>>
    readonly body: unknown
    readonly receivedAt: number
    /** Default `send` (with a route). */
    readonly kind?: RecordedRequest.RequestKind | undefined
    /** Which steps serve the request. Default: the sends' for a send, the resumes' for a resume, none otherwise. */
    readonly lane?: Load.Lane | "none" | undefined
    /** A resume, poll or cancel: the response it names. */
    readonly responseId?: string | undefined
    /** A send with `"background": true`: it creates a background response unless its step is a status. */
    readonly background?: boolean | undefined
  }): Arrival {
    const id = this.nextId++
    const route = request.route
    const kind = route === undefined ? undefined : request.kind ?? "send"
    const lane = route === undefined
      ? "none"
      : request.lane ?? (kind === "send" ? "send" : kind === "resume" ? "resume" : "none")
    let step: SimulatorScript.Step = { kind: "stream" }
    let stepIndex: number | undefined
    let source: Load.Source = Load.empty["openai-chat"].reply
    let nth = 0
    let served: SimulatorScript.StepKind | undefined
    if (route !== undefined) {
      if (lane !== "none") {
        const picked = this.pickHeld(route, lane, request.receivedAt)
        step = picked.step
        stepIndex = picked.index
        source = picked.source
        served = step.kind
      }
      this.counts = { ...this.counts, [route]: this.counts[route] + 1 }
      this.kindCounts[route][kind!]++
      nth = this.counts[route]
    }
    const responseId = request.responseId ??
      (kind === "send" && request.background === true && step.kind !== "status" ? Background.idFor(id) : undefined)
    const record: Mutable<RecordedRequest.RecordedRequest> = {
      id,
      route,
      method: request.method,
      path: request.path,
      headers: request.headers,
      body: request.body,
      receivedAt: request.receivedAt,
      nth,
      kind,
      responseId,
      step: served,
      stepIndex,
      closed: undefined
    }
    this.records.push(record)
    this.index.set(id, record)
    this.open.set(id, record)
    if (this.records.length > this.maxRecords) {
      const dropped = this.records.splice(0, this.records.length - this.maxRecords)
      for (const old of dropped) this.index.delete(old.id)
    }
    return { record: { ...record }, step, source }
  }

  /**
   * The step of the route's next request in a lane: a step with `forMs` stays at the cursor for its span (timed
   * from its first request by the arrival times), then the cursor moves on.
   */
  private pickHeld(route: SimulatorScript.Route, lane: Load.Lane, at: number): ReturnType<typeof Load.pick> {
    const held = (picked: ReturnType<typeof Load.pick>) => picked.index !== undefined && picked.step.forMs !== undefined
    const cursors = this.cursors[lane]
    const heldSince = this.heldSince[lane]
    let picked = Load.pick(this.script[route], cursors[route], lane)
    const since = heldSince[route]
    if (held(picked) && since !== undefined && at - since >= picked.step.forMs!) {
      cursors[route]++
      delete heldSince[route]
      picked = Load.pick(this.script[route], cursors[route], lane)
    }
    if (held(picked)) {
      if (heldSince[route] === undefined) heldSince[route] = at
    } else {
      cursors[route]++
    }
    return picked
  }

  close(id: number, closure: RecordedRequest.Closure): void {
    const record = this.open.get(id) ?? this.index.get(id)
    if (record !== undefined) record.closed = closure
    this.open.delete(id)
  }

  lookup(id: number): RecordedRequest.RecordedRequest | undefined {
    const record = this.index.get(id) ?? this.open.get(id)
    return record === undefined ? undefined : { ...record }
  }

  find(route: SimulatorScript.Route, nth: number): RecordedRequest.RecordedRequest | undefined {
    const record = this.records.find((r) => r.route === route && r.nth === nth)
    return record === undefined ? undefined : { ...record }
  }

  count(route: SimulatorScript.Route | undefined, kind?: RecordedRequest.RequestKind | undefined): number {
    const of = (r: SimulatorScript.Route) => kind === undefined ? this.counts[r] : this.kindCounts[r][kind]
    return route === undefined ? routes.reduce((n, r) => n + of(r), 0) : of(route)
  }

  snapshot(): ReadonlyArray<RecordedRequest.RecordedRequest> {
    return this.records.map((r) => ({ ...r }))
  }
}
