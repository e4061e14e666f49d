import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Effect from "effect/Effect"
import { globalValue } from "effect/GlobalValue"
import * as Scheduler from "effect/Scheduler"
import * as Fiber from "./fiber.js"

/** An attempt waiting for its turn, with its fiber's limit. */
interface Waiter {
  readonly limit: number
  readonly resume: () => void
}

/** The process's count: one event loop, so one count, whichever copy of this module counts. */
interface Gate {
  /** Attempts started in the current turn. */
  admitted: number
  /** The current turn's end is scheduled (it resets `admitted` and lets waiters start). */
  scheduled: boolean
  /** In arrival order from `head`; a waiter that was interrupted is left as `undefined`. */
  readonly waiting: Array<Waiter | undefined>
  head: number
}

const gate: Gate = globalValue("@reprise/core/internal/pacing", (): Gate => ({
  admitted: 0,
  scheduled: false,
  waiting: [],
  head: 0
}))

// A turn of the event loop: `setImmediate` runs after the I/O that is ready (Node); where there is none, a timer of 0.
const nextTurn: (f: () => void) => void = typeof globalThis.setImmediate === "function"
  ? (f) => globalThis.setImmediate(f)
  : (f) => globalThis.setTimeout(f, 0)

// The end of a turn: the waiters start, in order, up to their limit; another turn's end is scheduled only when
// something started in this one (so a waiter left means a turn is scheduled).
const turn = (): void => {
  const { waiting } = gate
  gate.admitted = 0
  while (gate.head < waiting.length) {
    const waiter = waiting[gate.head]
    if (waiter !== undefined) {
      if (gate.admitted >= waiter.limit) break
      gate.admitted++
      waiter.resume()
    }
    waiting[gate.head++] = undefined
  }
  if (gate.head === waiting.length) {
    waiting.length = 0
    gate.head = 0
  }
  gate.scheduled = false
  if (gate.admitted > 0) scheduleTurn()
}

const liveClock = Context.get(DefaultServices.liveServices, Clock.Clock)

/**
 * Whether the attempts of `fiber` are paced: only where the event loop is what moves the fiber on. Under another
 * `Clock` than the live one (a `TestClock`), a test drives time and expects an attempt to start when its fiber runs;
 * a fiber run synchronously (`Effect.runSync`, whose `SyncScheduler` is flushing: not yet `deferred`) has no turn to
 * wait for. A `SyncScheduler` that is `deferred` hands its tasks to the default scheduler: the fibers of a
 * `ManagedRuntime` run on the one its layer was built with.
 *
 * @internal
 */
export const pacedOn = (fiber: Fiber.Running): boolean => {
  if (Fiber.clock(fiber) !== liveClock) return false
  const scheduler = fiber.currentScheduler
  return !(scheduler instanceof Scheduler.SyncScheduler) || scheduler.deferred
}

/**
 * An attempt asks to start: `undefined` when it may start now (counted in this turn), otherwise the wait for its
 * turn. Called where the attempt starts, never ahead of it. A limit that is not at least 1 counts as 1.
 *
 * @internal
 */
export const admit = (attemptsPerTurn: number): Effect.Effect<void> | undefined => {
  if (attemptsPerTurn === Infinity) return undefined
  const limit = attemptsPerTurn >= 1 ? attemptsPerTurn : 1
  if (startsNow(limit)) return undefined
  return Effect.async<void>((resume) => {
    // asked again: the fiber may have yielded between the two, and the turn ended meanwhile
    if (startsNow(limit)) return resume(Effect.void)
    const waiter: Waiter = { limit, resume: () => resume(Effect.void) }
    const index = gate.waiting.push(waiter) - 1
    scheduleTurn()
    // interrupted while waiting: its place is skipped (an index is reused only once the queue is empty)
    return Effect.sync(() => {
      if (gate.waiting[index] === waiter) gate.waiting[index] = undefined
    })
  })
}

/** Counts an attempt in this turn if nobody waits and the turn has room for it. */
const startsNow = (limit: number): boolean => {
  if (gate.head !== gate.waiting.length || gate.admitted >= limit) return false
  gate.admitted++
  scheduleTurn()
  return true
}

const scheduleTurn = (): void => {
  if (gate.scheduled) return
  gate.scheduled = true
  nextTurn(turn)
}
