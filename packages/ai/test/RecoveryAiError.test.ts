import { assert, describe, it } from "@effect/vitest"
import * as HookError from "@reprise/core/HookError"
import * as Ledger from "@reprise/core/Ledger"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as RecoveryExhausted from "@reprise/core/RecoveryExhausted"
import * as TransportError from "@reprise/core/TransportError"
import { Duration, Option } from "effect"
import * as RecoveryAiError from "../src/RecoveryAiError.js"

const origin: RecoveryAiError.Origin = {
  method: "generateText",
  url: "http://127.0.0.1:1/v1/chat/completions",
  attempts: 3
}

describe("RecoveryAiError", () => {
  it("an error status: HttpResponseError{StatusCode} with the status, redacted headers, the code, the cause", () => {
    const cause = new TransportError.TransportError({
      reason: "HttpStatus",
      status: 503,
      providerCode: "server_error",
      headers: { "retry-after": "1", authorization: "<redacted>" },
      retryAfter: Duration.seconds(1)
    })
    const error = RecoveryAiError.fromRecoveryError(cause, origin)
    assert.strictEqual(error._tag, "HttpResponseError")
    if (error._tag !== "HttpResponseError") return
    assert.strictEqual(error.reason, "StatusCode")
    assert.strictEqual(error.response.status, 503)
    assert.deepStrictEqual(error.response.headers, { "retry-after": "1", authorization: "<redacted>" })
    assert.strictEqual(error.request.url, origin.url)
    assert.strictEqual(error.cause, cause)
    assert.include(error.message, "server_error")
    assert.include(error.message, "(3 attempts)")
    const facts = Option.getOrThrow(RecoveryAiError.facts(error))
    assert.deepStrictEqual([facts.status, facts.providerCode, facts.attempts], [503, "server_error", 3])
    assert.strictEqual(facts.ledger, undefined)
  })

  it("the ledger the origin names is in the facts, for every kind of failure", () => {
    const ledger = Ledger.make([
      Ledger.entry({ attempt: 1, phase: "headers", outcome: "discarded", refused: true, outputChars: 0 })
    ])
    const failures = [
      new TransportError.TransportError({ reason: "HttpStatus", status: 503 }),
      new HookError.HookError({ hook: "beforeGeneration", cause: new Error("no") }),
      new RecoveryExhausted.RecoveryExhausted({
        reason: "Attempts",
        attempts: 1,
        maxAttempts: 1,
        elapsed: Duration.seconds(1),
        errors: []
      })
    ]
    for (const failure of failures) {
      const error = RecoveryAiError.fromRecoveryError(failure, { ...origin, ledger })
      assert.strictEqual(Option.getOrThrow(RecoveryAiError.facts(error)).ledger, ledger, failure._tag)
    }
  })

  it("a body cut after a 200: HttpResponseError{Decode}; no status: HttpRequestError{Transport}", () => {
    const cut = RecoveryAiError.fromRecoveryError(
      new TransportError.TransportError({ reason: "Reset", status: 200 }),
      origin
    )
    assert.deepStrictEqual([cut._tag, (cut as any).reason, (cut as any).response.status], [
      "HttpResponseError",
      "Decode",
      200
    ])
    for (const reason of ["Connect", "PrematureEof", "Timeout", "TruncatedToolArguments"] as const) {
      const error = RecoveryAiError.fromRecoveryError(new TransportError.TransportError({ reason }), origin)
      assert.deepStrictEqual([error._tag, (error as any).reason], ["HttpRequestError", "Transport"], reason)
    }
  })

  it("rejections: a status >= 300 is StatusCode, a malformed stream MalformedOutput, the rest UnknownError", () => {
    const notFound = new ProviderRejection.ProviderRejection({ reason: "NotFound", status: 404 })
    assert.strictEqual(RecoveryAiError.fromRecoveryError(notFound, origin)._tag, "HttpResponseError")
    const malformed = new ProviderRejection.ProviderRejection({ reason: "MalformedStream", status: 200 })
    assert.strictEqual(RecoveryAiError.fromRecoveryError(malformed, origin)._tag, "MalformedOutput")
    const large = new ProviderRejection.ProviderRejection({ reason: "ReplyTooLarge", status: 200 })
    const error = RecoveryAiError.fromRecoveryError(large, origin)
    assert.strictEqual(error._tag, "UnknownError")
    assert.strictEqual(Option.getOrThrow(RecoveryAiError.recoveryError(error)), large)
  })

  it("an exhaustion maps as its last error, names its attempts, and keeps every error in the cause", () => {
    const last = new TransportError.TransportError({
      reason: "HttpStatus",
      status: 529,
      providerCode: "overloaded_error"
    })
    const exhausted = new RecoveryExhausted.RecoveryExhausted({
      reason: "Attempts",
      attempts: 11,
      maxAttempts: 11,
      elapsed: Duration.seconds(90),
      lastError: last,
      errors: Array.from({ length: 11 }, () => last)
    })
    const error = RecoveryAiError.fromRecoveryError(exhausted, { ...origin, attempts: undefined })
    assert.strictEqual(error._tag, "HttpResponseError")
    assert.include(error.message, "gave up after 11 of 11 attempts")
    const facts = Option.getOrThrow(RecoveryAiError.facts(error))
    assert.deepStrictEqual([facts.status, facts.providerCode, facts.attempts], [529, "overloaded_error", 11])
    assert.strictEqual(facts.lastError, last)
    assert.strictEqual(facts.error, exhausted)

    const nothingSent = new RecoveryExhausted.RecoveryExhausted({
      reason: "Deadline",
      attempts: 0,
      maxAttempts: 11,
      elapsed: Duration.seconds(600),
      errors: []
    })
    assert.strictEqual(RecoveryAiError.fromRecoveryError(nothingSent, origin)._tag, "UnknownError")
  })

  it("a hook's failure is an UnknownError; an AiError from elsewhere has no facts", () => {
    const hook = new HookError.HookError({ hook: "beforeGeneration", cause: new Error("no") })
    const error = RecoveryAiError.fromRecoveryError(hook, origin)
    assert.strictEqual(error._tag, "UnknownError")
    assert.strictEqual(error.cause, hook)
    const foreign = RecoveryAiError.fromRecoveryError(hook, origin)
    ;(foreign as any).cause = new Error("not reprise")
    assert.isTrue(Option.isNone(RecoveryAiError.facts(foreign)))
  })
})
