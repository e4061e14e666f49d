/**
 * One attempt of a reply: the generation opened and read in the attempt's scope, its events recorded and surfaced as
 * previews, then what follows decided in its span (a commit, or a failure stopped, continued or replayed) with its
 * ledger entry.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import type * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Metric from "effect/Metric"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Budget from "../Budget.js"
import * as Classification from "../Classification.js"
import * as Generation from "../Generation.js"
import * as HookError from "../HookError.js"
import * as Ledger from "../Ledger.js"
import type * as Provider from "../Provider.js"
import type * as ProviderFailure from "../ProviderFailure.js"
import * as ProviderRejection from "../ProviderRejection.js"
import * as RecoveryErrorFamily from "../RecoveryError.js"
import * as RecoveryNotifications from "../RecoveryNotifications.js"
import * as Telemetry from "../RecoveryTelemetry.js"
import type * as Resumption from "../Resumption.js"
import * as TransportError from "../TransportError.js"
import { Accumulator } from "./attempt.js"
import { pushback, resend } from "./fleetChecks.js"
import type { Hooks, Open } from "./recovery.js"
import type { ReplyRun } from "./replyRun.js"
import { ended, nextRoute, routeFailed, type RouteRun } from "./routeRun.js"
import { entryAttributes, region, replyAttributes } from "./spans.js"

type RecoveryError = RecoveryErrorFamily.RecoveryError

const A = Telemetry.Attribute
const N = RecoveryNotifications.Notification

/**
 * The errors an attempt fails with.
 *
 * @internal
 */
export type AttemptError = ProviderFailure.ProviderFailure | HookError.HookError | Budget.BudgetExhausted

/**
 * The next attempt continues the response of the one before it, and adds to what it had surfaced.
 *
 * @internal
 */
export interface Pending {
  readonly continuation: Resumption.Continuation
  readonly responseId: string
  readonly acc: Accumulator
}

/**
 * What one attempt led to, decided inside its span.
 *
 * @internal
 */
export type Decision =
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
 * One attempt: its accumulator (the preview, or the kept preview of the response it continues), the number of its
 * send once reserved, and when its failure was observed.
 *
 * @internal
 */
export class AttemptRun<RH> {
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
      this.attempt === undefined ? this.start() : Effect.zipRight(resend(this.reply), this.reply.allowance.reserve)
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
      yield* pushback(reply, error, failedAt)

      const verdict = Classification.classify(error)
      yield* Effect.annotateCurrentSpan(A.retryable, verdict._tag !== "Permanent")
      const faceted = (replayBlocked?: TransportError.ReplayBlocked) =>
        RecoveryErrorFamily.withAttemptFacts(error, {
          partialOutputChars: acc.text.length,
          ...(replayBlocked === undefined ? {} : { replayBlocked })
        })
      const surfaced = (replayBlocked?: TransportError.ReplayBlocked) =>
        stop(reply.surface(ended(reply, faceted(replayBlocked))))
      const leave = yield* routeFailed(reply, faceted(), verdict)
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
      const to = leave === undefined ? undefined : nextRoute(reply, leave)
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
 * A failure that is the provider's own answer (an in-band error event, or a rejection it sent), not a cut of the
 * transport or reprise's own limit: before any content, the ledger's policy counts it not billed.
 */
const refusedInBand = (error: AttemptError | undefined): boolean => {
  if (error === undefined) return false
  if (TransportError.isTransportError(error)) return error.reason === "ProviderError" || error.reason === "HttpStatus"
  return ProviderRejection.isProviderRejection(error) && error.reason !== "MalformedStream"
}
