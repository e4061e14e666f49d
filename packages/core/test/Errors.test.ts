import { assert, describe, it } from "@effect/vitest"
import { Duration, Schema } from "effect"
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
    assert.strictEqual(error.message, "HTTP 503 (overloaded_error): Overloaded; retry after 2s [request req_1]")
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

  it("provider failures round-trip through their schema", () => {
    const error = ProviderFailure.fromHttpStatus({ status: 429, retryAfter: Duration.seconds(3), requestId: "r" })
    const encoded = Schema.encodeSync(ProviderFailure.ProviderFailure)(error)
    const decoded = Schema.decodeSync(ProviderFailure.ProviderFailure)(encoded)
    assert.isTrue(TransportError.isTransportError(decoded))
    assert.strictEqual(decoded.message, error.message)
  })
})
