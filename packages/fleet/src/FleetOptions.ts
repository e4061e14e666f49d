/**
 * The options of a fleet on Redis (`RedisFleet.layer`), and their one declaration as `Config`: the environment
 * variables, the defaults and the ranges that `RedisFleet.layerConfig` reads, and that the `reprise` command line
 * reads with its flags (`--fleet`, `--fleet-name`) in front of them.
 *
 * | variable | default |
 * |---|---|
 * | `REPRISE_FLEET_URL` ({@link urlConfig}) | none: required |
 * | `REPRISE_FLEET_NAME` ({@link nameConfig}) | the name given to {@link config}, else required |
 * | `REPRISE_FLEET_RATIO`, `REPRISE_FLEET_FLOOR`, `REPRISE_FLEET_WINDOW` (`RetryBudget.config`) | 0.2, 10, 10 s |
 * | `REPRISE_FLEET_TIMEOUT` ({@link timeoutConfig}, ms) | 200 |
 * | `REPRISE_CIRCUIT_THRESHOLD`, `REPRISE_CIRCUIT_COOLDOWN` (`Circuit.config`, ms) | 3, 30000 |
 *
 * This module does not load the Redis client, so a program can read (and check) the settings before it decides to
 * connect.
 *
 * @since 0.1.0
 */
import * as Circuit from "@reprise/core/Circuit"
import * as Range from "@reprise/core/Range"
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import * as FleetAddress from "./FleetAddress.js"
import * as RetryBudget from "./RetryBudget.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** `redis://[[user]:password@]host[:port][/db]` (or `rediss://` for TLS). */
  readonly url: string
  /**
   * The fleet: every process that gives the same name on the same server shares its limits (see
   * {@link FleetAddress.defaultName}).
   */
  readonly name: string
  /** The retry budget; defaults to {@link RetryBudget.defaultSettings}. */
  readonly budget?: Partial<RetryBudget.Settings> | undefined
  /** How long one Redis call may take before the process goes on without the fleet. Default 200 ms. */
  readonly timeout?: Duration.DurationInput | undefined
  /** How long the layer waits for the first connection when it is built. Default 1 s. */
  readonly connectTimeout?: Duration.DurationInput | undefined
  /** While Redis is unavailable, how often a call tries it again (sooner once the client reconnected). Default 1 s. */
  readonly retryInterval?: Duration.DurationInput | undefined
  /** The longest pause one response's pushback may put on the fleet. Default 10 minutes. */
  readonly maxPause?: Duration.DurationInput | undefined
  /** The settings of the fleet's circuits, over the `Circuit.CircuitSettings` in context (default 3 and 30 s). */
  readonly circuit?: Partial<Circuit.Settings> | undefined
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultTimeout: Duration.Duration = Duration.millis(200)

/**
 * The environment variable of {@link urlConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const urlVariable = "REPRISE_FLEET_URL"

/**
 * The environment variable of {@link nameConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const nameVariable = "REPRISE_FLEET_NAME"

/**
 * The environment variable of {@link timeoutConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const timeoutVariable = "REPRISE_FLEET_TIMEOUT"

/**
 * `REPRISE_FLEET_URL`: a Redis URL ({@link FleetAddress.urlProblem}); a bad one is invalid data saying what is wrong
 * with it, without its credentials (`must start with redis:// or rediss:// (redis://HOST:PORT/DB), got http://…`).
 *
 * @since 0.1.0
 * @category config
 */
export const urlConfig: Config.Config<string> = Config.string(urlVariable).pipe(
  Config.mapOrFail((url) => {
    const problem = FleetAddress.urlProblem(url)
    return problem === undefined
      ? Either.right(url)
      : Either.left(
        ConfigError.InvalidData([], `${problem} (redis://HOST:PORT/DB), got ${FleetAddress.describeUrl(url)}`)
      )
  })
)

/**
 * `REPRISE_FLEET_NAME`: the fleet's name, not blank; `name` is its default when given (the CLI gives
 * {@link FleetAddress.defaultName}).
 *
 * @since 0.1.0
 * @category config
 */
export const nameConfig = (name?: string | undefined): Config.Config<string> => {
  const config = Config.string(nameVariable).pipe(
    Config.validate({ message: "must not be empty", validation: (name) => name.trim() !== "" })
  )
  return name === undefined ? config : Config.withDefault(config, name)
}

/**
 * `REPRISE_FLEET_TIMEOUT`: how long one Redis call may take, in whole milliseconds ≥ 1; default 200.
 *
 * @since 0.1.0
 * @category config
 */
export const timeoutConfig: Config.Config<Duration.Duration> = Range.integer(timeoutVariable).pipe(
  Config.validate(Range.atLeastOneMillisecond),
  Config.map(Duration.millis),
  Config.withDefault(defaultTimeout)
)

/**
 * The options of a fleet: {@link urlConfig}, {@link nameConfig} (with `name` as its default, when given),
 * `RetryBudget.config`, {@link timeoutConfig} and the circuits' `Circuit.config`.
 *
 * @since 0.1.0
 * @category config
 */
export const config = (name?: string | undefined): Config.Config<Options> =>
  Config.all({
    url: urlConfig,
    name: nameConfig(name),
    budget: RetryBudget.config,
    timeout: timeoutConfig,
    circuit: Circuit.config
  })
