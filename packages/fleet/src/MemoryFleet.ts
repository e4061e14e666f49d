/**
 * `MemoryFleet` shares the fleet's limits between the fibers of **one process** (a chat server running many
 * generations at once, a batch job with a worker pool): the same retry budget ({@link RetryBudget}) and the same
 * pause on server pushback as {@link RedisFleet}, kept in memory and timed by Effect's `Clock`, so `TestClock`
 * drives it in tests. Processes that must share limits use {@link RedisFleet}. Its {@link layer} also provides
 * circuits of its own (`Circuit.makeMemory`), as `RedisFleet.layer` provides the fleet's.
 *
 * ```ts
 * const program = Recovery.generate(request).pipe(Effect.provide(MemoryFleet.layer()))
 * ```
 *
 * @since 0.1.0
 */
import * as Circuit from "@reprise/core/Circuit"
import * as FleetLimits from "@reprise/core/FleetLimits"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Pause from "./internal/pause.js"
import * as RetryBudget from "./RetryBudget.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The retry budget; defaults to {@link RetryBudget.defaultSettings}. */
  readonly budget?: Partial<RetryBudget.Settings> | undefined
  /** The longest pause one response's pushback may set. Default 10 minutes. */
  readonly maxPause?: Duration.DurationInput | undefined
  /** The settings of the layer's circuits, over the `Circuit.CircuitSettings` in context (default 3 and 30 s). */
  readonly circuit?: Partial<Circuit.Settings> | undefined
}

interface State {
  readonly buckets: ReadonlyMap<number, RetryBudget.Bucket>
  /** `Clock.currentTimeMillis` at which the pause ends (0: none). */
  readonly pausedUntil: number
  readonly status: number | undefined
}

/**
 * A fresh in-memory fleet.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<FleetLimits.Service> =>
  Effect.gen(function*() {
    const settings = RetryBudget.validateSettings({ ...RetryBudget.defaultSettings, ...options.budget })
    const window = RetryBudget.windowSeconds(settings)
    const maxPause = Pause.maxPause(options.maxPause)
    const state = yield* Ref.make<State>({ buckets: new Map(), pausedUntil: 0, status: undefined })

    const pauseAt = (s: State, now: number) => FleetLimits.pause(s.pausedUntil - now, s.status)
    const paused = Effect.flatMap(Clock.currentTimeMillis, (now) => Effect.map(Ref.get(state), (s) => pauseAt(s, now)))

    /** Counts the window at `now` and drops its stale buckets. */
    const live = (s: State, second: number) => {
      const counts = RetryBudget.count(s.buckets, second, window)
      const buckets = new Map(s.buckets)
      for (const stale of counts.stale) buckets.delete(stale)
      return { counts, buckets }
    }
    const add = (buckets: Map<number, RetryBudget.Bucket>, second: number, kind: "firsts" | "replays") => {
      const bucket = buckets.get(second) ?? { firsts: 0, replays: 0 }
      buckets.set(second, { ...bucket, [kind]: bucket[kind] + 1 })
      return buckets
    }

    return {
      deposit: Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Ref.modify(state, (s): [Option.Option<FleetLimits.Pause>, State] => {
          const second = Math.floor(now / 1000)
          const { buckets } = live(s, second)
          return [pauseAt(s, now), { ...s, buckets: add(buckets, second, "firsts") }]
        })),
      withdraw: Effect.flatMap(Clock.currentTimeMillis, (now) =>
        Ref.modify(state, (s): [FleetLimits.Withdrawal, State] => {
          const second = Math.floor(now / 1000)
          const { buckets, counts } = live(s, second)
          const allowance = RetryBudget.allowance(settings, counts)
          return RetryBudget.allows(settings, counts)
            ? [
              { allowed: true, replays: counts.replays + 1, allowance },
              { ...s, buckets: add(buckets, second, "replays") }
            ]
            : [{ allowed: false, replays: counts.replays, allowance }, { ...s, buckets }]
        })),
      paused,
      pushback: ({ delay, status }) =>
        Effect.flatMap(Clock.currentTimeMillis, (now) =>
          Ref.update(state, (s) => {
            const until = now + Pause.pauseMillis(delay, maxPause)
            return until > s.pausedUntil ? { ...s, pausedUntil: until, status } : s
          }))
    } satisfies FleetLimits.Service
  })

/**
 * Provides `FleetLimits` with a fresh in-memory fleet, and `Circuit` and `CircuitSettings` with fresh circuits in
 * memory: every recovery scope under the layer shares them. Throws a `RangeError` for invalid settings.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<never> =>
  Layer.effectContext(Effect.gen(function*() {
    const circuitSettings = Circuit.validateSettings({ ...(yield* Circuit.CircuitSettings), ...options.circuit })
    return Context.make(FleetLimits.FleetLimits, yield* make(options)).pipe(
      Context.add(Circuit.Circuit, Circuit.makeMemory(circuitSettings)),
      Context.add(Circuit.CircuitSettings, circuitSettings)
    )
  }))
