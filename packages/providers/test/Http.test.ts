/**
 * Loopback tests: every protocol against a real node:http server on 127.0.0.1 through the real undici client.
 *
 * Timeouts over a real socket run on the live clock with short configured timeouts (150–250 ms): the socket itself
 * needs live time, so TestClock cannot drive them. They are the only tests here that wait for real. The same timeout
 * logic is driven by TestClock in Timeouts.test.ts.
 */
import { HttpClient } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import * as Classification from "@reprise/core/Classification"
import * as Policy from "@reprise/core/Policy"
import * as Provider from "@reprise/core/Provider"
import * as Recovery from "@reprise/core/Recovery"
import { Deferred, Duration, Effect, Either, Exit, Fiber, FiberRef, Layer, Redacted, Stream, TestClock } from "effect"
import type * as Http from "node:http"
import * as HttpProvider from "../src/HttpProvider.js"
import type * as ProviderOptions from "../src/ProviderOptions.js"
import { closedPort, KEY, request, run, server, summarize } from "./support/harness.js"
import type { Handler } from "./support/harness.js"
import { subjects } from "./support/protocols.js"
import type { Subject } from "./support/protocols.js"

type Json = any

const sse = (res: Http.ServerResponse, extra: Record<string, string> = {}) =>
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", ...extra })

const withServer = <A, E, R>(
  handler: Handler,
  f: (s: Effect.Effect.Success<ReturnType<typeof server>>) => Effect.Effect<A, E, R>
) => Effect.scoped(Effect.flatMap(server(handler), f)).pipe(Effect.provide(NodeHttpClient.layerUndici))

const provider = (subject: Subject, url: string, extra: Record<string, unknown> = {}) =>
  subject.make({ apiKey: Redacted.make(KEY), baseUrl: subject.base(url), ...extra })

const failureOf = (result: Either.Either<void, unknown>): Json => {
  if (Either.isRight(result)) assert.fail("expected a failure")
  return (result as Either.Left<unknown, void>).left
}

const statusTable: ReadonlyArray<readonly [number, string, string, boolean]> = [
  [400, "ProviderRejection", "BadRequest", false],
  [401, "ProviderRejection", "Authentication", false],
  [403, "ProviderRejection", "Permission", false],
  [404, "ProviderRejection", "NotFound", false],
  [408, "TransportError", "HttpStatus", true],
  [409, "ProviderRejection", "BadRequest", false],
  [413, "ProviderRejection", "ContextOverflow", false],
  [422, "ProviderRejection", "BadRequest", false],
  [429, "TransportError", "HttpStatus", true],
  [500, "TransportError", "HttpStatus", true],
  [501, "ProviderRejection", "OtherStatus", false],
  [502, "TransportError", "HttpStatus", true],
  [503, "TransportError", "HttpStatus", true],
  [504, "TransportError", "HttpStatus", true],
  [529, "TransportError", "HttpStatus", true]
]

for (const subject of subjects) {
  describe(`${subject.name} over loopback HTTP`, () => {
    it.effect("a complete stream decodes, with one request", () =>
      withServer((_req, res) => {
        sse(res)
        res.end(subject.success)
      }, (s) =>
        Effect.gen(function*() {
          const { events, result } = yield* run(yield* provider(subject, s.url))
          assert.isTrue(Either.isRight(result), String(Either.isLeft(result) ? result.left : ""))
          const summary = summarize(events)
          assert.strictEqual(summary.text, "Hello")
          assert.strictEqual(summary.finish?.reason, "stop")
          assert.strictEqual(s.received.length, 1)
        })))

    it.effect("the request goes to the protocol's endpoint with its headers and body", () =>
      withServer((_req, res) => {
        sse(res)
        res.end(subject.success)
      }, (s) =>
        Effect.gen(function*() {
          const p = yield* provider(subject, s.url)
          yield* run(
            p,
            request({
              system: "Be brief.",
              maxTokens: 64,
              tools: [{ name: "now", description: "The time", parameters: { type: "object", properties: {} } }],
              messages: [
                { role: "user", text: "What time is it?" },
                { role: "assistant", text: "", toolCalls: [{ id: "call_1", name: "now", arguments: {} }] },
                { role: "tool", toolCallId: "call_1", name: "now", content: "12:00", isError: false }
              ]
            })
          )
          assert.strictEqual(s.received.length, 1)
          const got = s.received[0]
          assert.strictEqual(got.method, "POST")
          assert.strictEqual(got.url, subject.path)
          assert.strictEqual(got.headers["content-type"], "application/json")
          assert.strictEqual(got.headers["accept"], "text/event-stream")
          const body = JSON.parse(got.body)
          if (subject.name === "anthropic") {
            assert.strictEqual(got.headers["x-api-key"], KEY)
            assert.strictEqual(got.headers["anthropic-version"], "2023-06-01")
            assert.isUndefined(got.headers["authorization"])
            assert.deepStrictEqual(body, {
              model: "test-model",
              max_tokens: 64,
              system: "Be brief.",
              messages: [
                { role: "user", content: [{ type: "text", text: "What time is it?" }] },
                { role: "assistant", content: [{ type: "tool_use", id: "call_1", name: "now", input: {} }] },
                {
                  role: "user",
                  content: [{ type: "tool_result", tool_use_id: "call_1", content: "12:00", is_error: false }]
                }
              ],
              tools: [{ name: "now", description: "The time", input_schema: { type: "object", properties: {} } }],
              stream: true
            })
          } else {
            assert.strictEqual(got.headers["authorization"], `Bearer ${KEY}`)
            assert.isUndefined(got.headers["x-api-key"])
          }
          if (subject.name === "openai-chat") {
            assert.deepStrictEqual(body, {
              model: "test-model",
              messages: [
                { role: "system", content: "Be brief." },
                { role: "user", content: "What time is it?" },
                {
                  role: "assistant",
                  content: null,
                  tool_calls: [{ id: "call_1", type: "function", function: { name: "now", arguments: "{}" } }]
                },
                { role: "tool", tool_call_id: "call_1", content: "12:00" }
              ],
              tools: [{
                type: "function",
                function: { name: "now", description: "The time", parameters: { type: "object", properties: {} } }
              }],
              max_tokens: 64,
              stream: true,
              stream_options: { include_usage: true }
            })
          }
          if (subject.name === "openai-responses" || subject.name === "subscription") {
            assert.deepStrictEqual(body, {
              model: "test-model",
              instructions: "Be brief.",
              input: [
                { role: "user", content: "What time is it?" },
                { type: "function_call", call_id: "call_1", name: "now", arguments: "{}" },
                { type: "function_call_output", call_id: "call_1", output: "12:00" }
              ],
              tools: [{
                type: "function",
                name: "now",
                description: "The time",
                parameters: { type: "object", properties: {} }
              }],
              max_output_tokens: 64,
              stream: true,
              ...(subject.name === "subscription" ? { store: false } : {})
            })
          }
        })))

    for (const [status, tag, reason, retryable] of statusTable) {
      it.effect(`HTTP ${status} is ${tag}{${reason}}, ${retryable ? "retryable" : "permanent"}`, () =>
        withServer((_req, res) => {
          res.writeHead(status, {
            "content-type": "application/json",
            "x-request-id": "req_123",
            "request-id": "req_123"
          })
          res.end(subject.errorBody(status >= 500 ? "server_error" : "invalid_request_error", `failed with ${status}`))
        }, (s) =>
          Effect.gen(function*() {
            const error = failureOf((yield* run(yield* provider(subject, s.url))).result)
            assert.strictEqual(error._tag, tag)
            assert.strictEqual(error.reason, reason)
            assert.strictEqual(error.status, status)
            assert.strictEqual(error.requestId, "req_123")
            assert.include(error.message, `failed with ${status}`)
            assert.strictEqual(Classification.classify(error)._tag, retryable ? "Retryable" : "Permanent")
            assert.strictEqual(s.received.length, 1)
          })))
    }

    it.effect("409 with x-should-retry: true is retryable; 503 with x-should-retry: false is not", () =>
      withServer((_req, res, i) => {
        res.writeHead(i === 0 ? 409 : 503, {
          "content-type": "application/json",
          "x-should-retry": i === 0 ? "true" : "false"
        })
        res.end(subject.errorBody("invalid_request_error", "conflict"))
      }, (s) =>
        Effect.gen(function*() {
          const p = yield* provider(subject, s.url)
          const conflict = failureOf((yield* run(p)).result)
          assert.strictEqual(conflict._tag, "TransportError")
          assert.strictEqual(Classification.classify(conflict)._tag, "Retryable")
          const unavailable = failureOf((yield* run(p)).result)
          assert.strictEqual(unavailable.shouldRetry, false)
          assert.deepStrictEqual(
            Classification.classify(unavailable),
            Classification.Permanent({ reason: "ServerForbidsRetry" })
          )
        })))

    it.effect("context overflow and quota are detected from the error body", () =>
      withServer((_req, res, i) => {
        res.writeHead(i === 0 ? 400 : 429, { "content-type": "application/json" })
        res.end(
          i === 0
            ? subject.name === "anthropic"
              ? subject.errorBody("invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum")
              : subject.errorBody(
                "invalid_request_error",
                "This model's maximum context length is 128000 tokens",
                "context_length_exceeded"
              )
            : subject.errorBody("insufficient_quota", "You exceeded your current quota", "insufficient_quota")
        )
      }, (s) =>
        Effect.gen(function*() {
          const p = yield* provider(subject, s.url)
          const overflow = failureOf((yield* run(p)).result)
          assert.strictEqual(overflow.reason, "ContextOverflow")
          const quota = failureOf((yield* run(p)).result)
          assert.strictEqual(quota.reason, "Quota")
          assert.strictEqual(Classification.classify(quota)._tag, "Permanent")
        })))

    it.effect("retry-after-ms, Retry-After seconds and Retry-After HTTP-date all parse", () =>
      withServer((_req, res, i) => {
        const headers: Array<Record<string, string>> = [
          { "retry-after-ms": "1500", "retry-after": "9" },
          { "retry-after": "7" },
          { "retry-after": "Wed, 01 Jan 2025 00:00:30 GMT" },
          { "retry-after": "Tue, 31 Dec 2024 23:00:00 GMT" }
        ]
        res.writeHead(429, { "content-type": "application/json", ...headers[i] })
        res.end(subject.errorBody("rate_limit_error", "slow down", "rate_limit_exceeded"))
      }, (s) =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2025-01-01T00:00:00Z"))
          const p = yield* provider(subject, s.url)
          const waits: Array<number> = []
          for (let i = 0; i < 4; i++) {
            const error = failureOf((yield* run(p)).result)
            assert.strictEqual(error._tag, "TransportError")
            const verdict = Classification.classify(error)
            assert.strictEqual(verdict._tag, "Retryable")
            waits.push(Duration.toMillis(error.retryAfter))
          }
          // ms wins over seconds; the date is 30 s after the (test) clock; a date in the past is no wait
          assert.deepStrictEqual(waits, [1500, 7000, 30_000, 0])
        })))

    it.effect("an invalid Retry-After (-1, a signed number, words, an ISO date) is ignored, not read as a date", () =>
      withServer((_req, res, i) => {
        const values = ["-1", "+5", "soon", "1e3", "2025-01-01T00:01:00Z"]
        res.writeHead(429, { "content-type": "application/json", "retry-after": values[i]! })
        res.end(subject.errorBody("rate_limit_error", "slow down", "rate_limit_exceeded"))
      }, (s) =>
        Effect.gen(function*() {
          yield* TestClock.setTime(Date.parse("2025-01-01T00:00:00Z"))
          const p = yield* provider(subject, s.url)
          for (let i = 0; i < 5; i++) {
            const error = failureOf((yield* run(p)).result)
            assert.strictEqual(error._tag, "TransportError")
            assert.isUndefined(error.retryAfter, `value ${i}`)
          }
        })))

    it.effect("HTTP 304 is not a redirect: a permanent OtherStatus, with one request", () =>
      withServer((_req, res) => {
        res.writeHead(304)
        res.end()
      }, (s) =>
        Effect.gen(function*() {
          const error = failureOf((yield* run(yield* provider(subject, s.url))).result)
          assert.strictEqual(error._tag, "ProviderRejection")
          assert.strictEqual(error.reason, "OtherStatus")
          assert.strictEqual(error.status, 304)
          assert.strictEqual(Classification.classify(error)._tag, "Permanent")
          assert.strictEqual(s.received.length, 1)
        })))

    for (const status of [301, 302, 303, 307, 308]) {
      it.effect(`HTTP ${status} is refused with exactly one request`, () =>
        withServer((_req, res, i) => {
          if (i === 0) {
            res.writeHead(status, { location: `http://127.0.0.1:${(_req.socket.localPort)}/elsewhere` })
            res.end()
          } else {
            sse(res)
            res.end(subject.success)
          }
        }, (s) =>
          Effect.gen(function*() {
            const error = failureOf((yield* run(yield* provider(subject, s.url))).result)
            assert.strictEqual(error._tag, "ProviderRejection")
            assert.strictEqual(error.reason, "RedirectRefused")
            assert.strictEqual(error.status, status)
            assert.strictEqual(error.location, `${s.url}/elsewhere`)
            assert.strictEqual(Classification.classify(error)._tag, "Permanent")
            assert.strictEqual(s.received.length, 1)
          })))
    }

    it.effect("in-band errors: transient and permanent are told apart", () =>
      withServer((_req, res, i) => {
        sse(res)
        res.end(subject.partial + (i === 0 ? subject.inBandTransient : subject.inBandPermanent))
      }, (s) =>
        Effect.gen(function*() {
          const p = yield* provider(subject, s.url)
          const transient = yield* run(p)
          const t = failureOf(transient.result)
          assert.strictEqual(t._tag, "TransportError")
          assert.strictEqual(t.reason, "ProviderError")
          assert.strictEqual(Classification.classify(t)._tag, "Retryable")
          assert.strictEqual(summarize(transient.events).text, "Hel")
          const permanent = failureOf((yield* run(p)).result)
          assert.strictEqual(Classification.classify(permanent)._tag, "Permanent")
        })))

    it.effect("a 200 JSON body in place of the stream: an error is classified by its code, other JSON is malformed", () =>
      withServer((_req, res, i) => {
        const bodies = [
          subject.errorBody("invalid_request_error", `model not found for ${KEY}`),
          subject.errorBody("overloaded_error", "Overloaded"),
          JSON.stringify({ id: "x", object: "chat.completion", choices: [] }),
          "",
          "<html><body>502 Bad Gateway</body></html>"
        ]
        res.writeHead(200, { "content-type": i === 4 ? "text/html" : "application/json", "x-request-id": "req_json" })
        res.end(bodies[i])
      }, (s) =>
        Effect.gen(function*() {
          const p = yield* provider(subject, s.url)
          const permanent = failureOf((yield* run(p)).result)
          assert.strictEqual(permanent._tag, "ProviderRejection")
          assert.strictEqual(permanent.reason, "BadRequest")
          assert.strictEqual(permanent.requestId, "req_json")
          assert.strictEqual(Classification.classify(permanent)._tag, "Permanent")
          assert.include(permanent.message, "model not found")
          assert.notInclude(permanent.message, KEY)
          const transient = failureOf((yield* run(p)).result)
          assert.strictEqual(transient._tag, "TransportError")
          assert.strictEqual(transient.reason, "ProviderError")
          assert.strictEqual(Classification.classify(transient)._tag, "Retryable")
          const completion = failureOf((yield* run(p)).result)
          assert.strictEqual(completion._tag, "ProviderRejection")
          assert.strictEqual(completion.reason, "MalformedStream")
          assert.include(completion.message, "got a JSON body")
          // an empty body and a body that is not JSON are still premature EOFs, as any truncated stream
          for (let i = 0; i < 2; i++) {
            const eof = failureOf((yield* run(p)).result)
            assert.strictEqual(eof.reason, "PrematureEof")
          }
          assert.strictEqual(s.received.length, 5)
        })))

    it.effect("a socket reset mid-body is a retryable transport failure", () =>
      withServer((_req, res) => {
        sse(res)
        res.write(subject.partial, () => setTimeout(() => res.socket?.destroy(), 20))
      }, (s) =>
        Effect.gen(function*() {
          const { events, result } = yield* run(yield* provider(subject, s.url))
          const error = failureOf(result)
          assert.strictEqual(error._tag, "TransportError")
          assert.strictEqual(error.reason, "Reset")
          assert.strictEqual(Classification.classify(error)._tag, "Retryable")
          assert.strictEqual(summarize(events).text, "Hel")
        })))

    it.effect("a socket closed before the headers is a reset", () =>
      withServer((req) => {
        req.socket.destroy()
      }, (s) =>
        Effect.gen(function*() {
          const error = failureOf((yield* run(yield* provider(subject, s.url))).result)
          assert.strictEqual(error._tag, "TransportError")
          assert.strictEqual(error.reason, "Reset")
        })))

    it.effect("a clean end of body before the terminal is a premature EOF", () =>
      withServer((_req, res) => {
        sse(res)
        res.end(subject.partial)
      }, (s) =>
        Effect.gen(function*() {
          const error = failureOf((yield* run(yield* provider(subject, s.url))).result)
          assert.strictEqual(error.reason, "PrematureEof")
          assert.strictEqual(Classification.classify(error)._tag, "Retryable")
        })))

    it.effect("connection refused is a Connect failure", () =>
      Effect.gen(function*() {
        const port = yield* closedPort
        const error = failureOf((yield* run(yield* provider(subject, `http://127.0.0.1:${port}`))).result)
        assert.strictEqual(error._tag, "TransportError")
        assert.strictEqual(error.reason, "Connect")
        assert.strictEqual(Classification.classify(error)._tag, "Retryable")
      }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

    it.effect("an event over maxEventSize is a MalformedStream rejection; data that is not JSON a MalformedChunk", () =>
      withServer((_req, res, i) => {
        sse(res)
        res.end(
          i === 0
            ? `data: ${JSON.stringify({ pad: "x".repeat(5000) })}\n\n`
            : i === 1
            ? `data: {not json ${KEY}\n\n`
            : `data: ${JSON.stringify({ type: 7, choices: "none" })}\n\n`
        )
      }, (s) =>
        Effect.gen(function*() {
          const p = yield* provider(subject, s.url, { maxEventSize: 1024 })
          const tooLarge = failureOf((yield* run(p)).result)
          assert.strictEqual(tooLarge._tag, "ProviderRejection")
          assert.strictEqual(tooLarge.reason, "MalformedStream")
          assert.include(tooLarge.message, "1024")
          const notJson = failureOf((yield* run(p)).result)
          assert.strictEqual(notJson._tag, "TransportError")
          assert.strictEqual(notJson.reason, "MalformedChunk")
          assert.strictEqual(Classification.classify(notJson)._tag, "Retryable")
          // the data is shown, scrubbed of the key
          assert.include(notJson.detail, "not valid JSON")
          assert.include(notJson.detail, "{not json")
          assert.notInclude(notJson.detail, KEY)
          const wrongShape = failureOf((yield* run(p)).result)
          assert.strictEqual(wrongShape._tag, "ProviderRejection")
          assert.strictEqual(wrongShape.reason, "MalformedStream")
        })))

    it.live("an idle stall with keepalives times out (live clock, 200 ms idle timeout)", () => {
      let keepalives = 0
      const timers: Array<ReturnType<typeof setInterval>> = []
      return withServer((_req, res) => {
        sse(res)
        res.write(subject.partial)
        timers.push(setInterval(() => {
          keepalives++
          res.write(subject.keepalive)
        }, 25))
        res.on("close", () => timers.forEach(clearInterval))
      }, (s) =>
        Effect.gen(function*() {
          const p = yield* provider(subject, s.url, { idleTimeout: "200 millis", firstByteTimeout: "5 seconds" })
          const { events, result } = yield* run(p)
          const error = failureOf(result)
          assert.strictEqual(error._tag, "TransportError")
          assert.strictEqual(error.reason, "Timeout")
          assert.strictEqual(Classification.classify(error)._tag, "Retryable")
          assert.strictEqual(summarize(events).text, "Hel")
          // keepalives kept flowing during the whole idle window and did not reset it
          assert.isAtLeast(keepalives, 4)
        })).pipe(Effect.ensuring(Effect.sync(() => timers.forEach(clearInterval))))
    })

    it.live("a first-byte stall times out and aborts the request (live clock, 150 ms)", () =>
      withServer(() => {
        // never answer
      }, (s) =>
        Effect.gen(function*() {
          const p = yield* provider(subject, s.url, { firstByteTimeout: "150 millis" })
          const error = failureOf((yield* run(p)).result)
          assert.strictEqual(error._tag, "TransportError")
          assert.strictEqual(error.reason, "Timeout")
          assert.strictEqual(s.received.length, 1)
          yield* s.awaitAbort(0)
          assert.deepStrictEqual(s.aborted, [0])
        })))

    it.live("interruption aborts the request and is not a failure", () =>
      withServer((_req, res) => {
        sse(res)
        res.write(subject.partial)
      }, (s) =>
        Effect.gen(function*() {
          const p = yield* provider(subject, s.url)
          const first = yield* Deferred.make<void>()
          const fiber = yield* p.stream(request()).pipe(
            Stream.tap(() => Deferred.succeed(first, undefined)),
            Stream.runDrain,
            Budget.scoped,
            Effect.fork
          )
          yield* Deferred.await(first)
          const exit = yield* Fiber.interrupt(fiber)
          assert.isTrue(Exit.isInterrupted(exit))
          assert.isFalse(Exit.isFailure(exit) && exit.cause._tag === "Fail")
          yield* s.awaitAbort(0)
          assert.deepStrictEqual(s.aborted, [0])
        })))

    it.effect("every send is reserved from the Budget first; none is made without a reservation", () =>
      withServer((_req, res) => {
        sse(res)
        res.end(subject.success)
      }, (s) =>
        Effect.gen(function*() {
          const p = yield* provider(subject, s.url)
          const allowance = yield* Budget.make({ maxAttempts: 2, deadline: Duration.seconds(60) })
          const once = p.stream(request()).pipe(Stream.runDrain, Effect.provideService(Budget.Budget, allowance))
          yield* once
          yield* once
          const third = yield* Effect.either(once)
          assert.strictEqual(yield* allowance.used, 2)
          assert.strictEqual(s.received.length, 2)
          assert.isTrue(Either.isLeft(third) && Budget.isBudgetExhausted(third.left))
        })))
  })
}

describe("capability fallback", () => {
  const unsupported = JSON.stringify({
    error: {
      message:
        "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
      type: "invalid_request_error",
      param: "max_tokens",
      code: "unsupported_parameter"
    }
  })
  const chat = subjects[0]
  const responses = subjects[1]

  it.effect("openai-chat resends once with max_completion_tokens, debiting the Budget", () =>
    withServer((_req, res, i) => {
      if (i === 0) {
        res.writeHead(400, { "content-type": "application/json" })
        res.end(unsupported)
      } else {
        sse(res)
        res.end(chat.success)
      }
    }, (s) =>
      Effect.gen(function*() {
        const p = yield* provider(chat, s.url)
        const allowance = yield* Budget.make({ maxAttempts: 5, deadline: Duration.seconds(60) })
        const events = yield* p.stream(request({ maxTokens: 32 })).pipe(
          Stream.runCollect,
          Effect.provideService(Budget.Budget, allowance)
        )
        assert.strictEqual(summarize([...events]).text, "Hello")
        assert.strictEqual(s.received.length, 2)
        assert.strictEqual(yield* allowance.used, 2)
        const [first, second] = s.received.map((r) => JSON.parse(r.body))
        assert.strictEqual(first.max_tokens, 32)
        assert.isUndefined(second.max_tokens)
        assert.strictEqual(second.max_completion_tokens, 32)
      })))

  it.effect("the fallback is made once only, and not without a reservation", () =>
    withServer((_req, res) => {
      res.writeHead(400, { "content-type": "application/json" })
      res.end(unsupported)
    }, (s) =>
      Effect.gen(function*() {
        const p = yield* provider(chat, s.url)
        const error = failureOf((yield* run(p, request({ maxTokens: 32 }))).result)
        assert.strictEqual(error.reason, "BadRequest")
        assert.strictEqual(s.received.length, 2)
        const single = yield* Budget.make({ maxAttempts: 1, deadline: Duration.seconds(60) })
        const exhausted = yield* p.stream(request({ maxTokens: 32 })).pipe(
          Stream.runDrain,
          Effect.provideService(Budget.Budget, single),
          Effect.flip
        )
        assert.isTrue(Budget.isBudgetExhausted(exhausted))
        assert.strictEqual(s.received.length, 3)
      })))

  it.effect("an ordinary 400 or a rejected parameter that was not sent causes no resend", () =>
    withServer((_req, res, i) => {
      res.writeHead(400, { "content-type": "application/json" })
      res.end(
        i === 0
          ? JSON.stringify({ error: { message: "messages: field required", type: "invalid_request_error" } })
          : unsupported
      )
    }, (s) =>
      Effect.gen(function*() {
        const p = yield* provider(chat, s.url)
        failureOf((yield* run(p, request({ maxTokens: 32 }))).result)
        assert.strictEqual(s.received.length, 1)
        // no max_tokens in the request: nothing to drop
        failureOf((yield* run(p, request())).result)
        assert.strictEqual(s.received.length, 2)
      })))

  it.effect("openai-chat resends once without stream_options; that reply has no usage", () =>
    withServer((_req, res, i) => {
      if (i === 0) {
        res.writeHead(400, { "content-type": "application/json" })
        res.end(JSON.stringify({
          error: { message: "Unrecognized request argument supplied: stream_options", type: "invalid_request_error" }
        }))
      } else {
        sse(res)
        // the usage chunk only when asked for, as the protocol has it
        res.end(chat.success.split("\n\n").filter((event) => !event.includes(`"usage"`)).join("\n\n"))
      }
    }, (s) =>
      Effect.gen(function*() {
        const { events, result } = yield* run(yield* provider(chat, s.url))
        assert.isTrue(Either.isRight(result))
        assert.strictEqual(summarize(events).text, "Hello")
        assert.isUndefined(summarize(events).usage)
        assert.strictEqual(s.received.length, 2)
        const [first, second] = s.received.map((r) => JSON.parse(r.body))
        assert.deepStrictEqual(first.stream_options, { include_usage: true })
        assert.isFalse("stream_options" in second)
      })))

  it.effect("openai-chat with streamUsage: false sends no stream_options", () =>
    withServer((_req, res) => {
      sse(res)
      res.end(chat.success)
    }, (s) =>
      Effect.gen(function*() {
        const { result } = yield* run(yield* provider(chat, s.url, { streamUsage: false }))
        assert.isTrue(Either.isRight(result))
        assert.strictEqual(s.received.length, 1)
        assert.isFalse("stream_options" in JSON.parse(s.received[0].body))
      })))

  it.effect("openai-responses resends once without max_output_tokens", () =>
    withServer((_req, res, i) => {
      if (i === 0) {
        res.writeHead(400, { "content-type": "application/json" })
        res.end(JSON.stringify({
          detail: "ignored",
          error: { message: "Unsupported parameter: max_output_tokens", type: "invalid_request_error", code: null }
        }))
      } else {
        sse(res)
        res.end(responses.success)
      }
    }, (s) =>
      Effect.gen(function*() {
        const { events, result } = yield* run(yield* provider(responses, s.url), request({ maxTokens: 32 }))
        assert.isTrue(Either.isRight(result))
        assert.strictEqual(summarize(events).text, "Hello")
        assert.strictEqual(s.received.length, 2)
        assert.isUndefined(JSON.parse(s.received[1].body).max_output_tokens)
      })))
})

describe("with the recovery runtime", () => {
  for (const subject of subjects) {
    it.live(`${subject.name}: a 200 JSON error in place of the stream is not replayed when its code is permanent`, () =>
      withServer((_req, res) => {
        res.writeHead(200, { "content-type": "application/json" })
        res.end(subject.errorBody("invalid_request_error", "Invalid model"))
      }, (s) =>
        Effect.gen(function*() {
          const p = yield* provider(subject, s.url)
          const exit = yield* Recovery.run(p.stream(request())).pipe(
            Effect.provide(Policy.layer({ backoffBase: Duration.millis(5), jitter: false })),
            Effect.exit
          )
          assert.isTrue(Exit.isFailure(exit))
          assert.strictEqual(s.received.length, 1)
        })))

    it.live(`${subject.name}: a 503, a reset and a premature EOF are replayed, one send each, then committed`, () =>
      withServer((_req, res, i) => {
        if (i === 0) {
          res.writeHead(503, { "content-type": "application/json", "retry-after-ms": "5" })
          res.end(subject.errorBody("server_error", "busy"))
        } else if (i === 1) {
          sse(res)
          res.write(subject.partial, () => setTimeout(() => res.socket?.destroy(), 10))
        } else if (i === 2) {
          sse(res)
          res.end(subject.partial)
        } else {
          sse(res)
          res.end(subject.success)
        }
      }, (s) =>
        Effect.gen(function*() {
          const p = yield* provider(subject, s.url)
          const reply = yield* Recovery.run(p.stream(request())).pipe(
            Effect.provide(Policy.layer({ backoffBase: Duration.millis(5), jitter: false }))
          )
          assert.strictEqual(reply.text, "Hello")
          assert.strictEqual(reply.attempts, 4)
          assert.strictEqual(s.received.length, 4)
          // every replay sends the first attempt's body and key, with its own attempt's trace context
          for (const replay of s.received.slice(1)) {
            assert.strictEqual(replay.body, s.received[0].body)
            assert.strictEqual(replay.headers.authorization ?? "", s.received[0].headers.authorization ?? "")
            assert.strictEqual(replay.headers["x-api-key"] ?? "", s.received[0].headers["x-api-key"] ?? "")
          }
          const traces = s.received.map((r) => r.headers.traceparent)
          assert.isTrue(traces.every((t) => typeof t === "string"), "a send without a traceparent")
          assert.strictEqual(new Set(traces).size, 4, "two sends with the same trace context")
        })))

    // With Effect's own tracer, the request carries the trace of its attempt's span (the platform client's span, a child
    // of the attempt's, is the parent it names). test/tracing.test.ts has the client's spans with the OpenTelemetry
    // SDK's tracer.
    const own = (url: string) =>
      HttpProvider.layerUndici(subject.name as ProviderOptions.Protocol, {
        apiKey: Redacted.make(KEY),
        baseUrl: subject.base(url)
      })

    it.live(`${subject.name}: with Effect's own tracer, a send carries its attempt span's trace`, () =>
      withServer((_req, res) => {
        sse(res)
        res.end(subject.success)
      }, (s) =>
        Effect.gen(function*() {
          const spans: Array<{ readonly traceId: string; readonly spanId: string }> = []
          yield* Effect.flatMap(Provider.Provider, (p) =>
            Recovery.run(p.stream(request()), {
              hooks: {
                onChunk: () =>
                  Effect.map(Effect.currentSpan, (span) => {
                    if (spans.length === 0) spans.push({ traceId: span.traceId, spanId: span.spanId })
                  })
              }
            })).pipe(Effect.provide(own(s.url)))
          assert.strictEqual(s.received.length, 1)
          const [attempt] = spans
          assert.match(String(s.received[0].headers.traceparent), new RegExp(`^00-${attempt.traceId}-[0-9a-f]{16}-01$`))
          assert.match(String(s.received[0].headers.b3), new RegExp(`^${attempt.traceId}-[0-9a-f]{16}-1-`))
        })))

    // a send leaves the fiber's tracer predicate as it found it
    it.live(`${subject.name}: the fiber's tracer predicate is its own again after a send, a failed one too`, () =>
      Effect.gen(function*() {
        const outer = yield* FiberRef.get(HttpClient.currentTracerDisabledWhen)
        const seen: Array<unknown> = []
        const onChunk = () =>
          Effect.map(FiberRef.get(HttpClient.currentTracerDisabledWhen), (predicate) => {
            seen.push(predicate)
          })
        // a reply read after its send
        yield* withServer(
          (_req, res) => {
            sse(res)
            res.end(subject.success)
          },
          (s) =>
            Effect.flatMap(Provider.Provider, (p) => Recovery.run(p.stream(request()), { hooks: { onChunk } })).pipe(
              Effect.provide(own(s.url))
            )
        )
        assert.isAbove(seen.length, 0)
        for (const predicate of seen) {
          assert.strictEqual(predicate, outer, "the span was still off as the reply was read")
        }
        assert.strictEqual(yield* FiberRef.get(HttpClient.currentTracerDisabledWhen), outer)
        // a send that fails (a refused connection): the predicate is back all the same
        const failed = yield* Effect.flatMap(Provider.Provider, (p) => Recovery.run(p.stream(request()))).pipe(
          Effect.provide(Layer.merge(own(`http://127.0.0.1:${yield* closedPort}`), Budget.layer({ maxAttempts: 1 }))),
          Effect.exit
        )
        assert.isTrue(Exit.isFailure(failed))
        assert.strictEqual(yield* FiberRef.get(HttpClient.currentTracerDisabledWhen), outer)
      }))

    it.live(`${subject.name}: with the trace context's propagation off, a send carries none`, () =>
      withServer((_req, res) => {
        sse(res)
        res.end(subject.success)
      }, (s) =>
        Effect.gen(function*() {
          yield* Effect.flatMap(Provider.Provider, (p) => Recovery.run(p.stream(request()))).pipe(
            Effect.provide(own(s.url)),
            Effect.locally(HttpClient.currentTracerPropagation, false)
          )
          assert.strictEqual(s.received.length, 1)
          assert.isUndefined(s.received[0].headers.traceparent)
          assert.isUndefined(s.received[0].headers.b3)
        })))

    // an app's client decides inside itself, as the platform's client always did: its wrappers are kept
    it.live(`${subject.name}: an app's client with propagation off sends no trace context`, () =>
      withServer((_req, res) => {
        sse(res)
        res.end(subject.success)
      }, (s) =>
        Effect.gen(function*() {
          const client = yield* HttpClient.HttpClient
          const p = yield* provider(subject, s.url).pipe(
            Effect.provideService(HttpClient.HttpClient, HttpClient.withTracerPropagation(client, false))
          )
          yield* Recovery.run(p.stream(request()))
          assert.strictEqual(s.received.length, 1)
          assert.isUndefined(s.received[0].headers.traceparent)
          assert.isUndefined(s.received[0].headers.b3)
        })))
  }
})
