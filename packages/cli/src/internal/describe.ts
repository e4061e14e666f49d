import * as Predicate from "effect/Predicate"

/** `ENOSPC: no space left on device` from Node's message, without what follows (the call and a path). */
const errno = (cause: object): string | undefined => {
  const description = Predicate.hasProperty(cause, "description") ? cause.description : undefined
  const match = typeof description === "string" ? /^(E[A-Z0-9]+: [^,]*)/.exec(description) : null
  return match === null ? undefined : match[1]
}

/**
 * A short description of a file-system failure for an error message: the platform's `SystemError` reason
 * (`NotFound`, `PermissionDenied`, …) rather than its long message, which carries absolute paths; for a reason the
 * platform does not name (`Unknown`), Node's error code and its text (`ENOSPC: no space left on device`).
 *
 * @internal
 */
export const describeCause = (cause: unknown): string =>
  Predicate.isTagged(cause, "SystemError") && Predicate.hasProperty(cause, "reason")
    ? cause.reason === "Unknown" ? errno(cause) ?? "Unknown" : String(cause.reason)
    : cause instanceof Error
    ? cause.message
    : String(cause)
