/**
 * The type id every member of the `RecoveryError` family carries, apart from the family's module so that each
 * member's module can stamp it without importing the family (which imports them all).
 *
 * @internal
 */
export const TypeId: unique symbol = Symbol.for("@reprise/core/RecoveryError")

/** @internal */
export type TypeId = typeof TypeId
