/**
 * stream-usage: Chat Completions asks for usage in the stream, end to end through the real provider layer, the undici
 * client and the loopback simulator, which sends the usage chunk only when a request asks for it. A server that
 * rejects `stream_options` gets the request once more without it (the capability fallback), and that reply commits
 * without usage; `streamUsage: false` never asks.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import { Effect, Option } from "effect"
import { committed, generate, previews, protocols, script, simulator } from "./support/e2e.js"

const text = "Usage is asked for, not assumed."
const usage = { inputTokens: 21, outputTokens: 7, cacheReadTokens: 16 }

/** A compatible server's answer to a parameter it does not know (Azure OpenAI's words). */
const rejectsStreamOptions = {
  kind: "status",
  status: 400,
  body: {
    error: {
      message: "Unrecognized request argument supplied: stream_options",
      type: "invalid_request_error",
      param: null,
      code: null
    }
  }
} as const

const bodies = (sim: Simulator.Service) =>
  Effect.map(sim.requestsTo("openai-chat"), (records) => records.map((r) => r.body as Record<string, unknown>))

describe("a script's usage, cache figures included, reaches the committed reply on every protocol", () => {
  const cached = { inputTokens: 1000, outputTokens: 9, cacheReadTokens: 600, cacheWriteTokens: 300 }
  for (const protocol of protocols) {
    it.live(protocol, () =>
      Effect.gen(function*() {
        yield* script(protocol, { reply: { text, usage: cached } })
        const outcome = yield* generate(protocol)
        assert.deepStrictEqual(Option.getOrUndefined(committed(outcome).usage), cached)
        const partial = previews(outcome.notes, 1).flatMap((e) => e._tag === "Usage" && e.partial === true ? [e] : [])
        // Anthropic's message_start reports the input counts before any content; the other protocols at the end only
        assert.deepStrictEqual(
          partial.map((e) => e.usage),
          protocol === "anthropic" ? [{ ...cached, outputTokens: 1 }] : []
        )
      }).pipe(Effect.provide(simulator)))
  }
})

describe("openai-chat: usage in the stream", () => {
  it.live("asked for by default: the reply commits with the usage the server sent", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* script("openai-chat", { reply: { text, usage } })
      const reply = committed(yield* generate("openai-chat"))
      assert.strictEqual(reply.text, text)
      assert.deepStrictEqual(Option.getOrUndefined(reply.usage), usage)
      const [body] = yield* bodies(sim)
      assert.deepStrictEqual(body.stream_options, { include_usage: true })
    }).pipe(Effect.provide(simulator)))

  it.live("a server that rejects stream_options: one resend without it, the reply commits without usage", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* script("openai-chat", { reply: { text, usage }, steps: [rejectsStreamOptions, { kind: "stream" }] })
      const reply = committed(yield* generate("openai-chat"))
      assert.strictEqual(reply.text, text)
      assert.strictEqual(reply.attempts, 1)
      assert.isTrue(Option.isNone(reply.usage), "no usage chunk was asked for, none came")
      const sent = yield* bodies(sim)
      assert.strictEqual(sent.length, 2)
      assert.deepStrictEqual(sent[0].stream_options, { include_usage: true })
      assert.isFalse("stream_options" in sent[1])
      // the resend is the same request but for stream_options
      const { stream_options: _, ...rest } = sent[0]
      assert.deepStrictEqual(sent[1], rest)
    }).pipe(Effect.provide(simulator)))

  it.live("streamUsage: false never asks: one send without stream_options, a reply without usage", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* script("openai-chat", { reply: { text, usage } })
      const reply = committed(yield* generate("openai-chat", { provider: { streamUsage: false } }))
      assert.strictEqual(reply.text, text)
      assert.isTrue(Option.isNone(reply.usage))
      const sent = yield* bodies(sim)
      assert.strictEqual(sent.length, 1)
      assert.isFalse("stream_options" in sent[0])
    }).pipe(Effect.provide(simulator)))
})
