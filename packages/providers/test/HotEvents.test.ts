/**
 * The guards of the hot events (`withGuard` in `internal/schema.ts`) against the schemas they stand in front of:
 * over generated JSON values shaped like what providers send, with every member sometimes of a wrong type and
 * members the schema does not declare, a guard takes only what the schema accepts and returns the value itself, on
 * which every member of the schema's value has the same value (the members the machines read), and the decoder built
 * on both (`decodeFast`) accepts and rejects exactly like the schema alone, with the same issue. The guards take every event of the recorded captures,
 * so the property is about the events that stream, not about values the guard leaves to the schema. The
 * constructors of the per-token events that the machines use in place of `Generation`'s are checked against them too.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Generation from "@reprise/core/Generation"
import * as AnthropicMessages from "@reprise/providers/AnthropicMessages"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import { Either, Equal, FastCheck as fc, Hash, ParseResult, Schema } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Events from "../src/internal/events.js"
import { decodeFast, guardOf } from "../src/internal/schema.js"

const root = Path.resolve(__dirname, "../../../../shared/fixtures/recorded")
const recorded = (dir: string): Array<unknown> =>
  Fs.readdirSync(Path.join(root, dir)).filter((f) => f.endsWith(".chunks.txt")).flatMap((f) =>
    Fs.readFileSync(Path.join(root, dir, f), "utf8").split("\n").filter((l) => l.trim().length > 0).map((l) =>
      JSON.parse(l) as unknown
    )
  )

// JSON values only: what JSON.parse can return
const json = fc.jsonValue().map((v) => JSON.parse(JSON.stringify(v)) as unknown)
/** A member's value: mostly of its type, sometimes null, sometimes anything at all. */
const member = <A>(valid: fc.Arbitrary<A>) =>
  fc.oneof(
    { weight: 8, arbitrary: valid },
    { weight: 1, arbitrary: fc.constant(null) },
    { weight: 1, arbitrary: json }
  )
const text = fc.oneof(fc.string(), fc.constantFrom("", "Hello", " world"))
const count = fc.oneof(fc.integer({ min: 0, max: 100_000 }), fc.double({ noNaN: true, noDefaultInfinity: true }))

const toolCall = fc.record({
  index: member(fc.integer({ min: 0, max: 3 })),
  id: member(text),
  type: member(fc.constant("function")),
  function: member(fc.record({ name: member(text), arguments: member(text) }, { requiredKeys: [] }))
}, { requiredKeys: [] })
const choice = fc.record({
  index: member(fc.integer({ min: 0, max: 2 })),
  delta: member(fc.record({
    role: member(fc.constant("assistant")),
    content: member(text),
    reasoning_content: member(text),
    reasoning: member(text),
    refusal: member(text),
    tool_calls: member(fc.array(member(toolCall), { maxLength: 3 }))
  }, { requiredKeys: [] })),
  logprobs: member(json),
  finish_reason: member(fc.constantFrom("stop", "length", "tool_calls"))
}, { requiredKeys: [] })
const chatChunk = fc.record({
  id: member(text),
  object: member(fc.constant("chat.completion.chunk")),
  choices: member(fc.array(member(choice), { maxLength: 3 })),
  usage: member(fc.record({
    prompt_tokens: member(count),
    completion_tokens: member(count),
    total: json,
    prompt_tokens_details: member(fc.record({
      cached_tokens: member(count),
      cache_write_tokens: member(count),
      audio_tokens: json
    }, { requiredKeys: [] }))
  }, { requiredKeys: [] })),
  error: member(fc.record({
    message: member(text),
    type: member(text),
    code: member(fc.oneof(text, fc.integer()))
  }, { requiredKeys: [] }))
}, { requiredKeys: [] })

const usage = fc.record({
  input_tokens: member(count),
  output_tokens: member(count),
  cache_creation_input_tokens: member(count),
  cache_read_input_tokens: member(count),
  service_tier: json
}, { requiredKeys: [] })
const block = fc.record({
  type: member(fc.constantFrom("text", "thinking", "redacted_thinking", "tool_use", "server_tool_use")),
  id: json,
  name: json,
  input: json,
  text: json,
  thinking: json,
  signature: json,
  data: json,
  citations: json
}, { requiredKeys: ["type"] })
const anthropicEvent = fc.record({
  type: member(
    fc.constantFrom(
      "message_start",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
      "ping",
      "error"
    )
  ),
  index: member(fc.integer({ min: 0, max: 5 })),
  message: member(fc.record({
    id: json,
    content: member(fc.array(member(block), { maxLength: 3 })),
    stop_reason: member(fc.constantFrom("end_turn", "tool_use", "max_tokens")),
    usage: member(usage)
  }, { requiredKeys: [] })),
  content_block: member(block),
  delta: member(fc.record({
    type: member(fc.constantFrom("text_delta", "input_json_delta", "thinking_delta", "signature_delta")),
    text: json,
    thinking: json,
    signature: json,
    partial_json: json,
    stop_reason: member(fc.constantFrom("end_turn", "tool_use")),
    stop_sequence: json
  }, { requiredKeys: [] })),
  usage: member(usage),
  error: member(fc.record({ type: member(text), message: member(text) }, { requiredKeys: [] }))
}, { requiredKeys: ["type"] })

/**
 * The schema's value agrees with the event a guard took on every member the schema declares: the schema's value has
 * only declared members, so each of its members, at every level, must be on the event with the same value (the guard
 * takes the event as it is, and the members the schema does not declare stay on it, unread).
 */
const agrees = (value: unknown, event: unknown, path = "event"): void => {
  if (Array.isArray(value)) {
    assert.isTrue(Array.isArray(event), `${path}: an array`)
    const list = event as ReadonlyArray<unknown>
    assert.strictEqual(list.length, value.length, `${path}: its length`)
    value.forEach((item, i) => agrees(item, list[i], `${path}[${i}]`))
  } else if (value !== null && typeof value === "object") {
    assert.isTrue(event !== null && typeof event === "object" && !Array.isArray(event), `${path}: an object`)
    for (const [key, member] of Object.entries(value)) {
      assert.isTrue(Object.hasOwn(event as object, key), `${path}.${key}: present`)
      agrees(member, (event as Record<string, unknown>)[key], `${path}.${key}`)
    }
  } else {
    assert.strictEqual(event, value, path)
  }
}

const suite = <A, I>(name: string, schema: Schema.Schema<A, I>, values: fc.Arbitrary<unknown>, dir: string) =>
  describe(`${name}: the guard in front of the schema`, () => {
    const guard = guardOf(schema)!
    const reference = Schema.decodeUnknownEither(schema)
    const fast = decodeFast(schema)
    const subject = { values, dir }

    it("has one", () => assert.isFunction(guard))

    it("the guard takes only what the schema accepts, the event itself, which agrees with the schema's value; the decoder agrees with the schema everywhere", () => {
      const counts = { taken: 0, left: 0, rejected: 0 }
      fc.assert(
        fc.property(fc.oneof({ weight: 9, arbitrary: subject.values }, { weight: 1, arbitrary: json }), (input) => {
          const expected = reference(input)
          const taken = guard(input)
          if (taken !== undefined) {
            counts.taken++
            assert.isTrue(Either.isRight(expected), `the guard took what the schema rejects: ${JSON.stringify(input)}`)
            assert.strictEqual(taken, input)
            if (Either.isRight(expected)) agrees(expected.right, taken)
          } else if (Either.isRight(expected)) {
            counts.left++
          } else {
            counts.rejected++
          }
          const actual = fast(input)
          const rejected = actual instanceof ParseResult.ParseError
          assert.strictEqual(rejected, Either.isLeft(expected), JSON.stringify(input))
          if (!rejected && Either.isRight(expected)) agrees(expected.right, actual)
          if (rejected && Either.isLeft(expected)) assert.strictEqual(String(actual), String(expected.left))
        }),
        { numRuns: 3000 }
      )
      // both verdicts occur often: the property says something about each, and about the guard's own checks
      assert.isAbove(counts.taken, 400, JSON.stringify(counts))
      assert.isAbove(counts.rejected, 400, JSON.stringify(counts))
    })

    it("takes every event of the recorded captures, as the schema decodes it", () => {
      const events = recorded(subject.dir)
      assert.isAbove(events.length, 50)
      for (const event of events) {
        const expected = reference(event)
        assert.isTrue(Either.isRight(expected), JSON.stringify(event))
        assert.strictEqual(guard(event), event)
        if (Either.isRight(expected)) agrees(expected.right, event)
      }
    })

    it("leaves a wrong type in a member the machine reads to the schema, which names it", () => {
      const wrong = subject.dir === "openai-chat"
        ? { choices: [{ index: 0, delta: { content: 5 } }] }
        : { type: "content_block_delta", index: 0, delta: { type: 7, text: "x" } }
      assert.isUndefined(guard(wrong))
      const result = fast(wrong)
      if (!(result instanceof ParseResult.ParseError)) return assert.fail("decoded a wrong type")
      assert.include(String(result), "Expected string, actual")
    })
  })

suite("OpenAiChat.ChatChunk", OpenAiChat.ChatChunk, chatChunk, "openai-chat")
suite("AnthropicMessages.MessagesEvent", AnthropicMessages.MessagesEvent, anthropicEvent, "anthropic")

describe("the constructors of the per-token events (internal/events.ts) build what Generation's do", () => {
  // the same in every way a consumer can tell: structural equality, deep equality (prototype included), the members
  // in their order, and the JSON
  const same = (fast: Generation.GenerationEvent, reference: Generation.GenerationEvent) => {
    assert.isTrue(Equal.equals(fast, reference))
    assert.deepStrictEqual(fast, reference)
    assert.strictEqual(Object.getPrototypeOf(fast), Object.getPrototypeOf(reference))
    assert.deepStrictEqual(Reflect.ownKeys(fast), Reflect.ownKeys(reference))
    assert.strictEqual(JSON.stringify(fast), JSON.stringify(reference))
    assert.strictEqual(Hash.hash(fast), Hash.hash(reference))
  }
  const text = fc.string({ unit: "binary" })
  const maybe = fc.option(text, { nil: undefined })

  it("textDelta and reasoningDelta", () =>
    fc.assert(fc.property(text, (t) => {
      same(Events.textDelta(t), Generation.TextDelta({ text: t }))
      same(Events.reasoningDelta(t), Generation.ReasoningDelta({ text: t }))
    })))

  it("toolCallDelta, with and without an id and a name", () =>
    fc.assert(fc.property(fc.nat(), maybe, maybe, text, (index, id, name, argumentsDelta) =>
      same(
        Events.toolCallDelta(index, id, name, argumentsDelta),
        Generation.ToolCallDelta({ index, id, name, argumentsDelta })
      ))))

  it("a fast event and a Data one are told apart by a different member", () =>
    assert.isFalse(Equal.equals(Events.textDelta("a"), Generation.TextDelta({ text: "b" }))))
})
