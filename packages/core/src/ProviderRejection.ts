/**
 * `ProviderRejection` is a provider's definite "no": the request, the key or the account is wrong, the context is
 * too long, the server redirected us, or the stream could not be decoded. None of these is replayed by
 * {@link Recovery}; a context overflow has its own policy in {@link Overflow}.
 *
 * @since 0.1.0
 */
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"

/**
 * @since 0.1.0
 * @category type ids
 */
export const TypeId: unique symbol = Symbol.for("@reprise/core/ProviderRejection")

/**
 * @since 0.1.0
 * @category type ids
 */
export type TypeId = typeof TypeId

/**
 * - `Authentication`: 401 or an invalid key.
 * - `Permission`: 403.
 * - `BadRequest`: 400, 409, 422 and other malformed or conflicting requests.
 * - `NotFound`: 404, usually an unknown model.
 * - `Quota`: 402 or `insufficient_quota`, even when sent with a 429.
 * - `ContextOverflow`: the prompt does not fit the model's context (`context_length_exceeded`, "prompt is too
 *   long", 413).
 * - `RedirectRefused`: a 3xx inside a recovery scope (304 Not Modified is not a redirect: `OtherStatus`); no
 *   second request is made.
 * - `MalformedStream`: an event that could not be decoded, or one over the size bound.
 * - `OtherStatus`: any other status that is not on the replay allowlist (501, 505, …).
 *
 * @since 0.1.0
 * @category models
 */
export const Reason = Schema.Literal(
  "Authentication",
  "Permission",
  "BadRequest",
  "NotFound",
  "Quota",
  "ContextOverflow",
  "RedirectRefused",
  "MalformedStream",
  "OtherStatus"
)

/**
 * @since 0.1.0
 * @category models
 */
export type Reason = typeof Reason.Type

/**
 * A permanent, provider-origin failure.
 *
 * @since 0.1.0
 * @category errors
 */
export class ProviderRejection extends Schema.TaggedError<ProviderRejection>("@reprise/core/ProviderRejection")(
  "ProviderRejection",
  {
    reason: Reason,
    detail: Schema.optional(Schema.String),
    status: Schema.optional(Schema.Number),
    providerCode: Schema.optional(Schema.String),
    requestId: Schema.optional(Schema.String),
    /** The `Location` of a refused redirect. */
    location: Schema.optional(Schema.String),
    headers: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.String })),
    partialOutputChars: Schema.optional(Schema.Number),
    cause: Schema.optional(Schema.Defect)
  }
) {
  /**
   * @since 0.1.0
   */
  readonly [TypeId]: TypeId = TypeId

  /**
   * @since 0.1.0
   */
  override get message(): string {
    const parts: Array<string> = [describeReason(this.reason)]
    if (this.status !== undefined) parts.push(` (HTTP ${this.status}`)
    if (this.providerCode !== undefined) {
      parts.push(this.status !== undefined ? `, ${this.providerCode})` : ` (${this.providerCode})`)
    } else if (this.status !== undefined) parts.push(")")
    if (this.location !== undefined) parts.push(` to ${this.location}`)
    if (this.detail !== undefined && this.detail.length > 0) parts.push(`: ${this.detail}`)
    if (this.requestId !== undefined) parts.push(` [request ${this.requestId}]`)
    return parts.join("")
  }
}

const describeReason = (reason: Reason): string => {
  switch (reason) {
    case "Authentication":
      return "authentication failed"
    case "Permission":
      return "permission denied"
    case "BadRequest":
      return "bad request"
    case "NotFound":
      return "not found"
    case "Quota":
      return "quota exceeded"
    case "ContextOverflow":
      return "context length exceeded"
    case "RedirectRefused":
      return "redirect refused"
    case "MalformedStream":
      return "malformed stream"
    case "OtherStatus":
      return "request failed"
  }
}

/**
 * @since 0.1.0
 * @category guards
 */
export const isProviderRejection = (u: unknown): u is ProviderRejection => Predicate.hasProperty(u, TypeId)
