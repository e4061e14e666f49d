/**
 * The ranges of the provider options, declared once. `ProviderOptions` validates what it reads from the environment
 * with them (`Config.validate` takes a rule as it is), and `settings.ts` checks options given in code with the same
 * rules, so both report the same message. Values in code are typed (a `Duration`, a number): a bad one is a bug in
 * the caller, a `RangeError`; the environment's is a `ConfigError` naming the variable.
 *
 * @internal
 */
import * as Duration from "effect/Duration"

/**
 * A range, in the shape `Config.validate` takes.
 *
 * @internal
 */
export interface Rule<A> {
  readonly message: string
  readonly validation: (a: A) => boolean
}

/** @internal */
export const positiveTimeout: Rule<Duration.Duration> = {
  message: "must be > 0 ms",
  validation: (d) => Duration.greaterThan(d, Duration.zero)
}

/** @internal */
export const atLeastOne: Rule<number> = { message: "must be at least 1", validation: (n) => n >= 1 }

/**
 * What the environment's parser (`Config.integer`) guarantees and a value in code may lack.
 *
 * @internal
 */
export const wholeNumber: Rule<number> = { message: "must be a whole number", validation: Number.isInteger }

/**
 * What milliseconds read as an integer guarantee and a `Duration` in code may lack.
 *
 * @internal
 */
export const finiteDuration: Rule<Duration.Duration> = { message: "must be finite", validation: Duration.isFinite }

/**
 * Throws a `RangeError` naming `name`, the first rule `value` breaks and `shown`.
 *
 * @internal
 */
export const check = <A>(name: string, value: A, shown: string, rules: ReadonlyArray<Rule<A>>): A => {
  for (const rule of rules) {
    if (!rule.validation(value)) throw new RangeError(`${name} ${rule.message}, got ${shown}`)
  }
  return value
}
