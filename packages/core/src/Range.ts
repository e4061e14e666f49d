/**
 * `Range` is how every package of reprise declares the range of a setting, once: a {@link Rule} is in the shape
 * `Config.validate` takes, so the same rule checks a value read from the environment (a `ConfigError` naming the
 * variable) and one given in code ({@link check}: a `RangeError`, since a bad value in code is a bug in the caller),
 * with the same message. A number read from text is read by {@link integer} or {@link number}: decimal notation only,
 * where `Config.integer` and `Config.number` take whatever JavaScript's `Number` takes (`0x10`, `1e3`, `Infinity`,
 * a blank value as 0).
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"

/**
 * A range, in the shape `Config.validate` takes.
 *
 * @since 0.1.0
 * @category models
 */
export interface Rule<A> {
  readonly message: string
  readonly validation: (a: A) => boolean
}

/**
 * Throws a `RangeError` naming `name`, the first rule `value` breaks and `shown`; returns `value` otherwise.
 *
 * @since 0.1.0
 * @category validation
 */
export const check = <A>(name: string, value: A, shown: string, rules: ReadonlyArray<Rule<A>>): A => {
  for (const rule of rules) {
    if (!rule.validation(value)) throw new RangeError(`${name} ${rule.message}, got ${shown}`)
  }
  return value
}

/**
 * At least 1.
 *
 * @since 0.1.0
 * @category rules
 */
export const atLeastOne: Rule<number> = { message: "must be at least 1", validation: (n) => n >= 1 }

/**
 * An integer: what the environment's parser ({@link integer}) guarantees and a value in code may lack.
 *
 * @since 0.1.0
 * @category rules
 */
export const wholeNumber: Rule<number> = { message: "must be a whole number", validation: Number.isInteger }

/**
 * A finite number of at least 0.
 *
 * @since 0.1.0
 * @category rules
 */
export const nonNegative: Rule<number> = {
  message: "must be a number >= 0",
  validation: (n) => Number.isFinite(n) && n >= 0
}

/**
 * A duration longer than zero.
 *
 * @since 0.1.0
 * @category rules
 */
export const positiveTimeout: Rule<Duration.Duration> = {
  message: "must be > 0 ms",
  validation: (d) => Duration.greaterThan(d, Duration.zero)
}

/**
 * A finite duration: what milliseconds read as an integer guarantee and a `Duration` in code may lack.
 *
 * @since 0.1.0
 * @category rules
 */
export const finiteDuration: Rule<Duration.Duration> = { message: "must be finite", validation: Duration.isFinite }

/**
 * A whole number of milliseconds, at least 1.
 *
 * @since 0.1.0
 * @category rules
 */
export const atLeastOneMillisecond: Rule<number> = {
  message: "must be a whole number of milliseconds >= 1",
  validation: (n) => n >= 1
}

/**
 * A number of milliseconds, at least 0.
 *
 * @since 0.1.0
 * @category rules
 */
export const nonNegativeMilliseconds: Rule<number> = { message: "must be >= 0 ms", validation: (n) => n >= 0 }

// an integer too long to be one (`Number` reads 400 digits as Infinity) is refused as `Config.integer` refuses it
const decimalInteger = (text: string) => /^[+-]?[0-9]+$/.test(text) && Number.isInteger(Number(text))
const decimalNumber = (text: string) => /^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$/.test(text)

const decimal = (valid: (text: string) => boolean, what: string, name: string | undefined): Config.Config<number> => {
  const config = Config.mapOrFail(
    Config.string(),
    (text) =>
      valid(text)
        ? Either.right(Number(text))
        : Either.left(
          ConfigError.InvalidData([], `Expected ${what} in decimal notation but received ${JSON.stringify(text)}`)
        )
  )
  return name === undefined ? config : Config.nested(config, name)
}

/**
 * `Config.integer` for text in decimal digits only (`600`, `-5`); anything else fails with `Expected an integer in
 * decimal notation but received "0x10"`.
 *
 * @since 0.1.0
 * @category config
 */
export const integer = (name?: string): Config.Config<number> => decimal(decimalInteger, "an integer", name)

/**
 * `Config.number` for text in decimal notation only (`600`, `2.5`, `.5`): no exponent, hex, `Infinity` or blank value
 * (`Expected a number in decimal notation but received "1e3"`).
 *
 * @since 0.1.0
 * @category config
 */
export const number = (name?: string): Config.Config<number> => decimal(decimalNumber, "a number", name)
