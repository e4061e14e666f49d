/**
 * Deadlines of one length, timed by one fiber for all of them: a provider's first-byte timeouts (`send.ts`) and its
 * idle timeouts (`sse.ts`). A deadline costs an entry in a queue, not a fiber and a timer of its own: a send is not a
 * race, which forks two fibers, and a stream has no reader or watchdog fiber waiting beside it.
 *
 * - Every deadline is the `Clock`'s monotonic time when it is armed (in milliseconds) plus the same length, so the
 *   queue is in deadline order: the timer sleeps until the first one still armed, and never needs waking for a later
 *   one (its deadline is at least the length away, and the timer never sleeps longer than that).
 * - The timer runs while the queue has users ({@link open}, {@link close}, or {@link use} for the rest of a scope;
 *   {@link enter} and {@link leave} are the same steps, synchronous, for an operation that holds the fiber): the first
 *   user starts it (a root fiber on that user's runtime, so its `Clock`, started at once so that there is never a
 *   second), and the last one to leave interrupts it, so nothing sleeps once the users are done (a process exits when
 *   its work does). The interruption is sent, not awaited: an expiry may close a scope whose finalizer is a queue's
 *   last user leaving, in the timer's own fiber (a provider's attempt, `attempt.ts`), and a timer that awaited its own
 *   end would wait for ever. A timer that has been stopped expires nothing more, even before its interruption arrives
 *   (each timer knows its `generation`). A user may arm many deadlines in turn (an idle timeout arms one per pull)
 *   without starting the timer each time.
 * - A deadline that passes while armed is marked `timedOut` and its `expire` runs, in the timer's fiber,
 *   uninterruptibly, each apart from the others. A deadline is disarmed when what it timed settles ({@link disarm}); a
 *   disarmed one never expires, and the disarmed are dropped from the queue.
 *
 * @internal
 */
import type * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Fiber from "effect/Fiber"
import * as FiberId from "effect/FiberId"
import * as Runtime from "effect/Runtime"
import type * as RuntimeFlags from "effect/RuntimeFlags"
import * as Scope from "effect/Scope"

/** @internal */
export interface Deadlines {
  readonly millis: number
  entries: Array<Deadline>
  head: number
  /** Entries from `head` on that are settled (disarmed or expired) but still in `entries`. */
  settled: number
  /** Users that have opened the queue and not closed it: the timer runs while there is one. */
  users: number
  timer: Fiber.RuntimeFiber<void> | undefined
  /** Counts the timers started and stopped: a timer runs only while the generation it was started in lasts. */
  generation: number
}

/** @internal */
export interface Deadline {
  readonly at: number
  /** What the deadline's passing does; cleared once it is disarmed. */
  expire: Effect.Effect<void> | undefined
  settled: boolean
  timedOut: boolean
}

/** @internal */
export const make = (length: Duration.Duration): Deadlines => ({
  millis: Duration.toMillis(length),
  entries: [],
  head: 0,
  settled: 0,
  users: 0,
  timer: undefined,
  generation: 0
})

const nowMillis = (clock: Clock.Clock) => Number(clock.unsafeCurrentTimeNanos() / 1_000_000n)

const time = (deadlines: Deadlines, generation: number): Effect.Effect<void> =>
  Effect.flatMap(Effect.clock, (clock) => {
    const loop: Effect.Effect<void> = Effect.suspend(() => {
      // stopped: its interruption is on its way
      if (deadlines.generation !== generation) return Effect.void
      const now = nowMillis(clock)
      const expired: Array<Effect.Effect<void>> = []
      while (deadlines.head < deadlines.entries.length) {
        const entry = deadlines.entries[deadlines.head]
        if (entry.settled) {
          deadlines.settled--
        } else {
          if (entry.at > now) break
          entry.timedOut = true
          entry.settled = true
          if (entry.expire !== undefined) expired.push(entry.expire)
          entry.expire = undefined
        }
        deadlines.head++
      }
      compact(deadlines)
      const wait = deadlines.head < deadlines.entries.length
        ? deadlines.entries[deadlines.head].at - now
        : deadlines.millis
      const sleep = Effect.zipRight(clock.sleep(Duration.millis(Math.max(1, wait))), loop)
      // each on its own: one that fails (a scope's finalizer failing as it closes) neither stops the others nor the
      // timer, which would leave every later deadline of the queue unwatched. An expiry closes an attempt's scope or
      // abandons a wait: neither waits on anything unbounded (`attempt.ts`, `body.ts`).
      return expired.length === 0 ? sleep : Effect.zipRight(
        Effect.uninterruptible(Effect.forEach(expired, (expire) => Effect.exit(expire), { discard: true })),
        sleep
      )
    })
    return loop
  })

// Drops the settled entries at the head, and all of them once they are most of the queue: a deadline armed for long
// (a stream of keepalives waits up to the whole timeout) would otherwise keep every entry armed after it, settled or
// not, until it settles. So the queue stays about as long as the deadlines armed, at an amortised constant cost per
// entry; filtering keeps the order, so the queue stays in deadline order.
const compact = (deadlines: Deadlines) => {
  while (deadlines.head < deadlines.entries.length && deadlines.entries[deadlines.head].settled) {
    deadlines.head++
    deadlines.settled--
  }
  const length = deadlines.entries.length - deadlines.head
  if (deadlines.settled >= 1024 && deadlines.settled * 2 >= length) {
    deadlines.entries = deadlines.entries.slice(deadlines.head).filter((entry) => !entry.settled)
    deadlines.head = 0
    deadlines.settled = 0
  } else if (deadlines.head >= 1024 && deadlines.head * 2 >= deadlines.entries.length) {
    deadlines.entries = deadlines.entries.slice(deadlines.head)
    deadlines.head = 0
  }
}

/**
 * A user of the queue begins, on `fiber`'s runtime: the timer is started if it is not running. A user must
 * {@link leave} what it enters, whatever happens.
 *
 * @internal
 */
export const enter = (
  deadlines: Deadlines,
  fiber: Fiber.RuntimeFiber<unknown, unknown>,
  runtimeFlags: RuntimeFlags.RuntimeFlags
): void => {
  deadlines.users++
  if (deadlines.timer !== undefined) return
  const runtime = Runtime.make({ context: fiber.currentContext, runtimeFlags, fiberRefs: fiber.getFiberRefs() })
  deadlines.generation++
  deadlines.timer = Runtime.runFork(runtime)(Effect.interruptible(time(deadlines, deadlines.generation)))
}

/**
 * A user of the queue begins while another is in it (its timer running), without a fiber in hand: false, and no user
 * added, when the timer is not running. For what outlives a fiber's step and ends in a callback (a released body read
 * to its end, `body.ts`), which must {@link leave} when it is done.
 *
 * @internal
 */
export const enterRunning = (deadlines: Deadlines): boolean => {
  if (deadlines.timer === undefined) return false
  deadlines.users++
  return true
}

/**
 * A user of the queue is done: the last one stops the timer (its interruption sent, not awaited) and empties the
 * queue.
 *
 * @internal
 */
export const leave = (deadlines: Deadlines): void => {
  deadlines.users--
  if (deadlines.users > 0 || deadlines.timer === undefined) return
  const timer = deadlines.timer
  deadlines.timer = undefined
  deadlines.generation++
  deadlines.entries = []
  deadlines.head = 0
  deadlines.settled = 0
  timer.unsafeInterruptAsFork(FiberId.none)
}

/**
 * {@link enter} as an effect, on the current fiber's runtime.
 *
 * @internal
 */
export const open = (deadlines: Deadlines): Effect.Effect<void> =>
  Effect.withFiberRuntime((fiber, status) => {
    enter(deadlines, fiber, status.runtimeFlags)
    return Effect.void
  })

/**
 * {@link leave} as an effect.
 *
 * @internal
 */
export const close = (deadlines: Deadlines): Effect.Effect<void> => Effect.sync(() => leave(deadlines))

/**
 * The queue opened for the rest of the current scope: opened and its closing added to the scope in one
 * uninterruptible step, so that an interruption cannot come between them and leave a user that never closes (the timer
 * would then run for ever, and keep the process alive).
 *
 * @internal
 */
export const use = (deadlines: Deadlines): Effect.Effect<void, never, Scope.Scope> =>
  // synchronous: opening the queue and adding a finalizer wait on nothing
  Effect.uninterruptible(
    Effect.flatMap(
      Effect.scope,
      (scope) => Effect.zipRight(open(deadlines), Scope.addFinalizer(scope, close(deadlines)))
    )
  )

/**
 * A deadline the queue's length from now, which runs `expire` if it passes while armed. Only while the queue is open.
 *
 * @internal
 */
export const arm = (deadlines: Deadlines, clock: Clock.Clock, expire: Effect.Effect<void> | undefined): Deadline => {
  const entry: Deadline = { at: nowMillis(clock) + deadlines.millis, expire, settled: false, timedOut: false }
  deadlines.entries.push(entry)
  return entry
}

/**
 * What the deadline timed has settled: it no longer expires.
 *
 * @internal
 */
export const disarm = (deadlines: Deadlines, entry: Deadline): void => {
  if (entry.settled) return
  entry.settled = true
  entry.expire = undefined
  deadlines.settled++
  compact(deadlines)
}
