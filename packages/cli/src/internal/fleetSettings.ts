/**
 * The fleet of the CLI: `--fleet` and `--fleet-name` in front of `REPRISE_FLEET_URL` and `REPRISE_FLEET_NAME`, read
 * with the fleet's own Configs (`FleetOptions`) over the flags, in front of the environment, with the budget's and the
 * timeout's variables behind them, read only when a fleet is named. A bad URL or name is reported under its flag,
 * whichever gave it.
 *
 * @internal
 */
import * as Options from "@effect/cli/Options"
import * as FleetAddress from "@reprise/fleet/FleetAddress"
import * as FleetOptions from "@reprise/fleet/FleetOptions"
import * as RetryBudget from "@reprise/fleet/RetryBudget"
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import { UsageError } from "../ExitCode.js"
import type { Parsed } from "../Settings.js"
import { overFlags, problems } from "./ownedSettings.js"

/**
 * A flag in front of a fleet variable: its value when given, `None` otherwise. The variable is read in
 * {@link resolveFleet}, by the fleet's own `Config`; the fallback here, never found, only tells @effect/cli (and its
 * help: "This option can be set from environment variables") that the option has a variable.
 *
 * @internal
 */
export const fleetFlag = (name: string, description: string): Options.Options<Option.Option<string>> =>
  Options.text(name).pipe(
    Options.withFallbackConfig(
      Config.mapOrFail(
        Config.succeed(undefined),
        () => Either.left(ConfigError.MissingData([], "read by Settings.resolve"))
      )
    ),
    Options.optional,
    Options.withDescription(description)
  )

/**
 * The fleet of `--fleet` and `--fleet-name` (or their variables), with the budget and the call timeout of the
 * fleet's variables: `FleetOptions`' Configs over the flags, in front of the environment.
 *
 * @internal
 */
export const resolveFleet = (
  parsed: Parsed,
  baseUrl: string,
  apiKey: Redacted.Redacted<string>
): Effect.Effect<FleetOptions.Options | undefined, UsageError> => {
  const given = new Map<string, string>()
  if (Option.isSome(parsed.fleet)) given.set(FleetOptions.urlVariable, parsed.fleet.value)
  if (Option.isSome(parsed.fleetName)) given.set(FleetOptions.nameVariable, parsed.fleetName.value)
  return overFlags(given, (provider) => {
    // A bad URL or name under its flag, whichever gave it; any other problem as Effect writes it, as the
    // environment alone would have failed (without the flags' map missing the variable).
    const read = <A>(config: Config.Config<A>, flag?: string) =>
      Effect.mapError(Effect.withConfigProvider(config, provider), (error) => {
        const found = problems(error)
        const first = found[0]
        return new UsageError({
          detail: first === undefined
            ? String(error)
            : flag !== undefined && first._op === "InvalidData"
            ? `${flag} ${first.message}`
            : found.map(String).join(" and ")
        })
      })
    return Effect.gen(function*() {
      const url = yield* read(Config.option(FleetOptions.urlConfig), "--fleet")
      if (Option.isNone(url)) {
        const name = yield* read(Config.option(Config.string(FleetOptions.nameVariable)))
        return Option.isSome(name)
          ? yield* Effect.fail(
            new UsageError({
              detail: `--fleet-name needs a fleet: pass --fleet redis://HOST:PORT/DB or set ${FleetOptions.urlVariable}`
            })
          )
          : undefined
      }
      const name = yield* read(FleetOptions.nameConfig(FleetAddress.defaultName(baseUrl, apiKey)), "--fleet-name")
      const budget = yield* read(RetryBudget.config)
      const timeout = yield* read(FleetOptions.timeoutConfig)
      return { url: url.value, name, budget, timeout }
    })
  })
}
