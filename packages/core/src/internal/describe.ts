import * as Predicate from "effect/Predicate"

/**
 * A short description of a file-system failure for an error message: the platform's `SystemError` reason
 * (`NotFound`, `PermissionDenied`, …) rather than its long message, which carries absolute paths.
 *
 * @internal
 */
export const describeCause = (cause: unknown): string =>
  Predicate.isTagged(cause, "SystemError") && Predicate.hasProperty(cause, "reason")
    ? String(cause.reason)
    : cause instanceof Error
    ? cause.message
    : String(cause)
