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
 * The union used to be declared in `Recovery.ts` (`Recovery.RecoveryError`, still an alias of this one), the members'
 * guards of `RecoveryExhausted` and `HookError` matched their tags by string, and the facts of the attempt were put
 * on a surfaced failure by rebuilding it with casts; {@link withAttemptFacts} does it with each member's own type.
 *
 * @since 0.1.0
 */
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as HookError from "./HookError.js"
import * as Family from "./internal/family.js"
import type * as ProviderFailure from "./ProviderFailure.js"
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

const trusted = { disableValidation: true } as const

/**
 * The fields a member's Schema declares that `error` has, read one by one. Not by spreading the error: a failure
 * raised in a span reaches recovery as Effect's proxy of it, and spreading a proxy asks for every own property's
 * descriptor, the `stack` among them, which formats the stack (about 1 ms per failure with source maps on).
 */
const fieldsOf = (error: object, fields: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const out: Record<string, unknown> = {}
  for (const name in fields) {
    if (name !== "_tag" && name in error) out[name] = (error as Record<string, unknown>)[name]
  }
  return out
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
): ProviderFailure.ProviderFailure => {
  // Not validated again (`disableValidation`): the copy is of a valid member, with a count and a literal added, and a
  // Schema class's validation costs about 0.1 ms per construction on the recovery path (docs/performance.md, fix 12).
  if (TransportError.isTransportError(error)) {
    return new TransportError.TransportError({
      ...fieldsOf(error, TransportError.TransportError.fields) as unknown as TransportError.TransportError,
      partialOutputChars: facts.partialOutputChars,
      ...(facts.replayBlocked === undefined ? {} : { replayBlocked: facts.replayBlocked })
    }, trusted)
  }
  return new ProviderRejection.ProviderRejection({
    ...fieldsOf(error, ProviderRejection.ProviderRejection.fields) as unknown as ProviderRejection.ProviderRejection,
    partialOutputChars: facts.partialOutputChars
  }, trusted)
}
