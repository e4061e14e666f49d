/**
 * The values a script's fields hold (counts, timers, statuses, one of several strings), each a schema whose failure
 * reads as one line that says what is expected and what was found: `Expected a non-negative integer, actual -3`.
 *
 * @internal
 */
import type * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

const actual = (issue: ParseResult.ParseIssue): string => {
  if (!("actual" in issue)) return ""
  try {
    return `, actual ${JSON.stringify(issue.actual)}`
  } catch {
    return ""
  }
}

/**
 * One of several strings, reported as one issue (`Expected "a" | "b", actual "c"`) rather than one per string.
 *
 * @internal
 */
export const oneOf = <const Values extends ReadonlyArray<string>>(...values: Values) =>
  Schema.Literal(...values).annotations({
    message: (issue) => ({
      message: `Expected ${values.map((v) => JSON.stringify(v)).join(" | ")}${actual(issue)}`,
      override: true
    })
  })

/** @internal */
export const Count = Schema.Int.pipe(Schema.greaterThanOrEqualTo(0)).annotations({
  identifier: "Count",
  message: (issue) => ({ message: `Expected a non-negative integer${actual(issue)}`, override: true })
})

/** @internal */
export const Positive = Schema.Int.pipe(Schema.greaterThanOrEqualTo(1)).annotations({
  identifier: "PositiveInt",
  message: (issue) => ({ message: `Expected an integer of at least 1${actual(issue)}`, override: true })
})

/**
 * A timer: every timer in a script is bounded, at most ten minutes.
 *
 * @internal
 */
export const Millis = Schema.Int.pipe(Schema.between(1, 600_000)).annotations({
  identifier: "Millis",
  message: (issue) => ({
    message: `Expected a whole number of milliseconds between 1 and 600000${actual(issue)}`,
    override: true
  })
})

/**
 * A span that may be empty: {@link Millis} or 0.
 *
 * @internal
 */
export const MillisOrZero = Schema.Int.pipe(Schema.between(0, 600_000)).annotations({
  message: (issue) => ({
    message: `Expected a whole number of milliseconds between 0 and 600000${actual(issue)}`,
    override: true
  })
})

/** @internal */
export const HttpStatus = Schema.Int.pipe(Schema.between(200, 599)).annotations({
  message: (issue) => ({
    message: `Expected an HTTP status: an integer between 200 and 599${actual(issue)}`,
    override: true
  })
})
