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
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Ref from "effect/Ref"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import { Redis } from "ioredis"
import * as Crypto from "node:crypto"
import * as FleetAddress from "./FleetAddress.js"
import * as FleetOptions from "./FleetOptions.js"
import * as Circuits from "./internal/circuit.js"
import * as Pause from "./internal/pause.js"
import * as PauseCopy from "./internal/pauseCopy.js"
import * as ReadBound from "./internal/readBound.js"
import * as Scripts from "./internal/scripts.js"
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

const count = (n: unknown): n is number => typeof n === "number" && Number.isFinite(n) && n >= 0

const withdrawalOf = (reply: unknown): FleetLimits.Withdrawal | undefined => {
  if (!Array.isArray(reply) || (reply[0] !== 0 && reply[0] !== 1) || !count(reply[1])) return undefined
  const allowance = Number(reply[2])
  return count(allowance) ? { allowed: reply[0] === 1, replays: reply[1], allowance } : undefined
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
    const window = RetryBudget.windowSeconds(settings)
    const ttl = (window + 1) * 1000
    const { budget, pause } = FleetAddress.keys(options.name)
    const channel = FleetAddress.pauseChannel(options.name)
    const where = FleetAddress.describeUrl(options.url)
    // The followed pause is timed by this clock, read where no fiber is (the subscriber's messages).
    const clock = yield* Effect.clock
    // The subscriber's check runs in the layer's scope: its end interrupts it.
    const scope = yield* Effect.scope

    // The client's own state, kept up to date by its events.
    const link = { ready: 0, lastError: undefined as string | undefined }
    // Acquired uninterruptibly, as resources are, and never blocks: `lazyConnect` makes no connection here, and both
    // `disconnect`s destroy their socket at once. The waits on the network come after, each interruptible and bounded.
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
    const clientReads = ReadBound.guard(client, (detail) => {
      link.lastError = detail
    })
    const buildStarted = yield* Clock.currentTimeMillis
    // Interruptible, whatever the layer is built in: the CLI builds it in an uninterruptible region, where a timeout
    // could not end a wait that is not (a server that accepts the connection and never answers would hold it, and
    // Ctrl-C with it, for good).
    const connected = yield* Effect.interruptible(
      Effect.async<boolean>((resume) => {
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
    )

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

    /** The fleet's keys a script of the budget or the pause is given (a circuit's script is given its route's). */
    const fleetKeys = (script: Scripts.Script) => script.keys.map((key) => key === "budget" ? budget : pause)
    /**
     * Sends the script on the keys `names` at once (EVALSHA; EVAL when the server lost its script cache, as a
     * restarted one has).
     */
    const run = (
      script: Scripts.Script,
      args: ReadonlyArray<string | number>,
      names: ReadonlyArray<string> = fleetKeys(script)
    ): Promise<unknown> => {
      const sent = client.evalsha(script.sha, names.length, ...names, ...args).catch((error: unknown) =>
        errorText(error).startsWith("NOSCRIPT")
          ? client.eval(script.source, names.length, ...names, ...args)
          : Promise.reject(error)
      )
      sent.then(clientReads.completed, clientReads.completed)
      return sent
    }

    // The pause as this process follows it: a subscriber connection listens on the fleet's channel, where every
    // pushback that sets a pause announces it. Once a pause was read from Redis after the subscription began
    // (`following`), the copy here misses nothing, and `deposit` and `paused` answer from it without a round trip
    // (docs/fleet.md, "Following the pause"). The subscription's loss (`epoch`) stops following until it is back.
    // The copy is learnt from the pause key alone (an announcement asks for a read of it; see `PauseCopy`), and the
    // pause this process's own pushback set ends for it with its own wait: it is not waited out a second time.
    const follow = {
      subscribed: false,
      following: false,
      epoch: 0,
      /** The read of the key an announcement asked for, until it is answered. */
      checking: undefined as Promise<void> | undefined
    }
    const noPause = Option.none<FleetLimits.Pause>()
    // this process's announcements carry it, and are not read again: the process knows its own pause
    const announcer = Crypto.randomBytes(6).toString("hex")
    // monotonic: a step of the wall clock neither ends nor lengthens a pause
    const nowMillis = () => Number(clock.unsafeCurrentTimeNanos()) / 1e6
    const maxPauseMillis = Duration.toMillis(maxPause)
    const copy = PauseCopy.make(nowMillis)
    const localPause = (): Option.Option<FleetLimits.Pause> => {
      const { left, status } = copy.current()
      return left === 0 ? noPause : FleetLimits.pause(Duration.millis(left), status)
    }
    /**
     * Decodes a pause read from Redis (by a call sent at `sentAt`) and learns it; read by a call sent while subscribed
     * (`epoch` then, or -1), it makes the copy whole. Answers the pause in force as the copy has it.
     */
    const pauseRead =
      (epoch: number, sentAt: number) => (reply: unknown): Option.Option<FleetLimits.Pause> | undefined => {
        const read = PauseCopy.decode(reply, maxPauseMillis)
        if (read === undefined) return undefined
        copy.observe(sentAt, read)
        if (epoch === follow.epoch && follow.subscribed) follow.following = true
        return localPause()
      }
    const epochNow = () => follow.subscribed ? follow.epoch : -1

    /** Why a script's call failed, in words that name the server and never its credentials. */
    const unavailable = (error: unknown) =>
      new Unavailable(
        client.status === "ready"
          ? `${where}: ${errorText(error)}`
          : `${where} is not connected${link.lastError === undefined ? "" : ` (${link.lastError})`}`
      )
    /** The store found unavailable at `now` (`Clock`, ms): tried again after `retryInterval`. */
    const down = (h: Health, detail: string, now: number): Health => ({
      up: false,
      reported: h.up ? false : h.reported,
      detail: h.up || h.detail === "" ? detail : h.detail,
      retryAt: now + Duration.toMillis(retryInterval),
      readyCount: link.ready
    })

    /**
     * Runs a script on `keys` within the timeout and decodes its reply; on any failure, answers with `fallback` and
     * marks the fleet unavailable.
     */
    const callOn: Circuits.Call = <A>(
      script: Scripts.Script,
      keys: ReadonlyArray<string>,
      args: ReadonlyArray<string | number>,
      decode: (reply: unknown) => A | undefined,
      fallback: Effect.Effect<A>
    ): Effect.Effect<A> =>
      Effect.gen(function*() {
        const before = yield* Ref.get(health)
        if (!before.up && link.ready === before.readyCount && (yield* Clock.currentTimeMillis) < before.retryAt) {
          yield* reportOutage
          return yield* fallback
        }
        // interruptible, so that the timeout bounds it in an uninterruptible region too (see the connection's wait)
        const result = yield* Effect.interruptible(
          Effect.tryPromise({ try: () => run(script, args, keys), catch: unavailable }).pipe(
            Effect.flatMap((reply) => {
              const value = decode(reply)
              return value === undefined
                ? Effect.fail(new Unavailable(`${where}: unexpected reply to the ${script.name} script`))
                : Effect.succeed(value)
            }),
            Effect.timeoutFail({
              duration: timeout,
              onTimeout: () => new Unavailable(`${where} did not answer within ${Duration.format(timeout)}`)
            })
          )
        ).pipe(Effect.either)
        if (Either.isRight(result)) {
          const restored = yield* Ref.modify(health, (h): [boolean, Health] => [
            !h.up && h.reported,
            h.up ? h : { ...h, up: true, reported: false, detail: "" }
          ])
          if (restored) yield* RecoveryNotifications.notify(N.FleetRestored())
          return result.right
        }
        const now = yield* Clock.currentTimeMillis
        yield* Ref.update(health, (h) => down(h, result.left.detail, now))
        yield* reportOutage
        return yield* fallback
      })
    /** {@link callOn} the fleet's own keys (the script's), answering `fallback` on any failure. */
    const call = <A>(
      script: Scripts.Script,
      args: ReadonlyArray<string | number>,
      decode: (reply: unknown) => A | undefined,
      fallback: A
    ): Effect.Effect<A> =>
      callOn(
        script,
        fleetKeys(script),
        args,
        decode,
        Effect.succeed(fallback)
      )

    /** A background call failed: the store is unavailable from now on. */
    const lost = (detail: string) =>
      Effect.runSync(Ref.update(health, (h) => down(h, detail, clock.unsafeCurrentTimeMillis())))
    // When each background call still unanswered was sent (`nowMillis`), oldest first: one connection answers in
    // order. One unanswered for longer than `timeout` is what a call's timeout is: the store is then unavailable, and
    // calls ask it again (within the retry interval, not at all), so a stalled connection is found and reported as
    // it was when every deposit waited for its answer.
    const unanswered: Array<number> = []
    const stalled = () => unanswered.length > 0 && nowMillis() - unanswered[0] > Duration.toMillis(timeout)
    /** Sends a script answered in the background, with no fiber of its own: its pause is learnt. */
    const background = (script: Scripts.Script, args: ReadonlyArray<string | number>): Promise<void> => {
      const read = pauseRead(epochNow(), nowMillis())
      unanswered.push(nowMillis())
      return run(script, args).then(
        (reply) => {
          unanswered.shift()
          if (read(reply) === undefined) lost(`${where}: unexpected reply to the ${script.name} script`)
        },
        (error) => {
          unanswered.shift()
          lost(unavailable(error).detail)
        }
      )
    }
    const local: FleetLimits.Withdrawal = { allowed: true, replays: 0, allowance: Infinity }
    const depositArgs = [window, ttl]
    // An announcement's read, when one is on its way: the copy answers once it is in (within `timeout`; past it, the
    // stalled connection is found by the next call).
    const checked = Effect.suspend(() =>
      follow.checking === undefined ? Effect.void : Effect.interruptible(
        Effect.promise(() => follow.checking ?? Promise.resolve()).pipe(Effect.timeout(timeout), Effect.ignore)
      )
    )
    /** From the followed pause while Redis answers and the copy is whole; otherwise with a round trip. */
    const followed = <A>(copy: () => Effect.Effect<A>, roundTrip: () => Effect.Effect<A>): Effect.Effect<A> =>
      Effect.flatMap(Ref.get(health), (h) => {
        if (!h.up) return roundTrip()
        if (stalled()) {
          lost(`${where} did not answer within ${Duration.format(timeout)}`)
          return roundTrip()
        }
        return follow.following ? Effect.zipRight(checked, Effect.suspend(copy)) : roundTrip()
      })

    // The subscriber: subscribed again on each connection (it loses its subscription with it), then synced by a read
    // of the pause. Its errors are the command connection's to report: it fails when that one does.
    // a copy of the client's options, `lazyConnect` included: no connection is made until `connect` below
    const subscriber = yield* Effect.acquireRelease(
      Effect.sync(() => client.duplicate({ connectionName: "reprise-fleet-pauses", autoResubscribe: false })),
      (subscriber) => Effect.sync(() => subscriber.disconnect())
    )
    const subscriberReads = ReadBound.guard(subscriber, () => undefined)
    const synced = yield* Deferred.make<void>()
    subscriber.on("error", () => undefined)
    subscriber.on("close", () => {
      follow.subscribed = false
      follow.following = false
      follow.epoch++
    })
    subscriber.on("ready", () => {
      const epoch = follow.epoch
      subscriber.subscribe(channel).then(() => {
        subscriberReads.completed()
        if (epoch !== follow.epoch) return
        follow.subscribed = true
        const sentAt = nowMillis()
        return run(Scripts.paused, []).then(pauseRead(epoch, sentAt))
      }, (error: unknown) => {
        // an ACL that denies the channel: the process asks before each send, with no idle connection kept open
        if (errorText(error).startsWith("NOPERM")) subscriber.disconnect()
      }).catch(() => undefined).finally(() => Deferred.unsafeDone(synced, Exit.void))
    })
    subscriber.on("message", (_channel: string, message: string) => {
      subscriberReads.completed()
      // `<ms left>:<status>:<announcer>`, as the pushback script publishes it: the key changed, and is read again
      // (not this process's own announcement: its pushback's answer told it)
      if (message.split(":")[2] === announcer || !follow.subscribed) return
      const checking: Promise<void> = background(Scripts.paused, []).finally(() => {
        if (follow.checking === checking) follow.checking = undefined
      })
      follow.checking = checking
    })
    subscriber.connect().catch(() => undefined)
    // A subscription lost without a word (a half-open connection) would leave the copy behind: the subscriber is
    // pinged every `retryInterval`, and one that does not answer within `timeout` is dropped and connected again; the
    // copy is not trusted until it follows again.
    const checkSubscriber = Effect.tryPromise(() => subscriber.ping()).pipe(
      Effect.tap(() => subscriberReads.completed()),
      Effect.timeout(timeout),
      Effect.catchAll(() =>
        Effect.sync(() => {
          follow.following = false
          subscriber.disconnect(true)
        })
      )
    )
    // Interruptible whatever the layer is built in (the CLI builds it in an uninterruptible region): the scope's end
    // interrupts it, and an uninterruptible loop would hold that end, and the process, forever.
    yield* Effect.forkIn(
      Effect.interruptible(Effect.repeat(
        Effect.suspend(() => follow.subscribed ? checkSubscriber : Effect.void),
        Schedule.spaced(retryInterval)
      )),
      scope
    )
    // With Redis there, the layer is ready once it follows the pause (or failed to), so the first send need not ask;
    // the wait shares `connectTimeout` with the connection, so building never takes longer than `connectTimeout`.
    if (connected) {
      const left = Duration.toMillis(connectTimeout) - ((yield* Clock.currentTimeMillis) - buildStarted)
      if (left > 0) yield* Effect.interruptible(Deferred.await(synced).pipe(Effect.timeout(left), Effect.ignore))
    }

    const limits: FleetLimits.Service = {
      // A first attempt's credit is sent at once and answered in the background: the send waits for nothing but a
      // pause the copy knows of. One connection keeps the order, so this process's replays are debited after it.
      // A failure marks the store unavailable, which the next call reports to its scope (as one within the retry
      // interval does).
      deposit: followed(
        () =>
          Effect.sync(() => {
            background(Scripts.deposit, depositArgs)
            return localPause()
          }),
        () => Effect.suspend(() => call(Scripts.deposit, depositArgs, pauseRead(epochNow(), nowMillis()), noPause))
      ),
      withdraw: call(Scripts.withdraw, [window, ttl, settings.ratio, settings.floor], withdrawalOf, local),
      paused: followed(
        () => Effect.sync(localPause),
        () => Effect.suspend(() => call(Scripts.paused, [], pauseRead(epochNow(), nowMillis()), noPause))
      ),
      pushback: ({ delay, status }) => {
        const millis = Pause.pauseMillis(delay, maxPause)
        return millis === 0 ?
          Effect.void :
          Effect.suspend(() => {
            // `delay` is counted from now, as the failing reply's own wait: the pause ends for this process with it
            const sentAt = nowMillis()
            const read = pauseRead(epochNow(), sentAt)
            return Effect.asVoid(call(Scripts.pushback, [millis, status ?? "", channel, announcer], (reply) => {
              const answer = read(reply)
              // the script set this pause (no longer one was in force): this process knows when it ends for it
              if (answer !== undefined && Array.isArray(reply) && reply[2] === 1) {
                copy.own(sentAt + Math.min(Duration.toMillis(delay), maxPauseMillis))
              }
              return answer
            }, noPause))
          })
      }
    }
    const circuit = Circuits.make({
      settings: circuitSettings,
      keyOf: (route) => FleetAddress.circuitKey(options.name, route),
      call: callOn
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
