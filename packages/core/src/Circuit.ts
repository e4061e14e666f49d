/**
 * `Circuit` is the breaker of each route of a plan (see {@link Routes}): it keeps a route that keeps failing from being
 * sent to, for a while, by every reply.
 *
 * - **Closed**: sends go through. Consecutive transient failures are counted; a send that succeeds, or that the server
 *   answered with a rejection of the request, resets the count. At `failureThreshold` the circuit opens.
 * - **Open**: the route is skipped without a send until `coolDown` has passed since it opened.
 * - **Half-open**: after the cool-down one send goes through as the probe; every other send is refused while it runs.
 *   The probe's success closes the circuit, its transient failure opens it again for another cool-down. A probe whose
 *   reply ends without reporting (interrupted, or ended by a hook or the budget) gives its lease back (`released`), so
 *   the next send may probe at once; one whose process died holds the circuit for one cool-down at most.
 *
 * A circuit is named by its route's key (protocol, endpoint and model; never a credential). The default service keeps
 * the circuits of the process in memory, on the `Clock`; `@reprise/fleet` provides one shared by every process on the
 * same Redis, on the server's clock, that falls back to this one while Redis is unreachable.
 *
 * @since 0.1.0
 */
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Range from "./Range.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /** Consecutive transient failures that open the circuit: a whole number, at least 1. Default 3. */
  readonly failureThreshold: number
  /** How long an open circuit refuses sends before it lets one probe through. Default 30 s. */
  readonly coolDown: Duration.Duration
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultSettings: Settings = { failureThreshold: 3, coolDown: Duration.seconds(30) }

/**
 * @since 0.1.0
 * @category models
 */
export type State = "closed" | "open" | "half-open"

/**
 * What the circuit says of a send about to be made.
 *
 * @since 0.1.0
 * @category models
 */
export type Admission = Data.TaggedEnum<{
  /** The circuit is closed: send. */
  Closed: {}
  /**
   * The cool-down is over and this send is the probe: send, and report its outcome. `lease` names this probe's lease
   * (the circuit's time when it lapses), for `released`.
   */
  Probe: { readonly lease?: number | undefined }
  /** The circuit is open (or its probe is running): skip the route; `retryIn` is left of the cool-down. */
  Open: { readonly retryIn: Duration.Duration }
}>

/**
 * @since 0.1.0
 * @category constructors
 */
export const Admission = Data.taggedEnum<Admission>()

/**
 * The circuits of a process, or of a fleet.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** Whether a send to the route may be made now; a `Probe` is handed to one caller per cool-down. */
  readonly admit: (key: string) => Effect.Effect<Admission>
  /** A send that completed, or that the server answered with a rejection of the request: the circuit closes. */
  readonly succeeded: (key: string) => Effect.Effect<void>
  /** A transient failure of a send: counted, and the state after it returned (`open` once the route is skipped). */
  readonly failed: (key: string) => Effect.Effect<State>
  /** The state of the route's circuit now (for status lines and tests). */
  readonly state: (key: string) => Effect.Effect<State>
  /**
   * The probe `lease` handed out by `admit` reported nothing and never will: it is given back, and the circuit is
   * half-open again (a later probe's lease is left alone). Optional: a service without it lets a lease lapse.
   */
  readonly released?: ((key: string, lease: number | undefined) => Effect.Effect<void>) | undefined
}

/**
 * The settings of the circuits {@link Circuit}'s default and {@link layerMemory} make.
 *
 * @since 0.1.0
 * @category settings
 */
export class CircuitSettings extends Context.Reference<CircuitSettings>()("@reprise/core/CircuitSettings", {
  defaultValue: (): Settings => defaultSettings
}) {}

interface Entry {
  failures: number
  /** `Clock` millis when the open circuit lets a probe through; undefined while closed. */
  openUntil: number | undefined
  /** `Clock` millis until which the probe handed out holds the circuit; undefined when none is out. */
  probeUntil: number | undefined
}

/**
 * Circuits kept in memory, on the `Clock`. Throws a `RangeError` for invalid settings.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeMemory = (settings: Settings = defaultSettings): Service => {
  const { coolDown, failureThreshold } = validateSettings(settings)
  const coolDownMillis = Duration.toMillis(coolDown)
  const entries = new Map<string, Entry>()
  const entry = (key: string): Entry => {
    let found = entries.get(key)
    if (found === undefined) {
      found = { failures: 0, openUntil: undefined, probeUntil: undefined }
      entries.set(key, found)
    }
    return found
  }
  const stateAt = (found: Entry | undefined, now: number): State =>
    found === undefined || found.openUntil === undefined
      ? "closed"
      : now < found.openUntil || (found.probeUntil !== undefined && now < found.probeUntil)
      ? "open"
      : "half-open"
  return {
    admit: (key) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const found = entries.get(key)
        if (found === undefined || found.openUntil === undefined) return Admission.Closed()
        if (now < found.openUntil) return Admission.Open({ retryIn: Duration.millis(found.openUntil - now) })
        if (found.probeUntil !== undefined && now < found.probeUntil) {
          return Admission.Open({ retryIn: Duration.millis(found.probeUntil - now) })
        }
        found.probeUntil = now + coolDownMillis
        return Admission.Probe({ lease: found.probeUntil })
      }),
    succeeded: (key) =>
      Effect.sync(() => {
        entries.delete(key)
      }),
    failed: (key) =>
      Effect.map(Clock.currentTimeMillis, (now) => {
        const found = entry(key)
        found.failures++
        // a failed probe, or the threshold reached: open for a cool-down from now
        if (found.openUntil !== undefined || found.failures >= failureThreshold) {
          found.openUntil = now + coolDownMillis
          found.probeUntil = undefined
        }
        return stateAt(found, now)
      }),
    state: (key) => Effect.map(Clock.currentTimeMillis, (now) => stateAt(entries.get(key), now)),
    released: (key, lease) =>
      Effect.sync(() => {
        const found = entries.get(key)
        if (
          found !== undefined && found.probeUntil !== undefined && (lease === undefined || found.probeUntil === lease)
        ) {
          found.probeUntil = undefined
        }
      })
  }
}

/**
 * The circuits recovery asks before each send on a route of a plan: the process's own, in memory, with the
 * {@link CircuitSettings} in force when it is first used, unless a layer provides others.
 *
 * @since 0.1.0
 * @category tags
 */
export class Circuit extends Context.Reference<Circuit>()("@reprise/core/Circuit", {
  defaultValue: (): Service => makeMemory(defaultSettings)
}) {}

/**
 * Circuits of their own, in memory (the settings are also provided as {@link CircuitSettings}).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerMemory = (settings: Partial<Settings> = {}): Layer.Layer<never> => {
  const resolved = validateSettings({ ...defaultSettings, ...settings })
  return Layer.mergeAll(
    Layer.succeed(Circuit, makeMemory(resolved)),
    Layer.succeed(CircuitSettings, resolved)
  )
}

/**
 * Throws a `RangeError` unless the threshold is a whole number of at least 1 and the cool-down is finite and not
 * negative.
 *
 * @since 0.1.0
 * @category settings
 */
export const validateSettings = (settings: Settings): Settings => {
  if (!Number.isInteger(settings.failureThreshold) || settings.failureThreshold < 1) {
    throw new RangeError(`failureThreshold must be a whole number >= 1, got ${settings.failureThreshold}`)
  }
  if (!Duration.isFinite(settings.coolDown)) throw new RangeError("coolDown must be finite")
  return settings
}

/**
 * The environment variable of {@link failureThresholdConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const failureThresholdVariable = "REPRISE_CIRCUIT_THRESHOLD"

/**
 * The environment variable of {@link coolDownConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const coolDownVariable = "REPRISE_CIRCUIT_COOLDOWN"

/**
 * `REPRISE_CIRCUIT_THRESHOLD`: a whole number, at least 1; default 3.
 *
 * @since 0.1.0
 * @category config
 */
export const failureThresholdConfig: Config.Config<number> = Range.integer(failureThresholdVariable).pipe(
  Config.validate(Range.atLeastOne),
  Config.withDefault(defaultSettings.failureThreshold)
)

/**
 * `REPRISE_CIRCUIT_COOLDOWN`: whole milliseconds, at least 0; default 30000.
 *
 * @since 0.1.0
 * @category config
 */
export const coolDownConfig: Config.Config<Duration.Duration> = Range.integer(coolDownVariable).pipe(
  Config.validate(Range.nonNegativeMilliseconds),
  Config.map(Duration.millis),
  Config.withDefault(defaultSettings.coolDown)
)

/**
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Settings> = Config.all({
  failureThreshold: failureThresholdConfig,
  coolDown: coolDownConfig
})

/**
 * Circuits in memory with their settings from the environment (see {@link config}).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: Layer.Layer<never, ConfigError.ConfigError> = Layer.unwrapEffect(
  Effect.map(config, (settings) => layerMemory(settings))
)
