/**
 * `RetryBudget` is the arithmetic of the fleet's shared retry budget (Finagle's `RetryBudget` semantics, over many
 * processes): **first attempts deposit, replays withdraw**, and a replay is allowed while the fleet's replays in its
 * window stay within
 *
 * ```text
 * ratio × first attempts in the window + floor × seconds the window has been active
 * ```
 *
 * - The window is `window` whole seconds of the store's clock (the Redis server's `TIME` for {@link RedisFleet},
 *   Effect's `Clock` for {@link MemoryFleet}), kept as one bucket per second: the current second and the
 *   `window − 1` before it. Older buckets are forgotten.
 * - "Active" seconds run from the oldest bucket still in the window to the current one (at least 1, at most
 *   `window`): the floor accrues second by second, so a fleet that was idle gets `floor` replays in its first second,
 *   not `floor × window` at once.
 * - Defaults: `ratio` 0.2 (one replay per five first attempts), `floor` 10 replays per second, `window` 10 s. With
 *   them, an outage that lasts `T` seconds (T ≤ 10) costs at most `first attempts × 1.2 + 10 × T` sends, whatever
 *   the number of processes and their attempt caps.
 *
 * This module is the reference: the Lua scripts of {@link RedisFleet} compute the same thing on the server, and the
 * tests check both against the same cases.
 *
 * @since 0.1.0
 */
import * as Range from "@reprise/core/Range"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"

/**
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /** Replays allowed per first attempt in the window (≥ 0). Default 0.2. */
  readonly ratio: number
  /** Replays allowed per active second of the window on top of the ratio (≥ 0). Default 10. */
  readonly floor: number
  /** How long first attempts and replays are remembered, in whole seconds (≥ 1). Default 10 s. */
  readonly window: Duration.Duration
}

/**
 * 20 %, 10 per second, 10 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultSettings: Settings = { ratio: 0.2, floor: 10, window: Duration.seconds(10) }

/**
 * The window in whole seconds.
 *
 * @since 0.1.0
 * @category utils
 */
export const windowSeconds = (settings: Settings): number => Math.round(Duration.toSeconds(settings.window))

/**
 * Validates settings: a finite ratio and floor ≥ 0, a window of whole seconds between 1 and 3600.
 *
 * @since 0.1.0
 * @category settings
 */
export const validateSettings = (settings: Settings): Settings => {
  if (!Number.isFinite(settings.ratio) || settings.ratio < 0) {
    throw new RangeError(`ratio must be a finite number >= 0, got ${settings.ratio}`)
  }
  if (!Number.isFinite(settings.floor) || settings.floor < 0) {
    throw new RangeError(`floor must be a finite number >= 0, got ${settings.floor}`)
  }
  const seconds = Duration.toSeconds(settings.window)
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > 3600) {
    throw new RangeError(`window must be a whole number of seconds between 1 and 3600`)
  }
  return settings
}

/**
 * What the fleet's window holds now.
 *
 * @since 0.1.0
 * @category models
 */
export interface Counts {
  readonly firsts: number
  readonly replays: number
  /** Seconds from the oldest bucket in the window to the current one, counting both (1 to `window`). */
  readonly activeSeconds: number
}

/**
 * How many replays the window allows (not necessarily whole).
 *
 * @since 0.1.0
 * @category arithmetic
 */
export const allowance = (settings: Settings, counts: Counts): number =>
  settings.ratio * counts.firsts + settings.floor * counts.activeSeconds

// Products such as 0.57 × 100 land a hair below the whole number they stand for.
const epsilon = 1e-9

/**
 * Whether one more replay fits: `replays + 1 ≤ allowance`.
 *
 * @since 0.1.0
 * @category arithmetic
 */
export const allows = (settings: Settings, counts: Counts): boolean =>
  counts.replays + 1 <= allowance(settings, counts) + epsilon

/**
 * One second's bucket.
 *
 * @since 0.1.0
 * @category models
 */
export interface Bucket {
  readonly firsts: number
  readonly replays: number
}

/**
 * The buckets of a window by second, and what they count at `now` (a second of the store's clock). A bucket is in
 * the window when `now − window < second ≤ now + window` (a bucket ahead of `now` is from a clock that stepped back:
 * it is counted, and dropped once far off). The others are returned in `stale`, to be deleted.
 *
 * @since 0.1.0
 * @category arithmetic
 */
export const count = (
  buckets: Iterable<readonly [second: number, bucket: Bucket]>,
  now: number,
  window: number
): Counts & { readonly stale: ReadonlyArray<number> } => {
  let firsts = 0
  let replays = 0
  let oldest = now
  const stale: Array<number> = []
  for (const [second, bucket] of buckets) {
    if (second <= now - window || second > now + window) {
      stale.push(second)
      continue
    }
    firsts += bucket.firsts
    replays += bucket.replays
    if (second < oldest) oldest = second
  }
  return { firsts, replays, activeSeconds: Math.max(1, Math.min(window, now - oldest + 1)), stale }
}

/**
 * `REPRISE_FLEET_RATIO` (default 0.2), `REPRISE_FLEET_FLOOR` (replays per second, default 10) and
 * `REPRISE_FLEET_WINDOW` (whole seconds, default 10).
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Settings> = Config.all({
  ratio: Range.number("REPRISE_FLEET_RATIO").pipe(
    Config.validate(Range.nonNegative),
    Config.withDefault(defaultSettings.ratio)
  ),
  floor: Range.number("REPRISE_FLEET_FLOOR").pipe(
    Config.validate(Range.nonNegative),
    Config.withDefault(defaultSettings.floor)
  ),
  window: Range.integer("REPRISE_FLEET_WINDOW").pipe(
    Config.validate({
      message: "must be a whole number of seconds from 1 to 3600",
      validation: (n) => n >= 1 && n <= 3600
    }),
    Config.map(Duration.seconds),
    Config.withDefault(defaultSettings.window)
  )
})
