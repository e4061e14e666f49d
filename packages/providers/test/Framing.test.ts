/**
 * SSE framing does not depend on how the body's bytes are cut into reads. The body pipeline decodes UTF-8 line by line
 * and feeds the parser of `@effect/experimental/Sse` one line at a time (see `internal/sse.ts`); these tests pin the
 * cases where that could differ from decoding the whole body first: a character cut between two reads, a BOM, CRLF
 * and CR-only line endings, invalid bytes, and a line still open at the end of a read.
 */
import { HttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import { Effect, Either, Redacted } from "effect"
import { fakeClient, KEY, run, summarize } from "./support/harness.js"

const options = { apiKey: Redacted.make(KEY), baseUrl: "http://127.0.0.1:9" }

const chunk = (content: string, finish: string | null = null) =>
  JSON.stringify({ choices: [{ index: 0, delta: { content }, finish_reason: finish }] })

// ASCII, Latin-1, a 3-byte character, a 4-byte character (a surrogate pair in UTF-16) and CJK
const pieces = ["plain ", "café ", "€ ", "🙂 ", "漢字"]
const text = pieces.join("")

const body = (newline: string) =>
  [...pieces.map((piece) => `data: ${chunk(piece)}`), `data: ${chunk("", "stop")}`, "data: [DONE]"]
    .map((line) => `${line}${newline}${newline}`)
    .join("")

const decode = (
  bytes: Uint8Array,
  chunkSize: number,
  client = fakeClient(bytes, { chunkSize }),
  extra: { readonly maxEventSize?: number } = {}
) =>
  Effect.flatMap(Effect.provideService(OpenAiChat.make({ ...options, ...extra }), HttpClient.HttpClient, client), run)

const encode = (s: string) => new TextEncoder().encode(s)

const expectText = (bytes: Uint8Array, expected: string) =>
  Effect.gen(function*() {
    // every cut from one byte at a time to one read for the whole body
    for (const chunkSize of [1, 2, 3, 5, 8, 13, 64, bytes.length]) {
      const { events, result } = yield* decode(bytes, chunkSize)
      if (Either.isLeft(result)) assert.fail(`chunks of ${chunkSize}: ${String(result.left)}`)
      const summary = summarize(events)
      assert.strictEqual(summary.text, expected, `chunks of ${chunkSize}`)
      assert.deepStrictEqual(summary.finish, { reason: "stop", providerReason: "stop" }, `chunks of ${chunkSize}`)
    }
  })

describe("SSE framing over any cut of the bytes", () => {
  it.effect("LF: multi-byte characters cut between reads are decoded whole", () => expectText(encode(body("\n")), text))

  it.effect("CRLF line endings", () => expectText(encode(body("\r\n")), text))

  it.effect("CR-only line endings", () => expectText(encode(body("\r")), text))

  it.effect("a leading UTF-8 BOM is stripped", () => {
    const bytes = encode(body("\n"))
    const withBom = new Uint8Array(bytes.length + 3)
    withBom.set([0xef, 0xbb, 0xbf])
    withBom.set(bytes, 3)
    return expectText(withBom, text)
  })

  it.effect("an invalid byte inside a string decodes to U+FFFD, as TextDecoder does", () => {
    const [before, after] = body("\n").split("café")
    const invalid = new Uint8Array([...encode(`${before}caf`), 0xff, ...encode(after)])
    return expectText(invalid, text.replace("café", "caf\uFFFD"))
  })

  for (const newline of ["\n", "\r\n", "\r"]) {
    it.effect(`${JSON.stringify(newline)}: events are read as they complete, not when the body ends`, () =>
      Effect.gen(function*() {
        // the body never ends: the reply completes only if each event is handled as soon as its blank line arrives
        // (a line still open at the end of a read must not wait for a later "\n")
        const bytes = encode(body(newline))
        for (const chunkSize of [1, 7, bytes.length]) {
          const { events, result } = yield* decode(bytes, chunkSize, fakeClient(bytes, { chunkSize, staysOpen: true }))
          assert.isTrue(Either.isRight(result), `chunks of ${chunkSize}: ${String(result)}`)
          assert.strictEqual(summarize(events).text, text)
        }
      }))
  }

  it.effect("a line that never ends fails as oversized once it passes maxEventSize, instead of growing forever", () =>
    Effect.gen(function*() {
      // one event, then a data line whose newline never comes, on a body that never ends
      const bytes = encode(`data: ${chunk("ok")}\n\ndata: "${"x".repeat(4096)}`)
      for (const chunkSize of [1, 100, bytes.length]) {
        const { events, result } = yield* decode(bytes, chunkSize, fakeClient(bytes, { chunkSize, staysOpen: true }), {
          maxEventSize: 1024
        })
        if (Either.isRight(result)) assert.fail(`chunks of ${chunkSize}: the stream completed`)
        const failure = result.left as { readonly _tag: string; readonly reason: string }
        assert.strictEqual(failure._tag, "ProviderRejection", `chunks of ${chunkSize}`)
        assert.strictEqual(failure.reason, "MalformedStream", `chunks of ${chunkSize}`)
        // the event before the oversized line was delivered first
        assert.strictEqual(summarize(events).text, "ok", `chunks of ${chunkSize}`)
      }
    }))
})
