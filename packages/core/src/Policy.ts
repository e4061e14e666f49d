/**
 * `Policy` is the wait between attempts: an Effect `Schedule` that grows exponentially from `backoffBase` (factor
 * 2) up to `backoffMax`, with jitter that only shortens (`delay × (1 − 0.25·U[0,1))`, drawn from Effect's `Random`
 * so that a seeded `Random` gives the same waits every time).
 *
 * Server pushback wins over the schedule: a `retry-after-ms` or `Retry-After` carried by the failure lengthens the
 * wait, never shortens it, and is not capped by `backoffMax` ({@link lengthen}).
 *
 * ## Settings, declared once
 *
 * Each setting read from outside has one `Config` here, with its environment variable, its default and its range:
 * {@link backoffBaseConfig} (`REPRISE_BACKOFF_BASE`) and {@link backoffMaxConfig} (`REPRISE_BACKOFF_MAX`), in whole
 * milliseconds. {@link config} (and so {@link layerConfig}) is the two of them plus the rule that binds them (the
 * maximum is not smaller than the base). The `reprise` CLI reads `--backoff-base` and `--backoff-max` through
 * {@link config} too, with the flags as a `ConfigProvider` in front of the environment, so the variables, the
 * defaults and the ranges are declared nowhere else.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import * as ScheduleDecision from "effect/ScheduleDecision"
import * as Intervals from "effect/ScheduleIntervals"
import * as Range from "./Range.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /** The first wait. Default 1 s. */
  readonly backoffBase: Duration.Duration
  /** The longest backoff wait (Retry-After may exceed it). Default 60 s. */
  readonly backoffMax: Duration.Duration
  /** Growth factor. Default 2. */
  readonly factor: number
  /** Shortening jitter. Default on. */
  readonly jitter: boolean
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultSettings: Settings = {
  backoffBase: Duration.seconds(1),
  backoffMax: Duration.seconds(60),
  factor: 2,
  jitter: true
}

/**
 * The settings recovery scopes use for their waits.
 *
 * @since 0.1.0
 * @category settings
 */
export class PolicySettings extends Context.Reference<PolicySettings>()("@reprise/core/PolicySettings", {
  defaultValue: (): Settings => defaultSettings
}) {}

/**
 * The backoff schedule: exponential from `backoffBase`, capped at `backoffMax`, jittered downwards. Its delays are
 * the waits before the second, third, … attempt.
 *
 * @since 0.1.0
 * @category schedules
 */
export const backoff = (settings: Settings = defaultSettings): Schedule.Schedule<Duration.Duration> => {
  const capped = Schedule.exponential(settings.backoffBase, settings.factor).pipe(
    Schedule.union(Schedule.spaced(settings.backoffMax)),
    Schedule.map(([exponential]) => Duration.min(exponential, settings.backoffMax))
  )
  return settings.jitter ? Schedule.jitteredWith(capped, { min: 0.75, max: 1 }) : capped
}

/**
 * Where a wait came from.
 *
 * @since 0.1.0
 * @category models
 */
export type DelaySource = "backoff" | "retry-after"

/**
 * A computed wait.
 *
 * @since 0.1.0
 * @category models
 */
export interface Wait {
  readonly delay: Duration.Duration
  readonly source: DelaySource
}

/**
 * Lengthens a backoff wait to the server's requested wait, when that is longer. A shorter `Retry-After` never
 * shortens the backoff.
 *
 * @since 0.1.0
 * @category waits
 */
export const lengthen = (backoffDelay: Duration.Duration, retryAfter: Option.Option<Duration.Duration>): Wait =>
  Option.match(retryAfter, {
    onNone: () => ({ delay: backoffDelay, source: "backoff" }),
    onSome: (requested) => {
      // Whole milliseconds, rounded up: never shorter than asked, and clocks stay integral.
      const serverDelay = Duration.millis(Math.ceil(Duration.toMillis(requested)))
      return Duration.greaterThan(serverDelay, backoffDelay)
        ? { delay: serverDelay, source: "retry-after" }
        : { delay: backoffDelay, source: "backoff" }
    }
  })

/**
 * Replaces the settings recovery scopes wait with.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (settings: Partial<Settings>): Layer.Layer<never> =>
  Layer.succeed(PolicySettings, { ...defaultSettings, ...settings })

const millis = (name: string, fallback: Duration.Duration): Config.Config<Duration.Duration> =>
  Range.integer(name).pipe(
    Config.validate(Range.nonNegativeMilliseconds),
    Config.map(Duration.millis),
    Config.withDefault(fallback)
  )

/**
 * The environment variable of {@link backoffBaseConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const backoffBaseVariable = "REPRISE_BACKOFF_BASE"

/**
 * The environment variable of {@link backoffMaxConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const backoffMaxVariable = "REPRISE_BACKOFF_MAX"

/**
 * `REPRISE_BACKOFF_BASE`: whole milliseconds, at least 0 ("must be >= 0 ms"); default 1000.
 *
 * @since 0.1.0
 * @category config
 */
export const backoffBaseConfig: Config.Config<Duration.Duration> = millis(
  backoffBaseVariable,
  defaultSettings.backoffBase
)

/**
 * `REPRISE_BACKOFF_MAX`: whole milliseconds, at least 0 ("must be >= 0 ms"); default 60000. {@link config} also
 * requires it not to be smaller than the base.
 *
 * @since 0.1.0
 * @category config
 */
export const backoffMaxConfig: Config.Config<Duration.Duration> = millis(backoffMaxVariable, defaultSettings.backoffMax)

/**
 * {@link backoffBaseConfig} and {@link backoffMaxConfig}, the maximum not smaller than the base (a `ConfigError`
 * without a path whose message names both variables, "REPRISE_BACKOFF_MAX must not be smaller than
 * REPRISE_BACKOFF_BASE"); the growth factor and the jitter are the defaults.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Settings> = Config.all({
  backoffBase: backoffBaseConfig,
  backoffMax: backoffMaxConfig
}).pipe(
  Config.validate({
    message: `${backoffMaxVariable} must not be smaller than ${backoffBaseVariable}`,
    validation: (s) => Duration.greaterThanOrEqualTo(s.backoffMax, s.backoffBase)
  }),
  Config.map((s) => ({ ...defaultSettings, ...s }))
)

/**
 * {@link PolicySettings} from the environment (see {@link config}).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: Layer.Layer<never, ConfigError.ConfigError> = Layer.effect(PolicySettings, config)

/**
 * Steps a schedule without sleeping: each `next` returns the wait the schedule asks for now (rounded up to whole
 * milliseconds, so jittered waits stay within their bounds and clocks stay integral), or `None` when the schedule
 * is done. The recovery loop uses it to check a wait against the deadline and announce it before it
 * sleeps.
 *
 * @since 0.1.0
 * @category models
 */
export interface Planner {
  readonly next: Effect.Effect<Option.Option<Duration.Duration>>
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const planner = (schedule: Schedule.Schedule<unknown>): Effect.Effect<Planner> =>
  Effect.map(Ref.make<unknown>(schedule.initial), (state) => ({
    next: Effect.gen(function*() {
      const now = yield* Clock.currentTimeMillis
      const [next, , decision] = yield* schedule.step(now, undefined, yield* Ref.get(state))
      yield* Ref.set(state, next)
      return ScheduleDecision.isDone(decision)
        ? Option.none()
        : Option.some(Duration.millis(Math.max(0, Math.ceil(Intervals.start(decision.intervals) - now))))
    })
  }))
