/**
 * The fleet's pause as one process knows it: learnt from reads of the pause key (the key's expiry is the pause; an
 * announcement on the channel only asks for a read), timed by a monotonic clock in milliseconds.
 *
 * A read sent at `sentAt` and answered at `now` with `left` ms bounds the pause's true end between `sentAt + left`
 * and `now + left`. A read whose bounds meet the copy's reads the same pause: the bounds narrow, and the end the copy
 * waits for stays as it was, so two reads of one pause that differ by their round trips do not announce it twice.
 * Otherwise the read is newer than the copy (one connection answers in order) and replaces it: a pause can be
 * lengthened, or found gone (a key deleted, or an announcement that no key was behind).
 *
 * @internal
 */

/**
 * A pause with less time left than this is over: a timer fires up to a millisecond early, and the wait that ends a
 * pause (the receiving reply's own, or another's `FleetPaused`) is not followed by a second one for what is left.
 *
 * @internal
 */
export const settleMillis = 20

/**
 * A pause as a script reads it: milliseconds left (0 for none) and the status that set it.
 *
 * @internal
 */
export interface Read {
  readonly left: number
  readonly status: number | undefined
}

/** The HTTP status stored with a pause, when it is one (a three-digit status); anything else is no status. */
const statusOf = (text: unknown): number | undefined => {
  const status = Number(text)
  return Number.isInteger(status) && status >= 100 && status <= 599 ? status : undefined
}

/**
 * Decodes a script's `{ms left, status, …}`, capped at `maxMillis`: whatever the key holds (another writer's, a
 * server's bug), no pause lasts longer than the fleet's `maxPause`.
 *
 * @internal
 */
export const decode = (reply: unknown, maxMillis: number): Read | undefined => {
  if (!Array.isArray(reply) || typeof reply[0] !== "number" || !Number.isFinite(reply[0])) return undefined
  return { left: Math.min(Math.max(reply[0], 0), maxMillis), status: statusOf(reply[1]) }
}

/**
 * @internal
 */
export interface PauseCopy {
  /** A read of the key sent at `sentAt`, answered now. */
  readonly observe: (sentAt: number, read: Read) => void
  /** The pause this process's own pushback set ends for it at `until`, with its own wait. */
  readonly own: (until: number) => void
  /** The pause in force: milliseconds left (0 for none, or one about to end) and its status. */
  readonly current: () => Read
}

/**
 * @internal
 */
export const make = (now: () => number): PauseCopy => {
  /** The end the copy waits for (0: none), its status, and the bounds of the pause's true end. */
  let until = 0
  let status: number | undefined
  let earliest = 0
  let latest = 0
  return {
    observe: (sentAt, read) => {
      const at = now()
      if (read.left === 0) {
        // no pause in force when the script ran: a copy whose pause must outlast that moment is wrong
        if (earliest > at) until = earliest = latest = 0
        return
      }
      const low = sentAt + read.left
      const high = at + read.left
      if (until > 0 && low <= latest && high >= earliest) {
        earliest = Math.max(low, earliest)
        latest = Math.min(high, latest)
      } else {
        until = high
        earliest = low
        latest = high
      }
      status = read.status
    },
    own: (end) => {
      until = end
    },
    current: () => {
      const left = until - now()
      return left < settleMillis ? { left: 0, status: undefined } : { left, status }
    }
  }
}
