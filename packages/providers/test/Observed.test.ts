/**
 * A provider marks each failure with the moment what carried it reached the client (its `observedAt`),
 * on the Clock, so that recovery counts the wait before the next attempt from there: a failure in a read is observed
 * at that read, not when the consumer, busy with the events before it, pulls it; a failed response is observed when
 * its headers arrive, not once its error body has been read. On the TestClock.
 */
import { HttpClient, HttpClientResponse } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import * as Generation from "@reprise/core/Generation"
import * as Message from "@reprise/core/Message"
import * as Policy from "@reprise/core/Policy"
import * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as Recovery from "@reprise/core/Recovery"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import { Chunk, Clock, Duration, Effect, Exit, Fiber, Option, Redacted, Stream, TestClock } from "effect"
import * as Send from "../src/internal/send.js"
import * as Settings from "../src/internal/settings.js"
import { type Machine, prematureEof, pull as pullBody } from "../src/internal/sse.js"
import { chatSpec, waitFor } from "./support/harness.js"

const settings = Settings.settings("openai-chat", { apiKey: Redacted.make("sk-test") })

const failureOf = (exit: Exit.Exit<unknown, unknown>): unknown =>
  Exit.isFailure(exit) && exit.cause._tag === "Fail" ? exit.cause.error : undefined

const yieldAll = Effect.repeatN(Effect.yieldNow(), 20)

describe("a failure is marked with the moment it was observed", () => {
  it.scoped("in a read: at that read, not when the consumer pulls it after the events before it", () =>
    Effect.gen(function*() {
      const failure = new ProviderRejection.ProviderRejection({ reason: "MalformedStream", detail: "test" })
      const machine: Machine<string> = {
        step: (data, out) => {
          if (data === "fail") return failure
          out.push(Generation.TextDelta({ text: data }))
          return undefined
        },
        done: () => false,
        end: (failed) => Effect.fail(Option.getOrElse(failed, () => prematureEof("test")))
      }
      yield* TestClock.adjust("1 second")
      // one read: an event that makes progress, then the failing one
      const body = Stream.make(new TextEncoder().encode("data: a\n\ndata: fail\n\n"))
      const pull = yield* pullBody({ body: Stream.toPull(body), settings, decode: (e) => e.data, machine })
      const first = yield* pull
      assert.deepStrictEqual(Chunk.toReadonlyArray(first), [Generation.TextDelta({ text: "a" })])
      // the consumer takes 2 s over the events before the failure
      yield* TestClock.adjust("2 seconds")
      const exit = yield* Effect.exit(pull)
      const failed = Option.getOrUndefined(failureOf(exit) as Option.Option<unknown>)
      assert.deepStrictEqual({ ...(failed as object), observedAt: undefined }, { ...failure, observedAt: undefined })
      assert.strictEqual((failed as { observedAt?: bigint }).observedAt, 1_000_000_000n, "observed at the read, at 1 s")
      assert.strictEqual(yield* Clock.currentTimeNanos, 3_000_000_000n)
    }))

  it.scoped("in a response: when its headers arrive, before its error body is read", () =>
    Effect.gen(function*() {
      let body: ReadableStreamDefaultController<Uint8Array> | undefined
      const client = HttpClient.make((request) =>
        // the headers arrive after 1 s; the error body is written by the test
        Effect.as(
          Effect.sleep("1 second"),
          HttpClientResponse.fromWeb(
            request,
            new Response(
              new ReadableStream<Uint8Array>({
                start: (controller) => {
                  body = controller
                }
              }),
              { status: 503, headers: { "content-type": "application/json" } }
            )
          )
        )
      )
      const fiber = yield* Effect.fork(
        Budget.scoped(Effect.scoped(Send.open(client, Send.prepare(chatSpec, settings), settings)))
      )
      yield* yieldAll
      yield* TestClock.adjust("1 second")
      yield* yieldAll
      assert.isDefined(body, "the response was not made")
      // its error body takes 2 s more
      yield* TestClock.adjust("2 seconds")
      body!.enqueue(new TextEncoder().encode(JSON.stringify({ error: { message: "overloaded" } })))
      body!.close()
      const exit = yield* Fiber.await(fiber)
      const failed = failureOf(exit)
      assert.isTrue(ProviderFailure.isProviderFailure(failed), `not a provider failure: ${String(failed)}`)
      assert.strictEqual((failed as { status?: number }).status, 503)
      assert.strictEqual(
        (failed as { observedAt?: bigint }).observedAt,
        1_000_000_000n,
        "observed at the headers, at 1 s"
      )
      assert.strictEqual(yield* Clock.currentTimeNanos, 3_000_000_000n)
    }))

  it.scoped("through recovery: a 503 whose error body takes 400 ms is replayed 1 s after its headers", () =>
    Effect.gen(function*() {
      const sentAt: Array<bigint> = []
      let errorBody: ReadableStreamDefaultController<Uint8Array> | undefined
      let failedSeen = false
      const client = HttpClient.make((request) =>
        Effect.flatMap(Clock.currentTimeNanos, (now) => {
          sentAt.push(now)
          if (sentAt.length > 1) {
            const sse = "data: " + JSON.stringify({ choices: [{ index: 0, delta: { content: "ok" } }] }) + "\n\n" +
              "data: " + JSON.stringify({ choices: [{ index: 0, delta: {}, finish_reason: "stop" }] }) + "\n\n" +
              "data: [DONE]\n\n"
            return Effect.succeed(HttpClientResponse.fromWeb(
              request,
              new Response(sse, { headers: { "content-type": "text/event-stream" } })
            ))
          }
          // the headers at once; the error body when the test writes it
          const body = new ReadableStream<Uint8Array>({
            start: (controller) => {
              errorBody = controller
            }
          })
          return Effect.succeed(HttpClientResponse.fromWeb(
            request,
            new Response(body, { status: 503, headers: { "content-type": "application/json" } })
          ))
        })
      )
      const provider = yield* OpenAiChat.make({ apiKey: Redacted.make("sk-test"), baseUrl: "http://127.0.0.1:9/v1" })
        .pipe(Effect.provideService(HttpClient.HttpClient, client))
      const fiber = yield* Effect.fork(
        Recovery.run(provider.stream({ model: "m", messages: [Message.user("hi")] })).pipe(
          Effect.provide(Policy.layer({ backoffBase: Duration.seconds(1), jitter: false })),
          Effect.provide(RecoveryNotifications.layerCallback((n) =>
            Effect.sync(() => {
              if (n._tag === "RetryScheduled") failedSeen = true
            })
          ))
        )
      )
      yield* yieldAll
      assert.isDefined(errorBody, "the first response was not made")
      // the error body 400 ms after the headers
      yield* TestClock.adjust("400 millis")
      errorBody!.enqueue(new TextEncoder().encode(JSON.stringify({ error: { message: "busy" } })))
      errorBody!.close()
      yield* waitFor(() => failedSeen)
      yield* TestClock.adjust("599 millis")
      yield* yieldAll
      assert.strictEqual(sentAt.length, 1, "replayed before 1 s from the headers")
      yield* TestClock.adjust("1 millis")
      const reply = yield* Fiber.join(fiber)
      assert.strictEqual(reply.attempts, 2)
      assert.strictEqual(reply.text, "ok")
      // 1 s from the first response's headers, not from the end of its error body (1.4 s)
      assert.deepStrictEqual(sentAt.map((t) => Number(t / 1_000_000n)), [0, 1000])
    }))

  it("the first observation stands, and a failure not observed has none", () => {
    const failure = new ProviderRejection.ProviderRejection({ reason: "MalformedStream", detail: "test" })
    assert.isUndefined(failure.observedAt)
    const observed = ProviderFailure.withObservedAt(failure, 5n)
    assert.strictEqual(observed.observedAt, 5n)
    assert.strictEqual(observed.detail, "test")
    assert.isTrue(ProviderRejection.isProviderRejection(observed))
    assert.strictEqual(ProviderFailure.withObservedAt(observed, 7n).observedAt, 5n)
  })
})
