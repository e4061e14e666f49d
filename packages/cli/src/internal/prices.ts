/**
 * The CLI's price list (`Prices` of @reprise/core): the JSON file `--prices FILE` names, else the variable
 * `REPRISE_PRICES`, else none. Both hold the same JSON, decoded with `Prices.PriceList`, as `Prices.config` decodes
 * the variable; a bad one is a usage error that names the file or the variable and says what is wrong on one line.
 *
 * @internal
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Prices from "@reprise/core/Prices"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

const decode = Schema.decodeUnknownEither(Schema.parseJson(Prices.PriceList))

/** A path into the list: the model's name as JSON, then its field (`"gpt-4.1".input`). */
const where = (path: ReadonlyArray<PropertyKey>): string =>
  path.map((key, i) => i === 0 ? JSON.stringify(String(key)) : `.${String(key)}`).join("")

/** What is wrong with one issue, in a few words (Schema's own words name the whole schema, on several lines). */
const describe = (issue: ParseResult.ArrayFormatterIssue): string => {
  if (issue.path.length === 0) {
    return issue._tag === "Transformation"
      ? `not JSON (${issue.message})`
      : `expected an object of model prices, such as {"gpt-4.1": {"input": 2, "output": 8}}`
  }
  if (issue.path.length === 1 && issue._tag === "Type") {
    return `${where(issue.path)}: expected {"input": N, "output": N}, with "cacheRead" and "cacheWrite" optional`
  }
  return issue._tag === "Missing" ? `${where(issue.path)} is missing` : `${where(issue.path)}: ${issue.message}`
}

/**
 * A price list from its JSON text, or what is wrong with it: `not JSON (…)`, or each issue with its place,
 * `"gpt-4.1".input: Expected a non-negative number, actual -1`.
 *
 * @internal
 */
export const parse = (text: string): Either.Either<Prices.PriceList, string> =>
  Either.mapLeft(decode(text), (error) => ParseResult.ArrayFormatter.formatErrorSync(error).map(describe).join("; "))

/** A file-system failure in a word: the platform's reason (`NotFound`, `PermissionDenied`, …), else its message. */
const failure = (error: { readonly _tag: string; readonly message: string; readonly reason?: string }) =>
  error._tag === "SystemError" && error.reason !== undefined ? error.reason : error.message

/**
 * The prices of `--prices FILE` when given, else of `REPRISE_PRICES`, else none (`{}`); the message of a bad one:
 * `--prices FILE cannot be read (NotFound)`, `--prices FILE is not a price list: …`,
 * `REPRISE_PRICES is not a price list: …`.
 *
 * @internal
 */
export const resolve = (
  file: Option.Option<string>
): Effect.Effect<Prices.PriceList, string, FileSystem.FileSystem> =>
  Option.match(file, {
    onSome: (file) =>
      Effect.gen(function*() {
        const fs = yield* FileSystem.FileSystem
        const text = yield* Effect.mapError(
          fs.readFileString(file),
          (error) => `--prices ${file} cannot be read (${failure(error)})`
        )
        return yield* Either.mapLeft(parse(text), (problem) => `--prices ${file} is not a price list: ${problem}`)
      }),
    onNone: () =>
      Effect.gen(function*() {
        const text = yield* Effect.mapError(
          Config.option(Config.string(Prices.variable)),
          () => `${Prices.variable} is not readable`
        )
        if (Option.isNone(text)) return {}
        return yield* Either.mapLeft(
          parse(text.value),
          (problem) => `${Prices.variable} is not a price list: ${problem}`
        )
      })
  })
