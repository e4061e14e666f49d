/**
 * The engine behind `Recovery`: one reply as a sequence of attempts, each attempt one read of the generation's pull in
 * a scope of its own, and what follows a failed attempt decided in that attempt's span (discard, classify, replay,
 * continue or stop).
 *
 * This module holds the engine's entry points and the types `Recovery` builds on. A reply's run is `ReplyRun`
 * (`replyRun.ts`), one attempt `AttemptRun` (`attemptRun.ts`); the routes of a plan as a reply follows them are in
 * `routeRun.ts`, the reply's part in the fleet's limits in `fleetChecks.ts`, the wait before the next attempt in
 * `wait.ts`, and the regions the reply and its attempts run in, with the facts on their spans, in `spans.ts`.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import type * as Scope from "effect/Scope"
import * as Tracer from "effect/Tracer"
import * as Budget from "../Budget.js"
import * as Circuit from "../Circuit.js"
import * as FleetLimits from "../FleetLimits.js"
import type * as Generation from "../Generation.js"
import * as Pacing from "../Pacing.js"
import * as Policy from "../Policy.js"
import * as Prices from "../Prices.js"
import type * as Provider from "../Provider.js"
import type * as RecoveryErrorFamily from "../RecoveryError.js"
import * as RecoveryNotifications from "../RecoveryNotifications.js"
import * as Telemetry from "../RecoveryTelemetry.js"
import * as Resumption from "../Resumption.js"
import * as Routes from "../Routes.js"
import type { AttemptError } from "./attemptRun.js"
import { ReplyRun } from "./replyRun.js"
import { RouteRun } from "./routeRun.js"
import { endSpan, region } from "./spans.js"

type RecoveryError = RecoveryErrorFamily.RecoveryError

/** @internal */
export interface Hooks<R> {
  readonly beforeGeneration?: Effect.Effect<void, unknown, R> | undefined
  readonly onChunk?:
    | ((event: Generation.GenerationEvent, attempt: number) => Effect.Effect<void, unknown, R>)
    | undefined
  readonly afterGeneration?: ((reply: Generation.Reply) => Effect.Effect<void, unknown, R>) | undefined
}

/** @internal */
export interface Options<R> {
  readonly hooks?: Hooks<R> | undefined
  readonly earlyBreakOnToolCall?: boolean | undefined
  readonly spanAttributes?: Readonly<Record<string, unknown>> | undefined
  readonly request?: Generation.GenerationRequest | undefined
}

/**
 * A generation as recovery runs it: opened once per attempt, in the attempt's scope, it sends the request (reserving
 * the send through `Budget.reserve`) and returns the pull of its events.
 *
 * @internal
 */
export type Open<E, R> = Effect.Effect<Provider.Pull<E>, E, R | Scope.Scope>

/**
 * Whether failed attempts may be replayed in the current fiber (`Recovery.currentReplay`).
 *
 * @internal
 */
export const currentReplay: FiberRef.FiberRef<boolean> = FiberRef.unsafeMake(true)

/**
 * Runs one reply: `beforeGeneration`, the attempts, then the commit told and `afterGeneration`, in the reply's span,
 * within the enclosing scope's {@link Budget.Budget} (or a new one).
 *
 * @internal
 */
export const reply = <E extends AttemptError, R, RH>(
  open: Open<E, R>,
  options: Options<RH>,
  meters: Telemetry.Meters
): Effect.Effect<Generation.Reply, RecoveryError, Exclude<R, Budget.Budget | Scope.Scope> | RH> =>
  replyOf([new RouteRun(open as Open<AttemptError, never>, undefined)], undefined, options, meters) as Effect.Effect<
    Generation.Reply,
    RecoveryError,
    Exclude<R, Budget.Budget | Scope.Scope> | RH
  >

/**
 * Runs one reply of `request` along `plan` (see `Routes`): each route opened with its own model, in order, with the
 * circuits of the context.
 *
 * @internal
 */
export const replyRouted = <RH>(
  plan: Routes.Plan,
  request: Generation.GenerationRequest,
  options: Options<RH>,
  meters: Telemetry.Meters
): Effect.Effect<Generation.Reply, RecoveryError, RH> =>
  replyOf(
    plan.routes.map((route, index) =>
      new RouteRun(
        route.provider.open({ ...request, model: route.model }) as Open<AttemptError, never>,
        { route, ref: Routes.refOf(plan, index), key: Routes.key(route) }
      )
    ),
    plan,
    options,
    meters
  )

const replyOf = <RH>(
  routes: ReadonlyArray<RouteRun>,
  plan: Routes.Plan | undefined,
  options: Options<RH>,
  meters: Telemetry.Meters
): Effect.Effect<Generation.Reply, RecoveryError, RH> =>
  Effect.flatMap(
    Effect.context<never>(),
    (context) =>
      Effect.flatMap(Effect.zip(Budget.enclosingOrNew, FiberRef.get(currentReplay)), ([allowance, replay]) => {
        const run = new ReplyRun<RH>(
          routes,
          plan === undefined ? undefined : Context.get(context, Circuit.Circuit),
          options,
          meters,
          allowance,
          // the reply's settings, read from the context once
          replay,
          Context.get(context, Policy.PolicySettings),
          Context.get(context, RecoveryNotifications.RecoveryNotifications),
          Context.get(context, FleetLimits.FleetLimits),
          Context.get(context, Pacing.Pacing),
          Context.get(context, Prices.Prices)
        )
        return region(
          Effect.makeSpan(Telemetry.SpanName.reply, {
            attributes: options.spanAttributes ?? {},
            captureStackTrace: false
          }),
          (span) =>
            Context.make(Budget.Budget, allowance).pipe(
              Context.add(Resumption.Resumption, run),
              Context.add(Tracer.ParentSpan, span)
            ),
          () => run.run(),
          // interrupted, the background response the reply was reading is cancelled; the cancel's own defect is joined
          // to the interruption, as `Effect.onInterrupt` joins a finalizer's
          (span, exit) =>
            Effect.zipRight(
              run.releaseProbe(),
              Exit.isFailure(exit) && Cause.isInterruptedOnly(exit.cause)
                ? Effect.flatMap(Effect.exit(run.abandon()), (cancelled) =>
                  Exit.isSuccess(cancelled)
                    ? endSpan(span, exit)
                    : Effect.zipRight(
                      endSpan(span, Exit.failCause(Cause.sequential(exit.cause, cancelled.cause))),
                      Effect.failCause(cancelled.cause)
                    ))
                : endSpan(span, exit)
            )
        )
      })
  )
