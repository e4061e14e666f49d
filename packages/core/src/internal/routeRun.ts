/**
 * A route as one reply follows it: how to open it, and what this reply has seen of it.
 *
 * @internal
 */
import type * as Generation from "../Generation.js"
import type * as ProviderFailure from "../ProviderFailure.js"
import * as Routes from "../Routes.js"
import type { AttemptError } from "./attemptRun.js"
import type { Open } from "./recovery.js"

/**
 * A route as one reply follows it: how to open it, and what this reply has seen of it. Without a plan a reply has one
 * route, without `planned` (and no circuit).
 *
 * @internal
 */
export class RouteRun {
  /** Sends this reply made on the route. */
  sends = 0
  /** Chunks that were not JSON, in this reply's attempts on the route. */
  malformed = 0
  /** Whether the reply came to the route (sent to it, or skipped it with its circuit open). */
  visited = false
  /** What ended the route for this reply: its last failure, or its open circuit. */
  last: { readonly message: string; readonly error?: ProviderFailure.ProviderFailure | undefined } | undefined =
    undefined

  constructor(
    readonly open: Open<AttemptError, never>,
    readonly planned:
      | { readonly route: Routes.Route; readonly ref: Generation.RouteRef; readonly key: string }
      | undefined
  ) {}

  /** Sends on the route before a transient failure leaves it (while a later route remains). */
  get limit(): number {
    return this.planned?.route.attempts ?? Routes.defaultAttempts
  }
}
