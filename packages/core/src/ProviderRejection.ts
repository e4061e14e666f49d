/**
 * `ProviderRejection` is a provider's definite "no": the request, the key or the account is wrong, the context is
 * too long, the server redirected us, the stream could not be decoded, the reply was over its size bound, or the
 * response broke HTTP in a way the client cannot read. Each would recur on a replay, so none is replayed by
 * {@link Recovery}; a context overflow has its own policy in {@link Overflow}.
 *
 * @since 0.1.0
 */
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Family from "./internal/family.js"
import * as RouteFailure from "./internal/routeFailure.js"

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
 * - `MalformedStream`: an event that could not be decoded, one over the size bound, or a JSON value read whole
 *   (tool-call arguments) nested deeper than the nesting bound.
 * - `ReplyTooLarge`: the response body of one attempt passed the reply size bound (`maxReplyBytes`); a replay would
 *   be as long.
 * - `ProtocolViolation`: a response the HTTP client cannot read: a header section over its limit, an unexpected
 *   `100 Continue` or protocol upgrade, bytes that are not HTTP/1.1, or a body in a content encoding it does not
 *   decode. The same server answers a replay the same way.
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
  "ReplyTooLarge",
  "ProtocolViolation",
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
    cause: Schema.optional(Schema.Defect),
    /** Each route's last failure, when every route of a plan failed (see `Routes`). */
    ...RouteFailure.field
  }
) {
  /**
   * @since 0.1.0
   */
  readonly [TypeId]: TypeId = TypeId

  /**
   * When the provider observed the failure (`Clock.currentTimeNanos`); see `TransportError`'s.
   *
   * @since 0.1.0
   */
  declare readonly observedAt?: bigint

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
    case "ReplyTooLarge":
      return "reply too large"
    case "ProtocolViolation":
      return "protocol violation"
    case "OtherStatus":
      return "request failed"
  }
}

/**
 * @since 0.1.0
 * @category guards
 */
export const isProviderRejection = (u: unknown): u is ProviderRejection => Predicate.hasProperty(u, TypeId)
