/**
 * The fleet's circuits: `Circuit.Service` over the scripts of `circuitScripts`, run by the fleet's calls
 * (`health`: their timeout, their outage reports), with a circuit of the process's own in memory for when Redis does
 * not answer.
 *
 * The memory circuit is told of every outcome (`failed`, `succeeded`) while Redis answers too, so the circuits it
 * answers with during an outage know what this process saw; `admit` and `state` ask it only when Redis does not
 * answer.
 *
 * @internal
 */
import * as Circuit from "@reprise/core/Circuit"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as CircuitScripts from "./circuitScripts.js"
import type * as Scripts from "./scripts.js"

/**
 * How long a circuit's key outlives its cool-down after its last write.
 *
 * @internal
 */
export const retention: Duration.Duration = Duration.minutes(1)

/**
 * Runs a script on the circuit's key within the fleet's timeout; any failure (unreachable, slow, an unexpected reply)
 * answers `fallback` and is the fleet's to report.
 *
 * @internal
 */
export type Call = <A>(
  script: Scripts.Script,
  keys: ReadonlyArray<string>,
  args: ReadonlyArray<string | number>,
  decode: (reply: unknown) => A | undefined,
  fallback: Effect.Effect<A>
) => Effect.Effect<A>

const millis = (n: unknown): n is number => typeof n === "number" && Number.isInteger(n) && n >= 0

/** `{0, 0}` closed, `{1, 0}` half-open, `{1, lease}` the probe, `{2, ms}` open. */
const decodeReply = (reply: unknown): readonly [0 | 1 | 2, number] | undefined =>
  Array.isArray(reply) && (reply[0] === 0 || reply[0] === 1 || reply[0] === 2) && millis(reply[1])
    ? [reply[0], reply[1]]
    : undefined

const admission = (reply: unknown): Circuit.Admission | undefined => {
  const decoded = decodeReply(reply)
  if (decoded === undefined) return undefined
  const [code, left] = decoded
  return code === 0
    ? Circuit.Admission.Closed()
    : code === 1
    ? Circuit.Admission.Probe({ lease: left })
    : Circuit.Admission.Open({ retryIn: Duration.millis(left) })
}

const deleted = (reply: unknown): true | undefined => reply === 1 ? true : undefined

const zeroOrOne = (reply: unknown): true | undefined => reply === 0 || reply === 1 ? true : undefined

const stateOf = (reply: unknown): Circuit.State | undefined => {
  const decoded = decodeReply(reply)
  return decoded === undefined ? undefined : decoded[0] === 0 ? "closed" : decoded[0] === 1 ? "half-open" : "open"
}

/**
 * The circuits of the fleet: the route `key` of each operation names the Redis key `keyOf(key)`.
 *
 * @internal
 */
export const make = (options: {
  readonly settings: Circuit.Settings
  readonly keyOf: (key: string) => string
  readonly call: Call
}): Circuit.Service => {
  const { call, keyOf, settings } = options
  const local = Circuit.makeMemory(settings)
  const coolDown = Math.ceil(Duration.toMillis(settings.coolDown))
  const ttl = coolDown + Duration.toMillis(retention)
  return {
    admit: (key) => call(CircuitScripts.admit, [keyOf(key)], [coolDown, ttl], admission, local.admit(key)),
    succeeded: (key) =>
      Effect.zipRight(
        local.succeeded(key),
        Effect.asVoid(call(CircuitScripts.succeeded, [keyOf(key)], [], deleted, Effect.succeed(true)))
      ),
    failed: (key) =>
      Effect.zipRight(
        local.failed(key),
        call(
          CircuitScripts.failed,
          [keyOf(key)],
          [coolDown, settings.failureThreshold, ttl],
          stateOf,
          local.state(key)
        )
      ),
    state: (key) => call(CircuitScripts.state, [keyOf(key)], [], stateOf, local.state(key)),
    released: (key, lease) =>
      Effect.zipRight(
        local.released!(key, undefined),
        lease === undefined
          ? Effect.void
          : Effect.asVoid(call(CircuitScripts.released, [keyOf(key)], [String(lease)], zeroOrOne, Effect.succeed(true)))
      )
  }
}
