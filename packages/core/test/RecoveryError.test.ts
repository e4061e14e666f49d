/**
 * The RecoveryError family: one type id on every member (a lookalike with the same `_tag` is not one), a union
 * Schema that round-trips each member, `withAttemptFacts` copying every field of a failure with each member's own
 * type (also through the proxy a failure becomes when it crosses a span), and the attempt's preview size on `Failed`
 * and on the exhaustion.
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Exit, Fiber, Schema, Stream, TestClock } from "effect"
import * as Budget from "../src/Budget.js"
import * as Generation from "../src/Generation.js"
import * as HookError from "../src/HookError.js"
import * as Policy from "../src/Policy.js"
import * as ProviderRejection from "../src/ProviderRejection.js"
import * as Recovery from "../src/Recovery.js"
import * as RecoveryError from "../src/RecoveryError.js"
import * as RecoveryExhausted from "../src/RecoveryExhausted.js"
import * as TransportError from "../src/TransportError.js"
import { recorder } from "./utils/notifications.js"

const transport = new TransportError.TransportError({
  reason: "HttpStatus",
  detail: "overloaded",
  status: 529,
  providerCode: "overloaded_error",
  retryAfter: Duration.seconds(2),
  shouldRetry: true,
  requestId: "req_1",
  headers: { "retry-after": "2" }
})
const rejection = new ProviderRejection.ProviderRejection({
  reason: "RedirectRefused",
  detail: "moved",
  status: 308,
  providerCode: "moved",
  requestId: "req_2",
  location: "https://elsewhere.example/v1",
  headers: { location: "https://elsewhere.example/v1" }
})
const exhausted = new RecoveryExhausted.RecoveryExhausted({
  reason: "Attempts",
  attempts: 2,
  maxAttempts: 2,
  elapsed: Duration.millis(30),
  errors: [transport],
  lastError: transport,
  partialOutputChars: 4
})
const hook = new HookError.HookError({ hook: "onChunk", attempt: 1, cause: "tts down" })
const members: ReadonlyArray<RecoveryError.RecoveryError> = [transport, rejection, exhausted, hook]

describe("RecoveryError", () => {
  it("every member carries the family's type id; a lookalike, the Budget's refusal and a plain error do not", () => {
    for (const member of members) assert.isTrue(RecoveryError.isRecoveryError(member), member._tag)
    for (const tag of ["TransportError", "ProviderRejection", "RecoveryExhausted", "HookError"]) {
      const lookalike = { _tag: tag, reason: "Reset", hook: "onChunk" }
      assert.isFalse(RecoveryError.isRecoveryError(lookalike), tag)
      assert.isFalse(RecoveryError.isRecoveryExhausted(lookalike), tag)
      assert.isFalse(RecoveryError.isHookError(lookalike), tag)
    }
    assert.isFalse(
      RecoveryError.isRecoveryError(
        new Budget.BudgetExhausted({ reason: "Attempts", attempts: 1, maxAttempts: 1, elapsed: Duration.zero })
      )
    )
    assert.isFalse(RecoveryError.isRecoveryError(new Error("x")))
  })

  it("the union Schema round-trips each member", () => {
    const encode = Schema.encodeSync(RecoveryError.RecoveryError)
    const decode = Schema.decodeSync(RecoveryError.RecoveryError)
    for (const member of members) {
      const back = decode(encode(member))
      assert.strictEqual(back._tag, member._tag)
      assert.strictEqual(back.message, member.message)
      assert.isTrue(RecoveryError.isRecoveryError(back))
    }
  })

  it("withAttemptFacts copies every field with the member's own type and adds the facts", () => {
    const copied = RecoveryError.withAttemptFacts(transport, {
      partialOutputChars: 12,
      replayBlocked: "ExternalEffects"
    })
    assert.isTrue(TransportError.isTransportError(copied))
    assert.deepStrictEqual({ ...copied }, { ...transport, partialOutputChars: 12, replayBlocked: "ExternalEffects" })
    const rejected = RecoveryError.withAttemptFacts(rejection, {
      partialOutputChars: 3,
      replayBlocked: "ExternalEffects"
    })
    assert.isTrue(ProviderRejection.isProviderRejection(rejected))
    assert.deepStrictEqual({ ...rejected }, { ...rejection, partialOutputChars: 3 })
    assert.strictEqual(rejected.message, rejection.message)
  })

  it.effect("a failure that crossed a span is copied without formatting its stack", () =>
    Effect.gen(function*() {
      const fresh = new TransportError.TransportError({ reason: "Reset", detail: "cut", status: 502 })
      // the failure as recovery gets it: Effect's proxy of it, made when it is raised in a span
      const proxied = yield* Effect.flip(Effect.withSpan(Effect.fail(fresh), "attempt"))
      const previous = Error.prepareStackTrace
      let formatted = 0
      Error.prepareStackTrace = (error, frames) => {
        formatted++
        return previous === undefined ? `${String(error)}\n${frames.join("\n")}` : previous(error, frames)
      }
      try {
        const copied = RecoveryError.withAttemptFacts(proxied, { partialOutputChars: 4 })
        assert.strictEqual(formatted, 0, "the copy formatted the failure's stack")
        assert.deepStrictEqual({ ...copied }, { ...fresh, partialOutputChars: 4 })
      } finally {
        Error.prepareStackTrace = previous
      }
    }))

  it.effect("a failure that crossed a span (a proxy of it) is copied whole, and Failed tells the preview's size", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const generation = Stream.unwrap(
        Effect.as(
          Budget.reserve,
          Stream.concat(Stream.make(Generation.TextDelta({ text: "12345" })), Stream.fail(rejection))
        )
      )
      const exit = yield* Effect.exit(Recovery.run(generation).pipe(Effect.provide(rec.layer)))
      assert.isTrue(Exit.isFailure(exit))
      const failed = (yield* rec.all).flatMap((n) => n._tag === "Failed" ? [n] : [])
      assert.strictEqual(failed.length, 1)
      assert.strictEqual(failed[0]!.partialOutputChars, 5)
      const surfaced = failed[0]!.error as ProviderRejection.ProviderRejection
      assert.strictEqual(surfaced.partialOutputChars, 5)
      assert.strictEqual(surfaced.location, rejection.location)
      assert.deepStrictEqual(surfaced.headers, rejection.headers)
    }))

  it.effect("the exhaustion tells the last attempt's preview size", () =>
    Effect.gen(function*() {
      const cut = Stream.unwrap(
        Effect.as(
          Budget.reserve,
          Stream.concat(
            Stream.make(Generation.TextDelta({ text: "abc" })),
            Stream.fail(new TransportError.TransportError({ reason: "Reset" }))
          )
        )
      )
      const fiber = yield* Effect.fork(Effect.exit(Recovery.run(cut)))
      yield* TestClock.adjust("1 minute")
      const exit = yield* Fiber.join(fiber)
      assert.isTrue(Exit.isFailure(exit))
      const error = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
      assert.isTrue(RecoveryError.isRecoveryExhausted(error))
      assert.strictEqual((error as RecoveryExhausted.RecoveryExhausted).partialOutputChars, 3)
    }).pipe(
      Effect.provide(Budget.layer({ maxAttempts: 2 })),
      Effect.provide(Policy.layer({ backoffBase: Duration.millis(10), jitter: false }))
    ))
})
