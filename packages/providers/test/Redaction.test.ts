/**
 * The API key never appears in an error's message, `toString`, JSON, `inspect` output, a pretty-printed cause or a
 * log line, on every error path, even when the server echoes the key back in its error body, its headers, a
 * redirect location or an in-band error event.
 */
import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Provider from "@reprise/core/Provider"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as ProviderOptions from "@reprise/providers/ProviderOptions"
import { Cause, ConfigProvider, Effect, Either, Layer, Logger, LogLevel, Redacted } from "effect"
import { inspect } from "node:util"
import { closedPort, KEY, request, run, server } from "./support/harness.js"
import { subjects } from "./support/protocols.js"

type Scenario = (url: string) => {
  readonly respond: (res: import("node:http").ServerResponse, req: import("node:http").IncomingMessage) => void
  readonly options?: Record<string, unknown>
}

const echo = `invalid key ${KEY} provided`

const scenarios = (subject: (typeof subjects)[number]): Record<string, Scenario> => ({
  ...Object.fromEntries([400, 401, 403, 404, 408, 409, 413, 422, 429, 500, 501, 503, 529].map((status) => [
    `HTTP ${status}`,
    () => ({
      respond: (res) => {
        res.writeHead(status, { "content-type": "application/json", "x-echo": KEY, "retry-after": "1" })
        res.end(subject.errorBody("invalid_request_error", echo, KEY))
      }
    })
  ])),
  "non-JSON error body": () => ({
    respond: (res) => {
      res.writeHead(502, { "content-type": "text/html" })
      res.end(`<html>${KEY}</html>`)
    }
  }),
  "request id echoing the key (HTTP 503)": () => ({
    respond: (res) => {
      res.writeHead(503, { "content-type": "application/json", "x-request-id": `req_${KEY}` })
      res.end(subject.errorBody("server_error", "busy"))
    }
  }),
  "request id echoing the key (in-band error)": () => ({
    respond: (res) => {
      res.writeHead(200, { "content-type": "text/event-stream", "request-id": `req_${KEY}` })
      res.end(subject.partial + subject.inBandTransient)
    }
  }),
  "redirect": (url) => ({
    respond: (res) => {
      res.writeHead(307, { location: `${url}/steal?key=${KEY}` })
      res.end()
    }
  }),
  "in-band error": () => ({
    respond: (res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.end(
        subject.partial +
          subject.inBandTransient.replace(/"(Overloaded|The server had an error|Slow down)"/, JSON.stringify(echo))
      )
    }
  }),
  "in-band permanent error": () => ({
    respond: (res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.end(subject.partial + subject.inBandPermanent.replace(/"(Bad input|Invalid prompt)"/, JSON.stringify(echo)))
    }
  }),
  "undecodable event": () => ({
    respond: (res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.end(`data: {"broken": "${KEY}\n\n`)
    }
  }),
  "oversized event": () => ({
    options: { maxEventSize: 256 },
    respond: (res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.end(`data: ${JSON.stringify({ pad: KEY.repeat(50) })}\n\n`)
    }
  }),
  "premature EOF": () => ({
    respond: (res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.end(subject.partial)
    }
  }),
  "reset mid-body": () => ({
    respond: (res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.write(subject.partial, () => setTimeout(() => res.socket?.destroy(), 10))
    }
  }),
  "first-byte timeout": () => ({ options: { firstByteTimeout: "100 millis" }, respond: () => {} }),
  "idle timeout": () => ({
    options: { idleTimeout: "100 millis" },
    respond: (res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.write(subject.partial)
    }
  })
})

const assertClean = (label: string, value: unknown, logs: ReadonlyArray<string>) => {
  const views: Record<string, string> = {
    message: String((value as any)?.message),
    toString: String(value),
    json: JSON.stringify(value),
    inspect: inspect(value, { depth: 20 }),
    cause: Cause.pretty(Cause.fail(value)),
    logs: logs.join("\n")
  }
  for (const [view, text] of Object.entries(views)) {
    assert.notInclude(text, KEY, `${label}: the key leaked through ${view}`)
  }
}

for (const subject of subjects) {
  describe(`${subject.name}: the key is never shown`, () => {
    for (const [label, scenario] of Object.entries(scenarios(subject))) {
      it.live(label, () => {
        const logs: Array<string> = []
        const logger = Logger.make(({ message, cause }) => {
          logs.push(inspect(message, { depth: 20 }), Cause.pretty(cause))
        })
        return Effect.gen(function*() {
          let current: ReturnType<Scenario> | undefined
          const s = yield* server((req, res) => current!.respond(res, req))
          current = scenario(s.url)
          const provider = yield* subject.make({
            apiKey: Redacted.make(KEY),
            baseUrl: subject.base(s.url),
            ...current.options
          })
          const { result } = yield* run(provider)
          assert.isTrue(Either.isLeft(result), `${label} must fail`)
          const error = (result as Either.Left<unknown, void>).left
          yield* Effect.logError("provider failed", error)
          yield* Effect.logDebug(error)
          assertClean(label, error, logs)
        }).pipe(
          Effect.scoped,
          Effect.provide(NodeHttpClient.layerUndici),
          Effect.provide(Logger.replace(Logger.defaultLogger, logger)),
          Logger.withMinimumLogLevel(LogLevel.All)
        )
      })
    }

    it.effect("connection refused", () =>
      Effect.gen(function*() {
        const port = yield* closedPort
        const provider = yield* subject.make({ apiKey: Redacted.make(KEY), baseUrl: `http://127.0.0.1:${port}` })
        const { result } = yield* run(provider)
        assert.isTrue(Either.isLeft(result))
        assertClean("connection refused", (result as Either.Left<unknown, void>).left, [])
      }).pipe(Effect.provide(NodeHttpClient.layerUndici)))
  })
}

describe("options and configuration", () => {
  it("options, the provider service and its layer do not show the key", () => {
    const options = { apiKey: Redacted.make(KEY), baseUrl: "http://127.0.0.1:9" }
    for (const text of [inspect(options, { depth: 10 }), JSON.stringify(options), String(options.apiKey)]) {
      assert.notInclude(text, KEY)
    }
  })

  it.effect("layerConfig reads the key and base URL from the environment", () =>
    Effect.gen(function*() {
      const s = yield* server((_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.end(subjects[0].success)
      })
      const env = ConfigProvider.fromMap(new Map([["OPENAI_API_KEY", KEY], ["OPENAI_BASE_URL", `${s.url}/v1/`]]))
      const provider = yield* Provider.Provider.pipe(
        Effect.provide(HttpProvider.layerConfig("openai-chat").pipe(Layer.provide(Layer.setConfigProvider(env))))
      )
      assert.strictEqual(provider.protocol, "openai-chat")
      const { result } = yield* run(provider)
      assert.isTrue(Either.isRight(result))
      assert.strictEqual(s.received[0].url, "/v1/chat/completions")
      assert.strictEqual(s.received[0].headers.authorization, `Bearer ${KEY}`)
    }).pipe(Effect.scoped, Effect.provide(NodeHttpClient.layerUndici)))

  it.effect("a missing key is a ConfigError naming the variable, whatever the base URL", () =>
    Effect.gen(function*() {
      for (const protocol of ProviderOptions.protocols) {
        const env = ConfigProvider.fromMap(new Map([["OPENAI_BASE_URL", "http://127.0.0.1:9"]]))
        const error = yield* Provider.Provider.pipe(
          Effect.provide(HttpProvider.layerConfig(protocol).pipe(Layer.provide(Layer.setConfigProvider(env)))),
          Effect.flip
        )
        assert.include(String(error), ProviderOptions.apiKeyVariable(protocol))
      }
      const custom = yield* Provider.Provider.pipe(
        Effect.provide(
          HttpProvider.layerConfig("anthropic", { apiKeyEnv: "MY_KEY" }).pipe(
            Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map())))
          )
        ),
        Effect.flip
      )
      assert.include(String(custom), "MY_KEY")
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it.effect("a base URL that is not http(s) is a ConfigError", () =>
    Effect.gen(function*() {
      const env = ConfigProvider.fromMap(new Map([["ANTHROPIC_API_KEY", KEY], ["ANTHROPIC_BASE_URL", "ftp://x"]]))
      const error = yield* Provider.Provider.pipe(
        Effect.provide(HttpProvider.layerConfig("anthropic").pipe(Layer.provide(Layer.setConfigProvider(env)))),
        Effect.flip
      )
      assert.include(String(error), "ANTHROPIC_BASE_URL")
      assert.notInclude(String(error), KEY)
    }).pipe(Effect.provide(NodeHttpClient.layerUndici)))

  it("defaults", () => {
    assert.strictEqual(ProviderOptions.defaultBaseUrl("openai-chat"), "https://api.openai.com/v1")
    assert.strictEqual(ProviderOptions.defaultBaseUrl("anthropic"), "https://api.anthropic.com")
    assert.strictEqual(ProviderOptions.defaultMaxEventSize, 1024 * 1024)
  })
})
