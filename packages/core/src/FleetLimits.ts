/**
 * `FleetLimits` is what a recovery scope asks, around each physical send, about the limits it shares with other
 * processes: a fleet of workers on one API key that shares one **retry budget** and one **pause** set by server
 * pushback. Core holds only this hook and its default, {@link unlimited} (no fleet: nothing is shared and nothing
 * waits); `@reprise/fleet` implements it over Redis, and in memory for the fibers of one process.
 *
 * The recovery loop (`Recovery.run`) calls it like this, for every reply:
 *
 * 1. before the reply's first attempt: {@link Service.deposit} (a first attempt credits the fleet's budget), then
 *    waits out the pause it returns, if any;
 * 2. after a failed attempt whose error carries a `Retry-After` (or `retry-after-ms`): {@link Service.pushback}, which
 *    pauses the whole fleet that long;
 * 3. when a failure is to be replayed, once the local Budget and the deadline allow it and before the backoff:
 *    {@link Service.withdraw}. A refusal ends recovery at once with `RecoveryExhausted{reason: "FleetBudget"}`;
 * 4. after the backoff, right before the replay is sent: {@link Service.paused}, and waits out the pause in force.
 *
 * A resend inside one attempt (a capability fallback) is a replay for the fleet: it withdraws and waits out a pause
 * too. Every wait for the fleet is announced with a `FleetPaused` notification and bounded by the scope's deadline:
 * a pause that would end past it ends recovery at once with `RetryAfterBeyondDeadline`, as a server's `Retry-After`
 * does. The per-reply `Budget` applies on top of everything the fleet allows.
 *
 * An implementation never fails and never hangs a generation: when its store is unreachable it answers as
 * {@link unlimited} does (the scope goes on with its local Budget) and reports the change once, with a
 * `FleetUnavailable` notification, and `FleetRestored` when the store is back (through
 * `RecoveryNotifications.notify`, to the scope that noticed).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

/**
 * A pause in force: the fleet sends nothing until it ends.
 *
 * @since 0.1.0
 * @category models
 */
export interface Pause {
  /** Time left until the pause ends (positive). */
  readonly remaining: Duration.Duration
  /** The HTTP status of the response whose pushback set the pause (429, 503, …), when known. */
  readonly status?: number | undefined
}

/**
 * The fleet's answer to a replay.
 *
 * @since 0.1.0
 * @category models
 */
export interface Withdrawal {
  readonly allowed: boolean
  /** The fleet's replays in its window, this one included when it was allowed. */
  readonly replays: number
  /** How many replays the fleet's window allows now (not necessarily whole). */
  readonly allowance: number
}

/**
 * Server pushback seen by one process.
 *
 * @since 0.1.0
 * @category models
 */
export interface Pushback {
  /** The wait the server asked for (`retry-after-ms`, or `Retry-After`). */
  readonly delay: Duration.Duration
  /** The HTTP status of the response that carried it. */
  readonly status?: number | undefined
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** A reply's first attempt is about to be sent: credit the budget. Returns the pause in force, if any. */
  readonly deposit: Effect.Effect<Option.Option<Pause>>
  /** A failed attempt is to be replayed: debit the budget, or refuse. */
  readonly withdraw: Effect.Effect<Withdrawal>
  /** Right before a replay is sent: the pause in force, if any. */
  readonly paused: Effect.Effect<Option.Option<Pause>>
  /** Pauses the fleet for `delay` from now, unless a pause in force already lasts longer (it is never shortened). */
  readonly pushback: (pushback: Pushback) => Effect.Effect<void>
}

const allowAll: Withdrawal = { allowed: true, replays: 0, allowance: Infinity }

/**
 * No fleet: every replay is allowed, nothing is ever paused, pushback is only this scope's own business.
 *
 * @since 0.1.0
 * @category constructors
 */
export const unlimited: Service = {
  deposit: Effect.succeed(Option.none()),
  withdraw: Effect.succeed(allowAll),
  paused: Effect.succeed(Option.none()),
  pushback: () => Effect.void
}

/**
 * The fleet recovery scopes consult. Defaults to {@link unlimited}; `@reprise/fleet` provides the shared ones.
 *
 * @since 0.1.0
 * @category tags
 */
export class FleetLimits extends Context.Reference<FleetLimits>()("@reprise/core/FleetLimits", {
  defaultValue: (): Service => unlimited
}) {}

/**
 * A pause from the time it has left, or none when that is not positive.
 *
 * @since 0.1.0
 * @category constructors
 */
export const pause = (remaining: Duration.DurationInput, status?: number | undefined): Option.Option<Pause> => {
  const duration = Duration.decode(remaining)
  return Duration.greaterThan(duration, Duration.zero)
    ? Option.some(status === undefined ? { remaining: duration } : { remaining: duration, status })
    : Option.none()
}
