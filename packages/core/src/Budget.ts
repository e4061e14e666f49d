/**
 * `Budget` is the allowance of one recovery scope: how many physical sends it may make (the first one included)
 * and a monotonic deadline read from Effect's `Clock`. Every physical send calls {@link reserve} before it is
 * sent; a send that cannot be reserved is not made.
 *
 * A scope is opened with {@link scoped}. A scope opened inside another one (a reply inside a reply, an overflow
 * retry, a sub-call) finds the enclosing allowance in the fiber's context and reuses it: nothing inside one scope
 * can reset the attempts or the deadline.
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
import * as Predicate from "effect/Predicate"
import * as Ref from "effect/Ref"
import * as Schema from "effect/Schema"

/**
 * The limits a new scope starts with.
 *
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /** Physical sends allowed in one scope, counting the first. At least 1. */
  readonly maxAttempts: number
  /** Time from the scope's start after which no attempt is admitted and no backoff is begun. */
  readonly deadline: Duration.Duration
}

/**
 * 11 attempts and 600 seconds.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultSettings: Settings = { maxAttempts: 11, deadline: Duration.seconds(600) }

/**
 * The settings new scopes are made with. Defaults to {@link defaultSettings}; replace it with {@link layer} or
 * {@link layerConfig}.
 *
 * @since 0.1.0
 * @category settings
 */
export class BudgetSettings extends Context.Reference<BudgetSettings>()("@reprise/core/BudgetSettings", {
  defaultValue: (): Settings => defaultSettings
}) {}

/**
 * A send could not be reserved: the scope used all its attempts, or its deadline has passed.
 *
 * @since 0.1.0
 * @category errors
 */
export class BudgetExhausted extends Schema.TaggedError<BudgetExhausted>("@reprise/core/BudgetExhausted")(
  "BudgetExhausted",
  {
    reason: Schema.Literal("Attempts", "Deadline"),
    /** Sends already made in the scope. */
    attempts: Schema.Number,
    maxAttempts: Schema.Number,
    elapsed: Schema.DurationFromSelf
  }
) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return this.reason === "Attempts"
      ? `no attempts left: ${this.attempts} of ${this.maxAttempts} used`
      : `deadline passed after ${Duration.format(this.elapsed)} (${this.attempts} of ${this.maxAttempts} attempts used)`
  }
}

/**
 * @since 0.1.0
 * @category guards
 */
export const isBudgetExhausted = (u: unknown): u is BudgetExhausted => Predicate.isTagged(u, "BudgetExhausted")

/**
 * The live allowance of one scope.
 *
 * @since 0.1.0
 * @category models
 */
export interface Allowance {
  readonly settings: Settings
  /** `Clock.currentTimeNanos` when the scope opened. */
  readonly startedAt: bigint
  /** `startedAt` plus the deadline. */
  readonly deadlineAt: bigint
  /**
   * Debits one physical send and returns its number in the scope (1 for the first). Fails, debiting nothing,
   * when all attempts are used or the deadline has passed.
   */
  readonly reserve: Effect.Effect<number, BudgetExhausted>
  /** Sends reserved so far. */
  readonly used: Effect.Effect<number>
  readonly remainingAttempts: Effect.Effect<number>
  /** Time left until the deadline (zero once it has passed). */
  readonly remainingTime: Effect.Effect<Duration.Duration>
  readonly elapsed: Effect.Effect<Duration.Duration>
}

/**
 * The allowance of the current recovery scope.
 *
 * @since 0.1.0
 * @category tags
 */
export class Budget extends Context.Tag("@reprise/core/Budget")<Budget, Allowance>() {}

const nanosToDuration = (nanos: bigint): Duration.Duration => Duration.nanos(nanos < 0n ? 0n : nanos)

/**
 * Opens a fresh allowance now, with the given settings.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (settings: Settings): Effect.Effect<Allowance> =>
  Effect.gen(function*() {
    const startedAt = yield* Clock.currentTimeNanos
    const deadlineAt = startedAt + Duration.toNanos(settings.deadline).pipe(Option.getOrElse(() => 0n))
    const used = yield* Ref.make(0)
    const elapsed = Effect.map(Clock.currentTimeNanos, (now) => nanosToDuration(now - startedAt))
    const reserve = Effect.flatMap(Clock.currentTimeNanos, (now) =>
      Ref.modify(used, (n): readonly [Effect.Effect<number, BudgetExhausted>, number] => {
        const exhausted = (reason: "Attempts" | "Deadline") =>
          Effect.fail(
            new BudgetExhausted({
              reason,
              attempts: n,
              maxAttempts: settings.maxAttempts,
              elapsed: nanosToDuration(now - startedAt)
            })
          )
        if (n >= settings.maxAttempts) {
          return [exhausted("Attempts"), n]
        }
        if (now >= deadlineAt) {
          return [exhausted("Deadline"), n]
        }
        return [Effect.succeed(n + 1), n + 1]
      })).pipe(Effect.flatten)
    return {
      settings,
      startedAt,
      deadlineAt,
      reserve,
      used: Ref.get(used),
      remainingAttempts: Effect.map(Ref.get(used), (n) =>
        Math.max(0, settings.maxAttempts - n)),
      remainingTime: Effect.map(Clock.currentTimeNanos, (now) =>
        nanosToDuration(deadlineAt - now)),
      elapsed
    }
  })

/**
 * Runs `self` inside a recovery scope. When an enclosing scope exists, its allowance is reused unchanged;
 * otherwise a new one is opened from the current {@link BudgetSettings}.
 *
 * @since 0.1.0
 * @category scopes
 */
export const scoped = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, Budget>> =>
  Effect.flatMap(Effect.serviceOption(Budget), (current) =>
    Option.match(current, {
      onSome: (allowance) => Effect.provideService(self, Budget, allowance),
      onNone: () =>
        Effect.flatMap(
          Effect.flatMap(BudgetSettings, make),
          (allowance) => Effect.provideService(self, Budget, allowance)
        )
    }))

/**
 * Debits one physical send from the current scope. Providers call it immediately before every send.
 *
 * @since 0.1.0
 * @category accessors
 */
export const reserve: Effect.Effect<number, BudgetExhausted, Budget> = Effect.flatMap(Budget, (b) => b.reserve)

/**
 * Validates settings: at least one attempt, a positive deadline.
 *
 * @since 0.1.0
 * @category settings
 */
export const validateSettings = (settings: Settings): Settings => {
  if (!Number.isInteger(settings.maxAttempts) || settings.maxAttempts < 1) {
    throw new RangeError(`maxAttempts must be an integer >= 1, got ${settings.maxAttempts}`)
  }
  if (!Duration.isFinite(settings.deadline) || Duration.lessThanOrEqualTo(settings.deadline, Duration.zero)) {
    throw new RangeError(`deadline must be a positive, finite duration`)
  }
  return settings
}

/**
 * Replaces the settings new scopes start with.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (settings: Partial<Settings>): Layer.Layer<never> =>
  Layer.succeed(BudgetSettings, validateSettings({ ...defaultSettings, ...settings }))

/**
 * `REPRISE_MAX_ATTEMPTS` (integer >= 1, default 11) and `REPRISE_DEADLINE` (seconds > 0, default 600).
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Settings> = Config.all({
  maxAttempts: Config.integer("REPRISE_MAX_ATTEMPTS").pipe(
    Config.validate({ message: "must be an integer >= 1", validation: (n) => n >= 1 }),
    Config.withDefault(defaultSettings.maxAttempts)
  ),
  deadline: Config.number("REPRISE_DEADLINE").pipe(
    Config.validate({ message: "must be a number of seconds > 0", validation: (n) => Number.isFinite(n) && n > 0 }),
    Config.map((seconds) => Duration.millis(seconds * 1000)),
    Config.withDefault(defaultSettings.deadline)
  )
})

/**
 * {@link BudgetSettings} from the environment (see {@link config}); a bad value fails with a `ConfigError` naming
 * the variable.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: Layer.Layer<never, ConfigError.ConfigError> = Layer.effect(
  BudgetSettings,
  config
)
