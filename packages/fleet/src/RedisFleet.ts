/**
 * `RedisFleet` is the `FleetLimits` of many processes, over one Redis server (`ioredis`): every recovery scope of
 * every process that names the same fleet shares
 *
 * - one **retry budget** ({@link RetryBudget}): first attempts deposit, replays withdraw, and a replay the fleet
 *   cannot afford ends recovery at once with `RecoveryExhausted{reason: "FleetBudget"}`;
 * - one **pause**: a `Retry-After` (or `retry-after-ms`) seen by any process pauses the fleet until it ends, and
 *   every process waits it out before each send, within its own deadline.
 *
 * Each operation is one Lua script run atomically on the server and timed by the server's clock; the keys expire,
 * so an idle fleet leaves none. The per-reply `Budget` (attempts, deadline) applies on top.
 *
 * **Faults.** Redis unreachable, slow or restarted never hangs a generation: every call has a short `timeout`
 * (default 200 ms) and the client does not queue commands while disconnected. On a failure the process goes on with
 * its local Budget alone (replays allowed, no pause), reports it once (`FleetUnavailable`), tries Redis again every
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
import * as FleetLimits from "@reprise/core/FleetLimits"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Ref from "effect/Ref"
import type * as Scope from "effect/Scope"
import { Redis } from "ioredis"
import * as FleetAddress from "./FleetAddress.js"
import * as Pause from "./internal/pause.js"
import * as Scripts from "./internal/scripts.js"
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
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultTimeout: Duration.Duration = Duration.millis(200)

const positive = (name: string, input: Duration.DurationInput | undefined, fallback: Duration.Duration) => {
  const duration = input === undefined ? fallback : Duration.decode(input)
  if (!Duration.isFinite(duration) || Duration.lessThanOrEqualTo(duration, Duration.zero)) {
    throw new RangeError(`${name} must be a positive, finite duration`)
  }
  return duration
}

/** What the process knows of the fleet's store. */
interface Health {
  readonly up: boolean
  /** `FleetUnavailable` was sent for this outage (so its end is announced too). */
  readonly reported: boolean
  readonly detail: string
  /** While down: `Clock.currentTimeMillis` before which no call is tried, unless the client reconnected since. */
  readonly retryAt: number
  /** The client's count of connections when the outage was noticed. */
  readonly readyCount: number
}

class Unavailable {
  readonly _tag = "Unavailable"
  constructor(readonly detail: string) {}
}

const errorText = (u: unknown): string =>
  Predicate.isObject(u) && "message" in u && typeof u.message === "string" ? u.message : String(u)

const pauseOf = (reply: unknown): Option.Option<FleetLimits.Pause> | undefined => {
  if (!Array.isArray(reply) || typeof reply[0] !== "number") return undefined
  const status = Number(reply[1])
  return FleetLimits.pause(Duration.millis(reply[0]), Number.isInteger(status) && status > 0 ? status : undefined)
}

const withdrawalOf = (reply: unknown): FleetLimits.Withdrawal | undefined => {
  if (!Array.isArray(reply) || typeof reply[0] !== "number" || typeof reply[1] !== "number") return undefined
  const allowance = Number(reply[2])
  return Number.isFinite(allowance) ? { allowed: reply[0] === 1, replays: reply[1], allowance } : undefined
}

/**
 * Connects to Redis and returns the fleet's `FleetLimits`; the connection closes with the scope. Building never
 * fails: without Redis the process starts on its local Budget (see the module's "Faults").
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<FleetLimits.Service, never, Scope.Scope> =>
  Effect.gen(function*() {
    const problem = FleetAddress.urlProblem(options.url)
    if (problem !== undefined) {
      throw new RangeError(`the fleet URL ${problem}, got ${FleetAddress.describeUrl(options.url)}`)
    }
    if (options.name.length === 0) throw new RangeError("the fleet name must not be empty")
    const settings = RetryBudget.validateSettings({ ...RetryBudget.defaultSettings, ...options.budget })
    const timeout = positive("timeout", options.timeout, defaultTimeout)
    const connectTimeout = positive("connectTimeout", options.connectTimeout, Duration.seconds(1))
    const retryInterval = positive("retryInterval", options.retryInterval, Duration.seconds(1))
    const maxPause = Pause.maxPause(options.maxPause)
    const window = RetryBudget.windowSeconds(settings)
    const ttl = (window + 1) * 1000
    const { budget, pause } = FleetAddress.keys(options.name)
    const where = FleetAddress.describeUrl(options.url)

    // The client's own state, kept up to date by its events.
    const link = { ready: 0, lastError: undefined as string | undefined }
    const client = yield* Effect.acquireRelease(
      Effect.sync(() =>
        new Redis(options.url, {
          lazyConnect: true,
          // fail at once while disconnected, instead of queueing behind a reconnection
          enableOfflineQueue: false,
          maxRetriesPerRequest: 0,
          // a command cut off by a lost connection is not sent again later: its timeout already decided for it
          autoResendUnfulfilledCommands: false,
          connectTimeout: Duration.toMillis(connectTimeout),
          // at release, destroy the socket at once: the default (2 s) holds the process when the socket already
          // failed, as it has while the server is unreachable, since it never closes a second time
          disconnectTimeout: 0,
          retryStrategy: (times) => Math.min(100 * times, 1000),
          connectionName: "reprise-fleet"
        })
      ),
      (client) => Effect.sync(() => client.disconnect())
    )
    client.on("error", (error: unknown) => {
      link.lastError = errorText(error)
    })
    client.on("ready", () => {
      link.ready++
      link.lastError = undefined
    })
    const connected = yield* Effect.async<boolean>((resume) => {
      const ready = () => resume(Effect.succeed(true))
      const failed = () => resume(Effect.succeed(false))
      client.once("ready", ready)
      client.once("error", failed)
      client.connect().catch(() => undefined)
      return Effect.sync(() => {
        client.off("ready", ready)
        client.off("error", failed)
      })
    }).pipe(Effect.timeoutTo({ duration: connectTimeout, onSuccess: (ok) => ok, onTimeout: () => false }))

    const health = yield* Ref.make<Health>({
      up: connected,
      reported: false,
      detail: connected
        ? ""
        : `${where} is not reachable (${link.lastError ?? `no connection within ${Duration.format(connectTimeout)}`})`,
      retryAt: 0,
      readyCount: link.ready
    })
    const N = RecoveryNotifications.Notification

    const reportOutage = Effect.flatMap(
      Ref.modify(
        health,
        (h): [string | undefined, Health] => h.up || h.reported ? [undefined, h] : [h.detail, { ...h, reported: true }]
      ),
      (detail) => detail === undefined ? Effect.void : RecoveryNotifications.notify(N.FleetUnavailable({ detail }))
    )

    const evaluate = (script: Scripts.Script, args: ReadonlyArray<string | number>) => {
      const names = script.keys.map((key) => key === "budget" ? budget : pause)
      const attempt = (command: "evalsha" | "eval") =>
        Effect.tryPromise({
          try: () =>
            command === "evalsha"
              ? client.evalsha(script.sha, names.length, ...names, ...args)
              : client.eval(script.source, names.length, ...names, ...args),
          catch: (error) => error
        })
      // A restarted server has an empty script cache.
      return attempt("evalsha").pipe(
        Effect.catchIf((error) => errorText(error).startsWith("NOSCRIPT"), () => attempt("eval"))
      )
    }

    /**
     * Runs a script within the timeout and decodes its reply; on any failure, answers `fallback` and marks the
     * fleet unavailable.
     */
    const call = <A>(
      script: Scripts.Script,
      args: ReadonlyArray<string | number>,
      decode: (reply: unknown) => A | undefined,
      fallback: A
    ): Effect.Effect<A> =>
      Effect.gen(function*() {
        const before = yield* Ref.get(health)
        if (!before.up && link.ready === before.readyCount && (yield* Clock.currentTimeMillis) < before.retryAt) {
          yield* reportOutage
          return fallback
        }
        const result = yield* evaluate(script, args).pipe(
          Effect.mapError((error) =>
            new Unavailable(
              client.status === "ready"
                ? `${where}: ${errorText(error)}`
                : `${where} is not connected${link.lastError === undefined ? "" : ` (${link.lastError})`}`
            )
          ),
          Effect.flatMap((reply) => {
            const value = decode(reply)
            return value === undefined
              ? Effect.fail(new Unavailable(`${where}: unexpected reply to the ${script.name} script`))
              : Effect.succeed(value)
          }),
          Effect.timeoutFail({
            duration: timeout,
            onTimeout: () => new Unavailable(`${where} did not answer within ${Duration.format(timeout)}`)
          }),
          Effect.either
        )
        if (Either.isRight(result)) {
          const restored = yield* Ref.modify(health, (h): [boolean, Health] => [
            !h.up && h.reported,
            h.up ? h : { ...h, up: true, reported: false, detail: "" }
          ])
          if (restored) yield* RecoveryNotifications.notify(N.FleetRestored())
          return result.right
        }
        const now = yield* Clock.currentTimeMillis
        yield* Ref.update(health, (h) => ({
          up: false,
          reported: h.up ? false : h.reported,
          detail: h.up || h.detail === "" ? result.left.detail : h.detail,
          retryAt: now + Duration.toMillis(retryInterval),
          readyCount: link.ready
        }))
        yield* reportOutage
        return fallback
      })

    const noPause = Option.none<FleetLimits.Pause>()
    const local: FleetLimits.Withdrawal = { allowed: true, replays: 0, allowance: Infinity }
    return {
      deposit: call(Scripts.deposit, [window, ttl], pauseOf, noPause),
      withdraw: call(Scripts.withdraw, [window, ttl, settings.ratio, settings.floor], withdrawalOf, local),
      paused: call(Scripts.paused, [], pauseOf, noPause),
      pushback: ({ delay, status }) => {
        const millis = Pause.pauseMillis(delay, maxPause)
        return millis === 0 ? Effect.void : Effect.asVoid(
          call(Scripts.pushback, [millis, status ?? ""], (reply) => typeof reply === "number" ? reply : undefined, 0)
        )
      }
    } satisfies FleetLimits.Service
  })

/**
 * Provides `FleetLimits` with the Redis fleet of `options`, connected for the layer's lifetime.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<never> => Layer.scoped(FleetLimits.FleetLimits, make(options))

/**
 * `REPRISE_FLEET_URL` (required), `REPRISE_FLEET_NAME` (default: `name`, when given), `REPRISE_FLEET_TIMEOUT` (ms,
 * default 200) and the budget's `REPRISE_FLEET_RATIO`, `REPRISE_FLEET_FLOOR`, `REPRISE_FLEET_WINDOW`
 * ({@link RetryBudget.config}).
 *
 * @since 0.1.0
 * @category config
 */
export const config = (name?: string | undefined): Config.Config<Options> =>
  Config.all({
    url: Config.string("REPRISE_FLEET_URL").pipe(
      Config.validate({
        message: "must be a Redis URL: redis://HOST:PORT/DB",
        validation: (url) => FleetAddress.urlProblem(url) === undefined
      })
    ),
    name: name === undefined
      ? Config.nonEmptyString("REPRISE_FLEET_NAME")
      : Config.nonEmptyString("REPRISE_FLEET_NAME").pipe(Config.withDefault(name)),
    budget: RetryBudget.config,
    timeout: Config.integer("REPRISE_FLEET_TIMEOUT").pipe(
      Config.validate({ message: "must be a whole number of milliseconds >= 1", validation: (n) => n >= 1 }),
      Config.map(Duration.millis),
      Config.withDefault(defaultTimeout)
    )
  })

/**
 * {@link layer} with the options of {@link config}; a bad value fails with a `ConfigError` naming the variable.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (name?: string | undefined): Layer.Layer<never, ConfigError.ConfigError> =>
  Layer.unwrapEffect(Effect.map(config(name), layer))
