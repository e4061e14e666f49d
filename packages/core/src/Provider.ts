/**
 * `Provider` is what every wire protocol implements: turn a {@link Generation.GenerationRequest} into a stream of
 * typed events that fails with a {@link ProviderFailure.ProviderFailure} unless the protocol's terminal event
 * arrives.
 *
 * A provider makes exactly one physical send per stream run (two for a capability fallback), each debited from the
 * {@link Budget.Budget} of the current scope before it is sent, and never retries on its own: replay is the
 * recovery scope's decision.
 *
 * @since 0.1.0
 */
import type * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import { globalValue } from "effect/GlobalValue"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as Budget from "./Budget.js"
import type * as Generation from "./Generation.js"
import type * as ProviderFailure from "./ProviderFailure.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** The wire protocol, e.g. `openai-chat`. */
  readonly protocol: string
  /**
   * One generation. Running the stream sends the request (after `Budget.reserve`); running it again sends it
   * again.
   */
  readonly stream: (
    request: Generation.GenerationRequest
  ) => Stream.Stream<
    Generation.GenerationEvent,
    ProviderFailure.ProviderFailure | Budget.BudgetExhausted,
    Budget.Budget
  >
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Provider extends Context.Tag("@reprise/core/Provider")<Provider, Service>() {}

/**
 * The pull of a generation: a chunk of events, or the end (`None`) or a failure (`Some`).
 *
 * @since 0.1.0
 * @category models
 */
export type Pull<E> = Effect.Effect<Chunk.Chunk<Generation.GenerationEvent>, Option.Option<E>>

const pulls = globalValue(
  Symbol.for("@reprise/core/Provider/pulls"),
  () => new WeakMap<object, Effect.Effect<Pull<unknown>, unknown, unknown>>()
)

/**
 * A generation stream made from its pull: `open` (run in the stream's scope) sends the request and returns the pull,
 * and the stream is its chunks. `Recovery` reads a stream made this way by its pull, without the stream's own
 * stages (a channel and a sink per chunk, about a quarter of the cost of a read: docs/performance.md, fix 17); any
 * other consumer reads it as the stream it is.
 *
 * The scope `open` runs in is its run's alone, from the open to the end of the reading (the stream's scope, or the
 * attempt's scope `Recovery` makes for it), so `open` may close it early when that run must stop at once, as
 * @reprise/providers does when a deadline passes: the request is aborted and the body released then (fix 32). A
 * consumer of {@link pullOf} must give each run a scope of its own, and read nothing more from a pull whose scope is
 * closed.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromPull = <E, R>(
  open: Effect.Effect<Pull<E>, E, R | Scope.Scope>
): Stream.Stream<Generation.GenerationEvent, E, Exclude<R, Scope.Scope>> => {
  // built when the stream is run, not here: `Recovery`, which reads it by its pull, never runs it, and building its
  // stages for every attempt was about 12 ms of figure 3's ramp-up, when the code is still cold (fix 41)
  const stream = Stream.suspend(() => Stream.unwrapScoped(Effect.map(open, Stream.repeatEffectChunkOption)))
  pulls.set(stream, open)
  return stream
}

/**
 * The `open` a stream was made from by {@link fromPull}, if it was.
 *
 * @since 0.1.0
 * @category getters
 */
export const pullOf = <E, R>(
  stream: Stream.Stream<Generation.GenerationEvent, E, R>
): Effect.Effect<Pull<E>, E, R | Scope.Scope> | undefined =>
  // registered by `fromPull` with the types of the stream it returned
  pulls.get(stream) as Effect.Effect<Pull<E>, E, R | Scope.Scope> | undefined
