/**
 * A provider chosen by protocol name: what the CLI needs to turn `--provider`, `--base-url`, the key and the timeouts
 * into a `Provider` layer. Each protocol module (`OpenAiChat`, `OpenAiResponses`, `AnthropicMessages`,
 * `Subscription`) can also be used directly.
 *
 * @since 0.1.0
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as Provider from "@reprise/core/Provider"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as AnthropicMessages from "./AnthropicMessages.js"
import * as OpenAiChat from "./OpenAiChat.js"
import * as OpenAiResponses from "./OpenAiResponses.js"
import * as ProviderOptions from "./ProviderOptions.js"
import * as Subscription from "./Subscription.js"

/**
 * The options of any protocol; `anthropicVersion` and `defaultMaxTokens` are read by `anthropic` only.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options extends ProviderOptions.Options {
  readonly anthropicVersion?: string | undefined
  readonly defaultMaxTokens?: number | undefined
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  protocol: ProviderOptions.Protocol,
  options: Options
): Effect.Effect<Provider.Service, never, HttpClient.HttpClient> => {
  switch (protocol) {
    case "openai-chat":
      return OpenAiChat.make(options)
    case "openai-responses":
      return OpenAiResponses.make(options)
    case "anthropic":
      return AnthropicMessages.make(options)
    case "subscription":
      return Subscription.make(options)
  }
}

/**
 * The provider of `protocol` over the `HttpClient` in context.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  protocol: ProviderOptions.Protocol,
  options: Options
): Layer.Layer<Provider.Provider, never, HttpClient.HttpClient> =>
  Layer.effect(Provider.Provider, make(protocol, options))

/**
 * The provider of `protocol` over the undici client of `@effect/platform-node` (which never follows redirects), on an
 * undici `Agent` of its own, closed with the layer.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerUndici = (
  protocol: ProviderOptions.Protocol,
  options: Options
): Layer.Layer<Provider.Provider> => Layer.provide(layer(protocol, options), undici)

// The client `NodeHttpClient.layerUndici` builds (`makeUndici` over `makeDispatcher`, both public), without what that
// layer adds: its context merged into every request's, a provided region and a copy of the context per send. The
// client reads nothing from that context but undici options, and this layer has none.
const undici: Layer.Layer<HttpClient.HttpClient> = Layer.scoped(
  HttpClient.HttpClient,
  Effect.map(NodeHttpClient.makeDispatcher, NodeHttpClient.makeUndici)
)

/**
 * The provider of `protocol` with its options from the environment (see `ProviderOptions.config`).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  protocol: ProviderOptions.Protocol,
  options?: ProviderOptions.ConfigOptions | undefined
): Layer.Layer<Provider.Provider, ConfigError.ConfigError, HttpClient.HttpClient> =>
  Layer.unwrapEffect(Effect.map(ProviderOptions.config(protocol, options), (resolved) => layer(protocol, resolved)))
