/**
 * The simulator's memory: the loaded script, each route's position in it, and the recorded requests. It is
 * mutated only from the simulator's own fibers (JavaScript runs them one at a time); waiters are woken through a
 * version counter kept by the caller.
 *
 * @internal
 */
import type * as Http from "node:http"
import type * as RecordedRequest from "../RecordedRequest.js"
import type * as SimulatorScript from "../SimulatorScript.js"
import * as Load from "./load.js"

type Mutable<A> = { -readonly [K in keyof A]: A[K] }

const routes: ReadonlyArray<SimulatorScript.Route> = ["openai-chat", "openai-responses", "anthropic", "subscription"]

const zero = (): Record<SimulatorScript.Route, number> => ({
  "openai-chat": 0,
  "openai-responses": 0,
  anthropic: 0,
  subscription: 0
})

const secret = new Set(["authorization", "x-api-key", "api-key", "proxy-authorization", "cookie"])

/**
 * Lower-cased headers with credentials redacted. An `authorization` value keeps its scheme (`Bearer <redacted>`)
 * so tests can check the scheme without seeing the key.
 *
 * @internal
 */
export const redact = (headers: Http.IncomingHttpHeaders): Record<string, string> => {
  const out: Record<string, string> = {}
  for (const [name, raw] of Object.entries(headers)) {
    if (raw === undefined) continue
    const value = Array.isArray(raw) ? raw.join(", ") : raw
    const key = name.toLowerCase()
    if (!secret.has(key)) out[key] = value
    else {
      const space = value.indexOf(" ")
      out[key] = key.endsWith("authorization") && space > 0 ? `${value.slice(0, space)} <redacted>` : "<redacted>"
    }
  }
  return out
}

/** @internal */
export interface Arrival {
  readonly record: RecordedRequest.RecordedRequest
  readonly step: SimulatorScript.Step
  readonly source: Load.Source
}

/** @internal */
export class Store {
  private records: Array<Mutable<RecordedRequest.RecordedRequest>> = []
  private index = new Map<number, Mutable<RecordedRequest.RecordedRequest>>()
  /** Exchanges not yet ended, kept even when the records are cleared, so `awaitClose` still resolves. */
  private open = new Map<number, Mutable<RecordedRequest.RecordedRequest>>()
  private cursors = zero()
  /** When the held step (one with `forMs`) at each route's cursor served its first request. */
  private heldSince: Partial<Record<SimulatorScript.Route, number>> = {}
  counts = zero()
  nextId = 1

  constructor(private script: Load.LoadedScript, private readonly maxRecords: number) {}

  setScript(script: Load.LoadedScript): void {
    this.script = script
    this.cursors = zero()
    this.heldSince = {}
    this.clear()
  }

  setRoute(route: SimulatorScript.Route, loaded: Load.LoadedRoute): void {
    this.script = { ...this.script, [route]: loaded }
    this.cursors = { ...this.cursors, [route]: 0 }
    this.heldSince = { ...this.heldSince, [route]: undefined }
  }

  clear(): void {
    this.records = []
    this.index.clear()
    this.counts = zero()
  }

  arrive(request: {
    readonly route: SimulatorScript.Route | undefined
    readonly method: string
    readonly path: string
    readonly headers: Readonly<Record<string, string>>
    readonly body: unknown
    readonly receivedAt: number
  }): Arrival {
    const id = this.nextId++
    const route = request.route
    let step: SimulatorScript.Step = { kind: "stream" }
    let stepIndex: number | undefined
    let source: Load.Source = Load.empty["openai-chat"].reply
    let nth = 0
    if (route !== undefined) {
      const picked = this.pickHeld(route, request.receivedAt)
      step = picked.step
      stepIndex = picked.index
      source = picked.source
      this.counts = { ...this.counts, [route]: this.counts[route] + 1 }
      nth = this.counts[route]
    }
    const record: Mutable<RecordedRequest.RecordedRequest> = {
      ...request,
      id,
      nth,
      step: route === undefined ? undefined : step.kind,
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
   * The step of the route's next request: a step with `forMs` stays at the cursor for its span (timed from its
   * first request by the arrival times), then the cursor moves on.
   */
  private pickHeld(route: SimulatorScript.Route, at: number): ReturnType<typeof Load.pick> {
    const held = (picked: ReturnType<typeof Load.pick>) => picked.index !== undefined && picked.step.forMs !== undefined
    let picked = Load.pick(this.script[route], this.cursors[route])
    const since = this.heldSince[route]
    if (held(picked) && since !== undefined && at - since >= picked.step.forMs!) {
      this.cursors = { ...this.cursors, [route]: this.cursors[route] + 1 }
      this.heldSince = { ...this.heldSince, [route]: undefined }
      picked = Load.pick(this.script[route], this.cursors[route])
    }
    if (held(picked)) {
      if (this.heldSince[route] === undefined) this.heldSince = { ...this.heldSince, [route]: at }
    } else {
      this.cursors = { ...this.cursors, [route]: this.cursors[route] + 1 }
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

  count(route: SimulatorScript.Route | undefined): number {
    return route === undefined ? routes.reduce((n, r) => n + this.counts[r], 0) : this.counts[route]
  }

  snapshot(): ReadonlyArray<RecordedRequest.RecordedRequest> {
    return this.records.map((r) => ({ ...r }))
  }
}
