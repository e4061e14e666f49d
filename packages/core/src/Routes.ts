/**
 * `Routes` is a plan of routes: an ordered list of providers and models that one reply may be served by, tried in
 * order, within one {@link Budget.Budget} (its attempts and its deadline cover the whole plan: every send on every
 * route is debited before it is sent). Like Effect's `ExecutionPlan`, it is a value an app provides as a layer
 * ({@link layer}) and swaps without touching the code that generates; unlike it, a route is left only while nothing is
 * committed, and the output of two routes is never joined.
 *
 * `Recovery.generate` reads the plan when one is provided: the reply starts on the first route (the primary), asking
 * for the route's model, and moves to the next route when the failure is one that the next route may not share:
 *
 * | leaves the route | reason |
 * |---|---|
 * | a transient failure once the route has had `attempts` sends, or once its circuit opened | `Transient` |
 * | a `Timeout` (no headers, no first token, a stall): a silent route is not waited on again | `Timeout` |
 * | a second chunk that is not JSON (the first is replayed on the same route) | `MalformedChunk` |
 * | 401, 403, 404 or a quota refusal (`insufficient_quota`, 402) | `Rejected` |
 * | a context overflow, for the next route that declares a larger `contextWindow` | `ContextOverflow` |
 * | the route's circuit is open: skipped without a send | `CircuitOpen` |
 *
 * A content-policy refusal or any other rejection of the request does not switch: another model would be asked the
 * same thing. A switch is announced like a replay: `AttemptDiscarded` (when the route had sent), then `RouteSwitched`;
 * the next route starts from the request, never from the preview. The last route is kept until the budget ends, as a
 * reply without a plan is. If every route fails, the error is the primary's failure with each route's last failure
 * attached (`routeFailures`); exhaustion of the budget is a `RecoveryExhausted` that carries them too.
 *
 * The committed `Reply` names its `route` and the `model` the provider named in its response. Each route has a circuit
 * ({@link Circuit}), named by its {@link key}.
 *
 * See docs/routes.md.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Layer from "effect/Layer"
import * as Schema from "effect/Schema"
import type * as Generation from "./Generation.js"
import * as RouteFailureSchema from "./internal/routeFailure.js"
import * as Provider from "./Provider.js"

/**
 * One route: a provider (its protocol, endpoint and key are the provider's) and the model to ask it for.
 *
 * @since 0.1.0
 * @category models
 */
export interface Route {
  readonly provider: Provider.Service
  /** The model the route asks for: it replaces the request's `model`. */
  readonly model: string
  /** Shown in notices, errors and spans; default `${protocol} ${model}`. */
  readonly name?: string | undefined
  /**
   * Sends on this route before a transient failure leaves it, while a later route remains: a whole number, at least
   * 1; default {@link defaultAttempts}. The last route has no limit of its own: the budget's is its.
   */
  readonly attempts?: number | undefined
  /** The context window the route declares, in tokens: an overflow moves to a later route that declares a larger one. */
  readonly contextWindow?: number | undefined
}

/**
 * Sends a route gets before a transient failure leaves it, when it declares none.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultAttempts = 2

/**
 * @since 0.1.0
 * @category models
 */
export interface Plan {
  readonly routes: readonly [Route, ...Array<Route>]
}

/**
 * The plan `Recovery.generate` follows. Without one, a reply has one route: the current `Provider` and the request's
 * model, with no circuit.
 *
 * @since 0.1.0
 * @category tags
 */
export class Routes extends Context.Tag("@reprise/core/Routes")<Routes, Plan>() {}

/**
 * A plan of `routes`, in order; the first is the primary. Throws a `RangeError` for a limit that is not a whole number
 * of at least 1.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (...routes: readonly [Route, ...Array<Route>]): Plan => {
  routes.forEach((route, i) => {
    for (const [name, value] of [["attempts", route.attempts], ["contextWindow", route.contextWindow]] as const) {
      if (value !== undefined && (!Number.isInteger(value) || value < 1)) {
        throw new RangeError(`route ${i + 1} (${nameOf(route)}): ${name} must be a whole number >= 1, got ${value}`)
      }
    }
  })
  return { routes }
}

/**
 * The plan for `Recovery.generate`, and its primary's provider as the `Provider` (for what reads one directly).
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (plan: Plan): Layer.Layer<Routes | Provider.Provider> =>
  Layer.succeedContext(Context.make(Routes, plan).pipe(Context.add(Provider.Provider, plan.routes[0].provider)))

/**
 * The route's display name: its own, or `${protocol} ${model}`.
 *
 * @since 0.1.0
 * @category utils
 */
export const nameOf = (route: Route): string => route.name ?? `${route.provider.protocol} ${route.model}`

/**
 * The name of the route's circuit: its protocol, endpoint and model (never its key). Two routes to one model of one
 * server share a circuit.
 *
 * @since 0.1.0
 * @category utils
 */
export const key = (route: Route): string =>
  `${route.provider.protocol} ${route.provider.endpoint ?? "-"} ${route.model}`

/**
 * The route at `index` (from 0) as replies and notifications name it.
 *
 * @since 0.1.0
 * @category utils
 */
export const refOf = (plan: Plan, index: number): Generation.RouteRef => {
  const route = plan.routes[index]!
  return { index: index + 1, name: nameOf(route), model: route.model }
}

/**
 * Why a reply left a route (see the module's table).
 *
 * @since 0.1.0
 * @category models
 */
export const SwitchReason = Schema.Literal(
  "Transient",
  "Timeout",
  "MalformedChunk",
  "Rejected",
  "ContextOverflow",
  "CircuitOpen"
)

/**
 * @since 0.1.0
 * @category models
 */
export type SwitchReason = typeof SwitchReason.Type

/**
 * A route's last failure, as an error carries it once every route failed (`routeFailures`).
 *
 * @since 0.1.0
 * @category models
 */
export const RouteFailure = RouteFailureSchema.RouteFailure

/**
 * @since 0.1.0
 * @category models
 */
export interface RouteFailure extends RouteFailureSchema.RouteFailure {}
