/**
 * One attempt of a provider's `open`, as `provider.ts` runs it: its scope, its `Clock`, and its place in the provider's
 * deadline queues (first byte, idle, and first token when the provider has that timeout), each taken once, in one
 * step, for the whole attempt.
 *
 * The attempt's scope is the one `open` runs in (`Recovery`'s attempt scope, or the scope of the stream), which is the
 * attempt's alone. The send registers its abort there (`scopedAbort.ts`, as `HttpClient.withScope` does; the body read
 * there then takes it over), and so does the body its release; a deadline that passes closes that scope, which aborts
 * the request and releases the body at once: a first-byte deadline from the timer's fiber, an idle one from the
 * reading fiber once its wait is abandoned. A first-token deadline that passes closes the scope while the request
 * waits for its headers, and abandons the body's wait once there is a body (the reader then closes it). A scope that cannot be closed (not a `CloseableScope`, which every scope
 * Effect makes is) is not closed early: the attempt then runs in a scope forked from it.
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Scope from "effect/Scope"
import * as Body from "./body.js"
import * as Deadlines from "./deadlines.js"

/** @internal */
export interface Attempt {
  readonly scope: Scope.CloseableScope
  /** Closes the attempt's scope: what a deadline's passing does. */
  readonly close: Effect.Effect<void>
  readonly clock: Clock.Clock
  readonly firstByte: Deadlines.Deadlines
  /** The idle queue, for an attempt that reads a body. */
  readonly idle: Deadlines.Deadlines | undefined
  /** The deadline armed for the send or the read in progress, disarmed when the attempt ends. */
  sending: Deadlines.Deadline | undefined
  reading: Deadlines.Deadline | undefined
  /** The first-token queue, when the provider has a first-token timeout. */
  readonly tokens: Deadlines.Deadlines | undefined
  /** The first-token deadline armed by the send, until the first content event or the attempt's end disarms it. */
  token: Deadlines.Deadline | undefined
  /** What the first-token deadline's passing does. */
  readonly expireToken: Effect.Effect<void>
  /** The body's pull, once the response is read. */
  body: Body.Pull | undefined
}

const isCloseable = (scope: Scope.Scope): scope is Scope.CloseableScope => Scope.CloseableScopeTypeId in scope

// What the attempt's end does: the deadlines still armed are disarmed (an interrupted send or read skips its own
// disarming), then the attempt leaves both queues. Synchronous: it may run in the timer's fiber (`deadlines.ts`).
const end = (attempt: Attempt) =>
  Effect.sync(() => {
    if (attempt.sending !== undefined) Deadlines.disarm(attempt.firstByte, attempt.sending)
    Deadlines.leave(attempt.firstByte)
    if (attempt.tokens !== undefined) {
      if (attempt.token !== undefined) Deadlines.disarm(attempt.tokens, attempt.token)
      Deadlines.leave(attempt.tokens)
    }
    if (attempt.idle === undefined) return
    if (attempt.reading !== undefined) Deadlines.disarm(attempt.idle, attempt.reading)
    Deadlines.leave(attempt.idle)
  })

/**
 * Runs `f` with the attempt, in the current scope: the attempt enters the queues and its end is added to the scope in
 * one uninterruptible step, so that an interruption cannot come between them and leave a user that never leaves.
 *
 * @internal
 */
export const within = <A, E, R>(
  firstByte: Deadlines.Deadlines,
  idle: Deadlines.Deadlines | undefined,
  tokens: Deadlines.Deadlines | undefined,
  f: (attempt: Attempt) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, R | Scope.Scope> =>
  Effect.withFiberRuntime<A, E, R | Scope.Scope>((fiber, status) => {
    const context = fiber.currentContext as Context.Context<Scope.Scope>
    const scope = Context.get(context, Scope.Scope)
    if (!isCloseable(scope)) {
      return Effect.flatMap(
        Scope.fork(scope, ExecutionStrategy.sequential),
        (child) => Scope.extend(within(firstByte, idle, tokens, f), child)
      )
    }
    // uninterruptible: `Scope.close` marks the scope closed before it runs the finalizers, so an interruption
    // between the two would leave the request unaborted. The finalizers wait on nothing unbounded: the attempt's
    // end and the request's abort are synchronous, and so is a body's release (a web body's `cancel` is bounded).
    const close = Effect.uninterruptible(Scope.close(scope, Exit.void))
    const attempt: Attempt = {
      scope,
      close,
      clock: Context.get(fiber.currentDefaultServices, Clock.Clock),
      firstByte,
      idle,
      sending: undefined,
      reading: undefined,
      tokens,
      token: undefined,
      // while the request waits for its headers, it is aborted; once there is a body, its wait is abandoned and its
      // reader, finding the deadline passed, closes the scope. A body whose wait cannot be abandoned is checked by its
      // reader at its next read.
      expireToken: Effect.suspend(() => {
        if (attempt.sending !== undefined) return close
        if (attempt.body !== undefined) Body.abandon(attempt.body)
        return Effect.void
      }),
      body: undefined
    }
    return Effect.zipRight(
      // synchronous: entering the queues and adding a finalizer wait on nothing
      Effect.uninterruptible(Effect.suspend(() => {
        Deadlines.enter(firstByte, fiber, status.runtimeFlags)
        if (idle !== undefined) Deadlines.enter(idle, fiber, status.runtimeFlags)
        if (tokens !== undefined) Deadlines.enter(tokens, fiber, status.runtimeFlags)
        return Scope.addFinalizer(scope, end(attempt))
      })),
      f(attempt)
    )
  })
