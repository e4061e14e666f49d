/**
 * Bounds on what a server may send, over loopback HTTP with the real undici client: how deep a JSON value reprise
 * reads whole may nest (`ProviderOptions.maxNestingDepth`), and how many body bytes one attempt may read
 * (`maxReplyBytes`). Past either bound the reply fails with a permanent `ProviderRejection` after exactly one send.
 */
import { HttpClient } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Classification from "@reprise/core/Classification"
import * as Policy from "@reprise/core/Policy"
import * as Recovery from "@reprise/core/Recovery"
import * as ProviderOptions from "@reprise/providers/ProviderOptions"
import { Cause, ConfigError, ConfigProvider, Duration, Effect, Either, Exit, Option, Redacted } from "effect"
import type * as Http from "node:http"
import { fakeClient, KEY, request, run, server, summarize } from "./support/harness.js"
import type { Handler } from "./support/harness.js"
import { subjects } from "./support/protocols.js"
import type { Subject } from "./support/protocols.js"

type Json = any

const sse = (res: Http.ServerResponse) => res.writeHead(200, { "content-type": "text/event-stream" })

const withServer = <A, E, R>(
  handler: Handler,
  f: (s: Effect.Effect.Success<ReturnType<typeof server>>) => Effect.Effect<A, E, R>
) => Effect.scoped(Effect.flatMap(server(handler), f)).pipe(Effect.provide(NodeHttpClient.layerUndici))

const provider = (subject: Subject, url: string, extra: Partial<ProviderOptions.Options> = {}) =>
  subject.make({ apiKey: Redacted.make(KEY), baseUrl: subject.base(url), ...extra })

/** One reply with recovery (a 1 ms backoff: a replay would follow at once); its failure. */
const replyFailure = (subject: Subject, url: string, extra: Partial<ProviderOptions.Options> = {}) =>
  Effect.gen(function*() {
    const p = yield* provider(subject, url, extra)
    const exit = yield* Recovery.run(p.stream(request())).pipe(
      Effect.provide(Policy.layer({ backoffBase: Duration.millis(1), backoffMax: Duration.millis(1), jitter: false })),
      Effect.exit
    )
    if (Exit.isSuccess(exit)) return assert.fail("expected a failure")
    return Option.getOrThrow(Cause.failureOption(exit.cause)) as Json
  })

/** Writes `chunk` for as long as the client reads, until the connection closes. */
const flood = (res: Http.ServerResponse, chunk: string) => {
  const pump = () => {
    while (!res.destroyed && res.write(chunk));
    if (!res.destroyed) res.once("drain", pump)
  }
  pump()
}

const nested = (depth: number) => "[".repeat(depth) + "]".repeat(depth)
const nestedObject = (depth: number) => "{\"a\":".repeat(depth - 1) + "{}" + "}".repeat(depth - 1)

describe("nesting depth", () => {
  it("the bound is a documented constant", () => {
    assert.strictEqual(ProviderOptions.maxNestingDepth, 128)
  })

  for (const subject of subjects) {
    describe(subject.name, () => {
      it.live("tool arguments nested 20,000 levels (40 KB) are a permanent MalformedStream after one send", () => {
        const name = `lookup_${KEY}`
        return withServer((_req, res) => {
          sse(res)
          res.end(subject.toolCall(name, nested(20_000)))
        }, (s) =>
          Effect.gen(function*() {
            const error = yield* replyFailure(subject, s.url)
            assert.strictEqual(s.received.length, 1)
            assert.strictEqual(error._tag, "ProviderRejection", String(error))
            assert.strictEqual(error.reason, "MalformedStream")
            assert.deepStrictEqual(
              Classification.classify(error),
              Classification.Permanent({ reason: "MalformedStream" })
            )
            assert.include(error.message, JSON.stringify("lookup_<redacted>"))
            assert.include(error.message, "20000 levels")
            assert.include(error.message, `${ProviderOptions.maxNestingDepth}`)
            assert.notInclude(error.message, KEY)
          }))
      })

      it.effect("arguments nested exactly to the bound are a tool call; one level more is rejected", () =>
        withServer((_req, res, i) => {
          sse(res)
          const depth = ProviderOptions.maxNestingDepth + (i === 0 ? 0 : 1)
          res.end(subject.toolCall("deep", nestedObject(depth)))
        }, (s) =>
          Effect.gen(function*() {
            const p = yield* provider(subject, s.url)
            const atBound = yield* run(p)
            assert.isTrue(Either.isRight(atBound.result), String(Either.isLeft(atBound.result) && atBound.result.left))
            const [call] = summarize(atBound.events).toolCalls
            assert.strictEqual(JSON.stringify(call.arguments), nestedObject(ProviderOptions.maxNestingDepth))
            const over = yield* run(p)
            assert.isTrue(Either.isLeft(over.result))
            const error = (over.result as Either.Left<Json, void>).left
            assert.strictEqual(error.reason, "MalformedStream")
            assert.include(error.message, `${ProviderOptions.maxNestingDepth + 1} levels`)
            assert.isEmpty(summarize(over.events).toolCalls)
          })))

      it.effect("brackets inside strings do not count as nesting", () =>
        withServer((_req, res) => {
          sse(res)
          res.end(subject.toolCall("search", JSON.stringify({ q: `[{\\"${"[".repeat(1000)}` })))
        }, (s) =>
          Effect.gen(function*() {
            const { events, result } = yield* run(yield* provider(subject, s.url))
            assert.isTrue(Either.isRight(result), String(Either.isLeft(result) && result.left))
            assert.deepStrictEqual(summarize(events).toolCalls[0].arguments, { q: `[{\\"${"[".repeat(1000)}` })
          })))

      it.live("an event nested 20,000 levels where a field is read is a MalformedStream, not a crash", () =>
        withServer((_req, res) => {
          sse(res)
          const deep = nested(20_000)
          res.end(subject.partial + `event: message_start\ndata: {"type": ${deep}, "choices": ${deep}}\n\n`)
        }, (s) =>
          Effect.gen(function*() {
            const error = yield* replyFailure(subject, s.url)
            assert.strictEqual(s.received.length, 1)
            assert.strictEqual(error._tag, "ProviderRejection", String(error))
            assert.strictEqual(error.reason, "MalformedStream")
            assert.include(error.message, `nested deeper than ${ProviderOptions.maxNestingDepth} levels`)
          })))

      it.effect("a deep value in a field no protocol reads is ignored like any unknown field", () =>
        withServer((_req, res) => {
          sse(res)
          res.end(subject.success.replace("data: {", `data: {"x_deep": ${nested(20_000)}, `))
        }, (s) =>
          Effect.gen(function*() {
            const { events, result } = yield* run(yield* provider(subject, s.url))
            assert.isTrue(Either.isRight(result), String(Either.isLeft(result) && result.left))
            assert.strictEqual(summarize(events).text, "Hello")
          })))
    })
  }

  describe("anthropic: input given whole", () => {
    const anthropic = subjects.find((s) => s.name === "anthropic")!
    const event = (name: string, data: string) => `event: ${name}\ndata: ${data}\n\n`
    const deepInput = `{"a": ${nested(20_000)}}`
    const toolUse = `{"type":"tool_use","id":"t1","name":"n${KEY}","input":${deepInput}}`
    const bodies = {
      "in content_block_start": event("message_start", `{"type":"message_start","message":{"content":[]}}`) +
        event("content_block_start", `{"type":"content_block_start","index":0,"content_block":${toolUse}}`) +
        event("content_block_stop", `{"type":"content_block_stop","index":0}`) +
        event("message_stop", `{"type":"message_stop"}`),
      "in message_start": event("message_start", `{"type":"message_start","message":{"content":[${toolUse}]}}`) +
        event("message_stop", `{"type":"message_stop"}`)
    }
    for (const [where, body] of Object.entries(bodies)) {
      it.live(`a deep input ${where} is a permanent MalformedStream after one send`, () =>
        withServer((_req, res) => {
          sse(res)
          res.end(body)
        }, (s) =>
          Effect.gen(function*() {
            const error = yield* replyFailure(anthropic, s.url)
            assert.strictEqual(s.received.length, 1)
            assert.strictEqual(error._tag, "ProviderRejection", String(error))
            assert.strictEqual(error.reason, "MalformedStream")
            assert.include(error.message, JSON.stringify("n<redacted>"))
            assert.include(error.message, "20001 levels")
            assert.notInclude(error.message, KEY)
          })))
    }
  })
})

describe("maxReplyBytes", () => {
  const chat = subjects[0]

  it.effect("must be an integer >= 1", () =>
    Effect.gen(function*() {
      for (const bad of [0, -1, 1.5, Number.NaN, Number.POSITIVE_INFINITY]) {
        const exit = yield* Effect.exit(
          Effect.provideService(
            provider(chat, "http://127.0.0.1:9", { maxReplyBytes: bad }),
            HttpClient.HttpClient,
            fakeClient("")
          )
        )
        assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause), `${bad}`)
        const defect = Exit.isFailure(exit) ? Option.getOrThrow(Cause.dieOption(exit.cause)) : undefined
        assert.instanceOf(defect, RangeError)
        assert.include(String(defect), "maxReplyBytes")
      }
    }))

  it.effect("REPRISE_MAX_REPLY_BYTES is read by ProviderOptions.config, validated, with the default", () =>
    Effect.gen(function*() {
      const load = (env: Record<string, string>) =>
        Effect.withConfigProvider(
          ProviderOptions.config("openai-chat"),
          ConfigProvider.fromMap(new Map(Object.entries({ OPENAI_API_KEY: "sk-test", ...env })))
        )
      assert.strictEqual((yield* load({ REPRISE_MAX_REPLY_BYTES: "4096" })).maxReplyBytes, 4096)
      assert.strictEqual((yield* load({})).maxReplyBytes, ProviderOptions.defaultMaxReplyBytes)
      for (const bad of ["0", "-5", "1.5", "lots"]) {
        const error = yield* Effect.flip(load({ REPRISE_MAX_REPLY_BYTES: bad }))
        assert.isTrue(ConfigError.isConfigError(error), bad)
        assert.include(String(error), "REPRISE_MAX_REPLY_BYTES")
      }
    }))

  for (const subject of subjects) {
    describe(subject.name, () => {
      it.live("a longer reply is a permanent ReplyTooLarge after one send, and the request is aborted", () =>
        withServer((_req, res) => {
          sse(res)
          res.write(subject.partial)
          flood(res, subject.delta("x".repeat(100)))
        }, (s) =>
          Effect.gen(function*() {
            const error = yield* replyFailure(subject, s.url, { maxReplyBytes: 4096 })
            assert.strictEqual(s.received.length, 1)
            assert.strictEqual(error._tag, "ProviderRejection", String(error))
            assert.strictEqual(error.reason, "ReplyTooLarge")
            assert.deepStrictEqual(
              Classification.classify(error),
              Classification.Permanent({ reason: "ReplyTooLarge" })
            )
            assert.include(error.message, "4096 bytes")
            assert.isAbove(error.partialOutputChars, 0)
            yield* s.awaitAbort(0)
          })))

      it.live("a body of keepalives only is bounded too (no event, no progress)", () =>
        withServer((_req, res) => {
          sse(res)
          flood(res, ": keepalive\n\n".repeat(100))
        }, (s) =>
          Effect.gen(function*() {
            const error = yield* replyFailure(subject, s.url, { maxReplyBytes: 256 * 1024 })
            assert.strictEqual(s.received.length, 1)
            assert.strictEqual(error.reason, "ReplyTooLarge", String(error))
          })))

      it.effect("it counts body bytes, whatever the cut into reads: the exact length passes, one byte less fails", () =>
        Effect.gen(function*() {
          const bytes = new TextEncoder().encode(subject.success)
          // Chat reads a trailer (usage, [DONE]) after its terminal, and a failure there ends the reply normally: cut
          // its body inside the finish chunk instead.
          const tooSmall = subject.name === "openai-chat" ? subject.partial.length + 10 : bytes.length - 1
          for (const chunkSize of [1, 3, 97, bytes.length]) {
            const decode = (maxReplyBytes: number) =>
              Effect.flatMap(
                Effect.provideService(
                  subject.make({ apiKey: Redacted.make(KEY), baseUrl: "http://127.0.0.1:9", maxReplyBytes }),
                  HttpClient.HttpClient,
                  fakeClient(bytes, { chunkSize })
                ),
                run
              )
            const exact = yield* decode(bytes.length)
            assert.isTrue(
              Either.isRight(exact.result),
              `${chunkSize}: ${Either.isLeft(exact.result) && exact.result.left}`
            )
            assert.strictEqual(summarize(exact.events).text, "Hello")
            const short = yield* decode(tooSmall)
            assert.isTrue(Either.isLeft(short.result), `${chunkSize}`)
            assert.strictEqual((short.result as Either.Left<Json, void>).left.reason, "ReplyTooLarge")
          }
        }))
    })
  }

  it.live("an endless error body is read only in part: the status still classifies, with one send", () =>
    withServer((_req, res) => {
      res.writeHead(400, { "content-type": "application/json" })
      flood(res, "x".repeat(4096))
    }, (s) =>
      Effect.gen(function*() {
        const error = yield* replyFailure(chat, s.url)
        assert.strictEqual(s.received.length, 1)
        assert.strictEqual(error.reason, "BadRequest")
        assert.isBelow(error.message.length, 1000)
        yield* s.awaitAbort(0)
      })))
})
