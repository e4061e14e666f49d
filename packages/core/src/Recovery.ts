/**
 * `Recovery` runs a generation as a sequence of attempts and commits exactly one of them.
 *
 * - Each attempt is one physical send, debited from the scope's {@link Budget.Budget} before it is sent.
 * - What an attempt yields is a preview: attempt-local, reported through {@link RecoveryNotifications}, never
 *   concatenated with another attempt's. Only an attempt whose stream reaches the protocol's terminal event
 *   (`Finish`) and completes is committed as a {@link Generation.Reply}.
 * - A failed attempt is replayed only when {@link Classification.classify} says it is retryable, replay is not
 *   disabled ({@link disabled}) and no chunk hook has run an external effect in it (`ExternalEffects`).
 * - The wait between attempts comes from {@link Policy}: the backoff schedule, lengthened by `Retry-After`, never
 *   begun when it would end past the deadline. A `Retry-After` past the deadline ends recovery at once.
 * - With a fleet ({@link FleetLimits}), a reply's first attempt credits the fleet's retry budget and every replay
 *   debits it (a refusal ends recovery with `FleetBudget`), a `Retry-After` pauses the whole fleet, and every send
 *   first waits out a pause in force, within the deadline. Without one nothing changes.
 * - A provider that reads a response the server keeps running (the Responses API's background mode) offers it
 *   through {@link Resumption}: a failed attempt of such a response is continued by the next attempt, which keeps
 *   the preview and adds what follows it, instead of being replayed; a response recovery leaves behind is cancelled
 *   on the server, once, waiting at most 2 s for its answer (docs/resume.md).
 * - With a plan of routes ({@link Routes}) in the context, {@link generate} follows it: the reply starts on the primary
 *   and moves to the next route, only while nothing is committed, when the failure is one the next route may not share
 *   (transient past the route's limit or with its circuit open, a timeout, a second malformed chunk, 401/403/404, a
 *   quota refusal, an overflow for a larger window); one budget covers every route (docs/routes.md).
 * - With {@link Pacing} provided, each attempt first waits for its turn of the event loop.
 * - Interruption is cancellation: it aborts the attempt in flight or the wait, commits nothing and is never
 *   classified.
 *
 * The engine is `internal/recovery.ts` and the modules it names; docs/recovery.md and docs/architecture.md describe it.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import type * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import type * as Budget from "./Budget.js"
import type * as Classification from "./Classification.js"
import type * as FleetLimits from "./FleetLimits.js"
import type * as Generation from "./Generation.js"
import type * as HookError from "./HookError.js"
import * as Engine from "./internal/recovery.js"
import type * as Pacing from "./Pacing.js"
import type * as Policy from "./Policy.js"
import * as Provider from "./Provider.js"
import type * as ProviderFailure from "./ProviderFailure.js"
import type * as RecoveryErrorFamily from "./RecoveryError.js"
import * as RecoveryNotifications from "./RecoveryNotifications.js"
import * as Telemetry from "./RecoveryTelemetry.js"
import type * as Resumption from "./Resumption.js"
import * as Routes from "./Routes.js"

/**
 * Everything a recovery scope may fail with: a failure that was not replayed (surfaced unchanged, with
 * `partialOutputChars` and, where replay was blocked, `replayBlocked`), exhaustion, or a failed hook. The family
 * lives in {@link RecoveryErrorFamily} (`@reprise/core/RecoveryError`); this is its union.
 *
 * @since 0.1.0
 * @category models
 */
export type RecoveryError = RecoveryErrorFamily.RecoveryError

/**
 * Generation hooks.
 *
 * - `beforeGeneration` runs once per reply, before the first attempt, and is not re-run on replay.
 * - `onChunk` runs for every surfaced event: it is an external, per-chunk effect. The attempt is marked effectful
 *   the moment it first runs, and a failure after that is surfaced with `replayBlocked: "ExternalEffects"`.
 * - `afterGeneration` runs once, after commit, outside recovery.
 *
 * A hook's failure is a {@link HookError.HookError} and is never replayed.
 *
 * @since 0.1.0
 * @category models
 */
export interface Hooks<R = never> extends Engine.Hooks<R> {}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> {
  readonly hooks?: Hooks<R> | undefined
  /**
   * Stop surfacing output after the first complete tool call. The stream is still drained to its terminal event
   * (for usage); if the drain fails, the attempt failed and its tool call is not committed.
   */
  readonly earlyBreakOnToolCall?: boolean | undefined
  /**
   * Attributes of the reply's `reprise.reply` span (see {@link Telemetry}); {@link generate} sets the GenAI ones
   * (`gen_ai.system`, `gen_ai.request.model`, …).
   */
  readonly spanAttributes?: Readonly<Record<string, unknown>> | undefined
  /**
   * The request the generation sends, for the ledger (see `Ledger`): its model names the attempts and its characters
   * estimate their input tokens when the provider reports none. {@link generate} sets it.
   */
  readonly request?: Generation.GenerationRequest | undefined
}

/**
 * Whether failed attempts may be replayed in the current fiber.
 *
 * @since 0.1.0
 * @category fiber refs
 */
export const currentReplay: FiberRef.FiberRef<boolean> = Engine.currentReplay

/**
 * Runs `self` with replay off: budget accounting and the ban on adapter retries stay, and every failure surfaces
 * unchanged after its single attempt. For consumers with no preview-reset protocol.
 *
 * @since 0.1.0
 * @category scopes
 */
export const disabled = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locally(self, currentReplay, false)

/**
 * Runs a generation with recovery and returns the committed reply. The stream is run once per attempt (adapted once
 * into the pull recovery reads); running it must make one physical send, reserved with `Budget.reserve` (providers
 * do this). A stream that reserves nothing is charged one send when it shows its first event or ends.
 *
 * @since 0.1.0
 * @category recovery
 */
export const run = <E extends ProviderFailure.ProviderFailure | Budget.BudgetExhausted, R, RH = never>(
  generation: Stream.Stream<Generation.GenerationEvent, E, R>,
  options: Options<RH> = {}
): Effect.Effect<Generation.Reply, RecoveryError, Exclude<R, Budget.Budget> | RH> =>
  // the stream's own scope is the attempt's, as running it as a stream would give it one of its own
  Engine.reply(Provider.fromStream(generation), options, Telemetry.meters(undefined)) as Effect.Effect<
    Generation.Reply,
    RecoveryError,
    Exclude<R, Budget.Budget> | RH
  >

/**
 * Runs a generation opened by `open` (a provider's `open`, see {@link Provider.Service}) with recovery: `open` runs
 * once per attempt, in the attempt's scope.
 *
 * @since 0.1.0
 * @category recovery
 */
export const runOpen = <E extends ProviderFailure.ProviderFailure | Budget.BudgetExhausted, R, RH = never>(
  open: Effect.Effect<Provider.Pull<E>, E, R>,
  options: Options<RH> = {}
): Effect.Effect<Generation.Reply, RecoveryError, Exclude<R, Budget.Budget | Scope.Scope> | RH> =>
  Engine.reply(open, options, Telemetry.meters(undefined))

/**
 * Runs one generation through the current {@link Provider.Provider} with recovery; with a plan of routes in the
 * context ({@link Routes.Routes}), along the plan instead: each route asked for its own model, a route left only
 * before commit (see {@link Routes}). The reply's span carries the GenAI attributes (`gen_ai.system`,
 * `gen_ai.request.model`, … of the primary) and its metrics are tagged with `gen_ai.system`.
 *
 * @since 0.1.0
 * @category recovery
 */
export const generate = <RH = never>(
  request: Generation.GenerationRequest,
  options: Options<RH> = {}
): Effect.Effect<Generation.Reply, RecoveryError, Provider.Provider | RH> =>
  Effect.flatMap(Effect.context<Provider.Provider>(), (context) => {
    const plan = Context.getOption(context, Routes.Routes)
    const provider = Option.isSome(plan) ? plan.value.routes[0].provider : Context.get(context, Provider.Provider)
    const model = Option.isSome(plan) ? plan.value.routes[0].model : request.model
    const system = Telemetry.systemOf(provider.protocol)
    const A = Telemetry.Attribute
    const spanned: Options<RH> = {
      ...options,
      request,
      spanAttributes: {
        [A.system]: system,
        [A.operation]: "chat",
        [A.protocol]: provider.protocol,
        [A.requestModel]: model,
        ...(request.maxTokens === undefined ? {} : { [A.requestMaxTokens]: request.maxTokens }),
        ...options.spanAttributes
      }
    }
    return Option.isSome(plan)
      ? Engine.replyRouted(plan.value, request, spanned, Telemetry.meters(system))
      : Engine.reply(provider.open(request), spanned, Telemetry.meters(system))
  })

/**
 * {@link run} as a stream of its notifications: `AttemptStarted`, `Preview`s, `AttemptDiscarded`, `RetryScheduled`
 * … ending after `Committed` (the stream then completes) or after `Exhausted`/`Failed` (the stream then fails with
 * the error). Notifications go to this stream instead of the bound {@link RecoveryNotifications}. Stopping the
 * stream early interrupts the generation.
 *
 * @since 0.1.0
 * @category recovery
 */
export const stream = <E extends ProviderFailure.ProviderFailure | Budget.BudgetExhausted, R, RH = never>(
  generation: Stream.Stream<Generation.GenerationEvent, E, R>,
  options: Options<RH> = {}
): Stream.Stream<RecoveryNotifications.Notification, RecoveryError, Exclude<R, Budget.Budget> | RH> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    // neither making nor shutting down an unbounded queue waits
    const queue = yield* Effect.acquireRelease(
      Queue.unbounded<Take.Take<RecoveryNotifications.Notification, RecoveryError>>(),
      Queue.shutdown
    )
    yield* run(generation, options).pipe(
      Effect.provideService(RecoveryNotifications.RecoveryNotifications, {
        notify: (notification) => Queue.offer(queue, Take.of(notification))
      }),
      Effect.exit,
      Effect.flatMap((exit) => Queue.offer(queue, Exit.isSuccess(exit) ? Take.end : Take.failCause(exit.cause))),
      Effect.forkScoped
    )
    return Stream.flattenTake(Stream.fromQueue(queue))
  }))
