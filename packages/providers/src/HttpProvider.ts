/**
 * A provider chosen by protocol name: what the CLI needs to turn `--provider`, `--base-url`, the key and the timeouts
 * into a `Provider` layer. Each protocol module (`OpenAiChat`, `OpenAiResponses`, `AnthropicMessages`,
 * `Subscription`) can also be used directly.
 *
 * A plan of routes (`Routes` of `@reprise/core`) is built from the same options: {@link route} makes one route, and
 * {@link layerRoutes} provides a whole plan over one undici client, with its primary's provider as the `Provider`.
 *
 * ```ts
 * const plan = HttpProvider.layerRoutes([
 *   { protocol: "openai-chat", model: "gpt-4.1", apiKey: Redacted.make(process.env.OPENAI_API_KEY!) },
 *   {
 *     protocol: "anthropic",
 *     model: "claude-sonnet-4-5",
 *     apiKey: Redacted.make(process.env.ANTHROPIC_API_KEY!),
 *     attempts: 1
 *   }
 * ])
 * ```
 *
 * @since 0.1.0
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as Provider from "@reprise/core/Provider"
import * as Routes from "@reprise/core/Routes"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as AnthropicMessages from "./AnthropicMessages.js"
import * as OpenAiChat from "./OpenAiChat.js"
import * as OpenAiResponses from "./OpenAiResponses.js"
import * as ProviderOptions from "./ProviderOptions.js"
import * as Subscription from "./Subscription.js"

/**
 * The options of any protocol; `anthropicVersion` and `defaultMaxTokens` are read by `anthropic` only, `streamUsage` by
 * `openai-chat` only.
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
 * The options of one route: the provider's, the model to ask it for, and the route's own settings (see
 * `Routes.Route`).
 *
 * @since 0.1.0
 * @category models
 */
export interface RouteOptions extends Options {
  /** The model the route asks for: it replaces the request's `model`. */
  readonly model: string
  /** Shown in notices, errors and spans; default `${protocol} ${model}`. */
  readonly name?: string | undefined
  /** Sends on this route before a transient failure leaves it, while a later route remains (default 2). */
  readonly attempts?: number | undefined
  /** The context window the route declares, in tokens (an overflow moves to a route that declares a larger one). */
  readonly contextWindow?: number | undefined
}

/**
 * One route of a plan, for {@link layerRoutes}: its protocol and its options.
 *
 * @since 0.1.0
 * @category models
 */
export interface RouteSpec extends RouteOptions {
  readonly protocol: ProviderOptions.Protocol
}

/**
 * A route over the provider of `protocol` (see {@link make}): its `endpoint` is the base URL without credentials, so
 * that routes to one model of one server share a circuit.
 *
 * @since 0.1.0
 * @category constructors
 */
export const route = (
  protocol: ProviderOptions.Protocol,
  options: RouteOptions
): Effect.Effect<Routes.Route, never, HttpClient.HttpClient> =>
  Effect.map(make(protocol, options), (provider) => ({
    provider,
    model: options.model,
    name: options.name,
    attempts: options.attempts,
    contextWindow: options.contextWindow
  }))

/**
 * A plan of the routes in order, the first the primary (`Routes.layer`), over one undici client for all of them (the
 * client of {@link layerUndici}, closed with the layer). Building it dies with a `RangeError` for options that `make`
 * or `Routes.make` refuse: a bug in the caller.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRoutes = (
  routes: readonly [RouteSpec, ...Array<RouteSpec>]
): Layer.Layer<Routes.Routes | Provider.Provider> => {
  const [primary, ...rest] = routes
  const plan = Effect.zipWith(
    route(primary.protocol, primary),
    Effect.forEach(rest, (spec) => route(spec.protocol, spec)),
    (first, others) => Routes.make(first, ...others)
  )
  return Layer.provide(Layer.unwrapEffect(Effect.map(plan, Routes.layer)), undici)
}

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
