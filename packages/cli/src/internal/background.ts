/**
 * The CLI's own setting `REPRISE_BACKGROUND`: whether the replies of a turn run in the provider's background mode.
 * `Settings.backgroundConfig` is its face; the flag-over-variable reading is the owned settings'.
 *
 * @internal
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Either from "effect/Either"

/**
 * The environment variable of {@link config}.
 *
 * @internal
 */
export const variable = "REPRISE_BACKGROUND"

/**
 * `REPRISE_BACKGROUND` as `Config.boolean` reads it, with an empty (or blank) value read as unset: default `false`.
 *
 * @internal
 */
export const config: Config.Config<boolean> = Config.string().pipe(
  Config.mapOrFail((text) => {
    switch (text.trim() === "" ? "" : text) {
      case "":
        return Either.right(false)
      case "true":
      case "yes":
      case "on":
      case "1":
        return Either.right(true)
      case "false":
      case "no":
      case "off":
      case "0":
        return Either.right(false)
      default:
        // `Config.boolean`'s words and message
        return Either.left(
          ConfigError.InvalidData([], `Expected a boolean value but received ${JSON.stringify(text)}`)
        )
    }
  }),
  // nested last, so that the variable names the failure
  Config.nested(variable),
  Config.withDefault(false)
)
