/**
 * What the process knows of the fleet's store, and the calls it makes by it. Every call has the fleet's `timeout`;
 * one that fails (unreachable, slow, an unexpected reply) answers its fallback and marks the store unavailable. An
 * unavailable store is reported once to the scope that meets it (`FleetUnavailable`), is not asked again before
 * `retryInterval` has passed (or the client has reconnected), and is reported back (`FleetRestored`) when a call
 * succeeds again.
 *
 * @internal
 */
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Ref from "effect/Ref"
import type * as Circuits from "./circuit.js"
import type * as Connection from "./connection.js"

/** What the process knows of the fleet's store. */
interface State {
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

/**
 * @internal
 */
export interface Health {
  /**
   * Runs a script on `keys` within the timeout and decodes its reply; on any failure, answers with `fallback` and
   * marks the store unavailable.
   */
  readonly call: Circuits.Call
  /** Whether the store is taken to be up: its last call was answered (before any, its first connection was made). */
  readonly up: Effect.Effect<boolean>
  /** A call sent without a fiber of its own failed with `detail`: the store is unavailable from now on. */
  readonly lost: (detail: string) => void
}

/**
 * The store's health over `connection`, up when its first connection was made.
 *
 * @internal
 */
export const make = (connection: Connection.Connection, options: {
  readonly timeout: Duration.Duration
  readonly retryInterval: Duration.Duration
}): Effect.Effect<Health> =>
  Effect.gen(function*() {
    const { retryInterval, timeout } = options
    // times the calls that fail with no fiber (`lost`)
    const clock = yield* Effect.clock
    const { where } = connection
    const state = yield* Ref.make<State>({
      up: connection.unreachable === undefined,
      reported: false,
      detail: connection.unreachable ?? "",
      retryAt: 0,
      readyCount: connection.readyCount()
    })
    const N = RecoveryNotifications.Notification

    const reportOutage = Effect.flatMap(
      Ref.modify(
        state,
        (h): [string | undefined, State] => h.up || h.reported ? [undefined, h] : [h.detail, { ...h, reported: true }]
      ),
      (detail) => detail === undefined ? Effect.void : RecoveryNotifications.notify(N.FleetUnavailable({ detail }))
    )

    /** The store found unavailable at `now` (`Clock`, ms): tried again after `retryInterval`. */
    const down = (h: State, detail: string, now: number): State => ({
      up: false,
      reported: h.up ? false : h.reported,
      detail: h.up || h.detail === "" ? detail : h.detail,
      retryAt: now + Duration.toMillis(retryInterval),
      readyCount: connection.readyCount()
    })

    const call: Circuits.Call = (script, keys, args, decode, fallback) =>
      Effect.gen(function*() {
        const before = yield* Ref.get(state)
        if (
          !before.up && connection.readyCount() === before.readyCount &&
          (yield* Clock.currentTimeMillis) < before.retryAt
        ) {
          yield* reportOutage
          return yield* fallback
        }
        // interruptible, so that the timeout bounds it in an uninterruptible region too (see the connection's wait)
        const result = yield* Effect.interruptible(
          Effect.tryPromise({
            try: () => connection.run(script, args, keys),
            catch: (error) => new Unavailable(connection.failure(error))
          }).pipe(
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
          const restored = yield* Ref.modify(state, (h): [boolean, State] => [
            !h.up && h.reported,
            h.up ? h : { ...h, up: true, reported: false, detail: "" }
          ])
          if (restored) yield* RecoveryNotifications.notify(N.FleetRestored())
          return result.right
        }
        const now = yield* Clock.currentTimeMillis
        yield* Ref.update(state, (h) => down(h, result.left.detail, now))
        yield* reportOutage
        return yield* fallback
      })

    return {
      call,
      up: Effect.map(Ref.get(state), (h) => h.up),
      lost: (detail) => Effect.runSync(Ref.update(state, (h) => down(h, detail, clock.unsafeCurrentTimeMillis())))
    }
  })
