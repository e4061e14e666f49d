/**
 * `RedisFleet` is the `FleetLimits` of many processes, over one Redis server (`ioredis`): every recovery scope of
 * every process that names the same fleet shares
 *
 * - one **retry budget** ({@link RetryBudget}): first attempts deposit, replays withdraw, and a replay the fleet
 *   cannot afford ends recovery at once with `RecoveryExhausted{reason: "FleetBudget"}`;
 * - one **pause**: a `Retry-After` (or `retry-after-ms`) seen by any process pauses the fleet until it ends, and
 *   every process waits it out before each send, within its own deadline;
 * - one **circuit per route** (core's `Circuit`): the failures of every process count towards opening it, an open
 *   circuit is skipped by every process, and after its cool-down exactly one send of the fleet is its probe.
 *
 * Each operation is one Lua script run atomically on the server and timed by the server's clock; the keys expire,
 * so an idle fleet leaves none. The per-reply `Budget` (attempts, deadline) applies on top.
 *
 * **Circuits.** {@link layer} provides `Circuit` and `CircuitSettings` with the fleet's limits. A route's circuit is
 * one hash (`FleetAddress.circuitKey`: the fleet's hash tag and a hash of the route's key) holding its failures, the
 * server time its cool-down ends and its probe's lease; it expires its cool-down plus one minute after its last
 * write, so consecutive failures further apart than that do not add up, and a circuit nobody asks about is forgotten
 * (closed). The semantics are `Circuit.makeMemory`'s. Each process also keeps its own circuits in memory, told of
 * every outcome it reports: while Redis does not answer, they answer instead (docs/fleet.md, "Circuits").
 *
 * **Following the pause.** A second connection subscribes to the fleet's channel, where every pushback announces the
 * pause it sets. Once subscribed and synced by one read, the process answers `paused` and `deposit` from its copy: a
 * send waits on Redis for nothing, and a first attempt's credit is sent without awaiting it. Without the
 * subscription (not yet made, lost, refused by an ACL) each call asks Redis (docs/fleet.md, "Following the
 * pause").
 *
 * **Faults.** Redis unreachable, slow, silent or restarted never hangs a generation: every call has a short
 * `timeout` (default 200 ms), building waits at most `connectTimeout`, every such wait is interruptible (so bounded
 * in an uninterruptible region too), the client does not queue commands while disconnected, and a connection that
 * reads more than 1 MiB of one reply is dropped. On a failure the process goes on with its local Budget alone
 * (replays allowed, no pause) and its own circuits, reports it once (`FleetUnavailable`), tries Redis again every
 * `retryInterval` (default 1 s) or as soon as the client has reconnected, and reports `FleetRestored` when a call
 * succeeds again.
 *
 * ```ts
 * const fleet = RedisFleet.layer({ url: "redis://127.0.0.1:6379/0", name: "batch-2026-10" })
 * const reply = Recovery.generate(request).pipe(Effect.provide(fleet))
 * ```
 *
 * @since 0.1.0
 */
import * as Circuit from "@reprise/core/Circuit"
import * as FleetLimits from "@reprise/core/FleetLimits"
import * as Clock from "effect/Clock"
import type * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Scope from "effect/Scope"
import * as FleetAddress from "./FleetAddress.js"
import * as FleetOptions from "./FleetOptions.js"
import * as Circuits from "./internal/circuit.js"
import * as Connection from "./internal/connection.js"
import * as Health from "./internal/health.js"
import * as Limits from "./internal/limits.js"
import * as Pause from "./internal/pause.js"
import * as PauseFollower from "./internal/pauseFollower.js"
import * as RetryBudget from "./RetryBudget.js"

/**
 * The options of {@link make} and {@link layer}, declared with their `Config` in `FleetOptions`.
 *
 * @since 0.1.0
 * @category models
 */
export type Options = FleetOptions.Options

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultTimeout: Duration.Duration = FleetOptions.defaultTimeout

const positive = (name: string, input: Duration.DurationInput | undefined, fallback: Duration.Duration) => {
  const duration = input === undefined ? fallback : Duration.decode(input)
  if (!Duration.isFinite(duration) || Duration.lessThanOrEqualTo(duration, Duration.zero)) {
    throw new RangeError(`${name} must be a positive, finite duration`)
  }
  return duration
}

/**
 * What one connection to a fleet gives: its limits, its circuits, and the settings of those circuits.
 *
 * @since 0.1.0
 * @category models
 */
export interface Fleet {
  readonly limits: FleetLimits.Service
  /** The circuits shared by every process of the fleet (see the module's "Circuits"). */
  readonly circuit: Circuit.Service
  readonly circuitSettings: Circuit.Settings
}

/**
 * Connects to Redis and returns the fleet's limits and circuits, over one connection (and its subscriber); it closes
 * with the scope. Building never fails: without Redis the process starts on its local Budget and its own circuits
 * (see the module's "Faults"). The circuits' settings are `options.circuit` over the `CircuitSettings` in context.
 * Throws a `RangeError` for invalid options.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeFleet = (options: Options): Effect.Effect<Fleet, never, Scope.Scope> =>
  Effect.gen(function*() {
    const problem = FleetAddress.urlProblem(options.url)
    if (problem !== undefined) {
      throw new RangeError(`the fleet URL ${problem}, got ${FleetAddress.describeUrl(options.url)}`)
    }
    if (options.name.length === 0) throw new RangeError("the fleet name must not be empty")
    const settings = RetryBudget.validateSettings({ ...RetryBudget.defaultSettings, ...options.budget })
    const circuitSettings = Circuit.validateSettings({ ...(yield* Circuit.CircuitSettings), ...options.circuit })
    const timeout = positive("timeout", options.timeout, defaultTimeout)
    const connectTimeout = positive("connectTimeout", options.connectTimeout, Duration.seconds(1))
    const retryInterval = positive("retryInterval", options.retryInterval, Duration.seconds(1))
    const maxPause = Pause.maxPause(options.maxPause)
    const keys = FleetAddress.keys(options.name)
    const channel = FleetAddress.pauseChannel(options.name)

    const buildStarted = yield* Clock.currentTimeMillis
    const connection = yield* Connection.make(options.url, connectTimeout)
    const health = yield* Health.make(connection, { timeout, retryInterval })
    const pause = yield* PauseFollower.make(connection, health, { keys, channel, timeout, retryInterval, maxPause })
    // With Redis there, the layer is ready once it follows the pause (or failed to), so the first send need not ask;
    // the wait shares `connectTimeout` with the connection, so building never takes longer than `connectTimeout`.
    if (connection.unreachable === undefined) {
      const left = Duration.toMillis(connectTimeout) - ((yield* Clock.currentTimeMillis) - buildStarted)
      if (left > 0) yield* Effect.interruptible(pause.synced.pipe(Effect.timeout(left), Effect.ignore))
    }

    const limits = Limits.make(health, pause, { keys, channel, settings, maxPause })
    const circuit = Circuits.make({
      settings: circuitSettings,
      keyOf: (route) => FleetAddress.circuitKey(options.name, route),
      call: health.call
    })
    return { limits, circuit, circuitSettings }
  })

/**
 * Connects to Redis and returns the fleet's `FleetLimits` ({@link makeFleet}'s limits).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<FleetLimits.Service, never, Scope.Scope> =>
  Effect.map(makeFleet(options), (fleet) => fleet.limits)

/**
 * Connects to Redis and returns the fleet's circuits ({@link makeFleet}'s circuit), over a connection of their own.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeCircuit = (options: Options): Effect.Effect<Circuit.Service, never, Scope.Scope> =>
  Effect.map(makeFleet(options), (fleet) => fleet.circuit)

/**
 * Provides `FleetLimits`, `Circuit` and `CircuitSettings` with the Redis fleet of `options` ({@link makeFleet}),
 * connected for the layer's lifetime: every process of the fleet shares its limits and its routes' circuits.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<never> =>
  Layer.scopedContext(
    Effect.map(makeFleet(options), (fleet) =>
      Context.make(FleetLimits.FleetLimits, fleet.limits).pipe(
        Context.add(Circuit.Circuit, fleet.circuit),
        Context.add(Circuit.CircuitSettings, fleet.circuitSettings)
      ))
  )

/**
 * The options of {@link layer} from `REPRISE_FLEET_URL` (required), `REPRISE_FLEET_NAME` (default: `name`, when
 * given), `REPRISE_FLEET_TIMEOUT` (ms, default 200), the budget's `REPRISE_FLEET_RATIO`, `REPRISE_FLEET_FLOOR`,
 * `REPRISE_FLEET_WINDOW`, and the circuits' `REPRISE_CIRCUIT_THRESHOLD`, `REPRISE_CIRCUIT_COOLDOWN`:
 * `FleetOptions.config`, where each is declared or named.
 *
 * @since 0.1.0
 * @category config
 */
export const config: (name?: string | undefined) => Config.Config<Options> = FleetOptions.config

/**
 * {@link layer} with the options of {@link config}; a bad value fails with a `ConfigError` naming the variable.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (name?: string | undefined): Layer.Layer<never, ConfigError.ConfigError> =>
  Layer.unwrapEffect(Effect.map(config(name), layer))
