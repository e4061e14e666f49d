import { assert, describe, it } from "@effect/vitest"
import * as Generation from "@reprise/core/Generation"
import * as ProviderFailure from "@reprise/core/ProviderFailure"
import { Notification } from "@reprise/core/RecoveryNotifications"
import { Duration, Effect, Option } from "effect"
import * as Output from "../src/Output.js"
import * as Render from "../src/Render.js"

const reply = new Generation.Reply({
  text: "Hello there",
  reasoning: "",
  toolCalls: [],
  finishReason: "stop",
  providerFinishReason: "stop",
  usage: Option.none(),
  attempts: 2
})

const attemptsThenCommit = [
  Notification.AttemptStarted({ attempt: 1, maxAttempts: 11 }),
  Notification.Preview({ attempt: 1, event: Generation.TextDelta({ text: "Hel" }) }),
  Notification.Preview({ attempt: 1, event: Generation.TextDelta({ text: "lo wor" }) }),
  Notification.AttemptDiscarded({
    attempt: 1,
    discardedText: "Hello wor",
    discardedToolCalls: [],
    error: ProviderFailure.fromHttpStatus({ status: 503 })
  }),
  Notification.RetryScheduled({
    nextAttempt: 2,
    delay: Duration.millis(1000),
    delaySource: "backoff",
    remainingAttempts: 10,
    remainingTime: Duration.seconds(599)
  }),
  Notification.AttemptStarted({ attempt: 2, maxAttempts: 11 }),
  Notification.Preview({ attempt: 2, event: Generation.TextDelta({ text: "Hello there" }) }),
  Notification.Committed({ reply })
]

const play = (mode: Render.Mode, isTTY: boolean) =>
  Effect.gen(function*() {
    const capture = Output.makeCapture(isTTY)
    yield* Effect.gen(function*() {
      const render = yield* Render.make(mode)
      for (const n of attemptsThenCommit) yield* render.notifications.notify(n)
      yield* render.commit(reply, true)
    }).pipe(Effect.provide(capture.layer))
    return { stdout: capture.stdout(), stderr: capture.stderr() }
  })

const retryLine = "reprise: attempt 1/11 failed (HTTP 503); discarded 9 chars; retrying in 1.0s\n"

describe("Render", () => {
  it.effect("plain: stdout is only the committed text; one retry line on stderr", () =>
    Effect.gen(function*() {
      const { stderr, stdout } = yield* play("plain", false)
      assert.strictEqual(stdout, "Hello there\n")
      assert.strictEqual(stderr, retryLine)
    }))

  it.effect("tty: previews live, the replay on a fresh line, and a notice that earlier text is not the answer", () =>
    Effect.gen(function*() {
      const { stderr, stdout } = yield* play("tty", true)
      assert.strictEqual(stdout, "Hello wor\nHello there\n")
      assert.strictEqual(
        stderr,
        retryLine + "reprise: attempt 2 committed; text shown by earlier attempts is not part of the answer\n"
      )
    }))

  it.effect("json: one event per line", () =>
    Effect.gen(function*() {
      const { stdout } = yield* play("json", false)
      const events = stdout.trim().split("\n").map((l) => JSON.parse(l))
      assert.deepStrictEqual(events, [
        { type: "attempt", attempt: 1 },
        { type: "delta", attempt: 1, text: "Hel" },
        { type: "delta", attempt: 1, text: "lo wor" },
        { type: "discard", attempt: 1, discardedChars: 9 },
        { type: "retry", attempt: 2, delay: 1000, source: "backoff" },
        { type: "attempt", attempt: 2 },
        { type: "delta", attempt: 2, text: "Hello there" },
        { type: "commit", text: "Hello there", finishReason: "stop", attempts: 2, toolCalls: 0 }
      ])
    }))

  it.effect("an incomplete finish is committed with a notice", () =>
    Effect.gen(function*() {
      const capture = Output.makeCapture(false)
      const truncated = new Generation.Reply({ ...reply, finishReason: "length", providerFinishReason: "length" })
      yield* Effect.flatMap(Render.make("plain"), (render) => render.commit(truncated, true)).pipe(
        Effect.provide(capture.layer)
      )
      assert.strictEqual(capture.stdout(), "Hello there\n")
      assert.strictEqual(capture.stderr(), "reprise: the reply is incomplete (finish reason length)\n")
    }))

  it("retry notices name the failure briefly", () => {
    assert.strictEqual(
      Render.shortReason(ProviderFailure.fromInBandError({ type: "overloaded_error" })),
      "overloaded_error"
    )
    assert.strictEqual(Render.seconds(Duration.millis(1500)), "1.5s")
  })
})
