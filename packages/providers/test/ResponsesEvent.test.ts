/**
 * The Responses events are typed: `ResponsesEvent` (built with `byType` of `internal/schema.ts`) accepts, rejects,
 * decodes and encodes exactly like the plain `Schema.Union` of the events the machine reads and of every other event,
 * over generated values; a read field of the wrong type fails the stream as a `MalformedStream` naming the event,
 * while an absent or `null` field is still read as missing.
 */
import { HttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import * as OpenAiResponses from "@reprise/providers/OpenAiResponses"
import { Effect, Either, FastCheck as fc, Redacted, Schema } from "effect"
import { fakeClient, KEY, run, summarize } from "./support/harness.js"

const readTypes = OpenAiResponses.readEvents.flatMap((event) => event.fields.type.literals as ReadonlyArray<string>)

const ReferenceItem = Schema.Union(
  OpenAiResponses.FunctionCallItem,
  Schema.Struct({ type: Schema.String.pipe(Schema.filter((type) => type !== "function_call")) })
)

const ReferenceEvent = Schema.Union(
  ...OpenAiResponses.readEvents,
  Schema.Struct({
    ...OpenAiResponses.OtherEvent.fields,
    type: Schema.String.pipe(Schema.filter((type) => !readTypes.includes(type)))
  })
)

// JSON values only: what JSON.parse can return
const json = fc.jsonValue().map((v) => JSON.parse(JSON.stringify(v)) as unknown)
const scalar = fc.oneof(
  fc.constant(null),
  fc.integer(),
  fc.boolean(),
  fc.string(),
  fc.constantFrom("function_call", "message", "completed", "failed", "incomplete", "content_filter")
)
const item = fc.record({
  type: fc.oneof(fc.constantFrom("function_call", "message", "tool_search_call"), scalar),
  id: scalar,
  call_id: scalar,
  name: scalar,
  arguments: fc.oneof(scalar, json)
}, { requiredKeys: [] })
const errorObject = fc.record({ code: scalar, type: scalar, message: scalar }, { requiredKeys: [] })
const response = fc.record({
  id: scalar,
  status: scalar,
  output: fc.oneof(fc.array(fc.oneof(item, scalar), { maxLength: 3 }), scalar),
  usage: fc.oneof(
    fc.record({
      input_tokens: scalar,
      output_tokens: scalar,
      input_tokens_details: fc.oneof(
        fc.record({ cached_tokens: scalar, cache_write_tokens: scalar }, { requiredKeys: [] }),
        scalar
      )
    }, { requiredKeys: [] }),
    scalar
  ),
  incomplete_details: fc.oneof(fc.record({ reason: scalar }, { requiredKeys: [] }), scalar),
  error: fc.oneof(errorObject, scalar)
}, { requiredKeys: [] })
const member = fc.oneof(scalar, json, item, errorObject, response)
const event = fc.record({
  type: fc.oneof(fc.constantFrom(...readTypes, "keepalive", "response.created"), scalar),
  delta: member,
  item_id: member,
  output_index: member,
  item: member,
  arguments: member,
  code: member,
  message: member,
  error: member,
  response: member,
  // every event's number, which a resume counts from: a number, or anything else
  sequence_number: fc.oneof(
    { weight: 14, arbitrary: fc.integer({ min: -1, max: 1_000_000 }) },
    { weight: 1, arbitrary: fc.double() },
    { weight: 1, arbitrary: member }
  ),
  extra: json
}, { requiredKeys: [] })

/** Checks that `fast` and `reference` agree on every value of `values`; returns how many each outcome had. */
const agree = <A, I>(
  fast: Schema.Schema<A, I>,
  reference: Schema.Schema<A, I>,
  values: fc.Arbitrary<unknown>
) => {
  const decodeFast = Schema.decodeUnknownEither(fast)
  const decodeReference = Schema.decodeUnknownEither(reference)
  const encodeFast = Schema.encodeEither(fast)
  const encodeReference = Schema.encodeEither(reference)
  const counts = { accepted: 0, rejected: 0 }
  fc.assert(
    fc.property(values, (input) => {
      const a = decodeFast(input)
      const b = decodeReference(input)
      assert.strictEqual(a._tag, b._tag, JSON.stringify(input))
      if (Either.isRight(a) && Either.isRight(b)) {
        counts.accepted++
        assert.deepStrictEqual(a.right, b.right)
        assert.deepStrictEqual(encodeFast(a.right), encodeReference(b.right))
      } else {
        counts.rejected++
      }
    }),
    { numRuns: 4000 }
  )
  return counts
}

describe("ResponsesEvent", () => {
  it("an output item decodes like Schema.Union(FunctionCallItem, any other type)", () => {
    const counts = agree(OpenAiResponses.OutputItem, ReferenceItem, fc.oneof(item, member))
    // both outcomes occur often: the property says something about each
    assert.isAbove(counts.accepted, 300)
    assert.isAbove(counts.rejected, 300)
  })

  it("an event decodes like Schema.Union(the events read, any other type)", () => {
    const counts = agree(OpenAiResponses.ResponsesEvent, ReferenceEvent, fc.oneof(event, json))
    assert.isAbove(counts.accepted, 300)
    assert.isAbove(counts.rejected, 300)
  })

  it("fields of an event that is not read are not checked, whatever their names", () => {
    const decode = Schema.decodeUnknownEither(OpenAiResponses.ResponsesEvent)
    // from the recordings: a hosted tool's `delta` is an object, a `tool_search_call`'s arguments too
    assert.isTrue(Either.isRight(decode({ type: "response.shell_call_output_content.delta", delta: { stdout: "" } })))
    assert.isTrue(Either.isRight(decode({
      type: "response.output_item.added",
      output_index: 0,
      item: { type: "tool_search_call", id: "ts_1", arguments: { query: "q" }, call_id: null }
    })))
    assert.isTrue(Either.isLeft(decode({ type: "response.output_text.delta", delta: { text: "x" } })))
  })
})

const data = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`
const completed = data({ type: "response.completed", response: { status: "completed", output: [] } })

const outcome = (body: string) =>
  Effect.gen(function*() {
    let sends = 0
    const client = fakeClient(body)
    const provider = yield* OpenAiResponses.make({ apiKey: Redacted.make(KEY), baseUrl: "http://127.0.0.1:9/v1" }).pipe(
      Effect.provideService(
        HttpClient.HttpClient,
        HttpClient.make((request) => Effect.suspend(() => (sends++, client.execute(request))))
      )
    )
    const result = yield* run(provider)
    return { ...result, sends }
  })

describe("openai-responses: typed events in the stream", () => {
  const wrong: Record<string, unknown> = {
    "response.output_text.delta": { type: "response.output_text.delta", delta: 5 },
    "response.output_item.added": {
      type: "response.output_item.added",
      output_index: 0,
      item: { type: "function_call", id: "fc_1", call_id: "call_1", name: ["get_weather"] }
    },
    "response.function_call_arguments.delta": {
      type: "response.function_call_arguments.delta",
      item_id: 7,
      delta: "{}"
    },
    "response.completed": { type: "response.completed", response: { status: "completed", output: {} } },
    "error": { type: "error", code: "server_error", message: { text: "busy" } }
  }
  for (const [type, payload] of Object.entries(wrong)) {
    it.effect(`a read field of the wrong type in ${type} is a MalformedStream naming the event, after one send`, () =>
      Effect.gen(function*() {
        const { result, sends } = yield* outcome(`event: ${type}\n${data(payload)}` + completed)
        assert.strictEqual(sends, 1)
        if (Either.isRight(result)) return assert.fail(`${type} with a wrong field decoded`)
        const error = result.left as { _tag: string; reason: string; message: string }
        assert.strictEqual(error._tag, "ProviderRejection")
        assert.strictEqual(error.reason, "MalformedStream")
        assert.include(error.message, `undecodable ${type} event`)
        assert.include(error.message, JSON.stringify(type))
      }))
  }

  it.effect("absent and null fields are read as missing, as before the events were typed", () =>
    Effect.gen(function*() {
      const { events, result } = yield* outcome(
        data({ type: "response.output_text.delta", delta: null }) +
          data({ type: "response.output_text.delta", delta: "Hi" }) +
          data({ type: "response.output_text.delta" }) +
          data({
            type: "response.output_item.added",
            output_index: null,
            item: { type: "function_call", id: null, call_id: "call_1", name: "f", arguments: null }
          }) +
          data({ type: "response.function_call_arguments.delta", item_id: "item_0", delta: "{}" }) +
          data({ type: "response.completed", response: { status: null, output: null, usage: null, error: null } })
      )
      assert.isTrue(Either.isRight(result), String(Either.isLeft(result) && result.left))
      const summary = summarize(events)
      assert.strictEqual(summary.text, "Hi")
      assert.deepStrictEqual(summary.toolCalls, [{ id: "call_1", name: "f", arguments: {} }])
      assert.deepStrictEqual(summary.finish, { reason: "tool_calls", providerReason: "completed" })
    }))
})
