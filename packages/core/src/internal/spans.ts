/**
 * The spans of a reply and of its attempts: the region each runs in (its services added to the fiber's context, then
 * its span or scope ended with its exit), how a span ends, and the facts recovery puts on the spans.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as Option from "effect/Option"
import type * as Tracer from "effect/Tracer"
import type * as Generation from "../Generation.js"
import type * as Ledger from "../Ledger.js"
import * as Telemetry from "../RecoveryTelemetry.js"
import type { Decision } from "./attemptRun.js"

const A = Telemetry.Attribute

/**
 * `use` with the services `acquire` made added to the fiber's context, then `release` run with its exit once the
 * context is given back: what `Effect.provide` over `Effect.scoped` or `Effect.withSpan` does, in one region instead of
 * one per combinator. A reply in flight holds the frames of every region around its read for as long as it reads: with
 * one combinator per service, a reply and its attempt held about 20 KB more of the heap per stream in figure 3's
 * stalled replies (docs/performance.md, "One region per reply and per attempt").
 *
 * @internal
 */
export const region = <S, A, E, R>(
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

/**
 * Ends `span` with `exit` at the `Clock`'s time (when the tracer's timing is on), unless it has ended.
 *
 * @internal
 */
export const endSpan = (span: Tracer.Span, exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> =>
  Effect.flatMap(
    FiberRef.get(FiberRef.currentTracerTimingEnabled),
    (timing) =>
      Effect.map(timing ? Clock.currentTimeNanos : Effect.succeed(0n), (now) => {
        if (span.status._tag !== "Ended") span.end(now, exit)
      })
  )

/**
 * An attempt's span ends with its outcome: a commit succeeds, a failed attempt fails with its own error.
 *
 * @internal
 */
export const attemptSpanExit = (exit: Exit.Exit<Decision, unknown>): Effect.Effect<Exit.Exit<unknown, unknown>> =>
  Exit.isFailure(exit)
    ? Effect.succeed(exit)
    : exit.value._tag === "Commit"
    ? Effect.succeed(Exit.void)
    // failed as `Effect.fail` fails, which captures the current span (the reply's) in the error
    : Effect.exit(Effect.fail(exit.value.error))

/**
 * An attempt's ledger entry on its span.
 *
 * @internal
 */
export const entryAttributes = (entry: Ledger.Entry): Record<string, unknown> => ({
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

/**
 * The reply's facts on its span.
 *
 * @internal
 */
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

/**
 * What the reply's discarded attempts cost, on its span.
 *
 * @internal
 */
export const ledgerAttributes = (ledger: Ledger.Ledger): Record<string, unknown> => ({
  [A.discardedInputTokens]: ledger.discarded.tokens.input,
  [A.discardedOutputTokens]: ledger.discarded.tokens.output,
  ...(ledger.committed.cost === undefined ? {} : { [A.committedCost]: ledger.committed.cost }),
  ...(ledger.discarded.cost === undefined ? {} : { [A.discardedCost]: ledger.discarded.cost })
})
