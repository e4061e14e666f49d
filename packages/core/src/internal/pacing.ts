/**
 * The gate behind `Pacing`: how many attempts have started in the current turn of the event loop, the attempts
 * waiting for a later turn, in order, and the `setImmediate` that ends each turn. One gate per event loop (a process,
 * or a worker thread), shared by every copy of this module in it (`globalValue`); `Recovery` asks it once per attempt.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as DefaultServices from "effect/DefaultServices"
import * as Effect from "effect/Effect"
import { globalValue } from "effect/GlobalValue"
import * as Fiber from "./fiber.js"

/** An attempt waiting for its turn, with its fiber's limit; `cancelled` once it was interrupted while waiting. */
interface Waiter {
  readonly limit: number
  readonly resume: () => void
  cancelled: boolean
}

/** The event loop's count. */
interface Gate {
  /** Attempts started in the current turn. */
  admitted: number
  /** The current turn's end is scheduled (it resets `admitted` and lets waiters start). */
  scheduled: boolean
  /** In arrival order from `head`; the ones before `head` have started or were cancelled. */
  readonly waiting: Array<Waiter>
  head: number
}

const gate: Gate = globalValue(Symbol.for("@reprise/core/Pacing/gate/1"), (): Gate => ({
  admitted: 0,
  scheduled: false,
  waiting: [],
  head: 0
}))

// A turn of the event loop: `setImmediate` runs after the I/O that is ready. The one the process had when this module
// loaded, so that fake timers installed later (a test's) neither hold nor drop a turn's end. Without it (not Node)
// nothing is paced (`pacedOn`).
const setImmediate: ((f: () => void) => unknown) | undefined = typeof globalThis.setImmediate === "function"
  ? globalThis.setImmediate.bind(globalThis)
  : undefined

// The end of a turn: the waiters start, in order, up to their limit; another turn's end is scheduled only when
// something started in this one (so a waiter left means a turn is scheduled).
const turn = (): void => {
  gate.scheduled = false
  gate.admitted = 0
  const { waiting } = gate
  while (gate.head < waiting.length) {
    const waiter = waiting[gate.head]
    if (!waiter.cancelled) {
      if (gate.admitted >= waiter.limit) break
      gate.admitted++
      waiter.resume()
    }
    gate.head++
  }
  // what has started or was cancelled is let go: at once when nobody waits, in one splice when a long queue moves on
  if (gate.head === waiting.length) {
    waiting.length = 0
    gate.head = 0
  } else if (gate.head >= 1024) {
    waiting.splice(0, gate.head)
    gate.head = 0
  }
  if (gate.admitted > 0) scheduleTurn()
}

const scheduleTurn = (): void => {
  if (gate.scheduled) return
  gate.scheduled = true
  setImmediate!(turn)
}

const liveClock = Context.get(DefaultServices.liveServices, Clock.Clock)

/**
 * Whether the attempts of `fiber` are paced: only where the event loop is what moves the fiber on. Under another
 * `Clock` than the live one (a `TestClock`), a test drives time and expects an attempt to start when its fiber runs;
 * a fiber run synchronously (`Effect.runSync`, whose `SyncScheduler` is flushing: not yet `deferred`) has no turn to
 * wait for. A `SyncScheduler` that is `deferred` hands its tasks to the default scheduler: the fibers of a
 * `ManagedRuntime` run on the one its layer was built with. Looked up by its field, not its class, so that a scheduler
 * of another copy of `effect` is told apart too.
 *
 * @internal
 */
export const pacedOn = (fiber: Fiber.Running): boolean => {
  if (setImmediate === undefined || Fiber.clock(fiber) !== liveClock) return false
  const deferred = (fiber.currentScheduler as { readonly deferred?: unknown }).deferred
  return typeof deferred !== "boolean" || deferred
}

/** Counts an attempt in this turn if nobody waits and the turn has room for it. */
const startsNow = (limit: number): boolean => {
  if (gate.head !== gate.waiting.length || gate.admitted >= limit) return false
  gate.admitted++
  scheduleTurn()
  return true
}

/**
 * An attempt asks to start: `undefined` when it may start now (counted in this turn), otherwise the wait for its
 * turn. Called where the attempt starts, never ahead of it, and only for a fiber {@link pacedOn} paces. A limit that is
 * not at least 1 counts as 1; `Infinity` is not counted.
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
    const waiter: Waiter = { limit, resume: () => resume(Effect.void), cancelled: false }
    gate.waiting.push(waiter)
    scheduleTurn()
    // interrupted while waiting: its place is skipped
    return Effect.sync(() => {
      waiter.cancelled = true
    })
  })
}

/**
 * The gate's state, for tests: attempts started in this turn, attempts waiting, whether a turn's end is scheduled.
 *
 * @internal
 */
export const state = (): { readonly admitted: number; readonly waiting: number; readonly scheduled: boolean } => ({
  admitted: gate.admitted,
  waiting: gate.waiting.slice(gate.head).filter((waiter) => !waiter.cancelled).length,
  scheduled: gate.scheduled
})
