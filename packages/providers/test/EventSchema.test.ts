/**
 * The event schemas' building blocks (`internal/schema.ts`) accept and return exactly what `Schema.optional` and
 * `Schema.NullOr` do for JSON input, without their unions. Checked against those two over generated JSON values, and
 * through the three protocol schemas on the shapes providers send.
 */
import { assert, describe, it } from "@effect/vitest"
import * as AnthropicMessages from "@reprise/providers/AnthropicMessages"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import * as OpenAiResponses from "@reprise/providers/OpenAiResponses"
import { Either, FastCheck as fc, Schema } from "effect"
import { nullable, optional } from "../src/internal/schema.js"

const Inner = Schema.Struct({ a: Schema.optional(Schema.NullOr(Schema.Number)), b: Schema.optional(Schema.String) })
const Fast = Schema.Struct({
  n: optional(nullable(Schema.Number)),
  s: optional(nullable(Schema.String)),
  inner: optional(nullable(Inner)),
  list: optional(nullable(Schema.Array(Schema.String)))
})
const Reference = Schema.Struct({
  n: Schema.optional(Schema.NullOr(Schema.Number)),
  s: Schema.optional(Schema.NullOr(Schema.String)),
  inner: Schema.optional(Schema.NullOr(Inner)),
  list: Schema.optional(Schema.NullOr(Schema.Array(Schema.String)))
})

const fast = Schema.decodeUnknownEither(Fast)
const reference = Schema.decodeUnknownEither(Reference)

// JSON values only: what JSON.parse can return (no undefined anywhere)
const json = fc.jsonValue().map((v) => JSON.parse(JSON.stringify(v)) as unknown)
const member = fc.oneof(
  json,
  fc.constant(null),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.string(),
  fc.array(fc.string()),
  fc.record({ a: fc.oneof(fc.constant(null), fc.integer(), fc.string()), b: fc.oneof(fc.string(), fc.integer()) }, {
    requiredKeys: []
  })
)
const object = fc.record({ n: member, s: member, inner: member, list: member, extra: json }, { requiredKeys: [] })

describe("event schema building blocks", () => {
  it("accept, reject and decode exactly like Schema.optional(Schema.NullOr(...)) on JSON input", () => {
    fc.assert(
      fc.property(fc.oneof(object, json), (input) => {
        const a = fast(input)
        const b = reference(input)
        assert.strictEqual(a._tag, b._tag, JSON.stringify(input))
        if (Either.isRight(a) && Either.isRight(b)) assert.deepStrictEqual(a.right, b.right)
      }),
      { numRuns: 2000 }
    )
  })

  it("report a wrong value with its path and the expected type", () => {
    const result = fast({ inner: { a: "x" } })
    if (Either.isRight(result)) assert.fail("decoded a string as a number")
    const message = String(result.left)
    assert.include(message, `["inner"]`)
    assert.include(message, `["a"]`)
    assert.include(message, `Expected number, actual "x"`)
  })

  it("the protocol schemas take null and absent members as providers send them", () => {
    const chat = Schema.decodeUnknownEither(OpenAiChat.ChatChunk)
    assert.isTrue(Either.isRight(chat({ choices: [{ index: 0, delta: { content: null, tool_calls: null } }] })))
    assert.isTrue(Either.isRight(chat({ choices: null, usage: null, error: null })))
    assert.isTrue(Either.isRight(chat({})))
    assert.isTrue(Either.isLeft(chat({ choices: [{ delta: { content: 5 } }] })))

    const anthropic = Schema.decodeUnknownEither(AnthropicMessages.MessagesEvent)
    assert.isTrue(Either.isRight(anthropic({ type: "message_delta", delta: { stop_reason: null }, usage: null })))
    assert.isTrue(Either.isLeft(anthropic({ type: "content_block_start", index: "0" })))

    const responses = Schema.decodeUnknownEither(OpenAiResponses.ResponsesEvent)
    assert.isTrue(Either.isRight(responses({ type: "response.completed", response: { usage: null } })))
    assert.isTrue(Either.isLeft(responses({ type: 1 })))
  })
})
