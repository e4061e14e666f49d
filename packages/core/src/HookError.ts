/**
 * A generation hook failed. Hooks are the caller's code, not the provider's: their failures are never replayed.
 *
 * @since 0.1.0
 */
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Family from "./internal/family.js"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@reprise/core/HookError")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * @since 0.1.0
 * @category errors
 */
export class HookError extends Schema.TaggedError<HookError>("@reprise/core/HookError")("HookError", {
  hook: Schema.Literal("beforeGeneration", "onChunk", "afterGeneration"),
  /** The attempt during which a chunk hook failed. */
  attempt: Schema.optional(Schema.Number),
  cause: Schema.Defect
}) {
  /**
   * @since 0.1.0
   */
  readonly [TypeId]: TypeId = TypeId

  /**
   * The `RecoveryError` family's mark.
   *
   * @since 0.1.0
   */
  readonly [Family.TypeId]: Family.TypeId = Family.TypeId

  /**
   * @since 0.1.0
   */
  override get message(): string {
    const cause = this.cause instanceof Error ? this.cause.message : String(this.cause)
    return `${this.hook} hook failed${this.attempt === undefined ? "" : ` in attempt ${this.attempt}`}: ${cause}`
  }
}

/**
 * @since 0.1.0
 * @category guards
 */
export const isHookError = (u: unknown): u is HookError => Predicate.hasProperty(u, TypeId)
