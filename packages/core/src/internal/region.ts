/**
 * Services provided for a region of a fiber's work, in fewer Effect operations than `Effect.provide`.
 *
 * `Effect.provide(self, context)` is `FiberRef.locally` of the fiber's context, which is an `acquireUseRelease`: about
 * a dozen operations around `self`. `Effect.scoped` over it adds a second `acquireUseRelease` to make and close the
 * scope. An attempt ran both, and a reply the first, on the path of every reply: figure 3 counted their operations
 * among the 569 an attempt ran (docs/performance.md, fix 32). These do the same steps, uninterruptibly but for `self`,
 * in one region: the context is the fiber's with `context`'s services added (overriding), restored when `self` ends,
 * before the scope (if any) is closed with `self`'s exit; a scope that fails to close fails the region as
 * `acquireUseRelease`'s release does.
 *
 * @internal
 */
import * as Cause from "effect/Cause"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberRef from "effect/FiberRef"
import * as Scope from "effect/Scope"

/**
 * `self` with `context` provided (`Effect.provide`).
 *
 * @internal
 */
export const provide = <A, E, R, S>(
  self: Effect.Effect<A, E, R>,
  context: Context.Context<S>
): Effect.Effect<A, E, Exclude<R, S>> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(
      FiberRef.getAndUpdate(FiberRef.currentContext, (outer) => Context.merge(outer, context)),
      (outer) => {
        const release = FiberRef.set(FiberRef.currentContext, outer)
        return Effect.matchCauseEffect(restore(self as Effect.Effect<A, E, never>), {
          onFailure: (cause) => Effect.zipRight(release, Effect.failCause(cause)),
          onSuccess: (a) => Effect.as(release, a)
        })
      }
    )
  )

/**
 * `self` with a scope of its own (made here, closed with `self`'s exit) and `context(scope)` provided
 * (`Effect.scoped` over `Effect.provide`).
 *
 * @internal
 */
export const scoped = <A, E, R, S>(
  self: Effect.Effect<A, E, R>,
  context: (scope: Scope.CloseableScope) => Context.Context<S>
): Effect.Effect<A, E, Exclude<R, S | Scope.Scope>> =>
  Effect.uninterruptibleMask((restore) =>
    Effect.flatMap(Scope.make(), (scope) =>
      Effect.flatMap(
        FiberRef.getAndUpdate(
          FiberRef.currentContext,
          (outer) => Context.add(Context.merge(outer, context(scope)), Scope.Scope, scope)
        ),
        (outer) => {
          const release = (exit: Exit.Exit<A, E>) =>
            Effect.zipRight(FiberRef.set(FiberRef.currentContext, outer), Scope.close(scope, exit))
          return Effect.matchCauseEffect(restore(self as Effect.Effect<A, E, never>), {
            onFailure: (cause) =>
              Effect.matchCauseEffect(release(Exit.failCause(cause)), {
                onFailure: (closing) => Effect.failCause(Cause.sequential(cause, closing)),
                onSuccess: () => Effect.failCause(cause)
              }),
            onSuccess: (a) => Effect.as(release(Exit.succeed(a)), a)
          })
        }
      ))
  )
