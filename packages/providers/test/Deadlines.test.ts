/**
 * The first-byte deadlines of a provider's sends (`internal/send.ts`, `sendTimed`): one timer fiber for all the
 * pending sends of a service, on the TestClock. A send whose headers are late fails with the `Timeout` at exactly
 * the first-byte timeout from its own start, its request aborted through its `AbortSignal`; a send in time beside it
 * is untouched; the timer runs only while a send is pending.
 */
import { HttpClient, HttpClientRequest, HttpClientResponse } from "@effect/platform"
import * as HttpClientError from "@effect/platform/HttpClientError"
import { assert, describe, it } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import { Duration, Effect, Exit, Fiber, Option, Redacted, TestClock } from "effect"
import * as Send from "../src/internal/send.js"
import * as Settings from "../src/internal/settings.js"

const settings = Settings.settings("openai-chat", {
  apiKey: Redacted.make("sk-test"),
  firstByteTimeout: Duration.seconds(60)
})

/**
 * A client whose `/late` requests are never answered (they end when their signal aborts them, as the platform's
 * clients' requests do; `aborted` lists them) and whose `/in-time` ones are, after 30 s.
 */
const client = (aborted: Array<string>) =>
  HttpClient.make((request, url, signal) =>
    url.pathname === "/in-time"
      ? Effect.as(Effect.sleep("30 seconds"), HttpClientResponse.fromWeb(request, new Response("{}")))
      : Effect.async<HttpClientResponse.HttpClientResponse, HttpClientError.RequestError>((resume) => {
        signal.addEventListener("abort", () => {
          aborted.push(url.pathname)
          resume(Effect.fail(new HttpClientError.RequestError({ request, reason: "Transport", cause: signal.reason })))
        })
      })
  )

const reasonOf = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) && exit.cause._tag === "Fail" ? (exit.cause.error as { reason?: string }).reason : undefined

const yieldAll = Effect.repeatN(Effect.yieldNow(), 20)

describe("first-byte deadlines", () => {
  it.effect("a late send times out at 60 s from its own start, aborted; one in time beside it is untouched", () =>
    Effect.gen(function*() {
      const aborted: Array<string> = []
      const http = client(aborted)
      const deadlines = Send.makeDeadlines(settings.firstByteTimeout)
      const send = (path: string) =>
        Effect.fork(
          Effect.scoped(Send.sendTimed(http, HttpClientRequest.get(`http://127.0.0.1:9${path}`), settings, deadlines))
        )
      const late = yield* Effect.scoped(Effect.gen(function*() {
        const first = yield* send("/late")
        const inTime = yield* send("/in-time")
        yield* yieldAll
        yield* TestClock.adjust("30 seconds")
        assert.isTrue(Exit.isSuccess(yield* Fiber.await(inTime)), "the send in time failed")
        // a second late send, 40 s after the first
        yield* TestClock.adjust("10 seconds")
        const second = yield* send("/late")
        yield* yieldAll
        yield* TestClock.adjust("19 seconds")
        assert.isTrue(Option.isNone(yield* Fiber.poll(first)), "timed out before 60 s")
        yield* TestClock.adjust("1 second")
        assert.strictEqual(reasonOf(yield* Fiber.await(first)), "Timeout")
        assert.deepStrictEqual(aborted, ["/late"])
        assert.isTrue(Option.isNone(yield* Fiber.poll(second)), "the second late send timed out with the first")
        yield* TestClock.adjust("40 seconds")
        return yield* Fiber.await(second)
      })).pipe(Budget.scoped)
      assert.strictEqual(reasonOf(late), "Timeout")
      assert.deepStrictEqual(aborted, ["/late", "/late"])
      assert.strictEqual(deadlines.pending, 0)
      assert.isUndefined(deadlines.timer, "the timer still runs with no send pending")
    }))

  it.effect("the timer runs while a send is pending, and stops with the last one", () =>
    Effect.gen(function*() {
      const http = client([])
      const deadlines = Send.makeDeadlines(settings.firstByteTimeout)
      const fiber = yield* Effect.fork(
        Effect.scoped(Send.sendTimed(http, HttpClientRequest.get("http://127.0.0.1:9/in-time"), settings, deadlines))
          .pipe(Budget.scoped)
      )
      yield* yieldAll
      assert.strictEqual(deadlines.pending, 1)
      assert.isDefined(deadlines.timer)
      yield* TestClock.adjust("30 seconds")
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(fiber)))
      assert.strictEqual(deadlines.pending, 0)
      assert.isUndefined(deadlines.timer)
    }))

  it.effect("an interrupted send is settled: its request aborted, and the timer stopped", () =>
    Effect.gen(function*() {
      const aborted: Array<string> = []
      const deadlines = Send.makeDeadlines(settings.firstByteTimeout)
      const fiber = yield* Effect.fork(
        Effect.scoped(
          Send.sendTimed(client(aborted), HttpClientRequest.get("http://127.0.0.1:9/late"), settings, deadlines)
        )
          .pipe(Budget.scoped)
      )
      yield* yieldAll
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(aborted, ["/late"])
      assert.strictEqual(deadlines.pending, 0)
      assert.isUndefined(deadlines.timer)
    }))
})
