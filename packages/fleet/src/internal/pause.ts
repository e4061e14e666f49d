/**
 * What both fleets do with server pushback before storing it.
 *
 * @internal
 */
import * as Duration from "effect/Duration"

/**
 * The longest pause one response may put on the fleet by default: 10 minutes (the default deadline). A longer
 * `Retry-After` still holds the process that received it; the others send again after the cap and get their own
 * answer.
 *
 * @internal
 */
export const defaultMaxPause: Duration.Duration = Duration.minutes(10)

/**
 * The pause to store, in whole milliseconds (rounded up, capped at `maxPause`); 0 when there is none.
 *
 * @internal
 */
export const pauseMillis = (delay: Duration.Duration, maxPause: Duration.Duration): number => {
  const millis = Math.ceil(Duration.toMillis(Duration.min(delay, maxPause)))
  return Number.isFinite(millis) && millis > 0 ? millis : 0
}

/**
 * Validates a `maxPause` option.
 *
 * @internal
 */
export const maxPause = (input: Duration.DurationInput | undefined): Duration.Duration => {
  const duration = input === undefined ? defaultMaxPause : Duration.decode(input)
  if (!Duration.isFinite(duration) || Duration.lessThanOrEqualTo(duration, Duration.zero)) {
    throw new RangeError("maxPause must be a positive, finite duration")
  }
  return duration
}
