/**
 * The `subscription` protocol: ChatGPT-style subscription backends that speak the Responses API
 * (`POST {base}/responses`, `Authorization: Bearer`) but may end a stream with `data: [DONE]` instead of a terminal
 * response event.
 *
 * Everything of `OpenAiResponses` holds, plus: `[DONE]` is accepted as a terminal. The withheld function calls are
 * then reconciled with the streamed items (there is no terminal output to compare with), and the finish reason is
 * `tool_calls` when there are calls, `stop` otherwise, with provider reason `[DONE]`. The request is sent with
 * `store: false`, which these backends require. With nothing stored, a reasoning item can go back only with its
 * `encrypted_content`: an item the backend sent with it is sent back, one without it is not (its id alone could not be
 * resolved; see `OpenAiResponses.reasoningItems`). `include: ["reasoning.encrypted_content"]` is not sent: models
 * without reasoning refuse it ("Encrypted content is not supported with this model"). Reasoning parts are tagged
 * `subscription` and go back only to this protocol. Its `tool_choice` and `text.format` (for a `toolChoice` and a
 * `responseFormat`) are those of `OpenAiResponses`.
 *
 * A variant of `OpenAiResponses` (`OpenAiResponses.makeVariant`): the state machine and the event schemas are that
 * module's, and the variant says that `[DONE]` ends a reply (`doneIsTerminal`).
 *
 * @since 0.1.0
 */
import type * as HttpClient from "@effect/platform/HttpClient"
import type * as Generation from "@reprise/core/Generation"
import * as Provider from "@reprise/core/Provider"
import type * as ConfigError from "effect/ConfigError"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as OpenAiResponses from "./OpenAiResponses.js"
import * as ProviderOptions from "./ProviderOptions.js"

/**
 * @since 0.1.0
 * @category constants
 */
export const protocol = "subscription" as const

/**
 * @since 0.1.0
 * @category models
 */
export interface Options extends ProviderOptions.Options {}

/**
 * The Responses body (`tool_choice` and `text.format` included; the `subscription` reasoning parts of assistant
 * messages as `reasoning` items) with `store: false`.
 *
 * @since 0.1.0
 * @category request
 */
export const requestBody = (request: Generation.GenerationRequest): Record<string, unknown> => ({
  ...OpenAiResponses.requestBody(request, protocol),
  store: false
})

const variant = OpenAiResponses.makeVariant({ protocol, requestBody, doneIsTerminal: true })

/**
 * A subscription provider over the `HttpClient` in context (use `NodeHttpClient.layerUndici`).
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<Provider.Service, never, HttpClient.HttpClient> =>
  variant(options)

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
