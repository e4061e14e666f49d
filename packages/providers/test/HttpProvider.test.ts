import { NodeHttpClient } from "@effect/platform-node"
import { assert, describe, it } from "@effect/vitest"
import * as Provider from "@reprise/core/Provider"
import { ConfigError, ConfigProvider, Effect, Layer } from "effect"
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
})
