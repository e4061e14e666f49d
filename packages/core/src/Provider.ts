/**
 * `Provider` is what every wire protocol implements: turn a {@link Generation.GenerationRequest} into typed events
 * that fail with a {@link ProviderFailure.ProviderFailure} unless the protocol's terminal event arrives.
 *
 * The service's `open` is what runs: in the current scope it sends the request and returns the {@link Pull} of its
 * events, chunk by chunk. `stream` is derived from it for every consumer that wants a `Stream`. `Recovery` reads
 * `open` directly, one scope per attempt.
 *
 * A provider makes exactly one physical send per `open` (two for a capability fallback), runs `Budget.reserve` right
 * before each, and never retries on its own: replay is the recovery scope's decision.
 *
 * @since 0.1.0
 */
import type * as Chunk from "effect/Chunk"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import type * as Budget from "./Budget.js"
import type * as Generation from "./Generation.js"
import type * as ProviderFailure from "./ProviderFailure.js"

/**
 * The pull of a generation: a chunk of events, or the end (`None`) or a failure (`Some`).
 *
 * @since 0.1.0
 * @category models
 */
export type Pull<E> = Effect.Effect<Chunk.Chunk<Generation.GenerationEvent>, Option.Option<E>>

/**
 * What a provider's generation fails with.
 *
 * @since 0.1.0
 * @category models
 */
export type Failure = ProviderFailure.ProviderFailure | Budget.BudgetExhausted

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  /** The wire protocol, e.g. `openai-chat`. */
  readonly protocol: string
  /**
   * Where it sends: its base URL, never with a credential. With the protocol and the model it names a route's
   * circuit (see `Routes`), so that routes to one server share one.
   */
  readonly endpoint?: string | undefined
  /**
   * One generation, opened in the current scope: the request sent (after `Budget.reserve`) and the pull of its
   * events returned. Closing the scope aborts the request and releases the body. Opening again sends again.
   */
  readonly open: (
    request: Generation.GenerationRequest
  ) => Effect.Effect<Pull<Failure>, Failure, Budget.Budget | Scope.Scope>
  /** {@link open} as a stream: running it sends the request; running it again sends it again. */
  readonly stream: (
    request: Generation.GenerationRequest
  ) => Stream.Stream<Generation.GenerationEvent, Failure, Budget.Budget>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Provider extends Context.Tag("@reprise/core/Provider")<Provider, Service>() {}

/**
 * The stream of an `open`: its pull read to the end, in the stream's scope.
 *
 * @since 0.1.0
 * @category constructors
 */
export const toStream = <E, R>(
  open: Effect.Effect<Pull<E>, E, R>
): Stream.Stream<Generation.GenerationEvent, E, Exclude<R, Scope.Scope>> =>
  Stream.unwrapScoped(Effect.map(open, Stream.repeatEffectChunkOption))

/**
 * A provider from its `open`; `stream` is derived from it.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: {
  readonly protocol: string
  readonly endpoint?: string | undefined
  readonly open: Service["open"]
}): Service => ({
  protocol: options.protocol,
  ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
  open: options.open,
  stream: (request) => toStream(options.open(request))
})

/**
 * A stream adapted into an `open`: run in a scope, it starts the stream and returns its pull, which runs with the
 * context `open` ran in.
 *
 * @since 0.1.0
 * @category constructors
 */
export const fromStream = <E, R>(
  stream: Stream.Stream<Generation.GenerationEvent, E, R>
): Effect.Effect<Pull<E>, never, R | Scope.Scope> =>
  Effect.flatMap(
    Effect.context<R>(),
    (context) => Effect.map(Stream.toPull(stream), (pull) => Effect.provide(pull, context))
  )

/**
 * A provider from a function that returns a stream per request (a test double, an adapter over another client): the
 * stream is adapted once, into the pull `open` returns.
 *
 * @since 0.1.0
 * @category constructors
 */
export const makeFromStream = (options: {
  readonly protocol: string
  readonly endpoint?: string | undefined
  readonly stream: Service["stream"]
}): Service => ({
  protocol: options.protocol,
  ...(options.endpoint === undefined ? {} : { endpoint: options.endpoint }),
  open: (request) => fromStream(options.stream(request)),
  stream: options.stream
})
