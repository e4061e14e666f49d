/**
 * `Budget` is the allowance of one recovery scope: how many physical sends it may make (the first one included)
 * and a monotonic deadline read from Effect's `Clock`. Every physical send calls {@link reserve} before it is
 * sent; a send that cannot be reserved is not made.
 *
 * A scope is opened with {@link scoped}. A scope opened inside another one (a reply inside a reply, an overflow
 * retry, a sub-call) finds the enclosing allowance in the fiber's context and reuses it: nothing inside one scope
 * can reset the attempts or the deadline.
 *
 * ## Settings, declared once
 *
 * Each setting has one `Config` here, which carries its environment variable, its default and its range:
 * {@link maxAttemptsConfig} (`REPRISE_MAX_ATTEMPTS`, {@link maxAttemptsVariable}) and {@link deadlineConfig}
 * (`REPRISE_DEADLINE`, {@link deadlineVariable}). {@link config} (and so {@link layerConfig}) is the two of them, and
 * the `reprise` CLI reads its `--max-attempts` and `--deadline` through the same two, with the flags as a
 * `ConfigProvider` in front of the environment: a bad value gets the same message whichever way it came in. A
 * deadline is kept in whole milliseconds, so one below half a millisecond is refused, and is at most 2^31 - 1 ms (about
 * 24.8 days), the longest wait Effect's clock can time.
 *
 * Settings given as values in code ({@link layer}, {@link validateSettings}) are checked against the same ranges;
 * a bad one is a bug in the caller, not a configuration problem, and throws a `RangeError` (see
 * {@link validateSettings}).
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
import * as Schema from "effect/Schema"
import * as Seconds from "./internal/seconds.js"
import * as Range from "./Range.js"

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
      : `deadline passed after ${Seconds.format(this.elapsed)} (${this.attempts} of ${this.maxAttempts} attempts used)`
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
  Effect.map(Clock.currentTimeNanos, (startedAt) => makeAt(settings, startedAt))

// An allowance opened at `startedAt` (`Clock.currentTimeNanos`).
const makeAt = (settings: Settings, startedAt: bigint): Allowance => new Live(settings, startedAt)

/** An allowance's state; its effects are built when they are asked for. */
class Live implements Allowance {
  readonly deadlineAt: bigint
  /** Sends reserved so far: a reservation reads and updates it in one synchronous step, with the clock's time. */
  sent = 0

  constructor(readonly settings: Settings, readonly startedAt: bigint) {
    this.deadlineAt = startedAt + Duration.toNanos(settings.deadline).pipe(Option.getOrElse(() => 0n))
  }

  get reserve(): Effect.Effect<number, BudgetExhausted> {
    return Effect.clockWith((clock) => {
      const now = clock.unsafeCurrentTimeNanos()
      const settings = this.settings
      const exhausted = (reason: "Attempts" | "Deadline") =>
        Effect.fail(
          new BudgetExhausted({
            reason,
            attempts: this.sent,
            maxAttempts: settings.maxAttempts,
            elapsed: nanosToDuration(now - this.startedAt)
          })
        )
      if (this.sent >= settings.maxAttempts) return exhausted("Attempts")
      if (now >= this.deadlineAt) return exhausted("Deadline")
      this.sent++
      return Effect.succeed(this.sent)
    })
  }

  get used(): Effect.Effect<number> {
    return Effect.sync(() => this.sent)
  }

  get remainingAttempts(): Effect.Effect<number> {
    return Effect.sync(() => Math.max(0, this.settings.maxAttempts - this.sent))
  }

  get remainingTime(): Effect.Effect<Duration.Duration> {
    return Effect.map(Clock.currentTimeNanos, (now) => nanosToDuration(this.deadlineAt - now))
  }

  get elapsed(): Effect.Effect<Duration.Duration> {
    return Effect.map(Clock.currentTimeNanos, (now) => nanosToDuration(now - this.startedAt))
  }
}

/**
 * Runs `self` inside a recovery scope. When an enclosing scope exists, its allowance is reused unchanged;
 * otherwise a new one is opened from the current {@link BudgetSettings}.
 *
 * @since 0.1.0
 * @category scopes
 */
export const scoped = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, Budget>> =>
  Effect.flatMap(enclosingOrNew, (allowance) => Effect.provideService(self, Budget, allowance))

/**
 * The allowance {@link scoped} runs with: the enclosing scope's when there is one, otherwise a new one from the
 * current {@link BudgetSettings}. For code that provides it together with other services, in one context.
 *
 * @since 0.1.0
 * @category scopes
 */
export const enclosingOrNew: Effect.Effect<Allowance> = Effect.flatMap(
  Effect.serviceOption(Budget),
  (enclosing) =>
    Option.isSome(enclosing)
      ? Effect.succeed(enclosing.value)
      : Effect.flatMap(BudgetSettings, (settings) => make(settings))
)

/**
 * Fails as a send refused at the deadline would, with `allowance`'s counts now: for a wait inside an attempt that
 * would end past the deadline (a fleet's pause before a resend, a poll of a background response).
 *
 * @since 0.1.0
 * @category constructors
 */
export const deadlineReached = (allowance: Allowance): Effect.Effect<never, BudgetExhausted> =>
  Effect.gen(function*() {
    return yield* Effect.fail(
      new BudgetExhausted({
        reason: "Deadline",
        attempts: yield* allowance.used,
        maxAttempts: allowance.settings.maxAttempts,
        elapsed: yield* allowance.elapsed
      })
    )
  })

/**
 * The sends of the current attempt: what {@link reserve} runs inside a recovery attempt. `Recovery` provides one per
 * attempt (the first send starts the attempt; a further one, a capability fallback's, passes the fleet's checks
 * first), each debiting the reply's allowance.
 *
 * @since 0.1.0
 * @category models
 */
export interface Sends {
  readonly reserve: Effect.Effect<number, BudgetExhausted>
}

/**
 * The {@link Sends} of the current recovery attempt; outside one (`undefined`), {@link reserve} debits the allowance in
 * context.
 *
 * @since 0.1.0
 * @category tags
 */
export class CurrentSends extends Context.Reference<CurrentSends>()("@reprise/core/Budget/CurrentSends", {
  defaultValue: (): Sends | undefined => undefined
}) {}

/**
 * Reserves one physical send: through the current attempt's {@link Sends} inside a recovery attempt, otherwise by
 * debiting the current scope's allowance. Returns the send's number in the scope. Providers run it immediately before
 * every send; a send that cannot be reserved is not made.
 *
 * @since 0.1.0
 * @category accessors
 */
export const reserve: Effect.Effect<number, BudgetExhausted, Budget> = Effect.flatMap(
  CurrentSends,
  (sends) => sends === undefined ? Effect.flatMap(Budget, (allowance) => allowance.reserve) : sends.reserve
)

const positiveDeadline: Range.Rule<Duration.Duration> = {
  message: "must be a positive number of seconds",
  validation: (d) => Duration.isFinite(d) && Duration.greaterThan(d, Duration.zero)
}

/**
 * The longest wait Effect's clock can time is 2^31 - 1 ms (a longer sleep never ends): a deadline within it lets every
 * wait it admits (a server's `Retry-After` included) end, and keeps the deadline representable in nanoseconds.
 */
const longestDeadlineMillis = 2 ** 31 - 1

const timeableDeadline: Range.Rule<Duration.Duration> = {
  message: `must be at most ${longestDeadlineMillis / 1000} seconds (about 24.8 days)`,
  validation: (d) => Duration.toMillis(d) <= longestDeadlineMillis
}

/** Text gives seconds, kept in whole milliseconds: what rounds to 0 ms is refused rather than rounded up. */
const roundsToOneMillisecond: Range.Rule<Duration.Duration> = {
  message: "must be at least 0.001 seconds (1 ms)",
  validation: (d) => Math.round(Duration.toMillis(d)) >= 1
}

/**
 * Validates settings given in code, with the ranges of {@link maxAttemptsConfig} and {@link deadlineConfig}: a whole
 * number of attempts of at least 1, a positive deadline of at most 2147483.647 seconds (any resolution: only text
 * is kept in whole milliseconds). A bad value is a bug in the caller, so it throws a `RangeError` (a defect when it
 * happens inside an effect), as {@link layer}, whose type has no error channel, promises; values from outside go through
 * {@link config} and fail with a `ConfigError`.
 *
 * @since 0.1.0
 * @category settings
 */
export const validateSettings = (settings: Settings): Settings => {
  Range.check("maxAttempts", settings.maxAttempts, String(settings.maxAttempts), [Range.wholeNumber, Range.atLeastOne])
  // `Duration.format` goes through nanoseconds, which a finite duration of 1e300 s has no bigint for
  const deadline = settings.deadline
  const shown = Duration.isFinite(deadline) && Duration.toMillis(deadline) > longestDeadlineMillis
    ? `${Duration.toSeconds(deadline)}s`
    : Duration.format(deadline)
  Range.check("deadline", deadline, shown, [positiveDeadline, timeableDeadline])
  return settings
}

/**
 * Replaces the settings new scopes start with. Throws a `RangeError` for impossible settings
 * ({@link validateSettings}).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (settings: Partial<Settings>): Layer.Layer<never> =>
  Layer.succeed(BudgetSettings, validateSettings({ ...defaultSettings, ...settings }))

/**
 * The environment variable of {@link maxAttemptsConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const maxAttemptsVariable = "REPRISE_MAX_ATTEMPTS"

/**
 * The environment variable of {@link deadlineConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const deadlineVariable = "REPRISE_DEADLINE"

/**
 * `REPRISE_MAX_ATTEMPTS`: an integer in decimal digits (`Range.integer`), at least 1 ("must be at least 1"); default 11.
 *
 * @since 0.1.0
 * @category config
 */
export const maxAttemptsConfig: Config.Config<number> = Range.integer(maxAttemptsVariable).pipe(
  Config.validate(Range.atLeastOne),
  Config.withDefault(defaultSettings.maxAttempts)
)

/**
 * `REPRISE_DEADLINE`: seconds in decimal notation (`Range.number`: `2.5`, not `1e3`), positive ("must be a positive
 * number of seconds"), at most 2147483.647, the longest wait Effect's clock can time ("must be at most 2147483.647
 * seconds (about 24.8 days)"), kept in whole milliseconds and so at least 0.001 ("must be at least 0.001 seconds
 * (1 ms)"); default 600.
 *
 * @since 0.1.0
 * @category config
 */
export const deadlineConfig: Config.Config<Duration.Duration> = Range.number().pipe(
  Config.map((seconds) => Duration.millis(seconds * 1000)),
  // the bound first: a number of seconds too large for a finite duration is too large, not "not positive"
  Config.validate(timeableDeadline),
  Config.validate(positiveDeadline),
  Config.validate(roundsToOneMillisecond),
  Config.map((deadline) => Duration.millis(Math.round(Duration.toMillis(deadline)))),
  // nested last, so that the variable names every failure above, the mapped ones too
  Config.nested(deadlineVariable),
  Config.withDefault(defaultSettings.deadline)
)

/**
 * {@link maxAttemptsConfig} and {@link deadlineConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Settings> = Config.all({ maxAttempts: maxAttemptsConfig, deadline: deadlineConfig })

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
