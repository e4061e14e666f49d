/**
 * The options every HTTP provider shares: where to send (`baseUrl`), the key (`Redacted`, never printed), the
 * first-byte and idle timeouts, the bounds on one SSE event and on one reply, whether Chat Completions asks for usage
 * in the stream (`streamUsage`), plus the environment they are read from by `layerConfig`, and the nesting bound of
 * tool-call arguments (`maxNestingDepth`).
 *
 * | protocol | key | base URL (default) |
 * |---|---|---|
 * | `openai-chat`, `openai-responses`, `subscription` | `OPENAI_API_KEY` | `OPENAI_BASE_URL` (`https://api.openai.com/v1`) |
 * | `anthropic` | `ANTHROPIC_API_KEY` | `ANTHROPIC_BASE_URL` (`https://api.anthropic.com`) |
 *
 * Timeouts come from `REPRISE_FIRST_BYTE_TIMEOUT` and `REPRISE_IDLE_TIMEOUT` (milliseconds, default 60000 and
 * 120000) and `REPRISE_FIRST_TOKEN_TIMEOUT` (milliseconds, unset by default: no first-token timeout), the reply size
 * bound from `REPRISE_MAX_REPLY_BYTES` (bytes, default 64 MiB). `openai-chat` reads `REPRISE_STREAM_USAGE` (`true` or
 * `false`, default `true`): whether its requests ask for usage in the stream.
 *
 * ## Settings, declared once
 *
 * Each of those four has one `Config` here, with its variable, its default and its range:
 * {@link firstByteTimeoutConfig}, {@link firstTokenTimeoutConfig}, {@link idleTimeoutConfig} and
 * {@link maxReplyBytesConfig} (their variables are {@link firstByteTimeoutVariable}, {@link firstTokenTimeoutVariable},
 * {@link idleTimeoutVariable} and {@link maxReplyBytesVariable}), and so has `streamUsage`: {@link streamUsageConfig}
 * ({@link streamUsageVariable}). {@link config} is built from them, and the `reprise` CLI reads
 * `--first-byte-timeout`, `--idle-timeout` and `--max-reply-bytes` through them, with the flags as a `ConfigProvider`
 * in front of the environment, so the variables, the defaults and the ranges
 * are declared nowhere else. Options given in code (`make`) are checked against the same ranges, and a bad one throws a
 * `RangeError` with the same message: it is a bug in the caller, and `make` has no error channel for it.
 *
 * @since 0.1.0
 */
import * as Range from "@reprise/core/Range"
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
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
   * (`https://api.anthropic.com`). The protocol's path is appended to its path (trailing slashes ignored) and its
   * query is kept on every request (`…/openai/deployments/d?api-version=2024-10-21`). It must be an http(s) URL
   * without a fragment (see {@link baseUrlProblem}); `make` throws a `RangeError` otherwise.
   */
  readonly baseUrl?: string | undefined
  /**
   * Time allowed from the send to the response headers. Default 60 seconds. A late request is aborted through its
   * `AbortSignal` (every client of @effect/platform ends its request on it).
   */
  readonly firstByteTimeout?: Duration.DurationInput | undefined
  /**
   * Time allowed between two events that make progress. SSE comments (keepalives) and Anthropic `ping` events do
   * not count. Default 120 seconds.
   */
  readonly idleTimeout?: Duration.DurationInput | undefined
  /**
   * Time allowed from the send to the first event of content: a text, reasoning or tool-call delta, a completed tool
   * call or reasoning block. Keepalives, pings, a role-only chunk and metadata events do not count; a reply that ends
   * before any content is not timed out. When it passes, the request is aborted and the attempt fails with a transient
   * `TransportError{reason: "Timeout"}`. Default: none (a slow first token is bounded by the idle timeout only). A
   * background response (`openai-responses` with `background: true`) is not timed by it.
   */
  readonly firstTokenTimeout?: Duration.DurationInput | undefined
  /** The largest pending SSE event, in string code units. Default 1 MiB. */
  readonly maxEventSize?: number | undefined
  /**
   * The largest response body one attempt may read, in bytes, as the HTTP client delivers them: with the undici
   * client, the bytes that crossed the socket (it decodes no content encoding, and a body with one is refused as a
   * `ProtocolViolation`). A longer body ends the attempt with a
   * permanent `ProviderRejection{reason: "ReplyTooLarge"}` once the bound is passed (the events within it are
   * decoded first: a terminal within the bound completes the reply): a replay would be as long. An integer >= 1;
   * default {@link defaultMaxReplyBytes}.
   */
  readonly maxReplyBytes?: number | undefined
  /**
   * `openai-chat` only: whether a request asks for a usage chunk at the end of the stream
   * (`stream_options: {include_usage: true}`). Default `true`. Some compatible servers reject `stream_options`; the
   * provider then sends the request once more without it (a capability fallback), and that reply has no usage. With
   * `false` the request never carries `stream_options`, and a reply has usage only if the server sends it unasked.
   * The other protocols always report usage and ignore this option.
   */
  readonly streamUsage?: boolean | undefined
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
 * How deeply a JSON value that reprise reads whole may nest: tool-call arguments (streamed text, or Anthropic's
 * `input` given whole) with arrays and objects nested deeper fail the reply with a permanent
 * `ProviderRejection{reason: "MalformedStream"}` naming the tool call and the depth. No tool takes arguments anywhere
 * near this deep, and everything downstream (a transcript, a tool, `JSON.stringify`) walks a value recursively: a
 * value of 20,000 levels (40 KB) would overflow the stack there. 128, as in `serde_json`.
 *
 * @since 0.1.0
 * @category constants
 */
export const maxNestingDepth: number = 128

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

/**
 * What is wrong with a base URL, as the end of a sentence ("the base URL …"), or `undefined` when it can be used: it
 * must be an absolute http(s) URL, and it must not have a fragment (`#…`), which is never sent to a server, so
 * that a path appended to it would be lost. A query is fine: it is kept on every request.
 *
 * @since 0.1.0
 * @category validation
 */
export const baseUrlProblem = (s: string): string | undefined => {
  if (!isHttpUrl(s)) return "must be an http(s) URL"
  // `new URL` drops an empty fragment (`…/v1#`) from `hash`: look for the delimiter itself.
  if (s.includes("#")) return "must not have a fragment (#…): a fragment is never sent to the server"
  return undefined
}

const millis = (name: string, fallback: Duration.Duration): Config.Config<Duration.Duration> =>
  Range.integer().pipe(
    Config.map(Duration.millis),
    Config.validate(Range.positiveTimeout),
    // nested last, so that the variable names the failure of the mapped value too
    Config.nested(name),
    Config.withDefault(fallback)
  )

/**
 * The environment variable of {@link firstByteTimeoutConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const firstByteTimeoutVariable = "REPRISE_FIRST_BYTE_TIMEOUT"

/**
 * The environment variable of {@link firstTokenTimeoutConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const firstTokenTimeoutVariable = "REPRISE_FIRST_TOKEN_TIMEOUT"

/**
 * The environment variable of {@link idleTimeoutConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const idleTimeoutVariable = "REPRISE_IDLE_TIMEOUT"

/**
 * The environment variable of {@link maxReplyBytesConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const maxReplyBytesVariable = "REPRISE_MAX_REPLY_BYTES"

/**
 * `REPRISE_FIRST_BYTE_TIMEOUT`: whole milliseconds, more than 0 ("must be > 0 ms"); default 60000
 * ({@link defaultFirstByteTimeout}).
 *
 * @since 0.1.0
 * @category config
 */
export const firstByteTimeoutConfig: Config.Config<Duration.Duration> = millis(
  firstByteTimeoutVariable,
  defaultFirstByteTimeout
)

/**
 * `REPRISE_FIRST_TOKEN_TIMEOUT`: whole milliseconds, more than 0 ("must be > 0 ms"); unset by default (no first-token
 * timeout).
 *
 * @since 0.1.0
 * @category config
 */
export const firstTokenTimeoutConfig: Config.Config<Option.Option<Duration.Duration>> = Range.integer().pipe(
  Config.map(Duration.millis),
  Config.validate(Range.positiveTimeout),
  Config.nested(firstTokenTimeoutVariable),
  Config.option
)

/**
 * `REPRISE_IDLE_TIMEOUT`: whole milliseconds, more than 0 ("must be > 0 ms"); default 120000
 * ({@link defaultIdleTimeout}).
 *
 * @since 0.1.0
 * @category config
 */
export const idleTimeoutConfig: Config.Config<Duration.Duration> = millis(idleTimeoutVariable, defaultIdleTimeout)

/**
 * `REPRISE_MAX_REPLY_BYTES`: an integer, at least 1 ("must be at least 1"); default 64 MiB
 * ({@link defaultMaxReplyBytes}).
 *
 * @since 0.1.0
 * @category config
 */
export const maxReplyBytesConfig: Config.Config<number> = Range.integer(maxReplyBytesVariable).pipe(
  Config.validate(Range.atLeastOne),
  Config.withDefault(defaultMaxReplyBytes)
)

/**
 * The environment variable of {@link streamUsageConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const streamUsageVariable = "REPRISE_STREAM_USAGE"

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultStreamUsage = true

/**
 * `REPRISE_STREAM_USAGE`: `true` or `false` (`streamUsage`, read by `openai-chat`); default `true`. Any other value is
 * a `ConfigError` naming the variable ("must be true or false").
 *
 * @since 0.1.0
 * @category config
 */
export const streamUsageConfig: Config.Config<boolean> = Config.string().pipe(
  Config.mapOrFail((text) =>
    text === "true"
      ? Either.right(true)
      : text === "false"
      ? Either.right(false)
      : Either.left(ConfigError.InvalidData([], `must be true or false, got ${JSON.stringify(text)}`))
  ),
  // nested last, so that the variable names the failure of the mapped value too
  Config.nested(streamUsageVariable),
  Config.withDefault(defaultStreamUsage)
)

/**
 * The base URL of a protocol from the environment: its variable when set (an http(s) URL without a fragment, see
 * {@link baseUrlProblem}), otherwise the public endpoint.
 *
 * @since 0.1.0
 * @category config
 */
export const baseUrlConfig = (protocol: Protocol): Config.Config<string> =>
  Config.string(baseUrlVariable(protocol)).pipe(
    Config.mapOrFail((url) => {
      const problem = baseUrlProblem(url)
      return problem === undefined
        ? Either.right(url)
        : Either.left(ConfigError.InvalidData([], problem))
    }),
    Config.withDefault(defaultBaseUrl(protocol))
  )

/**
 * The options of a protocol from the environment: the key, {@link baseUrlConfig}, {@link firstByteTimeoutConfig},
 * {@link firstTokenTimeoutConfig}, {@link idleTimeoutConfig} and {@link maxReplyBytesConfig}, and for `openai-chat`
 * {@link streamUsageConfig} (the other protocols do not read `REPRISE_STREAM_USAGE`). A missing key is a
 * `ConfigError` naming the variable, whatever the base URL.
 *
 * @since 0.1.0
 * @category config
 */
export const config = (protocol: Protocol, options?: ConfigOptions | undefined): Config.Config<Options> => {
  const shared = Config.all({
    apiKey: Config.redacted(options?.apiKeyEnv ?? apiKeyVariable(protocol)),
    baseUrl: baseUrlConfig(protocol),
    firstByteTimeout: firstByteTimeoutConfig,
    firstTokenTimeout: Config.map(firstTokenTimeoutConfig, Option.getOrUndefined),
    idleTimeout: idleTimeoutConfig,
    maxReplyBytes: maxReplyBytesConfig
  })
  return protocol === "openai-chat"
    ? Config.zipWith(shared, streamUsageConfig, (resolved, streamUsage): Options => ({ ...resolved, streamUsage }))
    : shared
}
