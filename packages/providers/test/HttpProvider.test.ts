import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Provider from "@reprise/core/Provider"
import * as Routes from "@reprise/core/Routes"
import { ConfigError, ConfigProvider, Effect, Layer, Redacted } from "effect"
import * as HttpProvider from "../src/HttpProvider.js"
import * as ProviderOptions from "../src/ProviderOptions.js"

const fromEnv = (protocol: ProviderOptions.Protocol, env: Record<string, string>) =>
  HttpProvider.layerConfig(protocol).pipe(
    Layer.provide(NodeHttpClient.layerUndici),
    Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env)))))
  )

describe("HttpProvider", () => {
  for (const protocol of ProviderOptions.protocols) {
    const keyVariable = ProviderOptions.apiKeyVariable(protocol)
    it.effect(`layerConfig builds the ${protocol} provider from ${keyVariable}`, () =>
      Effect.gen(function*() {
        const provider = yield* Effect.provide(Provider.Provider, fromEnv(protocol, { [keyVariable]: "sk-test" }))
        assert.strictEqual(provider.protocol, protocol)
        const missing = yield* Effect.flip(Effect.provide(Provider.Provider, fromEnv(protocol, {})))
        assert.isTrue(ConfigError.isConfigError(missing))
        assert.include(String(missing), keyVariable)
      }))
  }

  describe("endpoint", () => {
    const endpointOf = (protocol: ProviderOptions.Protocol, baseUrl?: string) =>
      Effect.map(
        HttpProvider.make(protocol, { apiKey: Redacted.make("sk-test"), baseUrl }),
        (provider) => provider.endpoint
      ).pipe(Effect.provide(NodeHttpClient.layerUndici))

    it.effect("is the base URL, default or given, without trailing slashes", () =>
      Effect.gen(function*() {
        assert.strictEqual(yield* endpointOf("openai-chat"), "https://api.openai.com/v1")
        assert.strictEqual(yield* endpointOf("openai-responses"), "https://api.openai.com/v1")
        assert.strictEqual(yield* endpointOf("subscription"), "https://api.openai.com/v1")
        assert.strictEqual(yield* endpointOf("anthropic"), "https://api.anthropic.com")
        assert.strictEqual(yield* endpointOf("openai-chat", "http://127.0.0.1:8080/v1/"), "http://127.0.0.1:8080/v1")
      }))

    it.effect("has no credentials and no query", () =>
      Effect.gen(function*() {
        for (const protocol of ProviderOptions.protocols) {
          const endpoint = yield* endpointOf(
            protocol,
            "https://user:hunter2@gw.example.com:8443/openai/deployments/d?api-version=2024-10-21&key=abc"
          )
          assert.strictEqual(endpoint, "https://gw.example.com:8443/openai/deployments/d", protocol)
        }
      }))

    it.effect("never shows the key, even in the path", () =>
      Effect.gen(function*() {
        const provider = yield* HttpProvider.make("openai-chat", {
          apiKey: Redacted.make("sk-reprise-SECRET-7f3a9c0e1d2b"),
          baseUrl: "https://gw.example.com/sk-reprise-SECRET-7f3a9c0e1d2b/v1"
        }).pipe(Effect.provide(NodeHttpClient.layerUndici))
        assert.notInclude(provider.endpoint, "SECRET")
      }))
  })

  describe("routes", () => {
    it.effect("route builds a route of the protocol's provider, its model and its settings", () =>
      Effect.gen(function*() {
        const route = yield* HttpProvider.route("anthropic", {
          apiKey: Redacted.make("sk-test"),
          baseUrl: "https://user:pw@claude.example.com",
          model: "claude-sonnet-4-5",
          attempts: 1,
          contextWindow: 200_000
        }).pipe(Effect.provide(NodeHttpClient.layerUndici))
        assert.strictEqual(route.provider.protocol, "anthropic")
        assert.strictEqual(route.model, "claude-sonnet-4-5")
        assert.strictEqual(route.attempts, 1)
        assert.strictEqual(route.contextWindow, 200_000)
        assert.strictEqual(Routes.nameOf(route), "anthropic claude-sonnet-4-5")
        assert.strictEqual(Routes.key(route), "anthropic https://claude.example.com claude-sonnet-4-5")
      }))

    it.effect("layerRoutes provides the plan, in order, and its primary's provider as the Provider", () =>
      Effect.gen(function*() {
        const layer = HttpProvider.layerRoutes([
          { protocol: "openai-chat", apiKey: Redacted.make("sk-a"), model: "gpt-4.1", name: "primary" },
          {
            protocol: "anthropic",
            apiKey: Redacted.make("sk-b"),
            baseUrl: "https://claude.example.com/",
            model: "claude-sonnet-4-5",
            attempts: 3
          },
          { protocol: "openai-chat", apiKey: Redacted.make("sk-c"), model: "gpt-4.1-mini" }
        ])
        const { plan, provider } = yield* Effect.all({ plan: Routes.Routes, provider: Provider.Provider }).pipe(
          Effect.provide(layer)
        )
        assert.deepStrictEqual(plan.routes.map(Routes.nameOf), [
          "primary",
          "anthropic claude-sonnet-4-5",
          "openai-chat gpt-4.1-mini"
        ])
        assert.deepStrictEqual(plan.routes.map(Routes.key), [
          "openai-chat https://api.openai.com/v1 gpt-4.1",
          "anthropic https://claude.example.com claude-sonnet-4-5",
          "openai-chat https://api.openai.com/v1 gpt-4.1-mini"
        ])
        assert.deepStrictEqual(plan.routes.map((route) => route.attempts), [undefined, 3, undefined])
        assert.strictEqual(provider, plan.routes[0].provider)
        assert.deepStrictEqual(Routes.refOf(plan, 1), {
          index: 2,
          name: "anthropic claude-sonnet-4-5",
          model: "claude-sonnet-4-5"
        })
      }))

    it.effect("a route limit that is not a whole number of at least 1 is refused when the layer is built", () =>
      Effect.gen(function*() {
        const exit = yield* Effect.exit(
          Effect.provide(
            Routes.Routes,
            HttpProvider.layerRoutes([{
              protocol: "openai-chat",
              apiKey: Redacted.make("sk-a"),
              model: "m",
              attempts: 0
            }])
          )
        )
        assert.isTrue(exit._tag === "Failure" && String(exit.cause).includes("attempts must be a whole number >= 1"))
      }))
  })
})
