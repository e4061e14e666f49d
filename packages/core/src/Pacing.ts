/**
 * `Pacing` spreads a burst of attempts over turns of the event loop: at most `attemptsPerTurn` attempts (default
 * **8**) start in one turn, and an attempt beyond them waits, in the order it came, for a later turn. Recovery applies
 * it to every attempt (a reply's first send and each replay or continuation), right before the attempt's span is made
 * and its send reserved.
 *
 * Why: what a fiber does before its request reaches the socket (the attempt's span, the `Budget`'s debit, the request's
 * body and headers, undici's dispatch) runs without giving the event loop a turn, and so do the other fibers started
 * in the same turn. A burst of replies started at once (`Effect.forEach(…, { concurrency: "unbounded" })`) used to
 * build every request before the first was written: with 1,000 replies, about 300 ms in which no request was on the
 * wire and no response was read. Paced, the first requests are written within the first turns, and what has arrived
 * is read between the later ones (docs/pacing.md has the measurements).
 *
 * What it costs: while no more than `attemptsPerTurn` attempts start in a turn, nothing waits; the count is reset by
 * one `setImmediate` per turn in which an attempt started. An attempt that waits waits for the turns before it, in
 * which the event loop first handles the I/O that is ready.
 *
 * Pacing follows the event loop, and so it applies only where the event loop moves the fiber on: under the live
 * `Clock`, in a fiber not run synchronously, where `setImmediate` exists. A test that drives time (`TestClock`, or any
 * other `Clock`) expects an attempt to start when its fiber runs, so its attempts are not paced, and a fiber run by
 * `Effect.runSync` has no turn to wait for (unless the run provides a runtime, whose scheduler it then takes:
 * docs/pacing.md). Waiting for a turn reads no clock.
 *
 * The count is the event loop's (a process's, or a worker thread's), shared by every runtime and by every copy of this
 * module; the limit is each fiber's own ({@link PacingSettings}), and an unpaced fiber's attempts are not counted.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"

/**
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /** Attempts that may start in one turn of the event loop: a whole number, at least 1, or `Infinity` (unpaced). */
  readonly attemptsPerTurn: number
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultSettings: Settings = { attemptsPerTurn: 8 }

/**
 * The pacing recovery scopes start their attempts with.
 *
 * @since 0.1.0
 * @category settings
 */
export class PacingSettings extends Context.Reference<PacingSettings>()("@reprise/core/PacingSettings", {
  defaultValue: (): Settings => defaultSettings
}) {}

/**
 * Replaces the pacing. Throws a `RangeError` for an `attemptsPerTurn` that is not a whole number of at least 1 nor
 * `Infinity`: a limit of 0 would start nothing.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (settings: Settings): Layer.Layer<never> => {
  const { attemptsPerTurn } = settings
  if (!(attemptsPerTurn === Infinity || (Number.isInteger(attemptsPerTurn) && attemptsPerTurn >= 1))) {
    throw new RangeError(`attemptsPerTurn must be a whole number of at least 1, or Infinity; got ${attemptsPerTurn}`)
  }
  return Layer.succeed(PacingSettings, { attemptsPerTurn })
}

/**
 * Every attempt starts at once, however many start in the same turn: recovery as it was before pacing.
 *
 * @since 0.1.0
 * @category layers
 */
export const unpaced: Layer.Layer<never> = layer({ attemptsPerTurn: Infinity })
