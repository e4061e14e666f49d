/**
 * The official `openai` SDK (v6) as a downstream client of the relay in `hold` mode: streamed and whole, one whole
 * answer across faults the relay recovers from upstream, keepalive comments included; an upstream 400 surfaces as the
 * SDK's `BadRequestError` with the provider's code.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import OpenAI from "openai"
import { relay } from "./support.js"

const TEXT = "The relay held this answer until it was whole."
const reply = { text: TEXT }

const script = {
  models: {
    "cut-then-ok": { reply, steps: [{ kind: "reset" as const, afterTokens: 3 }], then: { kind: "stream" as const } },
    "limited-then-ok": {
      reply,
      steps: [{ kind: "status" as const, status: 429, headers: { "retry-after": "1" } }, {
        kind: "eof" as const,
        afterTokens: 4
      }],
      then: { kind: "stream" as const }
    },
    "refused": { reply, then: { kind: "status" as const, status: 400, error: { code: "context_length_exceeded" } } }
  }
}

const client = (url: string) => new OpenAI({ apiKey: "downstream-key", baseURL: `${url}/v1`, maxRetries: 0 })

describe("openai SDK against the relay (hold)", () => {
  for (const model of ["cut-then-ok", "limited-then-ok"]) {
    it.live(`${model}: streamed, one whole answer`, () =>
      Effect.gen(function*() {
        // keepalives every 100 ms, so the 1 s Retry-After wait sends some
        const h = yield* relay(script, { keepalive: "100 millis" })
        const result = yield* Effect.promise(async () => {
          const stream = await client(h.url).chat.completions.create({
            model,
            messages: [{ role: "user", content: "Say it." }],
            stream: true,
            stream_options: { include_usage: true }
          })
          let text = ""
          let finish: string | null = null
          let usage: unknown = undefined
          for await (const chunk of stream) {
            text += chunk.choices[0]?.delta?.content ?? ""
            finish = chunk.choices[0]?.finish_reason ?? finish
            if (chunk.usage) usage = chunk.usage
          }
          return { text, finish, usage }
        })
        assert.strictEqual(result.text, TEXT)
        assert.strictEqual(result.finish, "stop")
        assert.isDefined(result.usage)
        assert.strictEqual((yield* h.sim.requestsFor(model)).length, model === "cut-then-ok" ? 2 : 3)
      }).pipe(Effect.scoped), 20_000)

    it.live(`${model}: whole, one chat.completion (the SDK's key is the relay's)`, () =>
      Effect.gen(function*() {
        const h = yield* relay(script, { keys: ["downstream-key"] })
        const completion = yield* Effect.promise(() =>
          client(h.url).chat.completions.create({ model, messages: [{ role: "user", content: "Say it." }] })
        )
        assert.strictEqual(completion.choices[0]!.message.content, TEXT)
        assert.strictEqual(completion.model, model)
        assert.isAbove(completion.usage!.completion_tokens, 0)
      }).pipe(Effect.scoped), 20_000)
  }

  it.live("an upstream 400 is the SDK's BadRequestError with the provider's code", () =>
    Effect.gen(function*() {
      const h = yield* relay(script)
      const error = yield* Effect.promise(() =>
        client(h.url).chat.completions.create({
          model: "refused",
          messages: [{ role: "user", content: "Say it." }],
          stream: true
        }).then(() => undefined, (e: unknown) => e)
      )
      assert.instanceOf(error, OpenAI.BadRequestError)
      assert.strictEqual((error as InstanceType<typeof OpenAI.BadRequestError>).code, "context_length_exceeded")
    }).pipe(Effect.scoped), 20_000)

  it.live(
    "reset: the SDK yields the reprise events as chunks without choices, and does not throw on a rollback",
    () =>
      Effect.gen(function*() {
        const h = yield* relay(script)
        const seen = yield* Effect.promise(async () => {
          const stream = await new OpenAI({
            apiKey: "downstream-key",
            baseURL: `${h.url}/v1`,
            maxRetries: 0,
            defaultHeaders: { "x-reprise-preview": "reset" }
          }).chat.completions.create({
            model: "cut-then-ok",
            messages: [{ role: "user", content: "Say it." }],
            stream: true
          })
          const out: Array<{ choices: number; text: string }> = []
          for await (const chunk of stream) {
            out.push({ choices: chunk.choices.length, text: chunk.choices[0]?.delta?.content ?? "" })
          }
          return out
        })
        // attempt, rollback, attempt, commit: four chunks with no choice
        assert.strictEqual(seen.filter((c) => c.choices === 0).length, 4)
        // after the rollback (the second empty chunk), the text is the whole answer
        const rollback = seen.findIndex((c, i) => c.choices === 0 && seen.slice(0, i).some((d) => d.choices === 0))
        assert.strictEqual(seen.slice(rollback).map((c) => c.text).join(""), TEXT)
      }).pipe(Effect.scoped),
    20_000
  )
})
