/**
 * Responses the client cannot read, written byte by byte by a raw node:net server on 127.0.0.1 and read by the real
 * undici client: a header section over undici's limit, an unexpected `100 Continue` or `101`, a compressed body
 * (undici does not decode one), bytes that are not HTTP/1.1. The same server would answer the same way to every
 * replay, so each is a permanent `ProviderRejection{reason: "ProtocolViolation"}` after exactly one send.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Classification from "@reprise/core/Classification"
import * as Policy from "@reprise/core/Policy"
import * as Recovery from "@reprise/core/Recovery"
import { Cause, Duration, Effect, Either, Exit, Option, Redacted } from "effect"
import type * as Net from "node:net"
import * as Zlib from "node:zlib"
import { KEY, request, run } from "./support/harness.js"
import { subjects } from "./support/protocols.js"
import type { Subject } from "./support/protocols.js"
import { rawServer } from "./support/raw.js"
import type { RawRequest } from "./support/raw.js"

type Json = any

const head = (status: string, headers: ReadonlyArray<string>) => `HTTP/1.1 ${status}\r\n${headers.join("\r\n")}\r\n\r\n`

const sseHead = (extra: ReadonlyArray<string> = []) =>
  head("200 OK", ["content-type: text/event-stream", "connection: close", ...extra])

/** Runs one reply with recovery (a 1 ms backoff, so that a replay would happen at once) and returns its failure. */
const replyFailure = (subject: Subject, url: string) =>
  Effect.gen(function*() {
    const provider = yield* subject.make({ apiKey: Redacted.make(KEY), baseUrl: subject.base(url) })
    const exit = yield* Recovery.run(provider.stream(request())).pipe(
      Effect.provide(Policy.layer({ backoffBase: Duration.millis(1), backoffMax: Duration.millis(1), jitter: false })),
      Effect.exit
    )
    if (Exit.isSuccess(exit)) return assert.fail("expected a failure")
    return Option.getOrThrow(Cause.failureOption(exit.cause)) as Json
  })

const cases: ReadonlyArray<{
  readonly name: string
  readonly write: (socket: Net.Socket, subject: Subject, request: RawRequest) => void
  readonly says: RegExp
}> = [
  {
    name: "a header section over undici's limit (UND_ERR_HEADERS_OVERFLOW)",
    write: (socket, subject) => socket.end(sseHead([`x-pad: ${"a".repeat(64 * 1024)}`]) + subject.success),
    says: /header/i
  },
  {
    name: "an unexpected 100 Continue",
    write: (socket, subject) => socket.end(head("100 Continue", []).slice(0, -2) + sseHead() + subject.success),
    says: /1xx|100/
  },
  {
    name: "an unrequested 101 Switching Protocols",
    write: (socket) => socket.end(head("101 Switching Protocols", ["connection: upgrade", "upgrade: websocket"])),
    says: /upgrade|101/i
  },
  {
    name: "a gzip body (undici does not decode one)",
    write: (socket, subject) => {
      const body = Zlib.gzipSync(subject.success)
      socket.end(Buffer.concat([Buffer.from(sseHead(["content-encoding: gzip"])), body]))
    },
    says: /gzip/
  },
  {
    name: "a br-compressed JSON body",
    write: (socket, subject) => {
      const body = Zlib.brotliCompressSync(subject.errorBody("invalid_request_error", "bad"))
      socket.end(Buffer.concat([
        Buffer.from(head("200 OK", ["content-type: application/json", "content-encoding: br", "connection: close"])),
        body
      ]))
    },
    says: /br/
  },
  {
    name: "bytes that are not HTTP/1.1 (a TLS alert: an http:// URL on a TLS port)",
    write: (socket) => socket.end(Buffer.from([0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x46])),
    says: /HTTP\/1\.1/
  }
]

for (const subject of subjects) {
  describe(`${subject.name}: a response the client cannot read`, () => {
    for (const c of cases) {
      it.live(`${c.name} is a permanent ProtocolViolation after exactly one send`, () =>
        Effect.scoped(Effect.gen(function*() {
          const s = yield* rawServer((socket, req) => c.write(socket, subject, req))
          const error = yield* replyFailure(subject, s.url)
          assert.strictEqual(s.received.length, 1)
          assert.strictEqual(error._tag, "ProviderRejection", String(error))
          assert.strictEqual(error.reason, "ProtocolViolation")
          assert.deepStrictEqual(
            Classification.classify(error),
            Classification.Permanent({ reason: "ProtocolViolation" })
          )
          assert.match(error.message, c.says)
          assert.notInclude(error.message, KEY)
        })).pipe(Effect.provide(NodeHttpClient.layerUndici)))
    }
  })
}

describe("at the edges: what stays a transport failure, what is released", () => {
  const chat = subjects[0]

  const cutShort: ReadonlyArray<readonly [string, ReadonlyArray<string>]> = [
    ["a chunked body cut short (the connection closed mid-chunk)", []],
    ["a chunked body cut short with connection: close (undici's \"Invalid EOF state\")", ["connection: close"]]
  ]
  for (const [name, extra] of cutShort) {
    it.effect(`${name} stays a retryable Reset`, () =>
      Effect.scoped(Effect.gen(function*() {
        const s = yield* rawServer((socket) =>
          socket.end(
            head("200 OK", ["content-type: text/event-stream", "transfer-encoding: chunked", ...extra]) +
              "ff\r\ndata: {"
          )
        )
        const provider = yield* chat.make({ apiKey: Redacted.make(KEY), baseUrl: chat.base(s.url) })
        const { result } = yield* run(provider)
        const error = Either.isLeft(result) ? result.left as Json : assert.fail("expected a failure")
        assert.strictEqual(error._tag, "TransportError", String(error))
        assert.strictEqual(error.reason, "Reset")
        assert.strictEqual(Classification.classify(error)._tag, "Retryable")
      })).pipe(Effect.provide(NodeHttpClient.layerUndici)))
  }

  it.live("an invalid chunk mid-body is a permanent ProtocolViolation, after the events before it", () =>
    Effect.scoped(Effect.gen(function*() {
      const s = yield* rawServer((socket) => {
        const event = chat.partial
        socket.end(
          head("200 OK", ["content-type: text/event-stream", "transfer-encoding: chunked"]) +
            `${Buffer.byteLength(event).toString(16)}\r\n${event}\r\nzz\r\n`
        )
      })
      const error = yield* replyFailure(chat, s.url)
      assert.strictEqual(s.received.length, 1)
      assert.strictEqual(error.reason, "ProtocolViolation", String(error))
      assert.strictEqual(error.status, 200)
      assert.match(error.message, /chunk size/)
      assert.strictEqual(error.partialOutputChars, 3)
    })).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.live("an encoded body is released unread: the client closes the connection the server keeps open", () =>
    Effect.scoped(Effect.gen(function*() {
      const s = yield* rawServer((socket) => {
        socket.write(Buffer.concat([Buffer.from(sseHead(["content-encoding: gzip"])), Zlib.gzipSync(chat.partial)]))
      })
      const error = yield* replyFailure(chat, s.url)
      assert.strictEqual(error.reason, "ProtocolViolation")
      yield* s.awaitClose(0)
    })).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.live("an encoded error body is not parsed: the status still classifies it (a 503 stays retryable)", () =>
    Effect.scoped(Effect.gen(function*() {
      const body = Zlib.gzipSync(chat.errorBody("server_error", "busy"))
      const s = yield* rawServer((socket) =>
        socket.end(Buffer.concat([
          Buffer.from(head("503 Service Unavailable", [
            "content-type: application/json",
            "content-encoding: gzip",
            `content-length: ${body.length}`
          ])),
          body
        ]))
      )
      const provider = yield* chat.make({ apiKey: Redacted.make(KEY), baseUrl: chat.base(s.url) })
      const { result } = yield* run(provider)
      const error = Either.isLeft(result) ? result.left as Json : assert.fail("expected a failure")
      assert.strictEqual(error._tag, "TransportError")
      assert.strictEqual(error.status, 503)
      assert.include(error.message, "the error body is gzip-encoded")
      assert.strictEqual(Classification.classify(error)._tag, "Retryable")
    })).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.live("content-encoding: identity is read as it is", () =>
    Effect.scoped(Effect.gen(function*() {
      const s = yield* rawServer((socket) => socket.end(sseHead(["content-encoding: identity"]) + chat.success))
      const provider = yield* chat.make({ apiKey: Redacted.make(KEY), baseUrl: chat.base(s.url) })
      const reply = yield* Recovery.run(provider.stream(request()))
      assert.strictEqual(reply.text, "Hello")
      assert.strictEqual(s.received.length, 1)
    })).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.live("the request asks for an unencoded body (accept-encoding: identity)", () =>
    Effect.scoped(Effect.gen(function*() {
      const s = yield* rawServer((socket) => socket.end(sseHead() + chat.success))
      const provider = yield* chat.make({ apiKey: Redacted.make(KEY), baseUrl: chat.base(s.url) })
      yield* Recovery.run(provider.stream(request()))
      assert.match(s.received[0].head, /\r\naccept-encoding: identity\r\n/i)
    })).pipe(Effect.provide(NodeHttpClient.layerUndici)))
})
