/**
 * The fleet's limits: `FleetLimits.Service` over the scripts of `scripts` (the retry budget, the pause), run by the
 * fleet's calls (their timeout, their outage reports), with the pause answered from the followed copy while it is
 * whole. Without Redis a replay is allowed and nothing is paused: the per-reply `Budget` alone applies.
 *
 * @internal
 */
import type * as FleetLimits from "@reprise/core/FleetLimits"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as RetryBudget from "../RetryBudget.js"
import type * as Health from "./health.js"
import * as Pause from "./pause.js"
import type * as PauseFollower from "./pauseFollower.js"
import * as Scripts from "./scripts.js"

const count = (n: unknown): n is number => typeof n === "number" && Number.isFinite(n) && n >= 0

const withdrawalOf = (reply: unknown): FleetLimits.Withdrawal | undefined => {
  if (!Array.isArray(reply) || (reply[0] !== 0 && reply[0] !== 1) || !count(reply[1])) return undefined
  const allowance = Number(reply[2])
  return count(allowance) ? { allowed: reply[0] === 1, replays: reply[1], allowance } : undefined
}

const local: FleetLimits.Withdrawal = { allowed: true, replays: 0, allowance: Infinity }

/**
 * The limits of the fleet whose keys are `keys`, its pushbacks announced on `channel`.
 *
 * @internal
 */
export const make = (health: Health.Health, pause: PauseFollower.PauseFollower, options: {
  readonly keys: { readonly budget: string; readonly pause: string }
  readonly channel: string
  readonly settings: RetryBudget.Settings
  readonly maxPause: Duration.Duration
}): FleetLimits.Service => {
  const { channel, keys, maxPause, settings } = options
  const noPause = Option.none<FleetLimits.Pause>()
  const window = RetryBudget.windowSeconds(settings)
  const ttl = (window + 1) * 1000
  const depositArgs = [window, ttl]
  /** {@link Health.Health.call} on the fleet's own keys (the script's), answering `fallback` on any failure. */
  const call = <A>(
    script: Scripts.Script,
    args: ReadonlyArray<string | number>,
    decode: (reply: unknown) => A | undefined,
    fallback: A
  ): Effect.Effect<A> => health.call(script, Scripts.fleetKeys(script, keys), args, decode, Effect.succeed(fallback))
  return {
    // A first attempt's credit is sent at once and answered in the background: the send waits for nothing but a
    // pause the copy knows of. One connection keeps the order, so this process's replays are debited after it.
    // A failure marks the store unavailable, which the next call reports to its scope (as one within the retry
    // interval does).
    deposit: pause.followed(
      () =>
        Effect.sync(() => {
          pause.background(Scripts.deposit, depositArgs)
          return pause.current()
        }),
      () => Effect.suspend(() => call(Scripts.deposit, depositArgs, pause.read(pause.now()), noPause))
    ),
    withdraw: call(Scripts.withdraw, [window, ttl, settings.ratio, settings.floor], withdrawalOf, local),
    paused: pause.followed(
      () => Effect.sync(pause.current),
      () => Effect.suspend(() => call(Scripts.paused, [], pause.read(pause.now()), noPause))
    ),
    pushback: ({ delay, status }) => {
      const millis = Pause.pauseMillis(delay, maxPause)
      return millis === 0 ?
        Effect.void :
        Effect.suspend(() => {
          // `delay` is counted from now, as the failing reply's own wait: the pause ends for this process with it
          const sentAt = pause.now()
          const read = pause.read(sentAt)
          return Effect.asVoid(call(Scripts.pushback, [millis, status ?? "", channel, pause.announcer], (reply) => {
            const answer = read(reply)
            // the script set this pause (no longer one was in force): this process knows when it ends for it
            if (answer !== undefined && Array.isArray(reply) && reply[2] === 1) pause.own(sentAt, delay)
            return answer
          }, noPause))
        })
    }
  }
}
