/**
 * The fleet's pause as this process follows it: a subscriber connection listens on the fleet's channel, where every
 * pushback that sets a pause announces it. Once a pause was read from Redis after the subscription began
 * (`following`), the copy here misses nothing, and the fleet's `deposit` and `paused` answer from it without a round
 * trip (docs/fleet.md, "Following the pause"). The subscription's loss (`epoch`) stops following until it is back.
 * The copy is learnt from the pause key alone (an announcement asks for a read of it; see `PauseCopy`), and the pause
 * this process's own pushback set ends for it with its own wait: it is not waited out a second time.
 *
 * @internal
 */
import * as FleetLimits from "@reprise/core/FleetLimits"
import * as Deferred from "effect/Deferred"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Option from "effect/Option"
import * as Schedule from "effect/Schedule"
import type * as Scope from "effect/Scope"
import * as Crypto from "node:crypto"
import * as Connection from "./connection.js"
import type * as Health from "./health.js"
import * as PauseCopy from "./pauseCopy.js"
import * as ReadBound from "./readBound.js"
import * as Scripts from "./scripts.js"

/**
 * @internal
 */
export interface PauseFollower {
  /** Carried by this process's announcements, which it does not read again: it knows its own pause. */
  readonly announcer: string
  /** The monotonic clock of the copy, in milliseconds: a step of the wall clock neither ends nor lengthens a pause. */
  readonly now: () => number
  /** The pause in force as the copy has it. */
  readonly current: () => Option.Option<FleetLimits.Pause>
  /**
   * Decodes a pause read from Redis by a call sent at `sentAt` and learns it; read by a call sent while subscribed,
   * it makes the copy whole. Answers the pause in force as the copy has it.
   */
  readonly read: (sentAt: number) => (reply: unknown) => Option.Option<FleetLimits.Pause> | undefined
  /** The pause this process's own pushback set (sent at `sentAt`, for `delay`) ends for it with its own wait. */
  readonly own: (sentAt: number, delay: Duration.Duration) => void
  /** Sends a script answered in the background, with no fiber of its own: its pause is learnt. */
  readonly background: (script: Scripts.Script, args: ReadonlyArray<string | number>) => Promise<void>
  /** From the followed pause (`copy`) while Redis answers and the copy is whole; otherwise with a round trip. */
  readonly followed: <A>(copy: () => Effect.Effect<A>, roundTrip: () => Effect.Effect<A>) => Effect.Effect<A>
  /** Done once the subscriber followed the pause or failed to, the first time. */
  readonly synced: Effect.Effect<void>
}

/**
 * Follows the pause of the fleet whose keys are `keys` on `channel`, with a subscriber of its own duplicated from
 * the connection's client; it closes with the scope, as does its check every `retryInterval`.
 *
 * @internal
 */
export const make = (connection: Connection.Connection, health: Health.Health, options: {
  readonly keys: { readonly budget: string; readonly pause: string }
  readonly channel: string
  readonly timeout: Duration.Duration
  readonly retryInterval: Duration.Duration
  readonly maxPause: Duration.Duration
}): Effect.Effect<PauseFollower, never, Scope.Scope> =>
  Effect.gen(function*() {
    const { channel, keys, retryInterval, timeout } = options
    const { where } = connection
    // The followed pause is timed by this clock, read where no fiber is (the subscriber's messages).
    const clock = yield* Effect.clock
    // The subscriber's check runs in the layer's scope: its end interrupts it.
    const scope = yield* Effect.scope
    const run = (script: Scripts.Script, args: ReadonlyArray<string | number>) =>
      connection.run(script, args, Scripts.fleetKeys(script, keys))

    const follow = {
      subscribed: false,
      following: false,
      epoch: 0,
      /** The read of the key an announcement asked for, until it is answered. */
      checking: undefined as Promise<void> | undefined
    }
    const noPause = Option.none<FleetLimits.Pause>()
    const announcer = Crypto.randomBytes(6).toString("hex")
    const nowMillis = () => Number(clock.unsafeCurrentTimeNanos()) / 1e6
    const maxPauseMillis = Duration.toMillis(options.maxPause)
    const copy = PauseCopy.make(nowMillis)
    const localPause = (): Option.Option<FleetLimits.Pause> => {
      const { left, status } = copy.current()
      return left === 0 ? noPause : FleetLimits.pause(Duration.millis(left), status)
    }
    /** {@link PauseFollower.read}, by a call sent while subscribed at `epoch` (-1: not subscribed). */
    const pauseRead =
      (epoch: number, sentAt: number) => (reply: unknown): Option.Option<FleetLimits.Pause> | undefined => {
        const read = PauseCopy.decode(reply, maxPauseMillis)
        if (read === undefined) return undefined
        copy.observe(sentAt, read)
        if (epoch === follow.epoch && follow.subscribed) follow.following = true
        return localPause()
      }
    const epochNow = () => follow.subscribed ? follow.epoch : -1

    // When each background call still unanswered was sent (`nowMillis`), oldest first: one connection answers in
    // order. One unanswered for longer than `timeout` is what a call's timeout is: the store is then unavailable, and
    // calls ask it again (within the retry interval, not at all), so a stalled connection is found and reported as
    // it was when every deposit waited for its answer.
    const unanswered: Array<number> = []
    const stalled = () => unanswered.length > 0 && nowMillis() - unanswered[0] > Duration.toMillis(timeout)
    const background = (script: Scripts.Script, args: ReadonlyArray<string | number>): Promise<void> => {
      const read = pauseRead(epochNow(), nowMillis())
      unanswered.push(nowMillis())
      return run(script, args).then(
        (reply) => {
          unanswered.shift()
          if (read(reply) === undefined) health.lost(`${where}: unexpected reply to the ${script.name} script`)
        },
        (error) => {
          unanswered.shift()
          health.lost(connection.failure(error))
        }
      )
    }
    // An announcement's read, when one is on its way: the copy answers once it is in (within `timeout`; past it, the
    // stalled connection is found by the next call).
    const checked = Effect.suspend(() =>
      follow.checking === undefined ? Effect.void : Effect.interruptible(
        Effect.promise(() => follow.checking ?? Promise.resolve()).pipe(Effect.timeout(timeout), Effect.ignore)
      )
    )
    const followed = <A>(copy: () => Effect.Effect<A>, roundTrip: () => Effect.Effect<A>): Effect.Effect<A> =>
      Effect.flatMap(health.up, (up) => {
        if (!up) return roundTrip()
        if (stalled()) {
          health.lost(`${where} did not answer within ${Duration.format(timeout)}`)
          return roundTrip()
        }
        return follow.following ? Effect.zipRight(checked, Effect.suspend(copy)) : roundTrip()
      })

    // The subscriber: subscribed again on each connection (it loses its subscription with it), then synced by a read
    // of the pause. Its errors are the command connection's to report: it fails when that one does.
    // a copy of the client's options, `lazyConnect` included: no connection is made until `connect` below
    const subscriber = yield* Effect.acquireRelease(
      Effect.sync(() =>
        connection.client.duplicate({ connectionName: "reprise-fleet-pauses", autoResubscribe: false })
      ),
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
        if (Connection.errorText(error).startsWith("NOPERM")) subscriber.disconnect()
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

    return {
      announcer,
      now: nowMillis,
      current: localPause,
      read: (sentAt) => pauseRead(epochNow(), sentAt),
      own: (sentAt, delay) => copy.own(sentAt + Math.min(Duration.toMillis(delay), maxPauseMillis)),
      background,
      followed,
      synced: Deferred.await(synced)
    }
  })
