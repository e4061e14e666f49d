/**
 * `Resumption` is how a provider tells a recovery scope that the response an attempt is reading can be continued
 * instead of regenerated: the OpenAI Responses API in background mode keeps a response running on the server after
 * its connection is cut, numbers its events, and streams those after a given one again.
 *
 * A provider that can do this offers a {@link Resumable} when its stream starts (`offer`); outside a recovery scope the
 * offer goes nowhere. When the attempt fails, `Recovery` asks it for a {@link Continuation} and, if it gets one, runs
 * it as the next attempt and **keeps** the preview: the continuation emits only the events after the last one surfaced
 * (the cursor). A continuation is a physical send like any other (debited from the Budget before it is sent, bounded by
 * the deadline, after the policy's wait lengthened by `Retry-After`). When it gets none, the attempt is discarded and
 * replayed like any failed attempt, and the response it leaves is cancelled (`cancel`, not debited), as it is when
 * recovery gives up or is interrupted: a background response goes on running, and billing, until it is.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Option from "effect/Option"
import type * as Stream from "effect/Stream"
import type * as Budget from "./Budget.js"
import type * as Generation from "./Generation.js"
import type * as ProviderFailure from "./ProviderFailure.js"

/**
 * How a continuation reads the rest of the response: `stream` the events after the cursor, or `poll` the response
 * until it is finished and emit what its final output adds to what was surfaced.
 *
 * @since 0.1.0
 * @category models
 */
export type Mode = "stream" | "poll"

/**
 * The next attempt of a cut response.
 *
 * @since 0.1.0
 * @category models
 */
export interface Continuation {
  readonly mode: Mode
  /** The sequence number of the last event surfaced: the continuation emits what comes after it. */
  readonly fromSequence: number
  /**
   * `true` when there is nothing to wait out before it (a poll after the server declined to stream the response
   * again); otherwise the policy's wait comes first, as it does before a replay.
   */
  readonly immediate: boolean
  /** The attempt: it reserves its send like a provider's stream does. */
  readonly stream: Stream.Stream<
    Generation.GenerationEvent,
    ProviderFailure.ProviderFailure | Budget.BudgetExhausted,
    Budget.Budget
  >
}

/**
 * What the recovery scope knows of a failed attempt when it asks for a continuation.
 *
 * @since 0.1.0
 * @category models
 */
export interface Failure {
  readonly error: ProviderFailure.ProviderFailure
  /** What `Classification.classify` says of it. */
  readonly retryable: boolean
  /** Sends the Budget still allows. */
  readonly remainingAttempts: number
  /**
   * The text and reasoning the consumer has been shown of this response: what a continuation must extend. A
   * provider whose own account differs (output it counted was never surfaced) continues from this one.
   */
  readonly shownText: string
  readonly shownReasoning: string
}

/**
 * A response that may outlive its connection.
 *
 * @since 0.1.0
 * @category models
 */
export interface Resumable {
  /** The response's id, once the server has named it (`undefined` before: there is nothing to resume or cancel). */
  readonly responseId: () => string | undefined
  /** True once the response has ended on the server as far as this client saw (its terminal event, a failure). */
  readonly settled: () => boolean
  /** How the next attempt continues the response after `failure`; `None`: it cannot, the attempt is replayed. */
  readonly continuation: (failure: Failure) => Option.Option<Continuation>
  /** Cancels the response on the server. Not a generation attempt: nothing is debited. */
  readonly cancel: Effect.Effect<void, ProviderFailure.ProviderFailure>
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly offer: (resumable: Resumable) => Effect.Effect<void>
}

/**
 * Where a provider offers its stream's {@link Resumable}. By default the offer goes nowhere; `Recovery` binds it for
 * each attempt.
 *
 * @since 0.1.0
 * @category tags
 */
export class Resumption extends Context.Reference<Resumption>()(
  "@reprise/core/Resumption",
  { defaultValue: (): Service => ({ offer: () => Effect.void }) }
) {}

/**
 * Offers `resumable` to the current recovery scope.
 *
 * @since 0.1.0
 * @category accessors
 */
export const offer = (resumable: Resumable): Effect.Effect<void> =>
  Effect.flatMap(Resumption, (service) => service.offer(resumable))
