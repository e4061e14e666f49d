/**
 * The `openai-responses` protocol: the OpenAI Responses API (`POST {base}/responses`, `Authorization: Bearer`).
 *
 * - The terminal is `response.completed`, `response.done` or `response.incomplete` (an incomplete finish: `length`,
 *   or `content_filter` when that is the stated reason). Reading stops at the first terminal, so a body holding
 *   several responses back to back yields the first one.
 * - `response.failed` and `error` events are explicit failures classified by their code (`server_error` and
 *   `rate_limit_exceeded` are transient).
 * - Native `function_call` items are previewed as `ToolCallDelta`s but withheld until the terminal event: the
 *   terminal's `response.output` decides the reply's calls (the streamed items when it lists none). Arguments that
 *   are not complete JSON fail the stream with `TruncatedToolArguments`; the call is never emitted.
 * - Hosted tools (`mcp_call`, `shell_call`, `code_interpreter_call`, …) are neither tool calls nor text.
 * - `[DONE]` is not a terminal here (see `Subscription`).
 * - Capability fallback: when the model rejects `max_output_tokens` as unsupported, the request is sent once more
 *   without it.
 *
 * @since 0.1.0
 */
import * as HttpClient from "@effect/platform/HttpClient"
import type * as Generation from "@reprise/core/Generation"
import * as Provider from "@reprise/core/Provider"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Responses from "./internal/responses.js"
import * as ProviderOptions from "./ProviderOptions.js"

/**
 * @since 0.1.0
 * @category constants
 */
export const protocol = "openai-responses" as const

/**
 * @since 0.1.0
 * @category models
 */
export interface Options extends ProviderOptions.Options {}

/**
 * One Responses stream event, as far as reprise reads it. Unknown fields and event types are ignored.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ResponsesEvent = Responses.ResponsesEvent

/**
 * The JSON body of a request: `model`, `instructions` (the system text), `input` (messages, `function_call` and
 * `function_call_output` items), `tools`, `max_output_tokens` and `stream: true`.
 *
 * @since 0.1.0
 * @category request
 */
export const requestBody = (request: Generation.GenerationRequest): Record<string, unknown> =>
  Responses.requestBody(request)

/**
 * A Responses provider over the `HttpClient` in context (use `NodeHttpClient.layerUndici`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<Provider.Service, never, HttpClient.HttpClient> =>
  Effect.map(HttpClient.HttpClient, (client) => Responses.makeService(protocol, client, options, requestBody))

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<Provider.Provider, never, HttpClient.HttpClient> =>
  Layer.effect(Provider.Provider, make(options))

/**
 * The provider with its options from the environment: `OPENAI_API_KEY` (or `apiKeyEnv`), `OPENAI_BASE_URL` (default
 * `https://api.openai.com/v1`), `REPRISE_FIRST_BYTE_TIMEOUT`, `REPRISE_IDLE_TIMEOUT`,
 * `REPRISE_MAX_REPLY_BYTES`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  options?: ProviderOptions.ConfigOptions | undefined
): Layer.Layer<Provider.Provider, ConfigError.ConfigError, HttpClient.HttpClient> =>
  Layer.unwrapEffect(Effect.map(ProviderOptions.config(protocol, options), layer))
