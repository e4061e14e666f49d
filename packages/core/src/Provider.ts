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
import * as Context from "effect/Context"
import type * as Stream from "effect/Stream"
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
