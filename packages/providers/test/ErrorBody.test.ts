/**
 * A non-success response's error body is read by the body's pull (`readErrorBody`), bounded in time: a body that
 * stalls is given up at the idle timeout, on the TestClock, and released; the status still classifies the failure.
 * Both ways it is timed: by a race for a request sent outside an attempt, and by a deadline in the provider's idle
 * queue within one. The bound in size, over loopback with the real undici client, is in `Limits.test.ts`.
 */
import { HttpClient, HttpClientResponse } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import * as Message from "@reprise/core/Message"
import * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as Recovery from "@reprise/core/Recovery"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import { Duration, Effect, Exit, Fiber, Redacted, TestClock } from "effect"
import * as Send from "../src/internal/send.js"
import * as Settings from "../src/internal/settings.js"
import { chatSpec, turns, waitFor } from "./support/harness.js"

const settings = Settings.settings("openai-chat", { apiKey: Redacted.make("sk-test") })

/** A client whose every response is a 503 with an error body that sends its start and then stalls. */
const stallingClient = () => {
  const state = { sends: 0, pulls: 0, cancelled: 0 }
  const client = HttpClient.make((request) =>
    Effect.sync(() => {
      state.sends++
      return HttpClientResponse.fromWeb(
        request,
        new Response(
          new ReadableStream<Uint8Array>({
            start: (controller) => {
              // the start of an error object, then nothing more
              controller.enqueue(new TextEncoder().encode(`{"error": {"message": "overloa`))
            },
            pull: () => {
              state.pulls++
            },
            cancel: () => {
              state.cancelled++
            }
          }),
          { status: 503, headers: { "content-type": "application/json" } }
        )
      )
    })
  )
  return { client, state }
}

/** The failure of `exit`, checked to be the 503's, with nothing of its unread body shown. */
const assertStatusFailure = (exit: Exit.Exit<unknown, unknown>) => {
  const failed = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
  assert.isTrue(ProviderFailure.isProviderFailure(failed), `not a provider failure: ${String(failed)}`)
  assert.strictEqual((failed as { status?: number }).status, 503)
  assert.strictEqual((failed as { reason?: string }).reason, "HttpStatus")
  // what was read of it is not shown: an unreadable body is an empty one
  assert.notInclude((failed as Error).message, "overloa")
}

describe("an error body that stalls is given up at the idle timeout and released; the status still classifies it", () => {
  it.scoped("outside an attempt: timed by a race", () =>
    Effect.gen(function*() {
      const { client, state } = stallingClient()
      const fiber = yield* Effect.fork(
        Budget.scoped(Effect.scoped(Send.open(client, Send.prepare(chatSpec, settings), settings)))
      )
      // the body read up to its stall: the stream asks for more
      yield* waitFor(() => state.pulls > 1)
      yield* TestClock.adjust(Duration.subtract(settings.idleTimeout, Duration.millis(1)))
      yield* turns(1000)
      assert.isNull(fiber.unsafePoll(), "given up before the idle timeout")
      yield* TestClock.adjust(Duration.millis(1))
      assertStatusFailure(yield* Fiber.await(fiber))
      assert.strictEqual(state.cancelled, 1, "the body was not released")
    }))

  it.scoped("within a provider's attempt: timed by its idle queue", () =>
    Effect.gen(function*() {
      const { client, state } = stallingClient()
      const provider = yield* OpenAiChat.make({
        apiKey: Redacted.make("sk-test"),
        baseUrl: "http://127.0.0.1:9/v1",
        idleTimeout: Duration.seconds(30)
      }).pipe(Effect.provideService(HttpClient.HttpClient, client))
      const fiber = yield* Effect.fork(
        Recovery.run(provider.stream({ model: "m", messages: [Message.user("hi")] })).pipe(
          Effect.provide(Budget.layer({ maxAttempts: 1 }))
        )
      )
      yield* waitFor(() => state.pulls > 1)
      yield* TestClock.adjust(Duration.millis(29_999))
      yield* turns(1000)
      assert.isNull(fiber.unsafePoll(), "given up before the idle timeout")
      yield* TestClock.adjust(Duration.millis(1))
      const exit = yield* Fiber.await(fiber)
      // one attempt allowed: recovery ends with the attempt's failure as its last error
      const ended = Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined
      const last = (ended as { lastError?: unknown } | undefined)?.lastError ?? ended
      assertStatusFailure(Exit.fail(last))
      assert.strictEqual(state.sends, 1)
      assert.strictEqual(state.cancelled, 1, "the body was not released")
    }))
})
