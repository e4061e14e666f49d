/**
 * generation-recovery: one reply with recovery, for every protocol, through the real provider layers and the undici
 * client against the loopback simulator. Faults are replayed and only the last attempt is committed; permanent
 * failures are sent once; waits honour Retry-After, attempts and the deadline; interruption commits nothing.
 *
 * Live-clock tests use 5–20 ms backoffs and a 250 ms idle timeout; the only real wait they rely on is the 300 ms
 * `retry-after-ms` check. Long waits (Retry-After: 30, the deadline, a 45 s backoff) run under TestClock: the
 * simulator keeps pacing its sockets on the real clock, and the test waits for the recovery loop to park on its
 * test-clock sleep before it moves the clock.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import * as Policy from "@reprise/core/Policy"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Chunk, Duration, Effect, Exit, Fiber, TestClock } from "effect"
import {
  awaitSleepUntil,
  beforeCut,
  committed,
  failure,
  fastBackoff,
  generate,
  longReply,
  midEvent,
  ofTag,
  outline,
  previewText,
  protocols,
  script,
  settle,
  simulator,
  start,
  when
} from "./support/e2e.js"

const replayedOnce = ["AttemptStarted", "AttemptDiscarded", "RetryScheduled", "AttemptStarted", "Committed"]

/** The URL a client of `protocol` posts to, on this simulator: a redirect there would be counted if followed. */
const endpoint = (sim: Simulator.Service, protocol: string) =>
  protocol === "anthropic"
    ? `${sim.url}/v1/messages`
    : protocol === "subscription"
    ? `${sim.url}/subscription/responses`
    : protocol === "openai-chat"
    ? `${sim.url}/v1/chat/completions`
    : `${sim.url}/v1/responses`

for (const protocol of protocols) {
  describe(`${protocol}: replayed faults`, () => {
    it.live("a terminal-less EOF is replayed; the commit is the last attempt's text alone", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, {
          steps: [
            { kind: "eof", reply: { text: "a first draft that never reaches its end" } },
            { kind: "stream", reply: { text: "the committed answer" } }
          ]
        })
        const outcome = yield* generate(protocol)
        const reply = committed(outcome)
        assert.strictEqual(reply.text, "the committed answer")
        assert.strictEqual(reply.finishReason, "stop")
        assert.strictEqual(reply.attempts, 2)
        assert.strictEqual(yield* sim.count(protocol), 2)
        assert.deepStrictEqual((yield* sim.requestsTo(protocol)).map((r) => r.step), ["eof", "stream"])

        assert.deepStrictEqual(outline(outcome.notes), replayedOnce)
        const [discarded] = ofTag(outcome.notes, "AttemptDiscarded")
        assert.strictEqual(discarded.attempt, 1)
        assert.strictEqual(discarded.discardedText, "a first draft that never reaches its end")
        assert.strictEqual(previewText(outcome.notes, 1), discarded.discardedText)
        assert.strictEqual((discarded.error as any)._tag, "TransportError")
        assert.strictEqual((discarded.error as any).reason, "PrematureEof")
        assert.strictEqual(previewText(outcome.notes, 2), "the committed answer")
        const [retry] = ofTag(outcome.notes, "RetryScheduled")
        assert.strictEqual(retry.nextAttempt, 2)
        assert.strictEqual(retry.delaySource, "backoff")
        assert.isTrue(Duration.equals(retry.delay, Duration.millis(5)))
      }).pipe(Effect.provide(simulator), Effect.provide(fastBackoff)))

    it.live("a reset in the middle of an event is replayed; the cut event never shows", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, {
          steps: [
            { kind: "reset", afterBytes: midEvent, reply: longReply("lost") },
            { kind: "stream", reply: { text: "the committed answer" } }
          ]
        })
        const outcome = yield* generate(protocol)
        assert.strictEqual(committed(outcome).text, "the committed answer")
        assert.strictEqual(yield* sim.count(protocol), 2)
        assert.deepStrictEqual(outline(outcome.notes), replayedOnce)
        const [discarded] = ofTag(outcome.notes, "AttemptDiscarded")
        assert.strictEqual(discarded.discardedText, beforeCut)
        assert.strictEqual((discarded.error as any).reason, "Reset")
        const [first] = yield* sim.requestsTo(protocol)
        const closed = yield* sim.awaitClose(first.id)
        assert.strictEqual(closed.by, "server")
        assert.strictEqual(closed.bytesWritten, midEvent)
      }).pipe(Effect.provide(simulator), Effect.provide(fastBackoff)))

    it.live("a stall mid-stream hits the idle timeout, the client hangs up, and the reply is replayed", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, {
          steps: [
            { kind: "stall", afterBytes: midEvent, durationMs: 60_000, reply: longReply("late") },
            { kind: "stream", reply: { text: "the committed answer" } }
          ]
        })
        const outcome = yield* generate(protocol, { provider: { idleTimeout: "250 millis" } })
        assert.strictEqual(committed(outcome).text, "the committed answer")
        assert.strictEqual(yield* sim.count(protocol), 2)
        assert.deepStrictEqual(outline(outcome.notes), replayedOnce)
        const [discarded] = ofTag(outcome.notes, "AttemptDiscarded")
        assert.strictEqual(discarded.discardedText, beforeCut)
        assert.strictEqual((discarded.error as any).reason, "Timeout")
        const [first] = yield* sim.requestsTo(protocol)
        assert.strictEqual((yield* sim.awaitClose(first.id)).by, "client")
      }).pipe(Effect.provide(simulator), Effect.provide(fastBackoff)))

    it.live("several faults in a row: each preview is discarded whole, only the last attempt is committed", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, {
          steps: [
            { kind: "status", status: 503 },
            { kind: "eof", reply: { text: "second try" } },
            { kind: "reset", afterBytes: midEvent, reply: longReply("lost") },
            { kind: "stream", reply: { text: "fourth and final" } }
          ]
        })
        const outcome = yield* generate(protocol)
        const reply = committed(outcome)
        assert.strictEqual(reply.text, "fourth and final")
        assert.strictEqual(reply.attempts, 4)
        assert.strictEqual(yield* sim.count(protocol), 4)
        assert.deepStrictEqual(
          ofTag(outcome.notes, "AttemptDiscarded").map((d) => [d.attempt, d.discardedText]),
          [[1, ""], [2, "second try"], [3, beforeCut]]
        )
        assert.deepStrictEqual(
          ofTag(outcome.notes, "RetryScheduled").map((r) => Duration.toMillis(r.delay)),
          [5, 10, 20]
        )
      }).pipe(Effect.provide(simulator), Effect.provide(fastBackoff)))
  })

  describe(`${protocol}: permanent failures are sent once`, () => {
    const cases: ReadonlyArray<
      readonly [string, (sim: Simulator.Service) => SimulatorScript.Step, string]
    > = [
      ["401", () => ({ kind: "status", status: 401 }), "Authentication"],
      ["403", () => ({ kind: "status", status: 403 }), "Permission"],
      [
        "400",
        () => ({ kind: "status", status: 400, error: { type: "invalid_request_error", message: "bad field" } }),
        "BadRequest"
      ],
      [
        "429 insufficient_quota",
        () => ({
          kind: "status",
          status: 429,
          headers: { "retry-after": "1" },
          error: { type: "insufficient_quota", code: "insufficient_quota", message: "no credit left" }
        }),
        "Quota"
      ],
      [
        "307",
        (sim) => ({ kind: "status", status: 307, headers: { location: endpoint(sim, protocol) } }),
        "RedirectRefused"
      ],
      [
        "308",
        (sim) => ({ kind: "status", status: 308, headers: { location: endpoint(sim, protocol) } }),
        "RedirectRefused"
      ]
    ]
    for (const [name, step, reason] of cases) {
      it.live(`${name}: ProviderRejection{${reason}} after exactly one request`, () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          // A second request would be served the reply in full, and a followed redirect lands on this route.
          yield* script(protocol, { steps: [step(sim)], reply: { text: "should never be committed" } })
          const outcome = yield* generate(protocol)
          const error = failure(outcome)
          assert.strictEqual(error._tag, "ProviderRejection")
          assert.strictEqual(error.reason, reason)
          assert.strictEqual(error.status, Number(name.slice(0, 3)))
          if (reason === "RedirectRefused") assert.strictEqual(error.location, endpoint(sim, protocol))
          assert.strictEqual(yield* sim.count(), 1)
          assert.deepStrictEqual(outline(outcome.notes), ["AttemptStarted", "AttemptDiscarded", "Failed"])
        }).pipe(Effect.provide(simulator), Effect.provide(fastBackoff)))
    }
  })

  describe(`${protocol}: waits and limits`, () => {
    it.live("429 with retry-after-ms: 300 waits at least 300 ms between the two requests", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, {
          steps: [
            { kind: "status", status: 429, headers: { "retry-after-ms": "300" } },
            { kind: "stream", reply: { text: "after the wait" } }
          ]
        })
        const outcome = yield* generate(protocol)
        assert.strictEqual(committed(outcome).text, "after the wait")
        const [first, second] = yield* sim.requestsTo(protocol)
        assert.strictEqual(yield* sim.count(protocol), 2)
        assert.isAtLeast(second.receivedAt - first.receivedAt, 300)
        const [retry] = ofTag(outcome.notes, "RetryScheduled")
        assert.strictEqual(retry.delaySource, "retry-after")
        assert.strictEqual(Duration.toMillis(retry.delay), 300)
      }).pipe(Effect.provide(simulator), Effect.provide(fastBackoff)))

    it.effect("429 with Retry-After: 30 (TestClock): no second request before 30 s, one right after", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, {
          steps: [
            { kind: "status", status: 429, headers: { "retry-after": "30" } },
            { kind: "stream", reply: { text: "after the wait" } }
          ]
        })
        const scheduled = yield* when((n) => n._tag === "RetryScheduled" ? n : undefined)
        const { run } = yield* start(protocol, { onNotification: scheduled.onNotification })
        const fiber = yield* Effect.fork(run)
        yield* sim.awaitRequest(protocol, 1)
        const retry = yield* scheduled.await
        assert.strictEqual(retry.delaySource, "retry-after")
        assert.strictEqual(Duration.toMillis(retry.delay), 30_000)
        yield* awaitSleepUntil(30_000)

        yield* TestClock.adjust("29999 millis")
        yield* settle
        assert.strictEqual(yield* sim.count(protocol), 1)
        assert.isTrue(Chunk.contains(yield* TestClock.sleeps(), 30_000), "still waiting for the server's 30 s")

        yield* TestClock.adjust("1 millis")
        const second = yield* sim.awaitRequest(protocol, 2)
        assert.strictEqual(second.step, "stream")
        const outcome = yield* Fiber.join(fiber)
        assert.strictEqual(committed(outcome).text, "after the wait")
        assert.strictEqual(yield* sim.count(protocol), 2)
      }).pipe(Effect.provide(simulator), Effect.provide(fastBackoff)))

    it.effect("a Retry-After past the deadline stops at once: one request, RetryAfterBeyondDeadline", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, { steps: [{ kind: "status", status: 429, headers: { "retry-after": "120" } }] })
        const outcome = yield* generate(protocol)
        const error = failure(outcome)
        assert.strictEqual(error._tag, "RecoveryExhausted")
        assert.strictEqual(error.reason, "RetryAfterBeyondDeadline")
        assert.strictEqual(Duration.toMillis(error.retryAfter), 120_000)
        assert.strictEqual(error.attempts, 1)
        assert.strictEqual(Duration.toMillis(error.elapsed), 0)
        assert.strictEqual(yield* sim.count(protocol), 1)
        assert.lengthOf(ofTag(outcome.notes, "RetryScheduled"), 0)
      }).pipe(
        Effect.provide(simulator),
        Effect.provide(fastBackoff),
        Effect.provide(Budget.layer({ deadline: Duration.seconds(20) }))
      ))

    it.live("maxAttempts 3 against an always-503 route: exactly 3 requests, RecoveryExhausted{Attempts}", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, { steps: [{ kind: "status", status: 503 }], afterLast: "repeat-last" })
        const outcome = yield* generate(protocol)
        const error = failure(outcome)
        assert.strictEqual(error._tag, "RecoveryExhausted")
        assert.strictEqual(error.reason, "Attempts")
        assert.strictEqual(error.attempts, 3)
        assert.strictEqual(error.maxAttempts, 3)
        assert.lengthOf(error.errors, 3)
        for (const e of error.errors) {
          assert.strictEqual(e._tag, "TransportError")
          assert.strictEqual(e.status, 503)
        }
        assert.strictEqual(error.lastError.status, 503)
        assert.strictEqual(yield* sim.count(protocol), 3)
        assert.deepStrictEqual(ofTag(outcome.notes, "AttemptStarted").map((n) => [n.attempt, n.maxAttempts]), [
          [1, 3],
          [2, 3],
          [3, 3]
        ])
        assert.deepStrictEqual(ofTag(outcome.notes, "RetryScheduled").map((n) => n.remainingAttempts), [2, 1])
        assert.strictEqual(outline(outcome.notes).at(-1), "Exhausted")
      }).pipe(
        Effect.provide(simulator),
        Effect.provide(fastBackoff),
        Effect.provide(Budget.layer({ maxAttempts: 3 }))
      ))

    it.effect("the deadline (TestClock): no backoff is begun past it; RecoveryExhausted{Deadline} after 2 sends", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, { steps: [{ kind: "status", status: 503 }], afterLast: "repeat-last" })
        const scheduled = yield* when((n) => n._tag === "RetryScheduled" ? n : undefined)
        const { run } = yield* start(protocol, { onNotification: scheduled.onNotification })
        const fiber = yield* Effect.fork(run)
        yield* sim.awaitRequest(protocol, 1)
        // 4 s backoff: it ends at 4 s, before the 10 s deadline
        assert.strictEqual(Duration.toMillis((yield* scheduled.await).delay), 4_000)
        yield* awaitSleepUntil(4_000)
        assert.strictEqual(yield* sim.count(protocol), 1)
        yield* TestClock.adjust("4 seconds")
        yield* sim.awaitRequest(protocol, 2)
        // the next backoff (8 s) would end at 12 s, past the deadline: recovery stops without waiting
        const outcome = yield* Fiber.join(fiber)
        const error = failure(outcome)
        assert.strictEqual(error._tag, "RecoveryExhausted")
        assert.strictEqual(error.reason, "Deadline")
        assert.strictEqual(error.attempts, 2)
        assert.strictEqual(Duration.toMillis(error.elapsed), 4_000)
        assert.lengthOf(error.errors, 2)
        assert.strictEqual(error.lastError.status, 503)
        assert.strictEqual(yield* sim.count(protocol), 2)
        assert.deepStrictEqual(
          ofTag(outcome.notes, "RetryScheduled").map((n) => Duration.toMillis(n.delay)),
          [4_000]
        )
      }).pipe(
        Effect.provide(simulator),
        Effect.provide(Policy.layer({ backoffBase: Duration.seconds(4), jitter: false })),
        Effect.provide(Budget.layer({ deadline: Duration.seconds(10) }))
      ))
  })

  describe(`${protocol}: interruption`, () => {
    it.live("during a stream: ends at once, the client closes the socket, nothing is committed", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, {
          steps: [{ kind: "stall", afterBytes: midEvent, durationMs: 600_000, reply: longReply("never") }]
        })
        const previewed = yield* when((n) =>
          n._tag === "Preview" && n.event._tag === "TextDelta" && n.event.text === " three" ? true : undefined
        )
        const { notes, run } = yield* start(protocol, { onNotification: previewed.onNotification })
        const fiber = yield* Effect.fork(run)
        const request = yield* sim.awaitRequest(protocol, 1)
        yield* previewed.await
        const exit = yield* Fiber.interrupt(fiber).pipe(
          Effect.timeoutFail({ duration: "5 seconds", onTimeout: () => "the interruption did not end the reply" })
        )
        assert.isTrue(Exit.isInterrupted(exit))
        const closed = yield* sim.awaitClose(request.id)
        assert.strictEqual(closed.by, "client")
        assert.strictEqual(closed.bytesWritten, midEvent)
        assert.deepStrictEqual(outline(notes), ["AttemptStarted"])
        assert.strictEqual(yield* sim.count(), 1)
      }).pipe(Effect.provide(simulator), Effect.provide(fastBackoff)))

    it.effect("during a backoff (TestClock): ends without the clock moving, no second request, nothing committed", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, {
          steps: [{ kind: "status", status: 503 }, { kind: "stream", reply: { text: "never sent" } }]
        })
        const scheduled = yield* when((n) => n._tag === "RetryScheduled" ? n : undefined)
        const { notes, run } = yield* start(protocol, { onNotification: scheduled.onNotification })
        const fiber = yield* Effect.fork(run)
        const first = yield* sim.awaitRequest(protocol, 1)
        assert.strictEqual(Duration.toMillis((yield* scheduled.await).delay), 45_000)
        yield* awaitSleepUntil(45_000)
        // the 503 exchange is over: what is left is the wait
        assert.strictEqual((yield* sim.awaitClose(first.id)).by, "server")

        const exit = yield* Fiber.interrupt(fiber)
        assert.isTrue(Exit.isInterrupted(exit))
        assert.strictEqual(yield* TestClock.currentTimeMillis, 0)
        yield* TestClock.adjust("2 minutes")
        yield* settle
        assert.strictEqual(yield* sim.count(), 1)
        assert.deepStrictEqual(outline(notes), ["AttemptStarted", "AttemptDiscarded", "RetryScheduled"])
      }).pipe(
        Effect.provide(simulator),
        Effect.provide(
          Policy.layer({ backoffBase: Duration.seconds(45), backoffMax: Duration.seconds(60), jitter: false })
        )
      ))
  })
}
