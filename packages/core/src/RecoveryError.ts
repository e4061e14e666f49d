/**
 * The failures a recovery scope can surface, as one family (modelled on `@effect/ai`'s `AiError`): every member
 * carries the family's {@link TypeId} ({@link isRecoveryError}), the {@link RecoveryError} union has its Schema, and
 * the members say what happened:
 *
 * - `TransportError`: the attempt did not reach its terminal event (the wire, a status that reports the server's
 *   condition, an in-band error).
 * - `ProviderRejection`: the provider's definite "no" (the request, the key, the account, the stream's shape).
 * - `RecoveryExhausted`: recovery gave up (attempts, deadline, `Retry-After`, the fleet's budget).
 * - `HookError`: a generation hook failed.
 *
 * What a provider's send or stream may fail with, the first two, is `ProviderFailure.ProviderFailure`; what the
 * server said becomes one of them at the boundary, in `ProviderFailure.fromHttpStatus` and `fromInBandError`. Only
 * `Classification.classify` says whether a failure is replayed. `Budget.BudgetExhausted` is not a member: it is the
 * Budget's refusal of a send inside an attempt, which the scope turns into a `RecoveryExhausted`.
 *
 * `Recovery.RecoveryError` is an alias of the union. {@link withAttemptFacts} puts the facts of the attempt on a
 * surfaced failure, each member built with its own type.
 *
 * @since 0.1.0
 */
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as HookError from "./HookError.js"
import * as Family from "./internal/family.js"
import * as ProviderFailure from "./ProviderFailure.js"
import * as ProviderRejection from "./ProviderRejection.js"
import * as RecoveryExhausted from "./RecoveryExhausted.js"
import * as TransportError from "./TransportError.js"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: Family.TypeId = Family.TypeId

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = Family.TypeId

/**
 * Everything a recovery scope may fail with.
 *
 * @since 0.1.0
 * @category models
 */
export type RecoveryError =
  | TransportError.TransportError
  | ProviderRejection.ProviderRejection
  | RecoveryExhausted.RecoveryExhausted
  | HookError.HookError

/**
 * @since 0.1.0
 * @category schemas
 */
export const RecoveryError: Schema.Union<
  [
    typeof TransportError.TransportError,
    typeof ProviderRejection.ProviderRejection,
    typeof RecoveryExhausted.RecoveryExhausted,
    typeof HookError.HookError
  ]
> = Schema.Union(
  TransportError.TransportError,
  ProviderRejection.ProviderRejection,
  RecoveryExhausted.RecoveryExhausted,
  HookError.HookError
)

/**
 * Whether `u` is a member of the family.
 *
 * @since 0.1.0
 * @category guards
 */
export const isRecoveryError = (u: unknown): u is RecoveryError => Predicate.hasProperty(u, TypeId)

/**
 * The members' own guards, by their type ids.
 *
 * @since 0.1.0
 * @category guards
 */
export const { isTransportError } = TransportError

/**
 * @since 0.1.0
 * @category guards
 */
export const { isProviderRejection } = ProviderRejection

/**
 * @since 0.1.0
 * @category guards
 */
export const { isRecoveryExhausted } = RecoveryExhausted

/**
 * @since 0.1.0
 * @category guards
 */
export const { isHookError } = HookError

/**
 * What a failed attempt had done when its failure surfaced: the preview it had shown (`partialOutputChars`) and, for
 * a failure that would otherwise have been replayed, why it was not (`replayBlocked`).
 *
 * @since 0.1.0
 * @category models
 */
export interface AttemptFacts {
  readonly partialOutputChars: number
  readonly replayBlocked?: TransportError.ReplayBlocked | undefined
}

/**
 * A copy of a provider failure with the facts of the attempt that surfaced it, each member built with its own
 * fields. (`replayBlocked` is a `TransportError`'s: a rejection is never replayed, so nothing blocks it.)
 *
 * @since 0.1.0
 * @category constructors
 */
export const withAttemptFacts = (
  error: ProviderFailure.ProviderFailure,
  facts: AttemptFacts
): ProviderFailure.ProviderFailure =>
  ProviderFailure.copyWith<ProviderFailure.ProviderFailure>(error, {
    partialOutputChars: facts.partialOutputChars,
    ...(facts.replayBlocked === undefined || !TransportError.isTransportError(error)
      ? {}
      : { replayBlocked: facts.replayBlocked })
  })
