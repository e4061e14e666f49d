/**
 * The wait before the next attempt, counted from the moment the failed attempt's failure was observed.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"

/**
 * The wait before the next attempt: `delay` counted from `since`, the moment the failed attempt's failure was observed
 * (`Clock`, nanoseconds). What recovery did since is inside the wait, not added to it; a wait that is already over is
 * not begun (docs/recovery.md, "When the wait starts").
 *
 * @internal
 */
export const waitFrom = (delay: Duration.Duration, since: bigint): Effect.Effect<void> =>
  Effect.flatMap(leftOf(delay, since), (left) => Duration.isZero(left) ? Effect.void : Effect.sleep(left))

/**
 * What is left now of `delay` counted from `since` (`Clock`, nanoseconds); zero once it is over.
 *
 * @internal
 */
export const leftOf = (delay: Duration.Duration, since: bigint): Effect.Effect<Duration.Duration> =>
  Effect.map(Clock.currentTimeNanos, (now) => {
    const left = Duration.unsafeToNanos(delay) - (now - since)
    return left > 0n ? Duration.nanos(left) : Duration.zero
  })
