/**
 * The engine behind `Recovery`: one reply as a sequence of attempts, each attempt one read of the generation's pull in
 * a scope of its own, and what follows a failed attempt decided in that attempt's span (discard, classify, replay,
 * continue or stop).
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import type * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Tracer from "effect/Tracer"
import * as Budget from "../Budget.js"
import * as Circuit from "../Circuit.js"
import * as Classification from "../Classification.js"
import * as FleetLimits from "../FleetLimits.js"
import * as Generation from "../Generation.js"
import * as HookError from "../HookError.js"
import * as Ledger from "../Ledger.js"
import * as Pacing from "../Pacing.js"
import * as Policy from "../Policy.js"
import * as Prices from "../Prices.js"
import * as Provider from "../Provider.js"
import * as ProviderFailure from "../ProviderFailure.js"
import * as ProviderRejection from "../ProviderRejection.js"
import * as RecoveryErrorFamily from "../RecoveryError.js"
import * as RecoveryExhausted from "../RecoveryExhausted.js"
import * as RecoveryNotifications from "../RecoveryNotifications.js"
import * as Telemetry from "../RecoveryTelemetry.js"
import * as Resumption from "../Resumption.js"
import * as Routes from "../Routes.js"
import * as TransportError from "../TransportError.js"
import { Accumulator } from "./attempt.js"

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

const A = Telemetry.Attribute
const N = RecoveryNotifications.Notification

type AttemptError = ProviderFailure.ProviderFailure | HookError.HookError | Budget.BudgetExhausted

/** The next attempt continues the response of the one before it, and adds to what it had surfaced. */
interface Pending {
  readonly continuation: Resumption.Continuation
  readonly responseId: string
  readonly acc: Accumulator
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

/**
 * The wait before the next attempt: `delay` counted from `since`, the moment the failed attempt's failure was observed
 * (`Clock`, nanoseconds). What recovery did since is inside the wait, not added to it; a wait that is already over is
 * not begun (docs/recovery.md, "When the wait starts").
 */
const waitFrom = (delay: Duration.Duration, since: bigint): Effect.Effect<void> =>
  Effect.flatMap(leftOf(delay, since), (left) => Duration.isZero(left) ? Effect.void : Effect.sleep(left))

/** What is left now of `delay` counted from `since` (`Clock`, nanoseconds); zero once it is over. */
const leftOf = (delay: Duration.Duration, since: bigint): Effect.Effect<Duration.Duration> =>
  Effect.map(Clock.currentTimeNanos, (now) => {
    const left = Duration.unsafeToNanos(delay) - (now - since)
    return left > 0n ? Duration.nanos(left) : Duration.zero
  })

/** A cancel of a response left behind waits at most this long for the server's answer. */
const cancelBound = Duration.seconds(2)

/** The end of a failed attempt's run decided by the fleet, for a resend inside an attempt that it refused. */
interface FleetStop {
  readonly reason: RecoveryExhausted.Reason
  readonly retryAfter?: Duration.Duration
}

/**
 * A route as one reply follows it: how to open it, and what this reply has seen of it. Without a plan a reply has one
 * route, without `planned` (and no circuit).
 */
class RouteRun {
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
 * One reply's state: its settings read once, the errors of its failed attempts, the backoff's schedule, and the
 * background response it reads, if its provider offered one (it is the reply's `Resumption` service).
 */
class ReplyRun<RH> implements Resumption.Service {
  readonly silent: boolean
  planner: Policy.Planner | undefined = undefined
  readonly errors: Array<ProviderFailure.ProviderFailure> = []
  /** Physical sends made by this reply (the budget's count is shared with nested scopes). */
  attemptsOfReply = 0
  /** Characters of preview the last failed attempt had shown (for the exhaustion and `Failed`). */
  lastShown: number | undefined = undefined
  /** Why the fleet stopped a resend inside an attempt: recovery ends with this reason instead of the budget's. */
  fleetStop: FleetStop | undefined = undefined
  /** The response the current attempt reads, when its provider offered one that can outlive the connection. */
  live: Resumption.Resumable | undefined = undefined
  pending: Pending | undefined = undefined
  /** The route the next attempt goes to (an index of `routes`). */
  current = 0
  /** The probe of a route's circuit this reply holds and has not reported yet (see `Circuit`). */
  probe: { readonly key: string; readonly lease: number | undefined } | undefined = undefined
  /** The ledger's entries, one per attempt decided. */
  readonly entries: Array<Ledger.Entry> = []
  #requestChars: number | undefined = undefined

  constructor(
    readonly routes: ReadonlyArray<RouteRun>,
    /** The circuits of the plan's routes; undefined without a plan. */
    readonly circuit: Circuit.Service | undefined,
    readonly options: Options<RH>,
    readonly meters: Telemetry.Meters,
    readonly allowance: Budget.Allowance,
    readonly replay: boolean,
    readonly policy: Policy.Settings,
    readonly notifications: RecoveryNotifications.Service,
    readonly fleet: FleetLimits.Service,
    readonly pacing: Pacing.Service,
    readonly prices: Prices.PriceList
  ) {
    this.silent = RecoveryNotifications.isSilent(notifications)
  }

  /** The request's characters (`Ledger.requestChars`), counted once; undefined when the request is not known. */
  requestChars(): number | undefined {
    const request = this.options.request
    if (request === undefined) return undefined
    return this.#requestChars ??= Ledger.requestChars(request)
  }

  /** The ledger so far. */
  ledger(): Ledger.Ledger {
    return Ledger.make([...this.entries], Object.keys(this.prices).length > 0)
  }

  /** The circuit of route `key` was told how a send went: a probe held on it is reported. */
  reported(key: string): void {
    if (this.probe?.key === key) this.probe = undefined
  }

  /** A probe the reply holds and never reported (it ended otherwise): its lease given back to the circuit. */
  releaseProbe(): Effect.Effect<void> {
    const probe = this.probe
    const released = this.circuit?.released
    this.probe = undefined
    return probe === undefined || released === undefined ? Effect.void : released(probe.key, probe.lease)
  }

  notify(notification: RecoveryNotifications.Notification): Effect.Effect<void> {
    return this.notifications.notify(notification)
  }

  /** `Resumption.Service`: the provider's offer of the response the current attempt reads. */
  readonly offer = (resumable: Resumption.Resumable): Effect.Effect<void> =>
    Effect.sync(() => {
      this.live = resumable
    })

  /** The reply: `beforeGeneration`, its attempts, then its commit told. */
  run(): Effect.Effect<Generation.Reply, RecoveryError, RH> {
    const before = this.options.hooks?.beforeGeneration
    const attempts = Effect.flatMap(this.attempts(), (reply) => this.told(reply))
    return before === undefined ? attempts : Effect.zipRight(
      Effect.mapError(before, (cause) => new HookError.HookError({ hook: "beforeGeneration", cause })),
      attempts
    )
  }

  /** A committed reply: told to the listener, counted, on the reply's span, then given to `afterGeneration`. */
  told(reply: Generation.Reply): Effect.Effect<Generation.Reply, RecoveryError, RH> {
    const self = this
    return Effect.gen(function*() {
      yield* self.notify(N.Committed({ reply }))
      yield* Metric.increment(self.meters.committed)
      yield* Effect.annotateCurrentSpan({
        ...replyAttributes(reply),
        ...(reply.ledger === undefined ? {} : ledgerAttributes(reply.ledger))
      })
      const after = self.options.hooks?.afterGeneration
      if (after !== undefined) {
        yield* Effect.mapError(after(reply), (cause) => new HookError.HookError({ hook: "afterGeneration", cause }))
      }
      return reply
    })
  }

  /**
   * The attempts, one after another, until one commits or recovery stops. Each step returns what runs next, so that
   * nothing of the steps before is held while an attempt reads its stream.
   */
  attempts(): Effect.Effect<Generation.Reply, RecoveryError, RH> {
    const attempt = Effect.zipRight(
      this.pacing.admit,
      Effect.flatMap(Effect.suspend(() => this.attempt()), (decision) => this.after(decision))
    )
    const sent = this.fleet === FleetLimits.unlimited ? attempt : Effect.suspend(() => this.fleetChecked(attempt))
    return this.circuit === undefined
      ? sent
      : Effect.flatMap(Effect.suspend(() => this.admitted()), (stop) => stop === undefined ? sent : stop)
  }

  /**
   * The fleet's part before a send: a reply's first attempt credits the fleet's budget (a replay was debited before its
   * backoff), and a send to the primary route waits out a pause the fleet is in. The fleet's pause is the primary's: it
   * is set by the primary's pushback, and another route of a plan does not share it.
   */
  fleetChecked(attempt: Effect.Effect<Generation.Reply, RecoveryError, RH>) {
    const primary = this.current === 0
    const pause = this.attemptsOfReply === 0
      ? this.fleet.deposit
      : primary
      ? this.fleet.paused
      : Effect.succeed(Option.none<FleetLimits.Pause>())
    return Effect.flatMap(
      Effect.flatMap(pause, (pause) => primary ? this.waitForFleet(pause) : Effect.succeed(Option.none())),
      (beyond) =>
        Option.isSome(beyond)
          ? Effect.zipRight(this.abandon(), this.exhausted("RetryAfterBeyondDeadline", beyond.value))
          : attempt
    )
  }

  /** What follows an attempt's decision: the reply, the end, or the wait and the next attempt. */
  after(decision: Decision): Effect.Effect<Generation.Reply, RecoveryError, RH> {
    switch (decision._tag) {
      case "Commit":
        this.live = undefined
        return Effect.succeed(decision.reply)
      case "Stop":
        return Effect.zipRight(this.abandon(), decision.stop)
      case "Retry": {
        const wait = waitFrom(decision.delay, decision.failedAt)
        // the response left behind is cancelled during the wait, which it does not lengthen
        const waited = this.resumableNow() === undefined
          ? Effect.zipRight(Effect.sync(() => (this.live = undefined)), wait)
          : Effect.all([this.abandon(), wait], { concurrency: 2, discard: true })
        return Effect.zipRight(waited, Effect.suspend(() => this.attempts()))
      }
      case "Resume":
        this.pending = decision.pending
        return Effect.zipRight(waitFrom(decision.delay, decision.failedAt), Effect.suspend(() => this.attempts()))
    }
  }

  /**
   * One attempt in its span: the generation opened and read in the attempt's scope, then what follows decided in the
   * span. A failed attempt's span fails with the attempt's own error.
   */
  attempt(): Effect.Effect<Decision, never, RH> {
    const resumed = this.pending
    this.pending = undefined
    // A fresh send reads a response of its own (if its provider offers one); a continuation reads the same one.
    if (resumed === undefined) this.live = undefined
    const open: Open<AttemptError, never> = resumed === undefined
      ? this.routes[this.current]!.open
      : Provider.fromStream(resumed.continuation.stream) as Open<AttemptError, never>
    const attempt = new AttemptRun<RH>(this, resumed)
    return region(
      Effect.makeSpan(Telemetry.SpanName.attempt, {
        attributes: { [A.maxAttempts]: this.allowance.settings.maxAttempts },
        captureStackTrace: false
      }),
      (span) => Context.make(Tracer.ParentSpan, span),
      () => Effect.flatMap(Effect.exit(attempt.read(open)), (exit) => attempt.decide(exit)),
      (span, exit) => Effect.flatMap(attemptSpanExit(exit), (ended) => endSpan(span, ended))
    )
  }

  /**
   * The circuit of the route the next attempt goes to, asked first: a route whose circuit is open is skipped without a
   * send (`RouteSwitched` with `CircuitOpen`), for the next one. Returns the end of the reply when no route is left.
   */
  admitted(): Effect.Effect<Effect.Effect<never, RecoveryError> | undefined> {
    const self = this
    return Effect.gen(function*() {
      const { allowance, routes } = self
      while (true) {
        const route = routes[self.current]!
        const admission = yield* self.circuit!.admit(route.planned!.key)
        if (admission._tag === "Probe") self.probe = { key: route.planned!.key, lease: admission.lease }
        if (admission._tag !== "Open") return undefined
        route.visited = true
        route.last = { message: `circuit open (probe in ${Duration.format(admission.retryIn)})` }
        const to = self.current + 1
        if (to >= routes.length) return self.routesEnded()
        const now = yield* Clock.currentTimeNanos
        // no route is switched to past the deadline, as no attempt is started past it
        if (now >= allowance.deadlineAt) return self.exhausted("Deadline")
        yield* self.notify(N.RouteSwitched({
          from: route.planned!.ref,
          to: routes[to]!.planned!.ref,
          reason: "CircuitOpen",
          nextAttempt: (yield* allowance.used) + 1,
          remainingAttempts: yield* allowance.remainingAttempts,
          remainingTime: Duration.nanos(allowance.deadlineAt - now)
        }))
        yield* Metric.increment(self.meters.switches("CircuitOpen"))
        self.current = to
      }
    })
  }

  /**
   * The end of a reply whose routes are all left: the first failure a route sent (the primary's when it sent), with
   * every route's last failure; when no route sent, `RecoveryExhausted{reason: "CircuitOpen"}`.
   */
  routesEnded(): Effect.Effect<never, RecoveryError> {
    const first = this.routes.find((route) => route.last?.error !== undefined)?.last?.error
    return first === undefined ? this.exhausted("CircuitOpen") : this.surface(this.withRoutes(first))
  }

  /**
   * The error a reply that ends on `error` fails with: `error` itself, or, once the reply has left a route, the first
   * failure a route sent (the primary's), with each route's last failure.
   */
  ended(error: ProviderFailure.ProviderFailure): ProviderFailure.ProviderFailure {
    if (this.routes.length < 2) return error
    const route = this.routes[this.current]!
    route.last = { message: error.message, error }
    return this.withRoutes(this.routes.find((route) => route.last?.error !== undefined)?.last?.error ?? error)
  }

  /** `error` with each route's last failure, when the plan has more than one route. */
  withRoutes<F extends ProviderFailure.ProviderFailure>(error: F): F {
    const routeFailures = this.routeFailures()
    return routeFailures === undefined ? error : ProviderFailure.copyWith<F>(error, { routeFailures } as Partial<F>)
  }

  routeFailures(): ReadonlyArray<Routes.RouteFailure> | undefined {
    if (this.routes.length < 2) return undefined
    return this.routes.filter((route) => route.visited).map((route) => ({
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
   */
  routeFailed(
    error: ProviderFailure.ProviderFailure,
    verdict: Classification.Classification
  ): Effect.Effect<Routes.SwitchReason | undefined> {
    const self = this
    return Effect.gen(function*() {
      const route = self.routes[self.current]!
      route.last = { message: error.message, error }
      const retryable = verdict._tag === "Retryable"
      let circuit: Circuit.State = "closed"
      if (self.circuit !== undefined) {
        const key = route.planned!.key
        // the server answered a rejection of the request: it is up
        if (retryable) circuit = yield* self.circuit.failed(key)
        else yield* self.circuit.succeeded(key)
        self.reported(key)
      }
      if (TransportError.isTransportError(error) && error.reason === "MalformedChunk" && ++route.malformed >= 2) {
        return "MalformedChunk"
      }
      if (retryable) {
        if (self.current === self.routes.length - 1) return undefined
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
  }

  /** The route a reply goes to when it leaves the current one for `reason`; undefined when there is none. */
  nextRoute(reason: Routes.SwitchReason): number | undefined {
    const { current, routes } = this
    if (reason !== "ContextOverflow") return current + 1 < routes.length ? current + 1 : undefined
    // an overflow goes to the next route that declares a larger window than the one that overflowed
    const window = routes[current]!.planned?.route.contextWindow ?? 0
    for (let i = current + 1; i < routes.length; i++) {
      const larger = routes[i]!.planned?.route.contextWindow
      if (larger !== undefined && larger > window) return i
    }
    return undefined
  }

  /** Recovery ends with `reason`; `retryAfter` for `RetryAfterBeyondDeadline`, `nextDelay` for a wait past the deadline. */
  exhausted(
    reason: RecoveryExhausted.Reason,
    retryAfter?: Duration.Duration,
    nextDelay?: Duration.Duration
  ): Effect.Effect<never, RecoveryExhausted.RecoveryExhausted> {
    const self = this
    return Effect.gen(function*() {
      const { allowance, errors, lastShown } = self
      const routeFailures = self.routeFailures()
      const error = new RecoveryExhausted.RecoveryExhausted({
        reason,
        attempts: yield* allowance.used,
        maxAttempts: allowance.settings.maxAttempts,
        elapsed: yield* allowance.elapsed,
        errors: [...errors],
        ...(errors.length > 0 ? { lastError: errors[errors.length - 1] } : {}),
        ...(retryAfter === undefined ? {} : { retryAfter }),
        ...(nextDelay === undefined ? {} : { nextDelay }),
        ...(lastShown === undefined ? {} : { partialOutputChars: lastShown }),
        ...(routeFailures === undefined ? {} : { routeFailures })
      })
      const ledger = self.ledger()
      yield* self.notify(N.Exhausted({ error, ledger }))
      yield* Metric.increment(self.meters.exhaustions(reason))
      yield* Effect.annotateCurrentSpan({
        [A.exhaustedReason]: reason,
        [A.attempts]: self.attemptsOfReply,
        ...ledgerAttributes(ledger)
      })
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

  /** A failure surfaced unchanged: told (`Failed`), counted and put on the span. */
  surface<A extends RecoveryError>(error: A): Effect.Effect<never, A> {
    const self = this
    return Effect.gen(function*() {
      const ledger = self.ledger()
      yield* self.notify(N.Failed({ error, partialOutputChars: self.lastShown ?? 0, ledger }))
      yield* Metric.increment(self.meters.surfaced(error._tag))
      yield* Effect.annotateCurrentSpan({
        ...ledgerAttributes(ledger),
        [A.attempts]: self.attemptsOfReply,
        [A.errorClass]: Telemetry.errorClass(error)
      })
      return yield* Effect.fail(error)
    })
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
   * A Retry-After of the primary route pauses the fleet until it is over counted from the failure, as this reply's own
   * wait is, so the pause ends with that wait.
   */
  pushback(error: AttemptError, failedAt: bigint): Effect.Effect<void> {
    // only the primary's: the fleet's pause is the primary route's (see `fleetChecked`)
    return this.current === 0 && TransportError.isTransportError(error) && error.retryAfter !== undefined
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
      if (self.fleet === FleetLimits.unlimited) return
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
   * would go on running and billing. Not a generation attempt; its failure is told, not raised. Uninterruptible, so
   * that an interruption does not stop it halfway (nothing would cancel the response again), and bounded: the cancel
   * itself is interruptible by its timeout, so a server that never answers holds reprise at most {@link cancelBound}.
   */
  abandon(): Effect.Effect<void> {
    const self = this
    return Effect.uninterruptible(Effect.gen(function*() {
      const resumable = self.resumableNow()
      self.live = undefined
      if (resumable === undefined) return
      const responseId = resumable.responseId()!
      // A fiber of its own, bounded by its own timeout: an interruption of the reply reaches neither the cancel nor its
      // timeout, and the wait for it ends within the bound.
      const cancelling = yield* Effect.forkDaemon(
        Effect.interruptible(resumable.cancel).pipe(
          Effect.timeoutFail({
            duration: cancelBound,
            onTimeout: () =>
              new TransportError.TransportError({
                reason: "Timeout",
                detail: `the cancel of ${responseId} had no answer within ${Duration.format(cancelBound)}`
              })
          }),
          Effect.either
        )
      )
      const result = yield* Fiber.join(cancelling)
      yield* self.notify(N.ResponseCancelled({ responseId, error: Either.isLeft(result) ? result.left : undefined }))
      yield* Metric.increment(self.meters.cancels(Either.isLeft(result) ? "failed" : "cancelled"))
    }))
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
    /** The next attempt goes to route `to` (told with `RouteSwitched` instead of `RetryScheduled`), at once. */
    readonly switchTo?: {
      readonly to: number
      readonly reason: Routes.SwitchReason
      readonly error: AttemptError
    } | undefined
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
            : self.exhausted("Deadline", undefined, now >= allowance.deadlineAt ? undefined : wait.delay)
        )
      }
      const withdrawal = yield* self.fleet.withdraw
      if (!withdrawal.allowed) return Either.left(self.exhausted("FleetBudget"))
      const switchTo = next.switchTo
      if (switchTo !== undefined) {
        const { reason, to } = switchTo
        yield* Effect.annotateCurrentSpan({ [A.outcome]: "switched", [A.routeSwitch]: reason })
        yield* self.notify(N.RouteSwitched({
          from: self.routes[self.current]!.planned!.ref,
          to: self.routes[to]!.planned!.ref,
          reason,
          error: switchTo.error,
          nextAttempt: next.attempt + 1,
          remainingAttempts: next.remainingAttempts,
          remainingTime: Duration.nanos(allowance.deadlineAt - now)
        }))
        yield* Metric.increment(meters.switches(reason))
        // the next route starts its backoff afresh
        self.current = to
        self.planner = undefined
        return Either.right(Duration.zero)
      }
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

  /** A failed attempt's preview discarded: told (with its ledger entry), counted and put on its span. */
  discarded(attempt: number, acc: Accumulator, error: AttemptError, entry: Ledger.Entry): Effect.Effect<void> {
    const self = this
    return Effect.gen(function*() {
      yield* self.notify(
        N.AttemptDiscarded({ attempt, discardedText: acc.text, discardedToolCalls: acc.toolCalls, error, entry })
      )
      yield* Metric.increment(self.meters.discards)
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
    failedAt: bigint,
    observe: (outcome: Ledger.Outcome) => Effect.Effect<Ledger.Entry>
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
      if (Either.isLeft(scheduled)) {
        // Recovery ends here after all: what the attempt kept is discarded with it, as when a replay cannot be made.
        yield* self.discarded(attempt, acc, error, yield* observe("discarded"))
        yield* Effect.annotateCurrentSpan({ [A.discardedChars]: acc.text.length, [A.outcome]: "surfaced" })
        return { _tag: "Stop", error, stop: scheduled.left } as const
      }
      yield* observe("continued")
      return { _tag: "Resume", error, delay: scheduled.right, failedAt, pending: { continuation, responseId, acc } }
    })
  }
}

/**
 * One attempt: its accumulator (the preview, or the kept preview of the response it continues), the number of its
 * send once reserved, and when its failure was observed.
 */
class AttemptRun<RH> {
  readonly acc: Accumulator
  readonly onChunk: Hooks<RH>["onChunk"]
  /**
   * Nobody listens and no hook runs: a chunk's events are recorded in one step, with no effect or `Preview` per event
   * (the previews would be dropped). Otherwise each event is surfaced in turn, as it comes, or, for a listener that
   * takes previews in batches and no hook, a chunk's surfaced events in one call.
   */
  readonly quiet: boolean
  attempt: number | undefined = undefined
  debitedAt: bigint | undefined = undefined
  failedAt: bigint | undefined = undefined
  /** Whether the generation opened: the provider answered with a stream. */
  opened = false

  constructor(readonly reply: ReplyRun<RH>, readonly resumed: Pending | undefined) {
    this.acc = resumed?.acc ?? new Accumulator(reply.options.earlyBreakOnToolCall === true)
    this.onChunk = reply.options.hooks?.onChunk
    this.quiet = this.onChunk === undefined && reply.silent
  }

  /**
   * The attempt's sends (`Budget.CurrentSends`): the first one starts the attempt; a further one (a capability
   * fallback's resend) passes the fleet's checks first. Each is debited from the reply's budget.
   */
  readonly sends: Budget.Sends = {
    reserve: Effect.suspend(() =>
      this.attempt === undefined ? this.start() : Effect.zipRight(this.reply.resend(), this.reply.allowance.reserve)
    )
  }

  /** The attempt's first send reserved: it starts (`AttemptStarted`, or `AttemptResumed` for a continuation). */
  start(): Effect.Effect<number, Budget.BudgetExhausted> {
    const self = this
    return Effect.gen(function*() {
      const { reply, resumed } = self
      const attempt = yield* reply.allowance.reserve
      self.attempt = attempt
      self.debitedAt = yield* Clock.currentTimeNanos
      reply.attemptsOfReply++
      const route = reply.routes[reply.current]!
      route.sends++
      route.visited = true
      yield* Metric.increment(reply.meters.attempts)
      const maxAttempts = reply.allowance.settings.maxAttempts
      const planned = route.planned
      if (planned !== undefined) {
        yield* Effect.annotateCurrentSpan({
          [A.routeIndex]: planned.ref.index,
          [A.route]: planned.ref.name,
          [A.requestModel]: planned.ref.model
        })
      }
      if (resumed === undefined) {
        yield* reply.notify(
          N.AttemptStarted(
            planned === undefined ? { attempt, maxAttempts } : { attempt, maxAttempts, route: planned.ref }
          )
        )
      } else {
        const { fromSequence, mode } = resumed.continuation
        yield* reply.notify(
          N.AttemptResumed({ attempt, maxAttempts, responseId: resumed.responseId, fromSequence, mode })
        )
        yield* Metric.increment(reply.meters.resumes(mode))
        yield* Effect.annotateCurrentSpan({
          [A.responseId]: resumed.responseId,
          [A.resumeFrom]: fromSequence,
          [A.resumeMode]: mode
        })
      }
      return attempt
    })
  }

  /** A run that shows an event or ends before reserving (a stream that is not a provider) is charged then. */
  charged(): Effect.Effect<number, Budget.BudgetExhausted> {
    return Effect.suspend(() => this.attempt === undefined ? this.start() : Effect.succeed(this.attempt))
  }

  /**
   * The generation opened and read to its end, in the attempt's scope, with the attempt's sends: each chunk recorded
   * and surfaced. A failure is stamped with the moment it was seen ({@link seen}).
   */
  read(open: Open<AttemptError, never>): Effect.Effect<void, AttemptError, RH> {
    // `open` runs in the attempt's scope, which the region below provides
    const read = Effect.matchEffect(open as Effect.Effect<Provider.Pull<AttemptError>, AttemptError>, {
      onFailure: (error) => Effect.zipRight(this.seen(error), Effect.fail(error)),
      onSuccess: (pull) => {
        this.opened = true
        const next: Effect.Effect<void, AttemptError, RH> = Effect.matchEffect(pull, {
          onFailure: (end) =>
            Option.isNone(end) ? Effect.void : Effect.zipRight(this.seen(end.value), Effect.fail(end.value)),
          onSuccess: (events) => {
            // nobody listens and no hook runs: the chunk is recorded here, with no effect of its own
            if (this.quiet && this.attempt !== undefined) {
              this.record(events)
              return next
            }
            return Effect.zipRight(this.onEvents(events), next)
          }
        })
        return next
      }
    })
    return region(
      Scope.make(),
      (scope) => Context.make(Scope.Scope, scope).pipe(Context.add(Budget.CurrentSends, this.sends)),
      () => read,
      (scope, exit) => Scope.close(scope, exit)
    )
  }

  /**
   * When the failure was observed: the provider's `observedAt` if it falls within this attempt (after its send was
   * debited, and not in the future), otherwise now. The wait before the next attempt is counted from here.
   */
  seen(error: AttemptError): Effect.Effect<void> {
    return Effect.map(Clock.currentTimeNanos, (now) => {
      const observed = "observedAt" in error ? error.observedAt : undefined
      const debitedAt = this.debitedAt
      this.failedAt ??= observed !== undefined && debitedAt !== undefined && observed >= debitedAt && observed < now
        ? observed
        : now
    })
  }

  /** Records every event of a chunk; with `shown`, appends to it the ones that are surfaced, in order. */
  record(events: Chunk.Chunk<Generation.GenerationEvent>, shown?: Array<Generation.GenerationEvent>): void {
    const acc = this.acc
    for (const event of events) {
      if (acc.add(event) && shown !== undefined) shown.push(event)
    }
  }

  /**
   * A chunk's events, each recorded and told in turn (`Preview`), or, for a listener that takes `previews` and no
   * hook, recorded and told in one batch; a run that had not reserved is charged first.
   */
  onEvents(events: Chunk.Chunk<Generation.GenerationEvent>): Effect.Effect<void, AttemptError, RH> {
    return Effect.flatMap(this.charged(), (attempt) => {
      if (this.quiet) return Effect.sync(() => this.record(events))
      const previews = this.reply.notifications.previews
      if (previews !== undefined && this.onChunk === undefined) {
        return Effect.suspend(() => {
          const shown: Array<Generation.GenerationEvent> = []
          this.record(events, shown)
          return shown.length === 0 ? Effect.void : previews(attempt, shown)
        })
      }
      const surfaced = Effect.forEach(events, (event) => this.surfaced(event, attempt), { discard: true })
      // a chunk hook is not the attempt's provider: a send it makes debits the reply's budget as any send outside an
      // attempt does, and does not count as this attempt's resend
      return this.onChunk === undefined ? surfaced : Effect.provideService(surfaced, Budget.CurrentSends, undefined)
    })
  }

  /** One event recorded and, when surfaced, told (a `Preview`, or a batch of one), then given to the chunk hook. */
  surfaced(event: Generation.GenerationEvent, attempt: number): Effect.Effect<void, HookError.HookError, RH> {
    const acc = this.acc
    if (!acc.add(event)) return Effect.void
    const previews = this.reply.notifications.previews
    const preview = previews === undefined
      ? this.reply.notify(N.Preview({ attempt, event }))
      : previews(attempt, [event])
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

  /** What follows from the read's exit: a commit, or the failure's decision. A defect or an interruption goes on. */
  decide(exit: Exit.Exit<void, AttemptError>): Effect.Effect<Decision, never, RH> {
    if (Exit.isFailure(exit)) {
      const failure = Cause.failureOrCause(exit.cause)
      if (Either.isRight(failure)) return Effect.failCause(failure.right)
      return Effect.zipRight(this.seen(failure.left), this.failed(failure.left))
    }
    return Effect.matchEffect(this.charged(), {
      onFailure: (error) => Effect.zipRight(this.seen(error), this.failed(error)),
      onSuccess: () => {
        if (this.acc.finish !== undefined) return this.committed()
        const premature = new TransportError.TransportError({
          reason: "PrematureEof",
          detail: "the stream ended without the protocol's terminal event"
        }, { disableValidation: true })
        return Effect.zipRight(this.seen(premature), this.failed(premature))
      }
    })
  }

  /**
   * The attempt's ledger entry (see `Ledger`): recorded in the reply's ledger, put on the attempt's span, counted in
   * `reprise.tokens`.
   */
  observe(outcome: Ledger.Outcome, error?: AttemptError): Effect.Effect<Ledger.Entry> {
    const { acc, reply } = this
    const planned = reply.routes[reply.current]!.planned
    const status = error !== undefined && "status" in error ? error.status : undefined
    const phase: Ledger.Phase = acc.finish !== undefined
      ? "terminal"
      : acc.content
      ? "content"
      : this.opened || status !== undefined
      ? "headers"
      : "none"
    const entry = Ledger.entry({
      attempt: this.attempt!,
      route: planned?.ref,
      model: planned?.ref.model ?? reply.options.request?.model,
      servedModel: acc.finish?.model,
      phase,
      outcome,
      refused: !this.opened || refusedInBand(error),
      usage: acc.usage,
      startUsage: acc.startUsage,
      // the request is counted only when an input count may have to be estimated
      requestChars: acc.usage === undefined && acc.startUsage === undefined ? reply.requestChars() : undefined,
      outputChars: acc.outputChars
    }, reply.prices)
    reply.entries.push(entry)
    const { tokens } = entry
    const counted = outcome === "continued"
      ? Effect.void
      : Effect.zipRight(
        Metric.incrementBy(reply.meters.tokens(outcome, "input"), tokens.input),
        Metric.incrementBy(reply.meters.tokens(outcome, "output"), tokens.output)
      )
    return Effect.as(Effect.zipRight(Effect.annotateCurrentSpan(entryAttributes(entry)), counted), entry)
  }

  /** A completed attempt, committed. */
  committed(): Effect.Effect<Decision> {
    const { acc, reply } = this
    const finish = acc.finish!
    const planned = reply.routes[reply.current]!.planned
    return Effect.flatMap(this.observe("committed"), () => this.commit(finish, planned))
  }

  commit(
    finish: NonNullable<Accumulator["finish"]>,
    planned: RouteRun["planned"]
  ): Effect.Effect<Decision> {
    const { acc, reply } = this
    const committed = new Generation.Reply({
      text: acc.text,
      reasoning: acc.reasoning,
      reasoningParts: acc.reasoningParts,
      toolCalls: acc.toolCalls,
      finishReason: finish.reason,
      providerFinishReason: finish.providerReason,
      usage: Option.fromNullable(acc.usage),
      attempts: reply.attemptsOfReply,
      ...(finish.model === undefined ? {} : { model: finish.model }),
      ...(planned === undefined ? {} : { route: planned.ref }),
      ledger: reply.ledger()
    })
    const annotated = Effect.annotateCurrentSpan({
      [A.attempt]: this.attempt!,
      [A.outcome]: "committed",
      ...replyAttributes(committed)
    })
    const decision: Decision = { _tag: "Commit", reply: committed }
    return reply.circuit === undefined || planned === undefined
      ? Effect.as(annotated, decision)
      : Effect.as(
        Effect.zipRight(
          annotated,
          Effect.zipRight(reply.circuit.succeeded(planned.key), Effect.sync(() => reply.reported(planned.key)))
        ),
        decision
      )
  }

  /** What follows a failed attempt: surfaced, exhausted, continued or replayed. */
  failed(error: AttemptError): Effect.Effect<Decision> {
    const self = this
    const { reply, acc } = this
    return Effect.gen(function*() {
      const failedAt = self.failedAt!
      const attempt = self.attempt
      if (attempt === undefined) {
        // Nothing was sent: no attempt was left, or the request was refused before its send. Nothing to replay.
        reply.lastShown = 0
        yield* Effect.annotateCurrentSpan({ ...Telemetry.failureAttributes(error), [A.outcome]: "unsent" })
        const stop = Budget.isBudgetExhausted(error)
          ? reply.budgetStop(error)
          : reply.surface(
            HookError.isHookError(error)
              ? error
              : RecoveryErrorFamily.withAttemptFacts(error, { partialOutputChars: 0 })
          )
        return { _tag: "Stop", error, stop } as const
      }
      yield* Effect.annotateCurrentSpan(A.attempt, attempt)
      reply.lastShown = acc.text.length
      const stop = (stop: Effect.Effect<never, RecoveryError>): Decision => ({ _tag: "Stop", error, stop })
      const resumable = reply.replay ? reply.resumableNow() : undefined
      if (resumable !== undefined && !Budget.isBudgetExhausted(error) && !HookError.isHookError(error)) {
        const resume = yield* reply.resumeOf(
          resumable,
          attempt,
          acc,
          error,
          failedAt,
          (outcome) => self.observe(outcome, error)
        )
        if (resume !== undefined) return resume
      }
      yield* reply.discarded(attempt, acc, error, yield* self.observe("discarded", error))
      yield* Effect.annotateCurrentSpan({
        ...Telemetry.failureAttributes(error),
        [A.discardedChars]: acc.text.length,
        [A.outcome]: "surfaced"
      })
      if (Budget.isBudgetExhausted(error)) return stop(reply.budgetStop(error))
      if (HookError.isHookError(error)) return stop(reply.surface(error))
      // Server pushback concerns every process on the key, whatever becomes of this failure.
      yield* reply.pushback(error, failedAt)

      const verdict = Classification.classify(error)
      yield* Effect.annotateCurrentSpan(A.retryable, verdict._tag !== "Permanent")
      const faceted = (replayBlocked?: TransportError.ReplayBlocked) =>
        RecoveryErrorFamily.withAttemptFacts(error, {
          partialOutputChars: acc.text.length,
          ...(replayBlocked === undefined ? {} : { replayBlocked })
        })
      const surfaced = (replayBlocked?: TransportError.ReplayBlocked) =>
        stop(reply.surface(reply.ended(faceted(replayBlocked))))
      const leave = yield* reply.routeFailed(faceted(), verdict)
      if (!reply.replay) {
        if (verdict._tag !== "Permanent" || leave !== undefined) {
          yield* Effect.annotateCurrentSpan(A.replayBlocked, "Disabled")
        }
        return surfaced()
      }
      if (acc.effectful && (verdict._tag !== "Permanent" || leave !== undefined)) {
        yield* Effect.annotateCurrentSpan(A.replayBlocked, "ExternalEffects")
        return surfaced("ExternalEffects")
      }
      const to = leave === undefined ? undefined : reply.nextRoute(leave)
      // a route left with nowhere to go ends the reply, as a failure that is not replayed does
      if ((leave !== undefined && to === undefined) || (leave === undefined && verdict._tag === "Permanent")) {
        return surfaced()
      }
      reply.errors.push(faceted())

      const remainingAttempts = yield* reply.allowance.remainingAttempts
      if (remainingAttempts === 0) return stop(reply.exhausted("Attempts"))
      const scheduled = yield* reply.scheduleNext({
        attempt,
        remainingAttempts,
        retryAfter: verdict._tag === "Retryable" ? verdict.retryAfter : Option.none(),
        immediate: to !== undefined,
        switchTo: to === undefined ? undefined : { to, reason: leave!, error }
      })
      return Either.isLeft(scheduled)
        ? stop(scheduled.left)
        : { _tag: "Retry", error, delay: scheduled.right, failedAt } as const
    })
  }
}

/**
 * `use` with the services `acquire` made added to the fiber's context, then `release` run with its exit once the
 * context is given back: what `Effect.provide` over `Effect.scoped` or `Effect.withSpan` does, in one region instead of
 * one per combinator. A reply in flight holds the frames of every region around its read for as long as it reads: with
 * one combinator per service, a reply and its attempt held about 20 KB more of the heap per stream in figure 3's
 * stalled replies (docs/performance.md, "One region per reply and per attempt").
 */
const region = <S, A, E, R>(
  acquire: Effect.Effect<S>,
  services: (acquired: S) => Context.Context<never>,
  use: (acquired: S) => Effect.Effect<A, E, R>,
  release: (acquired: S, exit: Exit.Exit<A, E>) => Effect.Effect<void>
): Effect.Effect<A, E, R> =>
  // the acquisition and the release wait on nothing but what `acquire` and `release` do (a span made or ended, a
  // scope made or closed: bounded as the attempt's finalizers are)
  Effect.acquireUseRelease(
    Effect.flatMap(acquire, (acquired) =>
      Effect.map(
        FiberRef.getAndUpdate(FiberRef.currentContext, (outer) => Context.merge(outer, services(acquired))),
        (outer) => ({ acquired, outer })
      )),
    ({ acquired }) => use(acquired),
    ({ acquired, outer }, exit) =>
      Effect.zipRight(FiberRef.set(FiberRef.currentContext, outer), release(acquired, exit))
  )

/** Ends `span` with `exit` at the `Clock`'s time (when the tracer's timing is on), unless it has ended. */
const endSpan = (span: Tracer.Span, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> =>
  Effect.flatMap(
    FiberRef.get(FiberRef.currentTracerTimingEnabled),
    (timing) =>
      Effect.map(timing ? Clock.currentTimeNanos : Effect.succeed(0n), (now) => {
        if (span.status._tag !== "Ended") span.end(now, exit)
      })
  )

/** An attempt's span ends with its outcome: a commit succeeds, a failed attempt fails with its own error. */
const attemptSpanExit = (exit: Exit.Exit<Decision, unknown>): Effect.Effect<Exit.Exit<unknown, unknown>> =>
  Exit.isFailure(exit)
    ? Effect.succeed(exit)
    : exit.value._tag === "Commit"
    ? Effect.succeed(Exit.void)
    // failed as `Effect.fail` fails, which captures the current span (the reply's) in the error
    : Effect.exit(Effect.fail(exit.value.error))

/**
 * A failure that is the provider's own answer (an in-band error event, or a rejection it sent), not a cut of the
 * transport or reprise's own limit: before any content, the ledger's policy counts it not billed.
 */
const refusedInBand = (error: AttemptError | undefined): boolean => {
  if (error === undefined) return false
  if (TransportError.isTransportError(error)) return error.reason === "ProviderError" || error.reason === "HttpStatus"
  return ProviderRejection.isProviderRejection(error) && error.reason !== "MalformedStream"
}

/** An attempt's ledger entry on its span. */
const entryAttributes = (entry: Ledger.Entry): Record<string, unknown> => ({
  [A.inputTokens]: entry.tokens.input,
  [A.outputTokens]: entry.tokens.output,
  ...(entry.tokens.cacheRead === 0 ? {} : { [A.cacheReadTokens]: entry.tokens.cacheRead }),
  ...(entry.tokens.cacheWrite === 0 ? {} : { [A.cacheWriteTokens]: entry.tokens.cacheWrite }),
  [A.usageVerdict]: entry.verdict,
  [A.usagePhase]: entry.phase,
  [A.usageInputSource]: entry.input,
  [A.usageOutputSource]: entry.output,
  ...(entry.cost === undefined ? {} : { [A.usageCost]: entry.cost })
})

/** The reply's facts on its span. */
export const replyAttributes = (reply: Generation.Reply): Record<string, unknown> => ({
  [A.attempts]: reply.attempts,
  [A.finishReasons]: [reply.finishReason],
  [A.committedChars]: reply.text.length,
  [A.toolCalls]: reply.toolCalls.length,
  ...(reply.model === undefined ? {} : { [A.responseModel]: reply.model }),
  ...(reply.route === undefined ? {} : { [A.routeIndex]: reply.route.index, [A.route]: reply.route.name }),
  ...Option.match(reply.usage, {
    onNone: () => ({}),
    onSome: (usage) => ({ [A.inputTokens]: usage.inputTokens, [A.outputTokens]: usage.outputTokens })
  })
})

/** What the reply's discarded attempts cost, on its span. */
const ledgerAttributes = (ledger: Ledger.Ledger): Record<string, unknown> => ({
  [A.discardedInputTokens]: ledger.discarded.tokens.input,
  [A.discardedOutputTokens]: ledger.discarded.tokens.output,
  ...(ledger.committed.cost === undefined ? {} : { [A.committedCost]: ledger.committed.cost }),
  ...(ledger.discarded.cost === undefined ? {} : { [A.discardedCost]: ledger.discarded.cost })
})
