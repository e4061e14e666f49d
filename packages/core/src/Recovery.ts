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
 *   on the server, once (docs/resume.md).
 * - Attempts are paced by {@link Pacing}: at most `attemptsPerTurn` (default 8) start in one turn of the event loop,
 *   so that a burst of replies puts its first requests on the wire while it builds the rest.
 * - Interruption is cancellation: it aborts the attempt in flight or the wait, commits nothing and is never
 *   classified.
 *
 * @since 0.1.0
 */
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import { globalValue } from "effect/GlobalValue"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import * as Tracer from "effect/Tracer"
import * as Budget from "./Budget.js"
import * as Classification from "./Classification.js"
import * as FleetLimits from "./FleetLimits.js"
import * as Generation from "./Generation.js"
import * as HookError from "./HookError.js"
import { Accumulator } from "./internal/attempt.js"
import * as Fiber from "./internal/fiber.js"
import * as Pace from "./internal/pacing.js"
import * as Pacing from "./Pacing.js"
import * as Policy from "./Policy.js"
import * as Provider from "./Provider.js"
import * as ProviderFailure from "./ProviderFailure.js"
import * as RecoveryErrorFamily from "./RecoveryError.js"
import * as RecoveryExhausted from "./RecoveryExhausted.js"
import * as RecoveryNotifications from "./RecoveryNotifications.js"
import * as Telemetry from "./RecoveryTelemetry.js"
import * as Resumption from "./Resumption.js"
import * as TransportError from "./TransportError.js"

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
export interface Hooks<R = never> {
  readonly beforeGeneration?: Effect.Effect<void, unknown, R> | undefined
  readonly onChunk?:
    | ((event: Generation.GenerationEvent, attempt: number) => Effect.Effect<void, unknown, R>)
    | undefined
  readonly afterGeneration?: ((reply: Generation.Reply) => Effect.Effect<void, unknown, R>) | undefined
}

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
}

const A = Telemetry.Attribute
const N = RecoveryNotifications.Notification

/**
 * Whether failed attempts may be replayed in the current fiber.
 *
 * @since 0.1.0
 * @category fiber refs
 */
export const currentReplay: FiberRef.FiberRef<boolean> = globalValue(
  Symbol.for("@reprise/core/Recovery/currentReplay"),
  () => FiberRef.unsafeMake(true)
)

/**
 * Runs `self` with replay off: budget accounting and the ban on adapter retries stay, and every failure surfaces
 * unchanged after its single attempt. For consumers with no preview-reset protocol.
 *
 * @since 0.1.0
 * @category scopes
 */
export const disabled = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.locally(self, currentReplay, false)

type AttemptError = ProviderFailure.ProviderFailure | HookError.HookError | Budget.BudgetExhausted

/** `attempt` is the number of the attempt's send; `undefined` when the run failed before it reserved one. */
type Outcome =
  | { readonly _tag: "Completed"; readonly acc: Accumulator; readonly attempt: number }
  | {
    readonly _tag: "Failed"
    readonly acc: Accumulator
    readonly attempt: number | undefined
    readonly error: AttemptError
    /** When recovery saw the failure (`Clock`, nanoseconds): the wait before the next attempt runs from here. */
    readonly failedAt: bigint
  }

/**
 * The wait before the next attempt: `delay` counted from `since`, the moment the failed attempt's failure reached
 * recovery (`Clock`, nanoseconds). What recovery did since (the attempt's scope closed, the failure classified and
 * told) is inside the wait, not added to it; a wait that is already over is not begun (docs/recovery.md, "When the
 * wait starts").
 */
const waitFrom = (delay: Duration.Duration, since: bigint): Effect.Effect<void> =>
  Effect.flatMap(leftOf(delay, since), (left) => Duration.isZero(left) ? Effect.void : Effect.sleep(left))

/** What is left now of `delay` counted from `since` (`Clock`, nanoseconds); zero once it is over. */
const leftOf = (delay: Duration.Duration, since: bigint): Effect.Effect<Duration.Duration> =>
  Effect.map(Clock.currentTimeNanos, (now) => {
    const left = Duration.unsafeToNanos(delay) - (now - since)
    return left > 0n ? Duration.nanos(left) : Duration.zero
  })

/** The next attempt continues the response of the one before it, and adds to what it had surfaced. */
interface Pending {
  readonly continuation: Resumption.Continuation
  readonly responseId: string
  readonly acc: Accumulator
}

/**
 * One run of the generation: the attempt. The sender reserves its send, once: the stream is given the scope's
 * allowance, observed (the run itself, an {@link Budget.Allowance} whose `reserve` is watched). Its first reservation
 * is the attempt's (`ReplyRun.started` gets the number it got); a further one in the same run (a capability fallback)
 * first passes `ReplyRun.resend`, the fleet's checks. A run that shows an event or ends before reserving (a stream that
 * is not a provider) is charged at that moment, so no output is committed without a debit; a run that fails before
 * reserving sent nothing (a request refused before it was sent, no attempt left).
 *
 * A continuation (see `Resumption`) runs with the accumulator of the attempt it continues, so the reply is the
 * response's whole output; a provider's `Resumption.offer` goes to the reply.
 *
 * One object per attempt, its steps on the prototype, for the reason {@link ReplyRun} is one (fix 36). Not a
 * generator: a suspended `Effect.gen` body is held on the fiber's stack for as long as the attempt reads its stream
 * (fix 21).
 */
class AttemptRun<RH> implements Budget.Allowance {
  readonly acc: Accumulator
  readonly onChunk: Hooks<RH>["onChunk"]
  /**
   * Nobody listens and no hook runs: a chunk's events are recorded in one step, with no effect or `Preview` per event
   * (the previews would be dropped). Otherwise each event is surfaced in turn, as it comes.
   */
  readonly quiet: boolean
  attempt: number | undefined = undefined
  /**
   * The moment the provider's failure reached recovery, before the attempt's scope closes (its body released, its
   * request's span ended), or the earlier moment the provider observed it (`ProviderFailure.markObserved`), if that is
   * after this attempt's send was debited (a mark from before it is not this attempt's): the backoff is counted from
   * here, so that work is done inside the wait.
   */
  failedAt: bigint | undefined = undefined
  debitedAt: bigint | undefined = undefined

  constructor(
    readonly reply: ReplyRun<any, any, RH>,
    readonly resumed: Pending | undefined,
    readonly span: Tracer.Span
  ) {
    const options = reply.options
    this.acc = resumed?.acc ?? new Accumulator(options.earlyBreakOnToolCall === true)
    this.onChunk = options.hooks?.onChunk
    this.quiet = this.onChunk === undefined && reply.silent
  }

  // The observed allowance: the reply's, but for `reserve`.
  get settings(): Budget.Settings {
    return this.reply.allowance.settings
  }
  get startedAt(): bigint {
    return this.reply.allowance.startedAt
  }
  get deadlineAt(): bigint {
    return this.reply.allowance.deadlineAt
  }
  get used(): Effect.Effect<number> {
    return this.reply.allowance.used
  }
  get remainingAttempts(): Effect.Effect<number> {
    return this.reply.allowance.remainingAttempts
  }
  get remainingTime(): Effect.Effect<Duration.Duration> {
    return this.reply.allowance.remainingTime
  }
  get elapsed(): Effect.Effect<Duration.Duration> {
    return this.reply.allowance.elapsed
  }
  get reserve(): Effect.Effect<number, Budget.BudgetExhausted> {
    return Effect.suspend(() =>
      this.attempt === undefined ? this.start() : Effect.zipRight(this.reply.resend(), this.reply.allowance.reserve)
    )
  }

  seen(error: unknown): Effect.Effect<void> {
    return Effect.map(Clock.currentTimeNanos, (now) => {
      const observed = ProviderFailure.observedAt(error)
      const debitedAt = this.debitedAt
      this.failedAt ??= observed !== undefined && debitedAt !== undefined && observed >= debitedAt && observed < now
        ? observed
        : now
    })
  }

  start(): Effect.Effect<number, Budget.BudgetExhausted> {
    return Effect.flatMap(this.reply.allowance.reserve, (n) =>
      Effect.withFiberRuntime<number>((fiber) => {
        this.attempt = n
        this.debitedAt = Fiber.clock(fiber).unsafeCurrentTimeNanos()
        const started = this.reply.started(this.resumed, n, fiber)
        return started === undefined ? Effect.succeed(n) : Effect.as(started, n)
      }))
  }

  charged(): Effect.Effect<void, Budget.BudgetExhausted> {
    return Effect.suspend(() => this.attempt === undefined ? Effect.asVoid(this.start()) : Effect.void)
  }

  surfaced(event: Generation.GenerationEvent, attempt: number): Effect.Effect<void, HookError.HookError, RH> {
    const acc = this.acc
    if (!acc.add(event)) return Effect.void
    const preview = this.reply.notify(N.Preview({ attempt, event }))
    const onChunk = this.onChunk
    if (onChunk === undefined) return preview
    return Effect.zipRight(
      preview,
      Effect.suspend(() => {
        acc.effectful = true
        return Effect.mapError(
          onChunk(event, attempt),
          (cause) => new HookError.HookError({ hook: "onChunk", attempt, cause })
        )
      })
    )
  }

  record(events: Chunk.Chunk<Generation.GenerationEvent>): void {
    // by index: `for…of` made an iterator result per event where the loop ran unoptimised, 9.4 MB of the 650 MB
    // figure 3's reprise client allocated (docs/performance.md, fix 29)
    const array = Chunk.toReadonlyArray(events)
    const acc = this.acc
    for (let i = 0; i < array.length; i++) {
      acc.add(array[i])
    }
  }

  /**
   * The stream runs with the attempt's observed allowance (its provider reserves through it); a listener or a hook
   * runs with the reply's own, as it would outside the stream.
   */
  surfacedChunk(
    events: Chunk.Chunk<Generation.GenerationEvent>,
    attempt: number
  ): Effect.Effect<void, HookError.HookError, RH> {
    return this.quiet
      ? Effect.sync(() => this.record(events))
      : Effect.provideService(
        Effect.forEach(events, (event) => this.surfaced(event, attempt), { discard: true }),
        Budget.Budget,
        this.reply.allowance
      )
  }

  onEvents(
    events: Chunk.Chunk<Generation.GenerationEvent>
  ): Effect.Effect<void, HookError.HookError | Budget.BudgetExhausted, RH> {
    const attempt = this.attempt
    return attempt === undefined
      ? Effect.zipRight(this.charged(), Effect.suspend(() => this.surfacedChunk(events, this.attempt!)))
      : this.surfacedChunk(events, attempt)
  }

  failed(error: AttemptError): Effect.Effect<Outcome> {
    const outcome = (): Outcome => ({
      _tag: "Failed",
      acc: this.acc,
      attempt: this.attempt,
      error,
      failedAt: this.failedAt!
    })
    return this.failedAt === undefined ? Effect.map(this.seen(error), outcome) : Effect.succeed(outcome())
  }

  /** Complete once its stream is, if the terminal arrived. */
  finished(): Effect.Effect<Outcome> {
    return this.acc.finish === undefined
      ? this.failed(
        new TransportError.TransportError({
          reason: "PrematureEof",
          detail: "the stream ended without the protocol's terminal event"
        }, { disableValidation: true })
      )
      : Effect.succeed({ _tag: "Completed", acc: this.acc, attempt: this.attempt! })
  }

  /**
   * The attempt in its region, made by `ReplyRun.attemptInSpan` in its span, uninterruptible but for `restore`: its
   * services (the observed `Budget`, the reply as the `Resumption` service, the span as the parent of the provider's)
   * and its `Scope` (made here, closed with the read's exit) in the fiber's context while its stream is read, then what
   * follows from its outcome decided in the span (`ReplyRun.decideFailure`), and the span ended. One region where
   * `Effect.useSpan` and `Effect.scoped` over `Effect.provide` made three, each with its frames on the fiber's stack
   * while the attempt reads its stream (fixes 21, 32 and 36). The attempt's services are provided to the whole run, not
   * as stages of the stream: a stream stage per attempt measurably costs memory (the chunks' listener and hook get the
   * reply's allowance back, `surfacedChunk`).
   */
  region<E extends ProviderFailure.ProviderFailure | Budget.BudgetExhausted, R>(
    generation: Stream.Stream<Generation.GenerationEvent, E, R>,
    restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  ): Effect.Effect<Decision, never, Exclude<R, Budget.Budget> | RH> {
    // A provider's stream is read by its pull when it was made from one (`Provider.fromPull`), in the attempt's scope:
    // the same chunks, without the stream's channel and sink per chunk (docs/performance.md, fix 17). Any other stream
    // is run as a stream, in no scope of the attempt's.
    const open = Provider.pullOf(generation)
    const read = (open === undefined
      ? Stream.runForEachChunk(generation, (events) => this.onEvents(events))
      : Effect.matchEffect(open, {
        onFailure: (error) => Effect.zipRight(this.seen(error), Effect.fail(error)),
        onSuccess: (pull) => {
          // One step per pull, from its result to the next pull: a chunk nobody hears is recorded right there, with no
          // effect of its own (fix 32).
          const loop: Effect.Effect<void, E | HookError.HookError | Budget.BudgetExhausted, R | RH> = Effect
            .matchEffect(pull, {
              onFailure: (end) =>
                Option.isNone(end) ? Effect.void : Effect.zipRight(this.seen(end.value), Effect.fail(end.value)),
              onSuccess: (events) => {
                if (!this.quiet || this.attempt === undefined) return Effect.zipRight(this.onEvents(events), loop)
                this.record(events)
                return loop
              }
            })
          return loop
        }
      })) as Effect.Effect<void, AttemptError, never>
    // one copy of the outer context's services, where a `Context.add` per service made one each (fix 40)
    const services = (outer: Context.Context<never>, scope: Scope.CloseableScope | undefined) => {
      const map = new Map(outer.unsafeMap)
      map.set(Budget.Budget.key, this as Budget.Allowance)
      map.set(Resumption.Resumption.key, this.reply)
      map.set(Tracer.ParentSpan.key, this.span)
      if (scope !== undefined) map.set(Scope.Scope.key, scope)
      return Context.unsafeMake<never>(map)
    }
    const inScope = (scope: Scope.CloseableScope | undefined) =>
      Effect.flatMap(
        FiberRef.getAndUpdate(FiberRef.currentContext, (outer) => services(outer, scope)),
        (outer) => {
          // the context restored, then the scope closed with the read's exit; a scope that fails to close fails the
          // read, as `Effect.scoped`'s release does
          const release = (exit: Exit.Exit<void, AttemptError>): Effect.Effect<Exit.Exit<void, AttemptError>> => {
            const restored = FiberRef.set(FiberRef.currentContext, outer)
            if (scope === undefined) return Effect.as(restored, exit)
            return Effect.matchCause(Effect.zipRight(restored, Scope.close(scope, exit)), {
              onFailure: (closing) =>
                Exit.failCause(Exit.isFailure(exit) ? Cause.sequential(exit.cause, closing) : closing),
              onSuccess: () => exit
            })
          }
          return Effect.flatMap(
            Effect.matchCauseEffect(restore(read), {
              onFailure: (cause) => release(Exit.failCause(cause)),
              onSuccess: () => release(Exit.void)
            }),
            (exit) => this.decided(exit, restore)
          )
        }
      )
    return (open === undefined ? inScope(undefined) : Effect.flatMap(Scope.make(), inScope)) as Effect.Effect<
      Decision,
      never,
      Exclude<R, Budget.Budget> | RH
    >
  }

  /**
   * What follows from the read's exit, decided in the attempt's span and ended with it: a committed attempt's span
   * succeeds, a failed one's fails with the attempt's own error, and a defect or an interruption ends it with that.
   */
  decided(
    exit: Exit.Exit<void, AttemptError>,
    restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
  ): Effect.Effect<Decision, never, RH> {
    const span = this.span
    const decide = (outcome: Outcome): Effect.Effect<Decision, never, RH> =>
      outcome._tag === "Completed"
        ? Effect.succeed(this.reply.committed(span, outcome))
        : this.reply.decideFailure(span, outcome)
    // The read's exit matched as `Effect.matchEffect` matches it, outside `restore`: a defect (the read's, or a
    // finalizer's joined to it) or an interruption goes on as it is, even with an interruption pending. Only what
    // follows a failure or a success runs interruptibly.
    const decision: Effect.Effect<Decision, never, RH> = Effect.matchEffect(exit, {
      onFailure: (error) => restore(Effect.flatMap(this.failed(error), decide)),
      onSuccess: () =>
        restore(Effect.flatMap(
          // a run that reserved nothing is charged here, in its attempt's span (provided only then: a region costs
          // two copies of the fiber's refs and one of its context, for the `Effect.void` of a run that reserved)
          this.attempt === undefined
            ? Effect.matchEffect(Effect.provideService(this.charged(), Tracer.ParentSpan, span), {
              onFailure: (error) => this.failed(error),
              onSuccess: () => this.finished()
            })
            : this.finished(),
          decide
        ))
    })
    return Effect.matchCauseEffect(decision, {
      onFailure: (cause) => Effect.zipRight(endSpan(span, Exit.failCause(cause)), Effect.failCause(cause)),
      onSuccess: (decision): Effect.Effect<Decision> =>
        decision._tag === "Commit"
          ? Effect.as(endSpan(span, Exit.void), decision)
          // failed as `Effect.fail` fails, which captures the current span (the reply's) in the error, as the span's
          // failure did when it was `Effect.useSpan`'s
          : Effect.flatMap(Effect.exit(Effect.fail(decision.error)), (failed) =>
            Effect.as(endSpan(span, failed), decision))
    })
  }
}

/**
 * Runs a generation with recovery and returns the committed reply. The stream is run once per attempt; running it
 * must make one physical send (providers guarantee this).
 *
 * @since 0.1.0
 * @category recovery
 */
export const run = <E extends ProviderFailure.ProviderFailure | Budget.BudgetExhausted, R, RH = never>(
  generation: Stream.Stream<Generation.GenerationEvent, E, R>,
  options: Options<RH> = {}
): Effect.Effect<Generation.Reply, RecoveryError, Exclude<R, Budget.Budget> | RH> =>
  runWith(generation, options, Telemetry.meters(undefined))

/** {@link run}, its metrics `meters` (tagged with the provider's `gen_ai.system` by {@link generate}). */
const runWith = <E extends ProviderFailure.ProviderFailure | Budget.BudgetExhausted, R, RH>(
  generation: Stream.Stream<Generation.GenerationEvent, E, R>,
  options: Options<RH>,
  meters: Telemetry.Meters
): Effect.Effect<Generation.Reply, RecoveryError, Exclude<R, Budget.Budget> | RH> =>
  Effect.withFiberRuntime((fiber) => replyOn(fiber, generation, options, meters))

/** {@link runWith} on the fiber in hand: its `Budget` read from it at once (fix 32). */
const replyOn = <E extends ProviderFailure.ProviderFailure | Budget.BudgetExhausted, R, RH>(
  fiber: Fiber.Running,
  generation: Stream.Stream<Generation.GenerationEvent, E, R>,
  options: Options<RH>,
  meters: Telemetry.Meters
): Effect.Effect<Generation.Reply, RecoveryError, Exclude<R, Budget.Budget> | RH> => {
  const allowance = Budget.enclosingOrNewIn(fiber)
  // The reply's span, its Budget and its end in one region: what `Effect.useSpan` over `Effect.provide` and
  // `Effect.onInterrupt` did in three, each with its frames on the fiber's stack for as long as the reply is in flight,
  // and their operations on every reply (docs/performance.md, fixes 19 and 36).
  return Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(
      Effect.makeSpan(Telemetry.SpanName.reply, {
        attributes: options.spanAttributes ?? {},
        captureStackTrace: false
      }),
      (span) => {
        const reply = new ReplyRun(fiber, generation, options, meters, allowance, span)
        return Effect.flatMap(
          FiberRef.getAndUpdate(
            FiberRef.currentContext,
            (outer) => {
              // one copy of the outer context's services (fix 40)
              const map = new Map(outer.unsafeMap)
              map.set(Budget.Budget.key, allowance)
              map.set(Tracer.ParentSpan.key, span)
              return Context.unsafeMake<never>(map)
            }
          ),
          (outer) => reply.region(restore, outer)
        )
      }
    )
  ) as Effect.Effect<Generation.Reply, RecoveryError, Exclude<R, Budget.Budget> | RH>
}

/**
 * Ends `span` with `exit`, as `Effect.useSpan` ends its span: at the `Clock`'s time when the tracer's timing is on, and
 * not again once it has ended.
 */
const endSpan = (span: Tracer.Span, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> =>
  Effect.withFiberRuntime((fiber) => {
    if (span.status._tag !== "Ended") {
      span.end(
        fiber.getFiberRef(FiberRef.currentTracerTimingEnabled) ? Fiber.clock(fiber).unsafeCurrentTimeNanos() : 0n,
        exit
      )
    }
    return Effect.void
  })

/** The end of a failed attempt's run decided by the fleet, for a resend inside an attempt that it refused. */
interface FleetStop {
  readonly reason: RecoveryExhausted.Reason
  readonly retryAfter?: Duration.Duration
}

/** What one attempt led to, decided inside its span. */
type Decision =
  | { readonly _tag: "Commit"; readonly reply: Generation.Reply }
  | { readonly _tag: "Stop"; readonly error: AttemptError; readonly stop: Effect.Effect<never, RecoveryError> }
  | {
    readonly _tag: "Retry"
    readonly error: AttemptError
    readonly delay: Duration.Duration
    readonly failedAt: bigint
  }
  | {
    readonly _tag: "Resume"
    readonly error: AttemptError
    readonly delay: Duration.Duration
    readonly failedAt: bigint
    readonly pending: Pending
  }

/**
 * The body of {@link runWith}: one reply's attempts, within `allowance`, in the reply's span `replySpan` (both in the
 * fiber's context while the reply runs: `replyOn` and {@link ReplyRun.region}).
 *
 * One object per reply, its steps on the prototype: a reply that built its steps as closures held about thirty of
 * them, and their function contexts, for as long as it was in flight, and each scavenge copied them
 * (docs/performance.md, fix 36). A step is built when it is needed (the wait, the backoff, the fleet's checks, the
 * cancel of a response left behind), most of them only after a failure. The reply is also the `Resumption` service of
 * its attempts ({@link ReplyRun.offer}).
 */
class ReplyRun<E extends ProviderFailure.ProviderFailure | Budget.BudgetExhausted, R, RH>
  implements Resumption.Service
{
  readonly replay: boolean
  readonly policy: Policy.Settings
  readonly notifications: RecoveryNotifications.Service
  readonly silent: boolean
  readonly fleet: FleetLimits.Service
  readonly attemptsPerTurn: number
  /** The backoff's schedule and its state, made at the first failure: most replies never need them. */
  planner: Policy.Planner | undefined = undefined
  readonly errors: Array<ProviderFailure.ProviderFailure> = []
  /** Physical sends made by this reply (the budget's count is shared with nested scopes). */
  attemptsOfReply = 0
  /** Characters of preview the last failed attempt had shown (for the exhaustion and `Failed`). */
  lastShown: number | undefined = undefined
  /**
   * Why the fleet stopped a resend inside an attempt: that attempt then fails with a BudgetExhausted, which ends
   * recovery with this reason instead.
   */
  fleetStop: FleetStop | undefined = undefined
  /**
   * The response the current attempt reads, when its provider offered one that can outlive the connection
   * (`Resumption`); the continuation of a cut response runs with it.
   */
  live: Resumption.Resumable | undefined = undefined
  pending: Pending | undefined = undefined

  constructor(
    fiber: Fiber.Running,
    readonly generation: Stream.Stream<Generation.GenerationEvent, E, R>,
    readonly options: Options<RH>,
    readonly meters: Telemetry.Meters,
    readonly allowance: Budget.Allowance,
    readonly replySpan: Tracer.Span
  ) {
    // the reply's settings read from the fiber once, not one yielded effect each (fix 32); looked up once per reply,
    // not once per event
    const context = fiber.currentContext
    this.replay = fiber.getFiberRef(currentReplay)
    this.policy = Context.get(context, Policy.PolicySettings)
    this.notifications = Context.get(context, RecoveryNotifications.RecoveryNotifications)
    this.silent = RecoveryNotifications.isSilent(this.notifications)
    this.fleet = Context.get(context, FleetLimits.FleetLimits)
    this.attemptsPerTurn = Pace.pacedOn(fiber) ? Context.get(context, Pacing.PacingSettings).attemptsPerTurn : Infinity
  }

  notify(notification: RecoveryNotifications.Notification): Effect.Effect<void> {
    return this.notifications.notify(notification)
  }

  /**
   * `Resumption.Service`: the provider's offer of the response the current attempt reads. A function of its own, not a
   * method: a provider may take it off the service (`const { offer } = …`).
   */
  readonly offer = (resumable: Resumption.Resumable): Effect.Effect<void> =>
    Effect.sync(() => {
      this.live = resumable
    })

  exhausted(
    reason: RecoveryExhausted.Reason,
    retryAfter?: Duration.Duration
  ): Effect.Effect<never, RecoveryExhausted.RecoveryExhausted> {
    const self = this
    return Effect.gen(function*() {
      const { allowance, errors, lastShown } = self
      const error = new RecoveryExhausted.RecoveryExhausted({
        reason,
        attempts: yield* allowance.used,
        maxAttempts: allowance.settings.maxAttempts,
        elapsed: yield* allowance.elapsed,
        errors: [...errors],
        ...(errors.length > 0 ? { lastError: errors[errors.length - 1] } : {}),
        ...(retryAfter === undefined ? {} : { retryAfter }),
        ...(lastShown === undefined ? {} : { partialOutputChars: lastShown })
      })
      yield* self.notify(N.Exhausted({ error }))
      yield* Metric.increment(self.meters.exhaustions(reason))
      yield* Effect.annotateCurrentSpan({ [A.exhaustedReason]: reason, [A.attempts]: self.attemptsOfReply })
      return yield* Effect.fail(error)
    })
  }

  /** Recovery ends with the fleet's reason when the fleet stopped a resend, otherwise with the budget's. */
  budgetStop(error: Budget.BudgetExhausted): Effect.Effect<never, RecoveryExhausted.RecoveryExhausted> {
    const fleetStop = this.fleetStop
    return fleetStop === undefined
      ? this.exhausted(error.reason)
      : this.exhausted(fleetStop.reason, fleetStop.retryAfter)
  }

  surface<A extends RecoveryError>(error: A): Effect.Effect<never, A> {
    return Effect.zipRight(
      Effect.zipRight(
        this.notify(N.Failed({ error, partialOutputChars: this.lastShown ?? 0 })),
        Effect.zipRight(
          Metric.increment(this.meters.surfaced(error._tag)),
          Effect.annotateCurrentSpan({
            [A.attempts]: this.attemptsOfReply,
            [A.errorClass]: Telemetry.errorClass(error)
          })
        )
      ),
      Effect.fail(error)
    )
  }

  /**
   * Waits out the fleet's pause, announcing each wait, before the next send. Returns the pause left when it would end
   * past the deadline (nothing is waited then).
   */
  waitForFleet(first: Option.Option<FleetLimits.Pause>): Effect.Effect<Option.Option<Duration.Duration>> {
    const self = this
    return Effect.gen(function*() {
      const { allowance, fleet } = self
      let pause = first
      while (Option.isSome(pause)) {
        const { remaining, status } = pause.value
        const now = yield* Clock.currentTimeNanos
        const nanos = Option.getOrElse(Duration.toNanos(remaining), () => allowance.deadlineAt - now)
        if (now + nanos >= allowance.deadlineAt) return Option.some(remaining)
        yield* self.notify(N.FleetPaused({
          attempt: (yield* allowance.used) + 1,
          delay: remaining,
          status,
          remainingTime: Duration.nanos(allowance.deadlineAt - now)
        }))
        yield* Effect.sleep(remaining)
        pause = yield* fleet.paused
      }
      return Option.none()
    })
  }

  /**
   * A Retry-After pauses the fleet until it is over counted from the failure, as this reply's own wait is, so the
   * pause ends with that wait (counted from the moment it is told, it would outlast it by recovery's bookkeeping).
   */
  pushback(error: AttemptError, failedAt: bigint): Effect.Effect<void> {
    return TransportError.isTransportError(error) && error.retryAfter !== undefined
      ? Effect.flatMap(
        leftOf(error.retryAfter, failedAt),
        (delay) => this.fleet.pushback(error.status === undefined ? { delay } : { delay, status: error.status })
      )
      : Effect.void
  }

  /** The fleet's checks for a resend inside an attempt (a capability fallback): a replay for the fleet. */
  resend(): Effect.Effect<void, Budget.BudgetExhausted> {
    const self = this
    return Effect.gen(function*() {
      const withdrawal = yield* self.fleet.withdraw
      const beyond = withdrawal.allowed ? yield* self.waitForFleet(yield* self.fleet.paused) : Option.none()
      if (withdrawal.allowed && Option.isNone(beyond)) return
      self.fleetStop = Option.match(beyond, {
        onNone: (): FleetStop => ({ reason: "FleetBudget" }),
        onSome: (retryAfter): FleetStop => ({ reason: "RetryAfterBeyondDeadline", retryAfter })
      })
      return yield* Budget.deadlineReached(self.allowance)
    })
  }

  resumableNow(): Resumption.Resumable | undefined {
    const live = this.live
    return live !== undefined && !live.settled() && live.responseId() !== undefined ? live : undefined
  }

  /**
   * A response recovery leaves behind (it replays, gives up or is interrupted) is cancelled on the server, once: it
   * would go on running and billing. Not a generation attempt; its failure is told, not raised. Uninterruptible (the
   * cancel is bounded by its provider): once taken off `live`, an interruption must not stop it halfway, since nothing
   * would cancel the response again.
   */
  abandon(): Effect.Effect<void> {
    return Effect.uninterruptible(Effect.suspend(() => {
      const resumable = this.resumableNow()
      this.live = undefined
      if (resumable === undefined) return Effect.void
      const responseId = resumable.responseId()!
      return Effect.flatMap(Effect.either(resumable.cancel), (result) =>
        Effect.zipRight(
          this.notify(N.ResponseCancelled({ responseId, error: result._tag === "Left" ? result.left : undefined })),
          Metric.increment(this.meters.cancels(result._tag === "Left" ? "failed" : "cancelled"))
        ))
    }))
  }

  /**
   * What the reservation of an attempt's send starts (the attempt's send is reserved by the sender). Done at once on
   * the fiber in hand when nobody listens (`undefined`: the metric only, fix 32).
   */
  started(resumed: Pending | undefined, attempt: number, fiber: Fiber.Running): Effect.Effect<void> | undefined {
    this.attemptsOfReply++
    if (resumed === undefined && this.silent) {
      Fiber.increment(fiber, this.meters.attempts)
      return undefined
    }
    return Effect.suspend(() => {
      const maxAttempts = this.allowance.settings.maxAttempts
      const meters = this.meters
      if (resumed === undefined) {
        return Effect.zipRight(
          this.notify(N.AttemptStarted({ attempt, maxAttempts })),
          Metric.increment(meters.attempts)
        )
      }
      const { fromSequence, mode } = resumed.continuation
      return Effect.all([
        this.notify(N.AttemptResumed({ attempt, maxAttempts, responseId: resumed.responseId, fromSequence, mode })),
        Metric.increment(meters.attempts),
        Metric.increment(meters.resumes(mode)),
        Effect.annotateCurrentSpan({
          [A.responseId]: resumed.responseId,
          [A.resumeFrom]: fromSequence,
          [A.resumeMode]: mode
        })
      ], { discard: true })
    })
  }

  /**
   * The wait before the next attempt, a replay or a continuation: the policy's backoff (none for an immediate
   * continuation) lengthened by Retry-After, never begun when it would end past the deadline, withdrawn from the
   * fleet's retry budget, then told (`RetryScheduled`, with `resume` for a continuation). Left: recovery ends instead,
   * with that exhaustion.
   */
  scheduleNext(next: {
    readonly attempt: number
    readonly remainingAttempts: number
    readonly retryAfter: Option.Option<Duration.Duration>
    readonly immediate: boolean
    readonly resume?: RecoveryNotifications.Resume | undefined
  }): Effect.Effect<Either.Either<Duration.Duration, Effect.Effect<never, RecoveryError>>> {
    const self = this
    return Effect.gen(function*() {
      const { allowance, meters } = self
      let wait: Policy.Wait = { delay: Duration.zero, source: "backoff" }
      if (!next.immediate) {
        if (self.planner === undefined) self.planner = yield* Policy.planner(Policy.backoff(self.policy))
        const backoff = yield* self.planner.next
        if (Option.isNone(backoff)) return Either.left(self.exhausted("Attempts"))
        wait = Policy.lengthen(backoff.value, next.retryAfter)
      }
      const now = yield* Clock.currentTimeNanos
      const waitNanos = Option.getOrElse(Duration.toNanos(wait.delay), () => allowance.deadlineAt)
      if (now + waitNanos >= allowance.deadlineAt) {
        return Either.left(
          wait.source === "retry-after"
            ? self.exhausted("RetryAfterBeyondDeadline", wait.delay)
            : self.exhausted("Deadline")
        )
      }
      const withdrawal = yield* self.fleet.withdraw
      if (!withdrawal.allowed) return Either.left(self.exhausted("FleetBudget"))
      yield* Effect.annotateCurrentSpan({
        [A.outcome]: next.resume === undefined ? "retried" : "resumed",
        [A.retryDelayMs]: Duration.toMillis(wait.delay),
        [A.retryDelaySource]: wait.source,
        ...(next.resume === undefined ? {} : { [A.responseId]: next.resume.responseId })
      })
      yield* self.notify(N.RetryScheduled({
        nextAttempt: next.attempt + 1,
        delay: wait.delay,
        delaySource: wait.source,
        remainingAttempts: next.remainingAttempts,
        remainingTime: Duration.nanos(allowance.deadlineAt - now),
        ...(next.resume === undefined ? {} : { resume: next.resume })
      }))
      yield* Metric.update(meters.retryDelay(wait.source), Duration.toMillis(wait.delay))
      if (wait.source === "retry-after") yield* Metric.increment(meters.retryAfterWaits)
      return Either.right(wait.delay)
    })
  }

  /**
   * The next attempt when it continues the failed attempt's response: scheduled like a replay (the policy's wait,
   * lengthened by Retry-After, within the deadline, debited from the fleet), except that nothing is discarded.
   * `undefined`: the response cannot be continued, and the failure goes the usual way.
   */
  resumeOf(
    resumable: Resumption.Resumable,
    attempt: number,
    acc: Accumulator,
    error: ProviderFailure.ProviderFailure,
    failedAt: bigint
  ): Effect.Effect<Decision | undefined> {
    const self = this
    return Effect.gen(function*() {
      const verdict = Classification.classify(error)
      const remainingAttempts = yield* self.allowance.remainingAttempts
      if (remainingAttempts === 0) return undefined
      const next = resumable.continuation({
        error,
        retryable: verdict._tag === "Retryable",
        remainingAttempts,
        shownText: acc.text,
        shownReasoning: acc.reasoning
      })
      if (Option.isNone(next)) return undefined
      const continuation = next.value
      const responseId = resumable.responseId()!
      // Recovery ends here after all: what the attempt kept is discarded with it, as when a replay cannot be made.
      const stop = (stop: Effect.Effect<never, RecoveryError>): Effect.Effect<Decision> =>
        Effect.as(
          Effect.zipRight(
            self.notify(
              N.AttemptDiscarded({ attempt, discardedText: acc.text, discardedToolCalls: acc.toolCalls, error })
            ),
            Effect.zipRight(
              Metric.increment(self.meters.discards),
              Effect.annotateCurrentSpan({ [A.discardedChars]: acc.text.length, [A.outcome]: "surfaced" })
            )
          ),
          { _tag: "Stop", error, stop } as Decision
        )
      yield* self.pushback(error, failedAt)
      yield* Effect.annotateCurrentSpan({
        ...Telemetry.failureAttributes(error),
        [A.retryable]: verdict._tag === "Retryable"
      })
      self.errors.push(RecoveryErrorFamily.withAttemptFacts(error, { partialOutputChars: acc.text.length }))
      const scheduled = yield* self.scheduleNext({
        attempt,
        remainingAttempts,
        retryAfter: verdict._tag === "Retryable" ? verdict.retryAfter : Option.none(),
        immediate: continuation.immediate,
        resume: {
          responseId,
          fromSequence: continuation.fromSequence,
          mode: continuation.mode,
          keptChars: acc.text.length,
          error
        }
      })
      if (Either.isLeft(scheduled)) return yield* stop(scheduled.left)
      return {
        _tag: "Resume",
        error,
        delay: scheduled.right,
        failedAt,
        pending: { continuation, responseId, acc }
      } as Decision
    })
  }

  /**
   * A completed attempt is committed on the spot: its span's attributes are set on the span in hand, with no region or
   * generator for them (fix 32).
   */
  committed(span: Tracer.Span, outcome: Extract<Outcome, { _tag: "Completed" }>): Decision {
    const { acc, attempt } = outcome
    const finish = acc.finish!
    const reply = new Generation.Reply({
      text: acc.text,
      reasoning: acc.reasoning,
      reasoningParts: acc.reasoningParts,
      toolCalls: acc.toolCalls,
      finishReason: finish.reason,
      providerFinishReason: finish.providerReason,
      usage: Option.fromNullable(acc.usage),
      attempts: this.attemptsOfReply
    })
    span.attribute(A.attempt, attempt)
    Fiber.annotate(span, { [A.outcome]: "committed", ...replyAttributes(reply) })
    return { _tag: "Commit", reply }
  }

  /**
   * What follows a failed attempt, in its span: provided for that part only. A region held while the attempt reads its
   * stream costs about 2.5 KB a reply; the read has the span in its own context (`AttemptRun.region`, fixes 21 and
   * 36).
   */
  decideFailure(span: Tracer.Span, outcome: Extract<Outcome, { _tag: "Failed" }>): Effect.Effect<Decision> {
    const self = this
    return Effect.provideService(
      Effect.gen(function*() {
        if (outcome.attempt === undefined) {
          // Nothing was sent: no attempt was left, or the request was refused before its send. Nothing to replay.
          const { error } = outcome
          self.lastShown = 0
          yield* Effect.annotateCurrentSpan({ ...Telemetry.failureAttributes(error), [A.outcome]: "unsent" })
          const stop = Budget.isBudgetExhausted(error)
            ? self.budgetStop(error)
            : self.surface(
              HookError.isHookError(error)
                ? error
                : RecoveryErrorFamily.withAttemptFacts(error, { partialOutputChars: 0 })
            )
          return { _tag: "Stop", error, stop } as Decision
        }
        const attempt = outcome.attempt
        yield* Effect.annotateCurrentSpan(A.attempt, attempt)

        const { acc, error, failedAt } = outcome
        self.lastShown = acc.text.length
        const stop = (stop: Effect.Effect<never, RecoveryError>): Decision => ({ _tag: "Stop", error, stop })
        const resumable = self.replay ? self.resumableNow() : undefined
        if (resumable !== undefined && !Budget.isBudgetExhausted(error) && !HookError.isHookError(error)) {
          const resume = yield* self.resumeOf(resumable, attempt, acc, error, failedAt)
          if (resume !== undefined) return resume
        }
        yield* self.notify(
          N.AttemptDiscarded({ attempt, discardedText: acc.text, discardedToolCalls: acc.toolCalls, error })
        )
        yield* Metric.increment(self.meters.discards)
        yield* Effect.annotateCurrentSpan({
          ...Telemetry.failureAttributes(error),
          [A.discardedChars]: acc.text.length,
          [A.outcome]: "surfaced"
        })
        if (Budget.isBudgetExhausted(error)) return stop(self.budgetStop(error))
        if (HookError.isHookError(error)) return stop(self.surface(error))
        // Server pushback concerns every process on the key, whatever becomes of this failure.
        yield* self.pushback(error, failedAt)

        const verdict = Classification.classify(error)
        yield* Effect.annotateCurrentSpan(A.retryable, verdict._tag !== "Permanent")
        if (verdict._tag === "Permanent") {
          return stop(
            self.surface(RecoveryErrorFamily.withAttemptFacts(error, { partialOutputChars: acc.text.length }))
          )
        }
        if (!self.replay) {
          yield* Effect.annotateCurrentSpan(A.replayBlocked, "Disabled")
          return stop(
            self.surface(RecoveryErrorFamily.withAttemptFacts(error, { partialOutputChars: acc.text.length }))
          )
        }
        if (acc.effectful) {
          yield* Effect.annotateCurrentSpan(A.replayBlocked, "ExternalEffects")
          return stop(
            self.surface(
              RecoveryErrorFamily.withAttemptFacts(error, {
                partialOutputChars: acc.text.length,
                replayBlocked: "ExternalEffects"
              })
            )
          )
        }
        self.errors.push(RecoveryErrorFamily.withAttemptFacts(error, { partialOutputChars: acc.text.length }))

        const remainingAttempts = yield* self.allowance.remainingAttempts
        if (remainingAttempts === 0) return stop(self.exhausted("Attempts"))
        const scheduled = yield* self.scheduleNext({
          attempt,
          remainingAttempts,
          retryAfter: verdict.retryAfter,
          immediate: false
        })
        return Either.isLeft(scheduled)
          ? stop(scheduled.left)
          : { _tag: "Retry", error, delay: scheduled.right, failedAt } as Decision
      }),
      Tracer.ParentSpan,
      span
    )
  }

  /**
   * The next attempt once {@link Pacing} lets it start: at once, or after the turns of the event loop before its own
   * (interruptibly). Asked when the attempt is run, not when it is built.
   */
  attemptInTurn(): Effect.Effect<Generation.Reply, RecoveryError, R | RH> {
    return Effect.suspend(() => {
      const wait = Pace.admit(this.attemptsPerTurn)
      return wait === undefined ? this.attemptInSpan() : Effect.zipRight(wait, this.attemptInSpan())
    })
  }

  /**
   * One attempt in its span, then what follows from it. The span, the attempt's services and its scope are one region
   * (`AttemptRun.region`), and what follows is decided inside the span: a failed attempt's span fails with the
   * attempt's own error. Not one generator, whose body would be held on the fiber's stack for as long as the attempt
   * reads its stream (fix 21).
   */
  attemptInSpan(): Effect.Effect<Generation.Reply, RecoveryError, R | RH> {
    return Effect.flatMap(
      Effect.uninterruptibleMask((restore) =>
        Effect.flatMap(
          Effect.makeSpan(Telemetry.SpanName.attempt, {
            attributes: { [A.maxAttempts]: this.allowance.settings.maxAttempts },
            captureStackTrace: false
          }),
          (span) => {
            const resumed = this.pending
            this.pending = undefined
            // A fresh send reads a response of its own (if its provider offers one); a continuation reads the same
            // one.
            if (resumed === undefined) this.live = undefined
            return new AttemptRun<RH>(this, resumed, span).region<
              E | ProviderFailure.ProviderFailure | Budget.BudgetExhausted,
              R | Budget.Budget
            >(resumed === undefined ? this.generation : resumed.continuation.stream, restore)
          }
        )
      ),
      (decision) => this.afterAttempt(decision)
    ) as Effect.Effect<Generation.Reply, RecoveryError, R | RH>
  }

  /**
   * The attempts, one after another: each step returns what runs next (the next attempt, or the end), so no
   * generator's body is held on the fiber's stack while an attempt reads its stream (fix 21).
   */
  attempts(): Effect.Effect<Generation.Reply, RecoveryError, R | RH> {
    // without a fleet, nothing to credit or wait out (fix 32)
    if (this.fleet === FleetLimits.unlimited) return this.attemptInTurn()
    const self = this
    return Effect.flatten(Effect.gen(function*() {
      // A reply's first attempt credits the fleet's budget (a replay was debited before its backoff); either way the
      // send waits out a pause the fleet is in.
      const beyond = yield* self.waitForFleet(
        yield* (self.attemptsOfReply === 0 ? self.fleet.deposit : self.fleet.paused)
      )
      if (Option.isSome(beyond)) {
        yield* self.abandon()
        return self.exhausted("RetryAfterBeyondDeadline", beyond.value)
      }
      return self.attemptInTurn()
    }))
  }

  afterAttempt(decision: Decision): Effect.Effect<Generation.Reply, RecoveryError, R | RH> {
    switch (decision._tag) {
      case "Commit":
        this.live = undefined
        return Effect.succeed(decision.reply)
      case "Stop":
        return Effect.zipRight(this.abandon(), decision.stop)
      case "Retry": {
        const wait = waitFrom(decision.delay, decision.failedAt)
        // the response left behind is cancelled during the wait, which it does not lengthen (past it, the replay
        // waits for the cancel, which takes at most 2 s); without one, the wait alone, with no fibers forked for it
        return Effect.zipRight(
          Effect.suspend(() =>
            this.resumableNow() === undefined
              ? Effect.zipRight(Effect.sync(() => (this.live = undefined)), wait)
              : Effect.all([this.abandon(), wait], { concurrency: 2, discard: true })
          ),
          this.attempts()
        )
      }
      case "Resume":
        this.pending = decision.pending
        // a poll after a refusal has nothing to wait out (a zero delay: `waitFrom` begins no sleep)
        return Effect.zipRight(waitFrom(decision.delay, decision.failedAt), this.attempts())
    }
  }

  /**
   * The reply in its region (made by `replyOn`, uninterruptible but for `restore`, with the reply's `Budget` and span
   * in the fiber's context, which was `outer`): its attempts, then its commit told. Interrupted, recovery cancels the
   * background response it was reading, if there is one. Then the context is restored, and the reply's span ended with
   * the reply's exit.
   */
  region(
    restore: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>,
    outer: Context.Context<never>
  ): Effect.Effect<Generation.Reply, RecoveryError, R | RH> {
    const release = FiberRef.set(FiberRef.currentContext, outer)
    return Effect.matchCauseEffect(restore(this.run()), {
      onFailure: (cause) => {
        const end = (final: Cause.Cause<RecoveryError>) =>
          Effect.zipRight(
            Effect.zipRight(release, endSpan(this.replySpan, Exit.failCause(final))),
            Effect.failCause(final)
          )
        // the cancel's own defect (a provider's, or a listener's) joined to the interruption, as `Effect.onInterrupt`
        // joins a cleanup's: the context is given back and the span ended all the same
        return Cause.isInterruptedOnly(cause)
          ? Effect.matchCauseEffect(this.abandon(), {
            onFailure: (cancelled) => end(Cause.sequential(cause, cancelled)),
            onSuccess: () => end(cause)
          })
          : end(cause)
      },
      onSuccess: (reply) => Effect.as(Effect.zipRight(release, endSpan(this.replySpan, Exit.succeed(reply))), reply)
    })
  }

  /** The reply: `beforeGeneration`, its attempts, then its commit told. */
  run(): Effect.Effect<Generation.Reply, RecoveryError, R | RH> {
    const options = this.options
    // building an attempt's effect runs nothing: the next one is built where it is needed, with no suspension
    const reply = Effect.flatMap(
      this.attempts(),
      (reply): Effect.Effect<Generation.Reply, RecoveryError, RH> =>
        // nobody listens and no hook runs: the metric and the reply span's attributes in one operation (fix 32)
        this.silent && options.hooks?.afterGeneration === undefined
          ? Effect.withFiberRuntime((fiber) => {
            Fiber.increment(fiber, this.meters.committed)
            Fiber.annotate(this.replySpan, replyAttributes(reply))
            return Effect.succeed(reply)
          })
          : this.told(reply)
    )
    const before = options.hooks?.beforeGeneration
    return before === undefined ? reply : Effect.zipRight(
      Effect.mapError(before, (cause) => new HookError.HookError({ hook: "beforeGeneration", cause })),
      reply
    )
  }

  /** A committed reply told to the listener, counted, on the reply's span, then given to `afterGeneration`. */
  told(reply: Generation.Reply): Effect.Effect<Generation.Reply, RecoveryError, RH> {
    const self = this
    return Effect.gen(function*() {
      yield* self.notify(N.Committed({ reply }))
      yield* Metric.increment(self.meters.committed)
      yield* Effect.annotateCurrentSpan(replyAttributes(reply))
      const after = self.options.hooks?.afterGeneration
      if (after !== undefined) {
        yield* Effect.mapError(after(reply), (cause) => new HookError.HookError({ hook: "afterGeneration", cause }))
      }
      return reply
    })
  }
}

const replyAttributes = (reply: Generation.Reply): Record<string, unknown> => ({
  [A.attempts]: reply.attempts,
  [A.finishReasons]: [reply.finishReason],
  [A.committedChars]: reply.text.length,
  [A.toolCalls]: reply.toolCalls.length,
  ...Option.match(reply.usage, {
    onNone: () => ({}),
    onSome: (usage) => ({ [A.inputTokens]: usage.inputTokens, [A.outputTokens]: usage.outputTokens })
  })
})

/**
 * Runs one generation through the current {@link Provider.Provider} with recovery.
 *
 * @since 0.1.0
 * @category recovery
 */
export const generate = <RH = never>(
  request: Generation.GenerationRequest,
  options: Options<RH> = {}
): Effect.Effect<Generation.Reply, RecoveryError, Provider.Provider | RH> =>
  // the provider read from the fiber in the operation that starts the reply (fix 32)
  Effect.withFiberRuntime((fiber) => {
    const provider = Context.get(fiber.currentContext as Context.Context<Provider.Provider>, Provider.Provider)
    const system = Telemetry.systemOf(provider.protocol)
    return replyOn(fiber, provider.stream(request), {
      ...options,
      spanAttributes: {
        [A.system]: system,
        [A.operation]: "chat",
        [A.protocol]: provider.protocol,
        [A.requestModel]: request.model,
        ...(request.maxTokens === undefined ? {} : { [A.requestMaxTokens]: request.maxTokens }),
        ...options.spanAttributes
      }
    }, Telemetry.meters(system))
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
