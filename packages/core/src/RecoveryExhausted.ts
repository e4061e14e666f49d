/**
 * `RecoveryExhausted` ends a recovery scope whose failures were all replayable but which could not go on: its
 * attempts are used, its deadline passed, the server asked for a wait that would end past the deadline, or the
 * fleet's shared retry budget refused a replay. It carries every attempt's error, so a caller can tell a flaky network from a provider outage.
 *
 * @since 0.1.0
 */
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Family from "./internal/family.js"
import * as RouteFailure from "./internal/routeFailure.js"
import * as Seconds from "./internal/seconds.js"
import * as ProviderFailure from "./ProviderFailure.js"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@reprise/core/RecoveryExhausted")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * - `Attempts`: every allowed send was made.
 * - `Deadline`: the deadline has passed, or the wait before the next attempt would end past it (see `nextDelay`).
 * - `RetryAfterBeyondDeadline`: the server's `Retry-After`, or a pause of the fleet, ends past the deadline;
 *   recovery stopped at once instead of sleeping in vain.
 * - `FleetBudget`: the fleet's shared retry budget refused the replay (`FleetLimits`); recovery stopped at once.
 * - `CircuitOpen`: every route of the plan left to try has its circuit open (see `Routes`, `Circuit`): nothing was
 *   sent to them.
 *
 * @since 0.1.0
 * @category models
 */
export const Reason = Schema.Literal("Attempts", "Deadline", "RetryAfterBeyondDeadline", "FleetBudget", "CircuitOpen")

/**
 * @since 0.1.0
 * @category models
 */
export type Reason = typeof Reason.Type

/**
 * @since 0.1.0
 * @category errors
 */
export class RecoveryExhausted extends Schema.TaggedError<RecoveryExhausted>("@reprise/core/RecoveryExhausted")(
  "RecoveryExhausted",
  {
    reason: Reason,
    /** Physical sends made by the scope. */
    attempts: Schema.Number,
    maxAttempts: Schema.Number,
    /** Time from the scope's start to the decision to stop. */
    elapsed: Schema.DurationFromSelf,
    /** The last attempt's error (absent when no attempt could be made at all). */
    lastError: Schema.optional(ProviderFailure.ProviderFailure),
    /** Every failed attempt's error of this reply, in order. */
    errors: Schema.Array(ProviderFailure.ProviderFailure),
    /** The server's requested wait (or the fleet's pause left), for `RetryAfterBeyondDeadline`. */
    retryAfter: Schema.optional(Schema.DurationFromSelf),
    /**
     * For `Deadline`, when the deadline had not passed yet: the wait before the next attempt, which would have ended
     * past it. Absent when the deadline itself was reached.
     */
    nextDelay: Schema.optional(Schema.DurationFromSelf),
    /** How many characters of preview the last attempt had shown, discarded with it (absent when none was made). */
    partialOutputChars: Schema.optional(Schema.Number),
    /** Each route's last failure, when every route of a plan failed (see `Routes`). */
    ...RouteFailure.field
  }
) {
  /**
   * @since 0.1.0
   */
  readonly [TypeId]: TypeId = TypeId

  /**
   * The `RecoveryError` family's mark.
   *
   * @since 0.1.0
   */
  readonly [Family.TypeId]: Family.TypeId = Family.TypeId

  /**
   * @since 0.1.0
   */
  override get message(): string {
    const what = this.reason === "Attempts"
      ? `gave up after ${this.attempts} of ${this.maxAttempts} attempts`
      : this.reason === "CircuitOpen"
      ? `every route left has its circuit open, after ${this.attempts} of ${this.maxAttempts} attempts`
      : this.reason === "FleetBudget"
      ? `the fleet's retry budget refused a replay after ${this.attempts} of ${this.maxAttempts} attempts`
      : this.reason === "Deadline"
      ? this.nextDelay === undefined
        ? `deadline reached after ${Seconds.format(this.elapsed)} and ${this.attempts} attempts`
        : `stopped after ${Seconds.format(this.elapsed)} and ${this.attempts} attempts: the ${
          Seconds.format(this.nextDelay)
        } wait before the next attempt would end past the deadline`
      : `server asked to retry after ${
        this.retryAfter === undefined ? "?" : Seconds.format(this.retryAfter)
      }, past the deadline`
    return this.lastError === undefined ? what : `${what}; last error: ${this.lastError.message}`
  }
}

/**
 * @since 0.1.0
 * @category guards
 */
export const isRecoveryExhausted = (u: unknown): u is RecoveryExhausted => Predicate.hasProperty(u, TypeId)
