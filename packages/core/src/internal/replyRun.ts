/**
 * The run of one reply: its settings read once, the attempts in turn and what comes between them (the wait, the
 * discard, a continuation, the cancel of a response left behind), the ledger's entries, and how recovery ends
 * (committed, surfaced or exhausted). It follows its plan's routes through `routeRun.ts` and the fleet's limits through
 * `fleetChecks.ts`.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Fiber from "effect/Fiber"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"
import type * as Budget from "../Budget.js"
import type * as Circuit from "../Circuit.js"
import * as Classification from "../Classification.js"
import * as FleetLimits from "../FleetLimits.js"
import type * as Generation from "../Generation.js"
import * as HookError from "../HookError.js"
import * as Ledger from "../Ledger.js"
import type * as Pacing from "../Pacing.js"
import * as Policy from "../Policy.js"
import type * as Prices from "../Prices.js"
import * as Provider from "../Provider.js"
import type * as ProviderFailure from "../ProviderFailure.js"
import * as RecoveryErrorFamily from "../RecoveryError.js"
import * as RecoveryExhausted from "../RecoveryExhausted.js"
import * as RecoveryNotifications from "../RecoveryNotifications.js"
import * as Telemetry from "../RecoveryTelemetry.js"
import type * as Resumption from "../Resumption.js"
import type * as Routes from "../Routes.js"
import * as TransportError from "../TransportError.js"
import type { Accumulator } from "./attempt.js"
import { type AttemptError, AttemptRun, type Decision, type Pending } from "./attemptRun.js"
import { fleetChecked, type FleetStop, pushback } from "./fleetChecks.js"
import type { Open, Options } from "./recovery.js"
import { admitted, routeFailures, type RouteRun } from "./routeRun.js"
import { attemptSpanExit, endSpan, ledgerAttributes, region, replyAttributes } from "./spans.js"
import { waitFrom } from "./wait.js"

type RecoveryError = RecoveryErrorFamily.RecoveryError

const A = Telemetry.Attribute
const N = RecoveryNotifications.Notification

/** A cancel of a response left behind waits at most this long for the server's answer. */
const cancelBound = Duration.seconds(2)

/**
 * One reply's state: its settings read once, the errors of its failed attempts, the backoff's schedule, and the
 * background response it reads, if its provider offered one (it is the reply's `Resumption` service).
 *
 * @internal
 */
export class ReplyRun<RH> implements Resumption.Service {
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
    const sent = this.fleet === FleetLimits.unlimited ? attempt : Effect.suspend(() => fleetChecked(this, attempt))
    return this.circuit === undefined
      ? sent
      : Effect.flatMap(Effect.suspend(() => admitted(this)), (stop) => stop === undefined ? sent : stop)
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

  /** Recovery ends with `reason`; `retryAfter` for `RetryAfterBeyondDeadline`, `nextDelay` for a wait past the deadline. */
  exhausted(
    reason: RecoveryExhausted.Reason,
    retryAfter?: Duration.Duration,
    nextDelay?: Duration.Duration
  ): Effect.Effect<never, RecoveryExhausted.RecoveryExhausted> {
    const self = this
    return Effect.gen(function*() {
      const { allowance, errors, lastShown } = self
      const failures = routeFailures(self)
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
        ...(failures === undefined ? {} : { routeFailures: failures })
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
      yield* pushback(self, error, failedAt)
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
