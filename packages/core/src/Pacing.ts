/**
 * `Pacing` is an opt-in limit on how many attempts start in one turn of the event loop. A burst of replies started at
 * once builds every request before the first one is written, since nothing on a fiber's way to its send yields to
 * the event loop; paced, the first requests are on the wire while the rest are built. Off by default
 * ({@link unpaced}); turn it on with {@link layer}.
 *
 * The attempts over the limit wait in arrival order, interruptibly, for the following turns; a turn ends with a
 * `setImmediate`, which runs after the I/O that is ready. Each layer built is one gate: the replies that share it share
 * its count (docs/pacing.md).
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/**
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /** Attempts that may start in one turn of the event loop: a whole number, at least 1, or `Infinity` (unpaced). */
  readonly attemptsPerTurn: number
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** Waits, interruptibly, until the current attempt may start. */
  readonly admit: Effect.Effect<void>
}

const unpacedService: Service = { admit: Effect.void }

/**
 * The gate `Recovery` asks before each attempt. Unpaced unless {@link layer} provides one.
 *
 * @since 0.1.0
 * @category tags
 */
export class Pacing extends Context.Reference<Pacing>()("@reprise/core/Pacing", {
  defaultValue: (): Service => unpacedService
}) {}

/**
 * A gate of its own: at most `attemptsPerTurn` attempts start in one turn of the event loop. Throws a `RangeError` for
 * a limit that is not a whole number of at least 1 nor `Infinity`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (settings: Settings): Service => {
  const limit = validate(settings).attemptsPerTurn
  if (limit === Infinity) return unpacedService
  let admitted = 0
  let turnScheduled = false
  const waiting: Array<{ readonly resume: () => void; cancelled: boolean }> = []

  const endTurn = () => {
    turnScheduled = false
    admitted = 0
    while (admitted < limit && waiting.length > 0) {
      const waiter = waiting.shift()!
      if (waiter.cancelled) continue
      admitted++
      waiter.resume()
    }
    if (admitted > 0) scheduleTurnEnd()
  }
  const scheduleTurnEnd = () => {
    if (turnScheduled) return
    turnScheduled = true
    setImmediate(endTurn)
  }
  const startsNow = (): boolean => {
    if (waiting.length > 0 || admitted >= limit) return false
    admitted++
    scheduleTurnEnd()
    return true
  }
  return {
    admit: Effect.suspend(() =>
      startsNow() ? Effect.void : Effect.async<void>((resume) => {
        const waiter = { resume: () => resume(Effect.void), cancelled: false }
        waiting.push(waiter)
        scheduleTurnEnd()
        return Effect.sync(() => {
          waiter.cancelled = true
        })
      })
    )
  }
}

const validate = (settings: Settings): Settings => {
  const { attemptsPerTurn } = settings
  if (!(attemptsPerTurn === Infinity || (Number.isInteger(attemptsPerTurn) && attemptsPerTurn >= 1))) {
    throw new RangeError(`attemptsPerTurn must be a whole number of at least 1, or Infinity; got ${attemptsPerTurn}`)
  }
  return settings
}

/**
 * Paces the attempts of the replies it is provided to, with a gate of its own (see {@link make}).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (settings: Settings): Layer.Layer<never> => {
  validate(settings)
  return Layer.sync(Pacing, () => make(settings))
}

/**
 * No pacing: every attempt starts when its fiber gets to it. The default.
 *
 * @since 0.1.0
 * @category layers
 */
export const unpaced: Layer.Layer<never> = Layer.succeed(Pacing, unpacedService)
