import { assert, describe, it } from "@effect/vitest"
import { Duration, Schema } from "effect"
import * as Budget from "../src/Budget.js"
import * as ProviderFailure from "../src/ProviderFailure.js"
import * as ProviderRejection from "../src/ProviderRejection.js"
import * as RecoveryExhausted from "../src/RecoveryExhausted.js"
import * as TransportError from "../src/TransportError.js"

describe("errors", () => {
  it("TransportError reads well in a terminal", () => {
    const error = new TransportError.TransportError({
      reason: "HttpStatus",
      status: 503,
      providerCode: "overloaded_error",
      detail: "Overloaded",
      retryAfter: Duration.seconds(2),
      requestId: "req_1"
    })
    assert.strictEqual(error.message, "HTTP 503 (overloaded_error): Overloaded; retry after 2.0s [request req_1]")
    assert.strictEqual(
      new TransportError.TransportError({ reason: "PrematureEof" }).message,
      "stream ended before its terminal event"
    )
    assert.strictEqual(
      new TransportError.TransportError({ reason: "Reset", replayBlocked: "ExternalEffects" }).message,
      "connection reset (not replayed: ExternalEffects)"
    )
  })

  it("ProviderRejection reads well in a terminal", () => {
    assert.strictEqual(
      ProviderFailure.fromHttpStatus({ status: 404, code: "model_not_found", detail: "no such model" }).message,
      "not found (HTTP 404, model_not_found): no such model"
    )
    assert.strictEqual(
      ProviderFailure.fromHttpStatus({ status: 308, location: "http://127.0.0.1/x" }).message,
      "redirect refused (HTTP 308) to http://127.0.0.1/x"
    )
    assert.strictEqual(
      new ProviderRejection.ProviderRejection({ reason: "MalformedStream", detail: "event over 1 MiB" }).message,
      "malformed stream: event over 1 MiB"
    )
  })

  it("RecoveryExhausted names the reason, the count and the last error", () => {
    const last = ProviderFailure.fromHttpStatus({ status: 503 })
    const error = new RecoveryExhausted.RecoveryExhausted({
      reason: "Attempts",
      attempts: 11,
      maxAttempts: 11,
      elapsed: Duration.seconds(303),
      errors: [last],
      lastError: last
    })
    assert.strictEqual(error.message, "gave up after 11 of 11 attempts; last error: HTTP 503")
    assert.isTrue(RecoveryExhausted.isRecoveryExhausted(error))
  })

  it("durations read as the CLI's retry notices do, in seconds with one decimal, never in nanoseconds", () => {
    const exhausted = (fields: Partial<ConstructorParameters<typeof RecoveryExhausted.RecoveryExhausted>[0]>) =>
      new RecoveryExhausted.RecoveryExhausted({
        reason: "Deadline",
        attempts: 3,
        maxAttempts: 11,
        elapsed: Duration.nanos(13_247_310_680n),
        errors: [],
        ...fields
      }).message
    assert.strictEqual(exhausted({}), "deadline reached after 13.2s and 3 attempts")
    assert.strictEqual(
      exhausted({ nextDelay: Duration.millis(1_843.7) }),
      "stopped after 13.2s and 3 attempts: the 1.8s wait before the next attempt would end past the deadline"
    )
    assert.strictEqual(
      exhausted({ reason: "RetryAfterBeyondDeadline", retryAfter: Duration.nanos(29_442_251_465n) }),
      "server asked to retry after 29.4s, past the deadline"
    )
    assert.strictEqual(
      new TransportError.TransportError({
        reason: "HttpStatus",
        status: 429,
        retryAfter: Duration.nanos(1_500_000_001n)
      })
        .message,
      "HTTP 429; retry after 1.5s"
    )
    assert.strictEqual(
      new Budget.BudgetExhausted({
        reason: "Deadline",
        attempts: 2,
        maxAttempts: 11,
        elapsed: Duration.nanos(13_247_310_680n)
      }).message,
      "deadline passed after 13.2s (2 of 11 attempts used)"
    )
  })

  it("provider failures round-trip through their schema", () => {
    const error = ProviderFailure.fromHttpStatus({ status: 429, retryAfter: Duration.seconds(3), requestId: "r" })
    const encoded = Schema.encodeSync(ProviderFailure.ProviderFailure)(error)
    const decoded = Schema.decodeSync(ProviderFailure.ProviderFailure)(encoded)
    assert.isTrue(TransportError.isTransportError(decoded))
    assert.strictEqual(decoded.message, error.message)
  })
})
