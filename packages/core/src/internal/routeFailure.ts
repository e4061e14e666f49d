/**
 * The schema of a route's last failure, as errors carry it when every route of a plan failed (see `Routes`).
 *
 * @internal
 */
import * as Schema from "effect/Schema"

/** @internal */
export const RouteFailure = Schema.Struct({
  /** The route's place in the plan, from 1. */
  route: Schema.Number,
  /** The route's display name. */
  name: Schema.String,
  /** The model the route asked for. */
  model: Schema.String,
  /** What ended it: the failure's message, or why it was skipped. */
  message: Schema.String,
  /** The failure itself; absent for a route that was skipped without a send (its circuit was open). */
  error: Schema.optional(Schema.Unknown)
})

/** @internal */
export interface RouteFailure extends Schema.Schema.Type<typeof RouteFailure> {}

/** @internal */
export const field = { routeFailures: Schema.optional(Schema.Array(RouteFailure)) }
