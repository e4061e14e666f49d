/**
 * Responses function calls are withheld until the terminal event and reconciled with its `response.output`.
 */
import { HttpClient } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect, Redacted } from "effect"
import * as OpenAiResponses from "../src/OpenAiResponses.js"
import { fakeClient, KEY, run, summarize } from "./support/harness.js"

const data = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`

const streamedCall = [
  data({
    type: "response.output_item.added",
    output_index: 0,
    item: { type: "function_call", id: "fc_1", call_id: "call_1", name: "get_weather", arguments: "" }
  }),
  data({ type: "response.function_call_arguments.delta", output_index: 0, item_id: "fc_1", delta: "{\"city\":" }),
  data({ type: "response.function_call_arguments.delta", output_index: 0, item_id: "fc_1", delta: "\"Paris\"}" }),
  data({
    type: "response.output_item.done",
    output_index: 0,
    item: {
      type: "function_call",
      id: "fc_1",
      call_id: "call_1",
      name: "get_weather",
      arguments: "{\"city\":\"Paris\"}"
    }
  })
].join("")

const completed = (output: ReadonlyArray<unknown>) =>
  data({ type: "response.completed", response: { status: "completed", output } })

const decode = (body: string) =>
  Effect.gen(function*() {
    const provider = yield* OpenAiResponses.make({ apiKey: Redacted.make(KEY), baseUrl: "http://127.0.0.1:9/v1" }).pipe(
      Effect.provideService(HttpClient.HttpClient, fakeClient(body))
    )
    const outcome = yield* run(provider)
    assert.strictEqual(outcome.result._tag, "Right")
    return summarize(outcome.events)
  })

describe("OpenAiResponses reconciliation", () => {
  it.effect("the terminal's output decides the calls and their arguments", () =>
    Effect.gen(function*() {
      const summary = yield* decode(
        streamedCall + completed([
          {
            type: "function_call",
            id: "fc_1",
            call_id: "call_1",
            name: "get_weather",
            arguments: "{\"city\":\"Lyon\"}"
          }
        ])
      )
      assert.deepStrictEqual(summary.toolCalls, [{ id: "call_1", name: "get_weather", arguments: { city: "Lyon" } }])
    }))

  it.effect("a listed call without arguments keeps the arguments that were streamed for it", () =>
    Effect.gen(function*() {
      const summary = yield* decode(
        streamedCall + completed([
          { type: "function_call", id: "fc_1", call_id: "call_1", name: "get_weather" }
        ])
      )
      assert.deepStrictEqual(summary.toolCalls, [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }])
    }))

  it.effect("an empty output falls back to the streamed items", () =>
    Effect.gen(function*() {
      const summary = yield* decode(streamedCall + completed([]))
      assert.deepStrictEqual(summary.toolCalls, [{ id: "call_1", name: "get_weather", arguments: { city: "Paris" } }])
    }))
})
