/**
 * The options every HTTP provider shares: where to send (`baseUrl`), the key (`Redacted`, never printed), the
 * first-byte and idle timeouts and the bound on one SSE event, plus the environment they are read from by
 * `layerConfig`.
 *
 * | protocol | key | base URL (default) |
 * |---|---|---|
 * | `openai-chat`, `openai-responses`, `subscription` | `OPENAI_API_KEY` | `OPENAI_BASE_URL` (`https://api.openai.com/v1`) |
 * | `anthropic` | `ANTHROPIC_API_KEY` | `ANTHROPIC_BASE_URL` (`https://api.anthropic.com`) |
 *
 * Timeouts come from `REPRISE_FIRST_BYTE_TIMEOUT` and `REPRISE_IDLE_TIMEOUT` (milliseconds, default 60000 and
 * 120000).
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import type * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"

/**
 * The four wire protocols.
 *
 * @since 0.1.0
 * @category models
 */
export const Protocol = Schema.Literal("openai-chat", "openai-responses", "anthropic", "subscription")

/**
 * @since 0.1.0
 * @category models
 */
export type Protocol = typeof Protocol.Type

/**
 * Every protocol, in the order of the CLI's help text.
 *
 * @since 0.1.0
 * @category constants
 */
export const protocols: ReadonlyArray<Protocol> = Protocol.literals

/**
 * Options of every HTTP provider.
 *
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The API key. It is sent as a header and never appears in an error, a log line or an inspected value. */
  readonly apiKey: Redacted.Redacted<string>
  /**
   * The base URL. OpenAI-style URLs include the version (`https://api.openai.com/v1`); Anthropic's does not
   * (`https://api.anthropic.com`). Trailing slashes are ignored.
   */
  readonly baseUrl?: string | undefined
  /** Time allowed from the send to the response headers. Default 60 seconds. */
  readonly firstByteTimeout?: Duration.DurationInput | undefined
  /**
   * Time allowed between two events that make progress. SSE comments (keepalives) and Anthropic `ping` events do
   * not count. Default 120 seconds.
   */
  readonly idleTimeout?: Duration.DurationInput | undefined
  /** The largest pending SSE event, in string code units. Default 1 MiB. */
  readonly maxEventSize?: number | undefined
  /**
   * The largest response body one attempt may read, in bytes (what crossed the socket, after any content
   * decoding). A longer body ends the attempt with a permanent `ProviderRejection{reason: "ReplyTooLarge"}`: a
   * replay would be as long. Default {@link defaultMaxReplyBytes}.
   */
  readonly maxReplyBytes?: number | undefined
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultFirstByteTimeout: Duration.Duration = Duration.seconds(60)

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultIdleTimeout: Duration.Duration = Duration.seconds(120)

/**
 * 1 MiB.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultMaxEventSize: number = 1024 * 1024

/**
 * 64 MiB.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultMaxReplyBytes: number = 64 * 1024 * 1024

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultOpenAiBaseUrl = "https://api.openai.com/v1"

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultAnthropicBaseUrl = "https://api.anthropic.com"

/**
 * The public endpoint a protocol talks to when no base URL is given.
 *
 * @since 0.1.0
 * @category constants
 */
export const defaultBaseUrl = (protocol: Protocol): string =>
  protocol === "anthropic" ? defaultAnthropicBaseUrl : defaultOpenAiBaseUrl

/**
 * The environment variable holding the key of a protocol.
 *
 * @since 0.1.0
 * @category config
 */
export const apiKeyVariable = (protocol: Protocol): string =>
  protocol === "anthropic" ? "ANTHROPIC_API_KEY" : "OPENAI_API_KEY"

/**
 * The environment variable holding the base URL of a protocol.
 *
 * @since 0.1.0
 * @category config
 */
export const baseUrlVariable = (protocol: Protocol): string =>
  protocol === "anthropic" ? "ANTHROPIC_BASE_URL" : "OPENAI_BASE_URL"

/**
 * @since 0.1.0
 * @category config
 */
export interface ConfigOptions {
  /** Read the key from this variable instead of the protocol's default (`--api-key-env`). */
  readonly apiKeyEnv?: string | undefined
}

/**
 * Whether a string is an absolute `http:` or `https:` URL.
 *
 * @since 0.1.0
 * @category validation
 */
export const isHttpUrl = (s: string): boolean => {
  try {
    const url = new URL(s)
    return url.protocol === "http:" || url.protocol === "https:"
  } catch {
    return false
  }
}

const millis = (name: string, fallback: Duration.Duration): Config.Config<Duration.Duration> =>
  Config.integer(name).pipe(
    Config.validate({ message: "must be a whole number of milliseconds > 0", validation: (n) => n > 0 }),
    Config.map(Duration.millis),
    Config.withDefault(fallback)
  )

/**
 * The base URL of a protocol from the environment: its variable when set (it must be an http(s) URL), otherwise
 * the public endpoint.
 *
 * @since 0.1.0
 * @category config
 */
export const baseUrlConfig = (protocol: Protocol): Config.Config<string> =>
  Config.string(baseUrlVariable(protocol)).pipe(
    Config.validate({ message: "must be an http(s) URL", validation: isHttpUrl }),
    Config.withDefault(defaultBaseUrl(protocol))
  )

/**
 * The options of a protocol from the environment. A missing key is a `ConfigError` naming the variable, whatever the
 * base URL.
 *
 * @since 0.1.0
 * @category config
 */
export const config = (protocol: Protocol, options?: ConfigOptions | undefined): Config.Config<Options> =>
  Config.all({
    apiKey: Config.redacted(options?.apiKeyEnv ?? apiKeyVariable(protocol)),
    baseUrl: baseUrlConfig(protocol),
    firstByteTimeout: millis("REPRISE_FIRST_BYTE_TIMEOUT", defaultFirstByteTimeout),
    idleTimeout: millis("REPRISE_IDLE_TIMEOUT", defaultIdleTimeout)
  })
