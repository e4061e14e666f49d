/**
 * Carries out a fault plan on a real socket: status and headers, body bytes (paced or not), stalls with or
 * without keepalive comments, clean ends and TCP resets. Every wait is an `Effect.sleep`, so interrupting the
 * fiber (the client went away, the simulator closed) ends it at once.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import type * as Http from "node:http"
import type * as Net from "node:net"
import type * as Plan from "./plan.js"

/**
 * The mutable facts of one exchange, shared with the `close` listener that decides who ended it.
 *
 * @internal
 */
export interface Exchange {
  readonly res: Http.ServerResponse
  /** Set before the simulator itself ends, resets or destroys the exchange. */
  serverDone: boolean
  /** Body bytes written so far, keepalive comments included. */
  bytesWritten: number
}

const keepalive = new TextEncoder().encode(": keepalive\n\n")

/**
 * Resets the connection: a TCP RST where Node supports it, else an abrupt destroy.
 *
 * @internal
 */
export const resetSocket = (socket: Net.Socket | null): void => {
  if (socket === null || socket.destroyed) return
  const reset = (socket as Net.Socket & { resetAndDestroy?: () => void }).resetAndDestroy
  if (typeof reset === "function") reset.call(socket)
  else socket.destroy()
}

/** Resolves once the bytes were handed to the kernel (or the write failed: the close listener reports that). */
const write = (ex: Exchange, bytes: Uint8Array): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    ex.res.write(bytes, () => resume(Effect.void))
    ex.bytesWritten += bytes.length
  })

const writeHead = (ex: Exchange, response: Plan.Response): Effect.Effect<void> =>
  Effect.suspend(() => {
    ex.res.writeHead(response.status, response.headers)
    // An empty write puts the status line and headers on the wire now, even when no body byte follows.
    return write(ex, new Uint8Array(0))
  })

/** Segment ends between `from` and `to` for the response's pace. */
const segments = (response: Plan.Response, from: number, to: number): ReadonlyArray<number> => {
  const pace = response.pace
  if (pace === undefined) return [to]
  const ends: Array<number> = []
  if (pace.bytes !== undefined) {
    for (let at = from + pace.bytes; at < to; at += pace.bytes) ends.push(at)
  } else {
    const inside = response.boundaries.filter((b) => b > from && b < to)
    for (let i = pace.events - 1; i < inside.length; i += pace.events) ends.push(inside[i]!)
  }
  ends.push(to)
  return ends
}

const writeRange = (ex: Exchange, response: Plan.Response, from: number, to: number): Effect.Effect<void> =>
  Effect.suspend(() => {
    if (to <= from) return Effect.void
    const ends = segments(response, from, to)
    return Effect.forEach(ends, (end, i) => {
      const start = i === 0 ? from : ends[i - 1]!
      const chunk = write(ex, response.body.subarray(start, end))
      return i === 0 || response.pace === undefined
        ? chunk
        : Effect.zipRight(Effect.sleep(response.pace.everyMs), chunk)
    }, { discard: true })
  })

const end = (ex: Exchange): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    ex.serverDone = true
    ex.res.end(() => resume(Effect.void))
  })

const reset = (ex: Exchange): Effect.Effect<void> =>
  Effect.sync(() => {
    ex.serverDone = true
    resetSocket(ex.res.socket)
  })

/** Closes the connection cleanly without a response (the client sees the socket end before any byte). */
const hangUp = (ex: Exchange): Effect.Effect<void> =>
  Effect.sync(() => {
    ex.serverDone = true
    ex.res.socket?.end()
  })

const stall = (ex: Exchange, durationMs: number, keepaliveMs: number | undefined): Effect.Effect<void> =>
  keepaliveMs === undefined
    ? Effect.sleep(durationMs)
    : Effect.raceFirst(
      Effect.sleep(durationMs),
      Effect.forever(Effect.zipRight(Effect.sleep(keepaliveMs), write(ex, keepalive)))
    )

const respond = (ex: Exchange, response: Plan.Response): Effect.Effect<void> =>
  Effect.gen(function*() {
    yield* writeHead(ex, response)
    const s = response.stall
    if (s !== undefined) {
      yield* writeRange(ex, response, 0, s.at)
      yield* stall(ex, s.durationMs, s.keepaliveMs)
      if (s.then === "reset") return yield* reset(ex)
      if (s.then === "eof") return yield* end(ex)
      yield* writeRange(ex, response, s.at, response.body.length)
      return yield* end(ex)
    }
    yield* writeRange(ex, response, 0, response.sendUntil)
    return yield* response.ending === "reset" ? reset(ex) : end(ex)
  })

/**
 * Carries out a plan. Interrupting it leaves the connection as it is: the caller destroys it.
 *
 * @internal
 */
export const execute = (ex: Exchange, plan: Plan.Plan): Effect.Effect<void> => {
  switch (plan._tag) {
    case "ResetBeforeHeaders":
      return reset(ex)
    case "StallBeforeHeaders":
      return Effect.zipRight(
        Effect.sleep(plan.durationMs),
        plan.then === "reset" ? reset(ex) : plan.then === "eof" ? hangUp(ex) : respond(ex, plan.response)
      )
    case "Respond":
      return respond(ex, plan.response)
  }
}
