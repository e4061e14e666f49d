/**
 * A reply's part in the fleet's limits (`FleetLimits`): the checks before a send, the wait out of a pause the fleet is
 * in, the pause a Retry-After of the primary route sets, and the checks of a resend inside an attempt.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Budget from "../Budget.js"
import * as FleetLimits from "../FleetLimits.js"
import type * as Generation from "../Generation.js"
import type * as RecoveryErrorFamily from "../RecoveryError.js"
import type * as RecoveryExhausted from "../RecoveryExhausted.js"
import * as RecoveryNotifications from "../RecoveryNotifications.js"
import * as TransportError from "../TransportError.js"
import type { AttemptError } from "./attemptRun.js"
import type { ReplyRun } from "./replyRun.js"
import { leftOf } from "./wait.js"

type RecoveryError = RecoveryErrorFamily.RecoveryError

const N = RecoveryNotifications.Notification

/**
 * The end of a failed attempt's run decided by the fleet, for a resend inside an attempt that it refused.
 *
 * @internal
 */
export interface FleetStop {
  readonly reason: RecoveryExhausted.Reason
  readonly retryAfter?: Duration.Duration
}

/**
 * The fleet's part before a send: a reply's first attempt credits the fleet's budget (a replay was debited before its
 * backoff), and a send to the primary route waits out a pause the fleet is in. The fleet's pause is the primary's: it
 * is set by the primary's pushback, and another route of a plan does not share it.
 *
 * @internal
 */
export const fleetChecked = <RH>(
  run: ReplyRun<RH>,
  attempt: Effect.Effect<Generation.Reply, RecoveryError, RH>
): Effect.Effect<Generation.Reply, RecoveryError, RH> => {
  const primary = run.current === 0
  const pause = run.attemptsOfReply === 0
    ? run.fleet.deposit
    : primary
    ? run.fleet.paused
    : Effect.succeed(Option.none<FleetLimits.Pause>())
  return Effect.flatMap(
    Effect.flatMap(pause, (pause) => primary ? waitForFleet(run, pause) : Effect.succeed(Option.none())),
    (beyond) =>
      Option.isSome(beyond)
        ? Effect.zipRight(run.abandon(), run.exhausted("RetryAfterBeyondDeadline", beyond.value))
        : attempt
  )
}

/**
 * Waits out the fleet's pause, announcing each wait, before the next send. Returns the pause left when it would end
 * past the deadline (nothing is waited then).
 *
 * @internal
 */
export const waitForFleet = (
  run: ReplyRun<unknown>,
  first: Option.Option<FleetLimits.Pause>
): Effect.Effect<Option.Option<Duration.Duration>> =>
  Effect.gen(function*() {
    const { allowance, fleet } = run
    let pause = first
    while (Option.isSome(pause)) {
      const { remaining, status } = pause.value
      const now = yield* Clock.currentTimeNanos
      const nanos = Option.getOrElse(Duration.toNanos(remaining), () => allowance.deadlineAt - now)
      if (now + nanos >= allowance.deadlineAt) return Option.some(remaining)
      yield* run.notify(N.FleetPaused({
        attempt: (yield* allowance.used) + 1,
        delay: remaining,
        status,
        remainingTime: Duration.nanos(allowance.deadlineAt - now)
      }))
      yield* Effect.sleep(remaining)
      pause = yield* fleet.paused
    }
    return Option.none()
  })

/**
 * A Retry-After of the primary route pauses the fleet until it is over counted from the failure, as this reply's own
 * wait is, so the pause ends with that wait.
 *
 * @internal
 */
export const pushback = (run: ReplyRun<unknown>, error: AttemptError, failedAt: bigint): Effect.Effect<void> =>
  // only the primary's: the fleet's pause is the primary route's (see `fleetChecked`)
  run.current === 0 && TransportError.isTransportError(error) && error.retryAfter !== undefined
    ? Effect.flatMap(
      leftOf(error.retryAfter, failedAt),
      (delay) => run.fleet.pushback(error.status === undefined ? { delay } : { delay, status: error.status })
    )
    : Effect.void

/**
 * The fleet's checks for a resend inside an attempt (a capability fallback): a replay for the fleet.
 *
 * @internal
 */
export const resend = (run: ReplyRun<unknown>): Effect.Effect<void, Budget.BudgetExhausted> =>
  Effect.gen(function*() {
    if (run.fleet === FleetLimits.unlimited) return
    const withdrawal = yield* run.fleet.withdraw
    const beyond = withdrawal.allowed ? yield* waitForFleet(run, yield* run.fleet.paused) : Option.none()
    if (withdrawal.allowed && Option.isNone(beyond)) return
    run.fleetStop = Option.match(beyond, {
      onNone: (): FleetStop => ({ reason: "FleetBudget" }),
      onSome: (retryAfter): FleetStop => ({ reason: "RetryAfterBeyondDeadline", retryAfter })
    })
    return yield* Budget.deadlineReached(run.allowance)
  })
