/**
 * The CLI's price list (`Prices` of @reprise/core): the JSON file `--prices FILE` names, else the variable
 * `REPRISE_PRICES` (blank: unset), else none. Both hold the same JSON, read with `Prices.parse` as `Prices.config`
 * reads the variable; a bad one is a usage error that names the file or the variable and says what is wrong on one
 * line.
 *
 * @internal
 */
import * as FileSystem from "@effect/platform/FileSystem"
import * as Prices from "@reprise/core/Prices"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"

const parse = Prices.parse

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
        if (Option.isNone(text) || text.value.trim() === "") return {}
        return yield* Either.mapLeft(
          parse(text.value),
          (problem) => `${Prices.variable} is not a price list: ${problem}`
        )
      })
  })
