/**
 * The relay's limits and what it never honours: downstream keys (constant-time, `Authorization: Bearer` or
 * `x-api-key`), the refusal to listen beyond loopback without them, the body limit (413), the concurrency limit (429
 * with `Retry-After: 1`), the routes of the configuration over the client's `model`, and the endpoints around the
 * generation ones.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Provider from "@reprise/core/Provider"
import * as Relay from "@reprise/server/Relay"
import { ConfigProvider, Effect, Exit, Layer, Stream } from "effect"
import * as AnthropicCodec from "../src/internal/codec/anthropic.js"
import * as ResponsesCodec from "../src/internal/codec/responses.js"
import { chat, content, post, relay, UPSTREAM_KEY } from "./support.js"

const healthy = { healthy: { reply: { text: "All good." }, then: { kind: "stream" as const } } }

const get = (url: string, headers: Record<string, string> = {}) =>
  Effect.promise(async () => {
    const response = await fetch(url, { headers })
    return { status: response.status, headers: response.headers, text: await response.text() }
  })

describe("Relay keys", () => {
  it.live(
    "with keys, a request without a valid one is a 401; Bearer and x-api-key both work",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({ models: healthy }, { keys: ["key-one", "key-two"] })
        const url = `${h.url}/v1/chat/completions`
        const none = yield* post(url, chat("healthy"))
        assert.strictEqual(none.status, 401)
        assert.strictEqual(JSON.parse(none.text).error.type, "authentication_error")
        assert.strictEqual((yield* post(url, chat("healthy"), { authorization: "Bearer key-on" })).status, 401)
        assert.strictEqual((yield* post(url, chat("healthy"), { authorization: "Bearer key-one" })).status, 200)
        assert.strictEqual((yield* post(url, chat("healthy"), { "x-api-key": "key-two" })).status, 200)
        // nothing was sent upstream for the refused ones
        assert.strictEqual((yield* h.sim.requestsFor("healthy")).length, 2)
        assert.strictEqual((yield* get(`${h.url}/v1/models`)).status, 401)
        assert.strictEqual((yield* get(`${h.url}/healthz`)).status, 200)
      }).pipe(Effect.scoped),
    20_000
  )

  const dummy = Layer.succeed(
    Provider.Provider,
    Provider.makeFromStream({ protocol: "openai-chat", stream: () => Stream.empty })
  )

  it.live("refuses to listen beyond loopback without keys, before it listens", () =>
    Effect.gen(function*() {
      const exit = yield* Layer.build(Relay.layer({ host: "0.0.0.0", port: 0, keys: [] }).pipe(Layer.provide(dummy)))
        .pipe(Effect.exit)
      assert.isTrue(Exit.isFailure(exit))
      if (Exit.isFailure(exit)) {
        const error = exit.cause._tag === "Fail" ? exit.cause.error : undefined
        assert.isTrue(Relay.isRelayError(error))
        assert.strictEqual((error as Relay.RelayError).reason, "KeysRequired")
      }
      // with keys it listens
      const ok = yield* Layer.build(Relay.layer({ host: "0.0.0.0", port: 0, keys: ["k"] }).pipe(Layer.provide(dummy)))
        .pipe(Effect.exit)
      assert.isTrue(Exit.isSuccess(ok))
    }).pipe(Effect.scoped), 20_000)
})

describe("Relay limits", () => {
  it.live("a body over the limit is a 413, and nothing is sent upstream", () =>
    Effect.gen(function*() {
      const h = yield* relay({ models: healthy }, { maxBodyBytes: 200 })
      const big = chat("healthy", { messages: [{ role: "user", content: "x".repeat(1000) }] })
      const r = yield* post(`${h.url}/v1/chat/completions`, big)
      assert.strictEqual(r.status, 413)
      assert.strictEqual(JSON.parse(r.text).error.code, "request_too_large")
      assert.strictEqual((yield* post(`${h.url}/v1/chat/completions`, chat("healthy"))).status, 200)
      assert.strictEqual((yield* h.sim.requestsFor("healthy")).length, 1)
    }).pipe(Effect.scoped), 20_000)

  it.live(
    "when every slot is taken, a 429 with Retry-After: 1; a slot is free again when its reply ends",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({
          models: {
            ...healthy,
            slow: { reply: { text: "a b c d e f" }, then: { kind: "drip", everyMs: 100, events: 1 } }
          }
        }, { maxConcurrent: 1 })
        const first = fetch(`${h.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify(chat("slow", { stream: true }))
        }).then((r) => r.text())
        for (let i = 0; i < 100 && (yield* h.sim.requestsFor("slow")).length === 0; i++) {
          yield* Effect.sleep("10 millis")
        }
        const busy = yield* post(`${h.url}/v1/chat/completions`, chat("healthy", { stream: true }))
        assert.strictEqual(busy.status, 429)
        assert.strictEqual(busy.headers.get("retry-after"), "1")
        assert.strictEqual(JSON.parse(busy.text).error.code, "relay_busy")
        assert.strictEqual(content(yield* Effect.promise(() => first)), "a b c d e f")
        assert.strictEqual((yield* post(`${h.url}/v1/chat/completions`, chat("healthy"))).status, 200)
        assert.strictEqual((yield* h.sim.requestsFor("healthy")).length, 1)
      }).pipe(Effect.scoped),
    20_000
  )

  it.live("a request the codec refuses is a 400 in OpenAI's shape, before any send", () =>
    Effect.gen(function*() {
      const h = yield* relay({ models: healthy })
      const url = `${h.url}/v1/chat/completions`
      const notJson = yield* post(url, "{not json")
      assert.strictEqual(notJson.status, 400)
      const noMessages = yield* post(url, { model: "healthy", messages: [] })
      assert.strictEqual(noMessages.status, 400)
      assert.match(JSON.parse(noMessages.text).error.message, /messages/)
      assert.strictEqual(JSON.parse(noMessages.text).error.param, "messages")
      const image = yield* post(url, {
        model: "healthy",
        messages: [{ role: "user", content: [{ type: "image_url", image_url: { url: "x" } }] }]
      })
      assert.strictEqual(image.status, 400)
      const badMode = yield* post(url, chat("healthy"), { "x-reprise-preview": "splice" })
      assert.strictEqual(badMode.status, 400)
      assert.strictEqual((yield* h.sim.requestsFor("healthy")).length, 0)
    }).pipe(Effect.scoped), 20_000)
})

describe("Relay routes", () => {
  it.live(
    "with a plan, the client's model goes to the primary route; a fallback's answer names the fallback's model",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({
          models: { ...healthy, down: { then: { kind: "status", status: 503 } } }
        }, { plan: ["configured-primary", "healthy"] })
        const r = yield* post(`${h.url}/v1/chat/completions`, chat("down"))
        assert.strictEqual(r.status, 200)
        const body = JSON.parse(r.text)
        assert.strictEqual(body.model, "healthy")
        assert.strictEqual(body.choices[0].message.content, "All good.")
        assert.strictEqual((yield* h.sim.requestsFor("configured-primary")).length, 0)
        assert.strictEqual((yield* h.sim.requestsFor("down")).length, 2)
        const streamed = yield* post(`${h.url}/v1/chat/completions`, chat("down", { stream: true }))
        for (const line of streamed.text.split("\n").filter((l) => l.startsWith("data: {"))) {
          assert.strictEqual(JSON.parse(line.slice(6)).model, "healthy")
        }
        const models = JSON.parse((yield* get(`${h.url}/v1/models`)).text)
        assert.deepStrictEqual(models.data.map((m: { id: string }) => m.id), ["configured-primary", "healthy"])
        assert.strictEqual(models.object, "list")
        assert.strictEqual(h.log[0]!.route, "openai-chat healthy")
      }).pipe(Effect.scoped),
    20_000
  )

  it.live(
    "without a plan, the client's model is asked for; the configured one is what /v1/models lists",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({ models: healthy }, { model: "healthy" })
        const r = yield* post(`${h.url}/v1/chat/completions`, chat("something-else"))
        assert.strictEqual(JSON.parse(r.text).model, "something-else")
        assert.strictEqual((yield* h.sim.requestsFor("something-else")).length, 1)
        const models = JSON.parse((yield* get(`${h.url}/v1/models`)).text)
        assert.deepStrictEqual(models.data.map((m: { id: string }) => m.id), ["healthy"])
      }).pipe(Effect.scoped),
    20_000
  )

  it.live(
    "the other endpoints: /healthz, the page, 404, and the protocols without a codec yet",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({ models: healthy })
        assert.deepStrictEqual(JSON.parse((yield* get(`${h.url}/healthz`)).text), { status: "ok" })
        const page = yield* get(`${h.url}/`)
        assert.strictEqual(page.status, 200)
        assert.match(page.headers.get("content-type") ?? "", /text\/html/)
        assert.strictEqual((yield* get(`${h.url}/v1/nothing`)).status, 404)
        const responses = yield* post(`${h.url}/v1/responses`, { model: "healthy", input: "hi" })
        if (ResponsesCodec.codec === undefined) assert.strictEqual(responses.status, 501)
        else assert.notStrictEqual(responses.status, 501)
        const messages = yield* post(`${h.url}/v1/messages`, {
          model: "healthy",
          max_tokens: 10,
          messages: [{ role: "user", content: "hi" }]
        })
        if (AnthropicCodec.codec === undefined) {
          assert.strictEqual(messages.status, 501)
          assert.strictEqual(JSON.parse(messages.text).type, "error")
        } else assert.notStrictEqual(messages.status, 501)
      }).pipe(Effect.scoped),
    20_000
  )
})

describe("Relay safety, more", () => {
  it.live("an upstream error that echoes the upstream key reaches the client without it", () =>
    Effect.gen(function*() {
      const h = yield* relay({
        models: {
          echo: {
            then: {
              kind: "status",
              status: 401,
              error: { code: "invalid_api_key", message: `Incorrect API key provided: ${UPSTREAM_KEY}.` }
            }
          }
        }
      })
      for (const mode of ["hold", "live", "reset"]) {
        const r = yield* post(`${h.url}/v1/chat/completions`, chat("echo", { stream: true }), {
          "x-reprise-preview": mode
        })
        assert.strictEqual(r.status, 502)
        assert.notInclude(r.text, UPSTREAM_KEY)
        assert.notInclude(r.text, UPSTREAM_KEY.slice(0, 12))
        assert.include(r.text, "<redacted>")
      }
    }).pipe(Effect.scoped), 20_000)

  it.live(
    "REPRISE_SERVE_KEYS: comma- or space-separated keys, read when no keys are given",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({ models: healthy }).pipe(
          Effect.withConfigProvider(ConfigProvider.fromMap(new Map([["REPRISE_SERVE_KEYS", "alpha, beta gamma"]])))
        )
        const url = `${h.url}/v1/chat/completions`
        assert.strictEqual((yield* post(url, chat("healthy"))).status, 401)
        for (const key of ["alpha", "beta", "gamma"]) {
          assert.strictEqual((yield* post(url, chat("healthy"), { authorization: `Bearer ${key}` })).status, 200)
        }
      }).pipe(Effect.scoped),
    20_000
  )

  it.live("a chunked body over the limit is a 413 too", () =>
    Effect.gen(function*() {
      const h = yield* relay({ models: healthy }, { maxBodyBytes: 1000 })
      const r = yield* Effect.promise(async () => {
        const payload = new TextEncoder().encode(JSON.stringify(chat("healthy", { padding: "x".repeat(5000) })))
        const body = new ReadableStream<Uint8Array>({
          start(controller) {
            for (let i = 0; i < payload.length; i += 500) controller.enqueue(payload.slice(i, i + 500))
            controller.close()
          }
        })
        const response = await fetch(`${h.url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body,
          duplex: "half"
        } as RequestInit)
        return { status: response.status, text: await response.text() }
      })
      assert.strictEqual(r.status, 413)
      assert.strictEqual((yield* h.sim.requestsFor("healthy")).length, 0)
    }).pipe(Effect.scoped), 20_000)

  it.live(
    "a body within the limit is served, chunked or of a declared length, up to the limit exactly",
    () =>
      Effect.gen(function*() {
        const payload = new TextEncoder().encode(
          JSON.stringify(chat("healthy", { stream: true, padding: "é".repeat(400) }))
        )
        const h = yield* relay({ models: healthy }, { maxBodyBytes: payload.length })
        const send = (chunked: boolean) =>
          Effect.promise(async () => {
            const body = chunked
              ? new ReadableStream<Uint8Array>({
                start(controller) {
                  // cut inside the two-byte characters too
                  for (let i = 0; i < payload.length; i += 99) controller.enqueue(payload.slice(i, i + 99))
                  controller.close()
                }
              })
              : payload
            const response = await fetch(`${h.url}/v1/chat/completions`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body,
              duplex: "half"
            } as RequestInit)
            return { status: response.status, text: await response.text() }
          })
        for (const chunked of [true, false]) {
          const r = yield* send(chunked)
          assert.strictEqual(r.status, 200)
          assert.strictEqual(content(r.text), "All good.")
        }
        assert.strictEqual((yield* h.sim.requestsFor("healthy")).length, 2)
      }).pipe(Effect.scoped),
    20_000
  )
})
