/**
 * The simulator's memory: the loaded script, each route's position in it (one for its sends, one for the resumes
 * of its background responses), each scripted model's position in its steps, the recorded requests and the
 * background responses. It is mutated only from the simulator's own fibers (JavaScript runs them one at a time);
 * waiters are woken through a version counter kept by the caller.
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

/**
 * What a request got, as recorded: `200` for a whole reply (`stream`, `drip`), the status of a `status` step
 * (followed by its error code when the step names one: `400 context_length_exceeded`), else the step's kind.
 *
 * @internal
 */
export const actionOf = (step: SimulatorScript.Step): string => {
  switch (step.kind) {
    case "stream":
    case "drip":
      return "200"
    case "status":
      return step.error?.code === undefined ? String(step.status) : `${step.status} ${step.error.code}`
    default:
      return step.kind
  }
}

const modelOf = (body: unknown): string | undefined =>
  typeof body === "object" && body !== null && typeof (body as { readonly model?: unknown }).model === "string"
    ? (body as { readonly model: string }).model
    : undefined

/** A position in a list of steps: the cursor, and when the held step (one with `forMs`) at it was first served. */
interface Position {
  cursor: number
  heldSince: number | undefined
}

interface Picked {
  readonly step: SimulatorScript.Step
  readonly index: number | undefined
  readonly source: Load.Source
  /** The recorded action when it is not the step's own (a refused prefill). */
  readonly action?: string | undefined
}

const zeroKinds = (): Record<SimulatorScript.Route, Record<RecordedRequest.RequestKind, number>> => ({
  "openai-chat": { send: 0, resume: 0, poll: 0, cancel: 0 },
  "openai-responses": { send: 0, resume: 0, poll: 0, cancel: 0 },
  anthropic: { send: 0, resume: 0, poll: 0, cancel: 0 },
  subscription: { send: 0, resume: 0, poll: 0, cancel: 0 }
})

/** @internal */
export class Store {
  private records: Array<Mutable<RecordedRequest.RecordedRequest>> = []
  private index = new Map<number, Mutable<RecordedRequest.RecordedRequest>>()
  /** Exchanges not yet ended, kept even when the records are cleared, so `awaitClose` still resolves. */
  private open = new Map<number, Mutable<RecordedRequest.RecordedRequest>>()
  /** Positions in steps: each route's per lane (`send openai-chat`), each scripted model's (`model NAME`). */
  private positions = new Map<string, Position>()
  private kindCounts = zeroKinds()
  counts = zero()
  nextId = 1
  /** Background responses, kept until the script is replaced. */
  readonly background: Background.Responses

  /**
   * @param startedAt when the script was set, by the simulator's context clock (epoch milliseconds): model outages
   *   are measured from it.
   */
  constructor(
    private script: Load.LoadedScript,
    private readonly maxRecords: number,
    private models: Load.LoadedModels = new Map(),
    private startedAt = 0
  ) {
    this.background = new Background.Responses(maxRecords)
  }

  get loaded(): Load.LoadedScript {
    return this.script
  }

  setScript(script: Load.LoadedScript, models: Load.LoadedModels = new Map(), startedAt = 0): void {
    this.script = script
    this.models = models
    this.startedAt = startedAt
    this.positions.clear()
    this.background.clear()
    this.clear()
  }

  setRoute(route: SimulatorScript.Route, loaded: Load.LoadedRoute): void {
    this.script = { ...this.script, [route]: loaded }
    for (const lane of ["send", "resume"] as const) this.positions.delete(`${lane} ${route}`)
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
    /** Now by the simulator's context clock (epoch milliseconds), for model outages. Default `receivedAt`. */
    readonly now?: number | undefined
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
    let action: string | undefined
    const model = modelOf(request.body)
    if (route !== undefined) {
      if (lane !== "none") {
        const scripted = lane === "send" && model !== undefined ? this.models.get(model) : undefined
        const picked = scripted === undefined
          ? this.pickHeld(`${lane} ${route}`, (n) => Load.pick(this.script[route], n, lane), request.receivedAt)
          : this.pickModel(model!, scripted, route, request)
        step = picked.step
        stepIndex = picked.index
        source = picked.source
        served = step.kind
        action = picked.action ?? actionOf(step)
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
      model,
      action,
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
   * The next step at a position (`pick` gives the step at a cursor): a step with `forMs` stays at the cursor for
   * its span (timed from its first request by the arrival times), then the cursor moves on.
   */
  private pickHeld(key: string, pick: (n: number) => Picked, at: number): Picked {
    const held = (picked: Picked) => picked.index !== undefined && picked.step.forMs !== undefined
    let position = this.positions.get(key)
    if (position === undefined) {
      position = { cursor: 0, heldSince: undefined }
      this.positions.set(key, position)
    }
    let picked = pick(position.cursor)
    if (held(picked) && position.heldSince !== undefined && at - position.heldSince >= picked.step.forMs!) {
      position.cursor++
      position.heldSince = undefined
      picked = pick(position.cursor)
    }
    if (held(picked)) {
      if (position.heldSince === undefined) position.heldSince = at
    } else {
      position.cursor++
    }
    return picked
  }

  /** A send for a scripted model: its outage, its refusal of prefill, else its next step. */
  private pickModel(
    name: string,
    model: Load.LoadedModel,
    route: SimulatorScript.Route,
    request: { readonly body: unknown; readonly receivedAt: number; readonly now?: number | undefined }
  ): Picked {
    const routeReply = this.script[route].reply
    const { outage } = model
    if (outage !== undefined && (request.now ?? request.receivedAt) - this.startedAt < outage.forMs) {
      const step: SimulatorScript.Step = {
        kind: "status",
        status: outage.status,
        headers: outage.headers,
        error: outage.error
      }
      return { step, index: undefined, source: routeReply }
    }
    if (model.rejectPrefill && Load.endsWithAssistant(request.body)) {
      return { step: Load.prefillRejection, index: undefined, source: routeReply, action: "400 prefill" }
    }
    return this.pickHeld(`model ${name}`, (n) => Load.pickModel(model, n, route, routeReply), request.receivedAt)
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

  ofModel(model: string): ReadonlyArray<RecordedRequest.RecordedRequest> {
    return this.records.filter((r) => r.model === model).map((r) => ({ ...r }))
  }
}
