/**
 * What the simulator records of each request it receives, and how each exchange ended. A module of its own so that
 * the simulator and its request store share these types without importing each other.
 *
 * @since 0.1.0
 */
import type * as SimulatorScript from "./SimulatorScript.js"

/**
 * How an exchange ended.
 *
 * - `by: "client"`: the client closed the connection before the response was complete (an abort, an
 *   interruption, a client-side timeout).
 * - `by: "server"`: the response ended, or the simulator itself reset, hung up or shut the connection down.
 *
 * @since 0.1.0
 * @category models
 */
export interface Closure {
  readonly by: "client" | "server"
  /** Epoch milliseconds, with the clock's sub-millisecond precision (fractional). */
  readonly at: number
  /** Response body bytes written before the end, keepalive comments included. */
  readonly bytesWritten: number
}

/**
 * One request as the simulator received it.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordedRequest {
  /** 1 for the first request the server received, across all routes and scripts. */
  readonly id: number
  /** The protocol route, or undefined for a path (or method) that matched none. */
  readonly route: SimulatorScript.Route | undefined
  /** 1 for the first request to the route since the last `setScript` or `clear` (0 without a route). */
  readonly nth: number
  readonly method: string
  /** The request target, query included. */
  readonly path: string
  /** Lower-cased names; `authorization`, `x-api-key`, `api-key`, `cookie` and `proxy-authorization` redacted. */
  readonly headers: Readonly<Record<string, string>>
  /** The parsed JSON body; the raw text when it is not JSON; undefined when empty. */
  readonly body: unknown
  /** Epoch milliseconds, with the clock's sub-millisecond precision (fractional). */
  readonly receivedAt: number
  /** The kind of step served (`stream` for a default reply); undefined without a route. */
  readonly step: SimulatorScript.StepKind | undefined
  /** The step's index in the route's `steps`, undefined for a default reply. */
  readonly stepIndex: number | undefined
  /** Set once the exchange ended. */
  readonly closed: Closure | undefined
}
