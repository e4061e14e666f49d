import { assert, describe, it } from "@effect/vitest"
import { Duration, Option } from "effect"
import * as Classification from "../src/Classification.js"
import { HookError } from "../src/HookError.js"
import * as ProviderFailure from "../src/ProviderFailure.js"
import * as ProviderRejection from "../src/ProviderRejection.js"
import * as TransportError from "../src/TransportError.js"

const verdict = (error: unknown) => {
  const c = Classification.classify(error)
  return c._tag === "Retryable" ? "replay" : c.reason
}

describe("Classification", () => {
  describe("HTTP statuses through fromHttpStatus", () => {
    const table: ReadonlyArray<readonly [number, string, string]> = [
      [408, "TransportError", "replay"],
      [429, "TransportError", "replay"],
      [500, "TransportError", "replay"],
      [502, "TransportError", "replay"],
      [503, "TransportError", "replay"],
      [504, "TransportError", "replay"],
      [529, "TransportError", "replay"],
      [400, "ProviderRejection", "BadRequest"],
      [401, "ProviderRejection", "Authentication"],
      [402, "ProviderRejection", "Quota"],
      [403, "ProviderRejection", "Permission"],
      [404, "ProviderRejection", "NotFound"],
      [409, "ProviderRejection", "BadRequest"],
      [413, "ProviderRejection", "ContextOverflow"],
      [422, "ProviderRejection", "BadRequest"],
      [501, "ProviderRejection", "OtherStatus"],
      [505, "ProviderRejection", "OtherStatus"],
      [301, "ProviderRejection", "RedirectRefused"],
      [302, "ProviderRejection", "RedirectRefused"],
      [307, "ProviderRejection", "RedirectRefused"],
      [308, "ProviderRejection", "RedirectRefused"]
    ]
    for (const [status, tag, expected] of table) {
      it(`${status} → ${expected}`, () => {
        const error = ProviderFailure.fromHttpStatus({ status })
        assert.strictEqual(error._tag, tag)
        assert.strictEqual(error.status, status)
        assert.strictEqual(verdict(error), expected)
      })
    }
  })

  describe("x-should-retry", () => {
    it("false forbids replay of an otherwise retryable status", () => {
      for (const status of [408, 429, 500, 503, 529]) {
        assert.strictEqual(
          verdict(ProviderFailure.fromHttpStatus({ status, shouldRetry: false })),
          "ServerForbidsRetry"
        )
      }
    })
    it("false forbids replay of transport faults too", () => {
      assert.strictEqual(
        verdict(new TransportError.TransportError({ reason: "Reset", shouldRetry: false })),
        "ServerForbidsRetry"
      )
    })
    it("true additionally allows 409, and nothing else", () => {
      assert.strictEqual(verdict(ProviderFailure.fromHttpStatus({ status: 409, shouldRetry: true })), "replay")
      assert.strictEqual(verdict(ProviderFailure.fromHttpStatus({ status: 400, shouldRetry: true })), "BadRequest")
      assert.strictEqual(verdict(ProviderFailure.fromHttpStatus({ status: 401, shouldRetry: true })), "Authentication")
      assert.strictEqual(verdict(ProviderFailure.fromHttpStatus({ status: 501, shouldRetry: true })), "OtherStatus")
    })
    it("is ignored by a hand-made TransportError with a permanent status", () => {
      const error = new TransportError.TransportError({ reason: "HttpStatus", status: 501, shouldRetry: true })
      assert.strictEqual(verdict(error), "PermanentStatus")
    })
  })

  describe("status and code together", () => {
    it("insufficient_quota is never replayed, even on a 429", () => {
      const error = ProviderFailure.fromHttpStatus({
        status: 429,
        code: "insufficient_quota",
        type: "insufficient_quota"
      })
      assert.strictEqual(error._tag, "ProviderRejection")
      assert.strictEqual(verdict(error), "Quota")
    })
    it("context_length_exceeded on a 400 is an overflow", () => {
      const error = ProviderFailure.fromHttpStatus({
        status: 400,
        type: "invalid_request_error",
        code: "context_length_exceeded"
      })
      assert.strictEqual(verdict(error), "ContextOverflow")
    })
    it("Anthropic's 'prompt is too long' is an overflow", () => {
      const error = ProviderFailure.fromHttpStatus({
        status: 400,
        type: "invalid_request_error",
        detail: "prompt is too long: 210000 tokens > 200000 maximum"
      })
      assert.strictEqual(verdict(error), "ContextOverflow")
    })
    it("a 429 keeps its Retry-After and a 503 its code", () => {
      const error = ProviderFailure.fromHttpStatus({
        status: 429,
        retryAfter: Duration.seconds(7),
        type: "rate_limit_error"
      })
      const c = Classification.classify(error)
      assert.strictEqual(c._tag, "Retryable")
      // as millis: assert.deepStrictEqual takes Option.none() for Option.some(x)
      if (c._tag === "Retryable") {
        assert.strictEqual(Option.getOrUndefined(Option.map(c.retryAfter, Duration.toMillis)), 7000)
      }
    })
    it("a 3xx carries its Location", () => {
      const error = ProviderFailure.fromHttpStatus({ status: 307, location: "http://127.0.0.1:1/elsewhere" })
      assert.strictEqual(error._tag, "ProviderRejection")
      if (error._tag === "ProviderRejection") assert.strictEqual(error.location, "http://127.0.0.1:1/elsewhere")
    })
    it("credentials in headers are redacted", () => {
      const error = ProviderFailure.fromHttpStatus({
        status: 503,
        headers: { "x-api-key": "sk-secret", authorization: "Bearer sk-secret", "retry-after": "3" }
      })
      assert.deepStrictEqual(error.headers, {
        "x-api-key": "<redacted>",
        authorization: "<redacted>",
        "retry-after": "3"
      })
      assert.notInclude(JSON.stringify(error), "sk-secret")
    })
  })

  describe("transport reasons", () => {
    for (const reason of ["Connect", "Reset", "PrematureEof", "Timeout", "TruncatedToolArguments"] as const) {
      it(`${reason} is replayed`, () => {
        assert.strictEqual(verdict(new TransportError.TransportError({ reason })), "replay")
      })
    }
  })

  describe("in-band provider errors through fromInBandError", () => {
    const table: ReadonlyArray<readonly [{ code?: string; type?: string; detail?: string }, string]> = [
      [{ type: "overloaded_error" }, "replay"],
      [{ type: "api_error" }, "replay"],
      [{ type: "rate_limit_error" }, "replay"],
      [{ type: "server_error" }, "replay"],
      [{ code: "server_error", type: "server_error" }, "replay"],
      [{ code: "rate_limit_exceeded", type: "requests" }, "replay"],
      [{ code: "insufficient_quota", type: "insufficient_quota" }, "Quota"],
      [{ code: "context_length_exceeded", type: "invalid_request_error" }, "ContextOverflow"],
      [{ type: "invalid_request_error", detail: "prompt is too long: 1 tokens > 0 maximum" }, "ContextOverflow"],
      [{ type: "invalid_request_error" }, "BadRequest"],
      [{ type: "authentication_error" }, "Authentication"],
      [{ type: "permission_error" }, "Permission"],
      [{ type: "not_found_error" }, "NotFound"],
      [{ code: "some_new_code" }, "PermanentProviderCode"],
      [{}, "PermanentProviderCode"]
    ]
    for (const [input, expected] of table) {
      it(`${JSON.stringify(input)} → ${expected}`, () => {
        assert.strictEqual(verdict(ProviderFailure.fromInBandError(input)), expected)
      })
    }
  })

  describe("origin", () => {
    it("anything that is not a provider failure is never replayed", () => {
      assert.strictEqual(verdict(new Error("ECONNRESET")), "NotProviderOrigin")
      assert.strictEqual(verdict({ _tag: "TransportError", reason: "Reset" }), "NotProviderOrigin")
      assert.strictEqual(verdict(new HookError({ hook: "onChunk", cause: "boom" })), "NotProviderOrigin")
      assert.strictEqual(verdict(undefined), "NotProviderOrigin")
    })
    it("every rejection is permanent", () => {
      for (const reason of ProviderRejection.Reason.literals) {
        assert.strictEqual(verdict(new ProviderRejection.ProviderRejection({ reason })), reason)
      }
    })
  })
})
