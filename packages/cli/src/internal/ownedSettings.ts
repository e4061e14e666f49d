/**
 * The settings the CLI reads with their owners' Configs (`Budget`, `Policy`, `ProviderOptions`, `Circuit`, `Fallback`,
 * the background mode), each behind the flag that stands in front of its variable: the table of flags and variables,
 * the reading of the Configs over a `ConfigProvider` of the flags the user gave in front of the environment's, and the
 * messages of a bad value, naming what the user gave (a flag with its value, a variable as Effect writes a
 * `ConfigError`, each setting of a rule between two as it was given).
 *
 * @internal
 */
import * as Options from "@effect/cli/Options"
import * as Budget from "@reprise/core/Budget"
import * as Circuit from "@reprise/core/Circuit"
import * as Policy from "@reprise/core/Policy"
import * as ProviderOptions from "@reprise/providers/ProviderOptions"
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as ConfigProvider from "effect/ConfigProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { UsageError } from "../ExitCode.js"
import * as Fallback from "../Fallback.js"
import type { Parsed } from "../Settings.js"
import * as Background from "./background.js"

/** A setting whose `Config` is its owner's, and the flag that stands in front of its variable. */
interface Owned {
  /** The flag, without its dashes. */
  readonly flag: string
  readonly variable: string
  /** Its value (flag, variable or default, from the current `ConfigProvider`) as the flag would give it. */
  readonly current: Effect.Effect<string, ConfigError.ConfigError>
}

const setting = <A>(flag: string, variable: string, config: Config.Config<A>, show: (value: A) => string): Owned => ({
  flag,
  variable,
  current: Effect.map(config, show)
})

const millis = (d: Duration.Duration) => String(Duration.toMillis(d))

/**
 * The settings of the CLI whose `Config` is their owner's, by the key of their flag in `Settings.options`.
 *
 * @internal
 */
export const owned = {
  maxAttempts: setting("max-attempts", Budget.maxAttemptsVariable, Budget.maxAttemptsConfig, String),
  deadline: setting(
    "deadline",
    Budget.deadlineVariable,
    Budget.deadlineConfig,
    (d) => String(Duration.toSeconds(d))
  ),
  backoffBase: setting("backoff-base", Policy.backoffBaseVariable, Policy.backoffBaseConfig, millis),
  backoffMax: setting("backoff-max", Policy.backoffMaxVariable, Policy.backoffMaxConfig, millis),
  idleTimeout: setting("idle-timeout", ProviderOptions.idleTimeoutVariable, ProviderOptions.idleTimeoutConfig, millis),
  firstByteTimeout: setting(
    "first-byte-timeout",
    ProviderOptions.firstByteTimeoutVariable,
    ProviderOptions.firstByteTimeoutConfig,
    millis
  ),
  firstTokenTimeout: setting(
    "first-token-timeout",
    ProviderOptions.firstTokenTimeoutVariable,
    ProviderOptions.firstTokenTimeoutConfig,
    Option.match({ onNone: () => "none", onSome: millis })
  ),
  routeAttempts: setting(
    "route-attempts",
    Fallback.routeAttemptsVariable,
    Fallback.routeAttemptsConfig,
    Option.match({ onNone: () => "none", onSome: String })
  ),
  contextWindow: setting(
    "context-window",
    Fallback.contextWindowVariable,
    Fallback.contextWindowConfig,
    Option.match({ onNone: () => "none", onSome: String })
  ),
  circuitThreshold: setting(
    "circuit-threshold",
    Circuit.failureThresholdVariable,
    Circuit.failureThresholdConfig,
    String
  ),
  circuitCooldown: setting("circuit-cooldown", Circuit.coolDownVariable, Circuit.coolDownConfig, millis),
  maxReplyBytes: setting(
    "max-reply-bytes",
    ProviderOptions.maxReplyBytesVariable,
    ProviderOptions.maxReplyBytesConfig,
    String
  ),
  streamUsage: setting(
    "no-stream-usage",
    ProviderOptions.streamUsageVariable,
    ProviderOptions.streamUsageConfig,
    String
  ),
  background: setting("background", Background.variable, Background.config, String)
}

/**
 * The flag of a setting: its value when given, `None` otherwise. The variable and the default are read in
 * {@link readOwned}, by the setting's own `Config`; the fallback here only tells @effect/cli (and its help: "This option
 * can be set from environment variables") that the flag may be left out.
 *
 * @internal
 */
export const flag = (
  of: { readonly flag: string; readonly variable: string },
  make: (name: string) => Options.Options<number>,
  description: (env: string) => string
): Options.Options<Option.Option<number>> =>
  make(of.flag).pipe(
    Options.map(Option.some),
    Options.withFallbackConfig(Config.succeed(Option.none<number>())),
    Options.withDescription(description(`env ${of.variable}`))
  )

/**
 * `read` with a `ConfigProvider` of the flags the user gave (`given`, by variable) in front of the environment's.
 *
 * @internal
 */
export const overFlags = <A, E, R>(
  given: Map<string, string>,
  read: (provider: ConfigProvider.ConfigProvider) => Effect.Effect<A, E, R>
) =>
  Effect.configProviderWith((environment) =>
    read(ConfigProvider.orElse(ConfigProvider.fromMap(given), () => environment))
  )

/** What {@link readOwned} reads with the owners' Configs, whole: `Policy.config` also checks the base against the max. */
const ownedConfig = Config.all({
  budget: Budget.config,
  policy: Policy.config,
  firstByteTimeout: ProviderOptions.firstByteTimeoutConfig,
  idleTimeout: ProviderOptions.idleTimeoutConfig,
  firstTokenTimeout: ProviderOptions.firstTokenTimeoutConfig,
  routeAttempts: Fallback.routeAttemptsConfig,
  contextWindow: Fallback.contextWindowConfig,
  circuit: Circuit.config,
  maxReplyBytes: ProviderOptions.maxReplyBytesConfig,
  streamUsage: ProviderOptions.streamUsageConfig,
  background: Background.config
})

/**
 * A flag's value as its owner's Config reads it: a number in decimal notation (`String` writes `1e+21` and `1e-7`, which
 * `Range.number` refuses, for values given in digits).
 */
const asText = (value: number | boolean): string =>
  typeof value === "number"
    ? value.toLocaleString("en-US", { useGrouping: false, maximumFractionDigits: 20 })
    : String(value)

/**
 * The owned settings, each from its flag when given, else from its variable, else its default: the owners' Configs
 * read over the flags as a `ConfigProvider`, in front of the environment's.
 *
 * @internal
 */
export const readOwned = (parsed: Parsed) => {
  const given = new Map<string, string>()
  for (const [key, of] of Object.entries(owned)) {
    const value: Option.Option<number | boolean> = parsed[key as keyof typeof owned]
    if (Option.isSome(value)) given.set(of.variable, asText(value.value))
  }
  return overFlags(given, (provider) =>
    Effect.withConfigProvider(ownedConfig, provider).pipe(
      Effect.catchAll((error) =>
        Effect.flatMap(describe(error, given, provider), (detail) => Effect.fail(new UsageError({ detail })))
      )
    ))
}

const ownedList: ReadonlyArray<Owned> = Object.values(owned)

/**
 * The problems in a `ConfigError`: its invalid values (a missing one is only the flags' map not having it).
 *
 * @internal
 */
export const problems = (error: ConfigError.ConfigError): ReadonlyArray<ConfigError.ConfigError> =>
  ConfigError.reduceWithContext(error, undefined, {
    andCase: (_, left, right) => [...left, ...right],
    orCase: (_, left, right) => [...left, ...right],
    invalidDataCase: (_, path, message) => [ConfigError.InvalidData(path, message)],
    missingDataCase: () => [],
    sourceUnavailableCase: (_, path, message, cause) => [ConfigError.SourceUnavailable(path, message, cause)],
    unsupportedCase: (_, path, message) => [ConfigError.Unsupported(path, message)]
  })

/**
 * The message for a failure of the owned settings, naming what the user gave: a flag as a flag, with its value; a
 * variable as Effect writes a `ConfigError` (what `Budget.layerConfig` fails with too); and in the message of a rule
 * between settings (a `ConfigError` without a path, naming their variables), each setting as it was given.
 */
const describe = (
  error: ConfigError.ConfigError,
  given: ReadonlyMap<string, string>,
  provider: ConfigProvider.ConfigProvider
): Effect.Effect<string> => {
  const found = problems(error)
  if (found.length === 0) return Effect.succeed(String(error))
  return Effect.map(
    Effect.forEach(found, (problem) => {
      if (problem._op !== "InvalidData") return Effect.succeed(String(problem))
      if (problem.path.length === 0) return namedIn(problem.message, given, provider)
      const of = ownedList.find((of) => problem.path.length === 1 && of.variable === problem.path[0])
      const flagValue = of === undefined ? undefined : given.get(of.variable)
      return Effect.succeed(
        of !== undefined && flagValue !== undefined
          ? `--${of.flag} ${problem.message}, got ${flagValue}`
          : String(problem)
      )
    }),
    (lines) => lines.join("; ")
  )
}

/** `message` with each owned variable it names replaced by the setting as given: `--backoff-base (20)`. */
const namedIn = (message: string, given: ReadonlyMap<string, string>, provider: ConfigProvider.ConfigProvider) =>
  Effect.reduce(ownedList, message, (line, of) => {
    const name = new RegExp(`\\b${of.variable}\\b`, "g")
    return line.search(name) < 0
      ? Effect.succeed(line)
      : Effect.map(named(of, given, provider), (label) => line.replace(name, () => label))
  })

/** A setting as the user gave it, with its value: `--backoff-base (20)`, `REPRISE_BACKOFF_BASE (20)`. */
const named = (of: Owned, given: ReadonlyMap<string, string>, provider: ConfigProvider.ConfigProvider) =>
  Effect.gen(function*() {
    const flagValue = given.get(of.variable)
    if (flagValue !== undefined) return `--${of.flag} (${flagValue})`
    const value = yield* Effect.option(Effect.withConfigProvider(of.current, provider))
    const set = yield* Effect.option(Effect.withConfigProvider(Config.string(of.variable), provider))
    // a setting left at its default is named by its flag, the way to change it
    return `${Option.isSome(set) ? of.variable : `--${of.flag}`} (${Option.getOrElse(value, () => "?")})`
  })
