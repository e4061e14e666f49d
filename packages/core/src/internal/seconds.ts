import * as Duration from "effect/Duration"

/**
 * A duration in an error message, as the CLI's retry notices write one: seconds with one decimal (`1.8s`, `60.0s`).
 *
 * @internal
 */
export const format = (duration: Duration.Duration): string =>
  Duration.isFinite(duration) ? `${(Duration.toMillis(duration) / 1000).toFixed(1)}s` : "an unbounded time"
