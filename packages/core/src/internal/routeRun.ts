/**
 * The routes of a plan as one reply follows them: each route's state for this reply (`RouteRun`), its circuit asked
 * before a send and told of a failure, whether a failure leaves the route and for which one, and the routes' failures
 * on the error that ends the reply.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Metric from "effect/Metric"
import type * as Circuit from "../Circuit.js"
import type * as Classification from "../Classification.js"
import type * as Generation from "../Generation.js"
import * as ProviderFailure from "../ProviderFailure.js"
import * as ProviderRejection from "../ProviderRejection.js"
import type * as RecoveryErrorFamily from "../RecoveryError.js"
import * as RecoveryNotifications from "../RecoveryNotifications.js"
import * as Routes from "../Routes.js"
import * as TransportError from "../TransportError.js"
import type { AttemptError } from "./attemptRun.js"
import type { Open } from "./recovery.js"
import type { ReplyRun } from "./replyRun.js"

type RecoveryError = RecoveryErrorFamily.RecoveryError

const N = RecoveryNotifications.Notification

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

/**
 * The circuit of the route the next attempt goes to, asked first: a route whose circuit is open is skipped without a
 * send (`RouteSwitched` with `CircuitOpen`), for the next one. Returns the end of the reply when no route is left.
 *
 * @internal
 */
export const admitted = (run: ReplyRun<unknown>): Effect.Effect<Effect.Effect<never, RecoveryError> | undefined> =>
  Effect.gen(function*() {
    const { allowance, routes } = run
    while (true) {
      const route = routes[run.current]!
      const admission = yield* run.circuit!.admit(route.planned!.key)
      if (admission._tag === "Probe") run.probe = { key: route.planned!.key, lease: admission.lease }
      if (admission._tag !== "Open") return undefined
      route.visited = true
      route.last = { message: `circuit open (probe in ${Duration.format(admission.retryIn)})` }
      const to = run.current + 1
      if (to >= routes.length) return routesEnded(run)
      const now = yield* Clock.currentTimeNanos
      // no route is switched to past the deadline, as no attempt is started past it
      if (now >= allowance.deadlineAt) return run.exhausted("Deadline")
      yield* run.notify(N.RouteSwitched({
        from: route.planned!.ref,
        to: routes[to]!.planned!.ref,
        reason: "CircuitOpen",
        nextAttempt: (yield* allowance.used) + 1,
        remainingAttempts: yield* allowance.remainingAttempts,
        remainingTime: Duration.nanos(allowance.deadlineAt - now)
      }))
      yield* Metric.increment(run.meters.switches("CircuitOpen"))
      run.current = to
    }
  })

/**
 * The end of a reply whose routes are all left: the first failure a route sent (the primary's when it sent), with
 * every route's last failure; when no route sent, `RecoveryExhausted{reason: "CircuitOpen"}`.
 *
 * @internal
 */
export const routesEnded = (run: ReplyRun<unknown>): Effect.Effect<never, RecoveryError> => {
  const first = run.routes.find((route) => route.last?.error !== undefined)?.last?.error
  return first === undefined ? run.exhausted("CircuitOpen") : run.surface(withRoutes(run, first))
}

/**
 * The error a reply that ends on `error` fails with: `error` itself, or, once the reply has left a route, the first
 * failure a route sent (the primary's), with each route's last failure.
 *
 * @internal
 */
export const ended = (
  run: ReplyRun<unknown>,
  error: ProviderFailure.ProviderFailure
): ProviderFailure.ProviderFailure => {
  if (run.routes.length < 2) return error
  const route = run.routes[run.current]!
  route.last = { message: error.message, error }
  return withRoutes(run, run.routes.find((route) => route.last?.error !== undefined)?.last?.error ?? error)
}

/**
 * `error` with each route's last failure, when the plan has more than one route.
 *
 * @internal
 */
export const withRoutes = <F extends ProviderFailure.ProviderFailure>(run: ReplyRun<unknown>, error: F): F => {
  const failures = routeFailures(run)
  return failures === undefined ? error : ProviderFailure.copyWith<F>(error, { routeFailures: failures } as Partial<F>)
}

/**
 * Each route the reply came to, with what ended it; undefined when the plan has one route.
 *
 * @internal
 */
export const routeFailures = (run: ReplyRun<unknown>): ReadonlyArray<Routes.RouteFailure> | undefined => {
  if (run.routes.length < 2) return undefined
  return run.routes.filter((route) => route.visited).map((route) => ({
    route: route.planned!.ref.index,
    name: route.planned!.ref.name,
    model: route.planned!.ref.model,
    message: route.last?.message ?? "not tried",
    ...(route.last?.error === undefined ? {} : { error: route.last.error })
  }))
}

/**
 * A failure of the current route, seen by its circuit and counted: whether the route is left, and why. A transient
 * failure leaves a route only while a later one remains; the rest leave it whatever follows (and end the reply when
 * nothing does).
 *
 * @internal
 */
export const routeFailed = (
  run: ReplyRun<unknown>,
  error: ProviderFailure.ProviderFailure,
  verdict: Classification.Classification
): Effect.Effect<Routes.SwitchReason | undefined> =>
  Effect.gen(function*() {
    const route = run.routes[run.current]!
    route.last = { message: error.message, error }
    const retryable = verdict._tag === "Retryable"
    let circuit: Circuit.State = "closed"
    if (run.circuit !== undefined) {
      const key = route.planned!.key
      // the server answered a rejection of the request: it is up
      if (retryable) circuit = yield* run.circuit.failed(key)
      else yield* run.circuit.succeeded(key)
      run.reported(key)
    }
    if (TransportError.isTransportError(error) && error.reason === "MalformedChunk" && ++route.malformed >= 2) {
      return "MalformedChunk"
    }
    if (retryable) {
      if (run.current === run.routes.length - 1) return undefined
      if (circuit === "open" || route.sends >= route.limit) return "Transient"
      if (TransportError.isTransportError(error) && error.reason === "Timeout") return "Timeout"
      return undefined
    }
    if (ProviderRejection.isProviderRejection(error)) {
      switch (error.reason) {
        case "Authentication":
        case "Permission":
        case "NotFound":
        case "Quota":
          return "Rejected"
        case "ContextOverflow":
          return "ContextOverflow"
      }
    }
    return undefined
  })

/**
 * The route a reply goes to when it leaves the current one for `reason`; undefined when there is none.
 *
 * @internal
 */
export const nextRoute = (run: ReplyRun<unknown>, reason: Routes.SwitchReason): number | undefined => {
  const { current, routes } = run
  if (reason !== "ContextOverflow") return current + 1 < routes.length ? current + 1 : undefined
  // an overflow goes to the next route that declares a larger window than the one that overflowed
  const window = routes[current]!.planned?.route.contextWindow ?? 0
  for (let i = current + 1; i < routes.length; i++) {
    const larger = routes[i]!.planned?.route.contextWindow
    if (larger !== undefined && larger > window) return i
  }
  return undefined
}
