/**
 * The options shared by `reprise chat` and `reprise repl`, their environment variables and defaults, and their
 * validation. Flags win over the environment; a bad value in either is a usage error (exit 2), never a silent
 * fallback.
 *
 * @since 0.1.0
 */
import * as Options from "@effect/cli/Options"
import * as FleetAddress from "@reprise/fleet/FleetAddress"
import * as RetryBudget from "@reprise/fleet/RetryBudget"
import * as ProviderOptions from "@reprise/providers/ProviderOptions"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import { UsageError } from "./ExitCode.js"

/**
 * Everything a turn needs, validated.
 *
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  readonly protocol: ProviderOptions.Protocol
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string>
  readonly model: string
  readonly maxAttempts: number
  readonly deadline: Duration.Duration
  readonly backoffBase: Duration.Duration
  readonly backoffMax: Duration.Duration
  readonly idleTimeout: Duration.Duration
  readonly firstByteTimeout: Duration.Duration
  /** The largest response body one attempt may read (`--max-reply-bytes`). */
  readonly maxReplyBytes: number
  readonly recovery: boolean
  readonly json: boolean
  readonly session: Option.Option<string>
  /** Wait for another process's turn on the session instead of failing (`--wait-session`). */
  readonly waitSession: boolean
  readonly tools: ReadonlyArray<string>
  readonly workspace: string
  readonly system: Option.Option<string>
  readonly maxTokens: Option.Option<number>
  readonly debug: boolean
  /** The fleet this process shares its retry budget and pushback with (`--fleet`, `--fleet-name`), if any. */
  readonly fleet?: Fleet | undefined
}

/**
 * A fleet to join: the options of `@reprise/fleet`'s `RedisFleet.layer`.
 *
 * @since 0.1.0
 * @category models
 */
export interface Fleet {
  readonly url: string
  readonly name: string
  readonly budget: RetryBudget.Settings
  readonly timeout: Duration.Duration
}

const withEnv = <A>(options: Options.Options<A>, config: Config.Config<A>) =>
  Options.withFallbackConfig(options, config)

/**
 * The command-line options of `chat` and `repl`.
 *
 * @since 0.1.0
 * @category options
 */
export const options = {
  provider: withEnv(
    Options.choice("provider", ProviderOptions.protocols),
    Config.literal(...ProviderOptions.protocols)("REPRISE_PROVIDER").pipe(Config.withDefault("openai-chat" as const))
  ).pipe(Options.withDescription("wire protocol (env REPRISE_PROVIDER)")),
  baseUrl: Options.text("base-url").pipe(
    Options.optional,
    Options.withDescription("provider base URL (env OPENAI_BASE_URL / ANTHROPIC_BASE_URL)")
  ),
  model: withEnv(Options.text("model"), Config.string("REPRISE_MODEL")).pipe(
    Options.optional,
    Options.withDescription("model name (env REPRISE_MODEL); required")
  ),
  maxAttempts: withEnv(
    Options.integer("max-attempts"),
    Config.integer("REPRISE_MAX_ATTEMPTS").pipe(Config.withDefault(11))
  ).pipe(Options.withDescription("attempts per reply, counting the first (env REPRISE_MAX_ATTEMPTS)")),
  deadline: withEnv(Options.float("deadline"), Config.number("REPRISE_DEADLINE").pipe(Config.withDefault(600))).pipe(
    Options.withDescription("seconds after which no attempt starts and no wait begins (env REPRISE_DEADLINE)")
  ),
  backoffBase: withEnv(
    Options.integer("backoff-base"),
    Config.integer("REPRISE_BACKOFF_BASE").pipe(Config.withDefault(1000))
  ).pipe(Options.withDescription("first wait in ms (env REPRISE_BACKOFF_BASE)")),
  backoffMax: withEnv(
    Options.integer("backoff-max"),
    Config.integer("REPRISE_BACKOFF_MAX").pipe(Config.withDefault(60_000))
  ).pipe(Options.withDescription("longest backoff in ms (env REPRISE_BACKOFF_MAX)")),
  idleTimeout: withEnv(
    Options.integer("idle-timeout"),
    Config.integer("REPRISE_IDLE_TIMEOUT").pipe(Config.withDefault(120_000))
  ).pipe(Options.withDescription("ms without stream progress before a retryable timeout (env REPRISE_IDLE_TIMEOUT)")),
  firstByteTimeout: withEnv(
    Options.integer("first-byte-timeout"),
    Config.integer("REPRISE_FIRST_BYTE_TIMEOUT").pipe(Config.withDefault(60_000))
  ).pipe(Options.withDescription("ms to wait for response headers (env REPRISE_FIRST_BYTE_TIMEOUT)")),
  maxReplyBytes: withEnv(
    Options.integer("max-reply-bytes"),
    Config.integer("REPRISE_MAX_REPLY_BYTES").pipe(Config.withDefault(ProviderOptions.defaultMaxReplyBytes))
  ).pipe(
    Options.withDescription(
      "largest response body one attempt may read, in bytes; a longer reply fails, permanently " +
        "(env REPRISE_MAX_REPLY_BYTES, default 64 MiB)"
    )
  ),
  noRecovery: Options.boolean("no-recovery").pipe(Options.withDescription("surface every failure after one attempt")),
  json: Options.boolean("json").pipe(Options.withDescription("NDJSON events on stdout")),
  session: Options.text("session").pipe(
    Options.optional,
    Options.withDescription("JSONL transcript to resume from and append committed messages to")
  ),
  waitSession: Options.boolean("wait-session").pipe(
    Options.withDescription("if another process is in a turn on --session, wait for it instead of exiting 2")
  ),
  tools: Options.text("tools").pipe(Options.optional, Options.withDescription("comma-separated: now, append_file")),
  workspace: Options.text("workspace").pipe(
    Options.optional,
    Options.withDescription("directory append_file is confined to (default: the current directory)")
  ),
  system: Options.text("system").pipe(Options.optional, Options.withDescription("system prompt")),
  maxTokens: Options.integer("max-tokens").pipe(Options.optional, Options.withDescription("output token limit")),
  apiKeyEnv: Options.text("api-key-env").pipe(
    Options.optional,
    Options.withDescription("read the API key from this variable instead of OPENAI_API_KEY / ANTHROPIC_API_KEY")
  ),
  debug: Options.boolean("debug").pipe(Options.withDescription("print stack traces with errors")),
  fleet: withEnv(Options.text("fleet"), Config.string("REPRISE_FLEET_URL")).pipe(
    Options.optional,
    Options.withDescription(
      "share one retry budget and Retry-After pauses with other processes over Redis: redis://HOST:PORT/DB " +
        "(env REPRISE_FLEET_URL; see docs/fleet.md)"
    )
  ),
  fleetName: withEnv(Options.text("fleet-name"), Config.string("REPRISE_FLEET_NAME")).pipe(
    Options.optional,
    Options.withDescription("the fleet to join (env REPRISE_FLEET_NAME; default: the base URL and a hash of the key)")
  )
}

/**
 * @since 0.1.0
 * @category models
 */
export type Parsed = {
  readonly [K in keyof typeof options]: (typeof options)[K] extends Options.Options<infer A> ? A : never
}

const fail = (detail: string) => Effect.fail(new UsageError({ detail }))

const envName = /^[A-Za-z_][A-Za-z0-9_]*$/

/** Visible ASCII only: what an API key is made of, and what a header value can carry unchanged. */
const headerSafe = /^[\x21-\x7e]+$/

/**
 * The fleet of `--fleet` and `--fleet-name`, with the budget of `REPRISE_FLEET_RATIO`, `REPRISE_FLEET_FLOOR`,
 * `REPRISE_FLEET_WINDOW` and the call timeout of `REPRISE_FLEET_TIMEOUT` (ms).
 */
const resolveFleet = (
  parsed: Parsed,
  baseUrl: string,
  apiKey: Redacted.Redacted<string>
): Effect.Effect<Fleet | undefined, UsageError> =>
  Effect.gen(function*() {
    if (Option.isNone(parsed.fleet)) {
      return Option.isSome(parsed.fleetName)
        ? yield* fail("--fleet-name needs a fleet: pass --fleet redis://HOST:PORT/DB or set REPRISE_FLEET_URL")
        : undefined
    }
    const url = parsed.fleet.value
    const problem = FleetAddress.urlProblem(url)
    if (problem !== undefined) {
      return yield* fail(`--fleet ${problem} (redis://HOST:PORT/DB), got ${FleetAddress.describeUrl(url)}`)
    }
    const name = Option.getOrElse(parsed.fleetName, () => FleetAddress.defaultName(baseUrl, apiKey))
    if (name.trim() === "") return yield* fail("--fleet-name must not be empty")
    const usage = (error: unknown) => new UsageError({ detail: String(error) })
    const budget = yield* Effect.mapError(RetryBudget.config, usage)
    const timeout = yield* Config.integer("REPRISE_FLEET_TIMEOUT").pipe(
      Config.validate({ message: "must be a whole number of milliseconds >= 1", validation: (n) => n >= 1 }),
      Config.withDefault(200),
      Effect.mapError(usage)
    )
    return { url, name, budget, timeout: Duration.millis(timeout) }
  })

/**
 * Checks ranges, resolves the base URL and the key, and returns the settings of a turn. The key is read with
 * `Config.redacted`: a missing key is a usage error whatever the base URL, and the key is never printed.
 *
 * @since 0.1.0
 * @category constructors
 */
export const resolve = (parsed: Parsed): Effect.Effect<Settings, UsageError> =>
  Effect.gen(function*() {
    const protocol = parsed.provider
    if (Option.isNone(parsed.model) || parsed.model.value.trim() === "") {
      return yield* fail("a model is required: pass --model NAME or set REPRISE_MODEL")
    }
    if (parsed.maxAttempts < 1) return yield* fail(`--max-attempts must be at least 1, got ${parsed.maxAttempts}`)
    if (!(parsed.deadline > 0) || !Number.isFinite(parsed.deadline)) {
      return yield* fail(`--deadline must be a positive number of seconds, got ${parsed.deadline}`)
    }
    if (Math.round(parsed.deadline * 1000) < 1) {
      return yield* fail(`--deadline must be at least 0.001 seconds (1 ms), got ${parsed.deadline}`)
    }
    if (parsed.backoffBase < 0) return yield* fail(`--backoff-base must be >= 0 ms, got ${parsed.backoffBase}`)
    if (parsed.backoffMax < parsed.backoffBase) {
      return yield* fail(
        `--backoff-max (${parsed.backoffMax}) must not be smaller than --backoff-base (${parsed.backoffBase})`
      )
    }
    if (parsed.idleTimeout <= 0) return yield* fail(`--idle-timeout must be > 0 ms, got ${parsed.idleTimeout}`)
    if (parsed.firstByteTimeout <= 0) {
      return yield* fail(`--first-byte-timeout must be > 0 ms, got ${parsed.firstByteTimeout}`)
    }
    if (parsed.maxReplyBytes < 1) {
      return yield* fail(`--max-reply-bytes must be at least 1, got ${parsed.maxReplyBytes}`)
    }
    if (Option.isSome(parsed.maxTokens) && parsed.maxTokens.value < 1) {
      return yield* fail(`--max-tokens must be at least 1, got ${parsed.maxTokens.value}`)
    }
    const baseUrl = Option.isSome(parsed.baseUrl)
      ? parsed.baseUrl.value
      : yield* Config.string(ProviderOptions.baseUrlVariable(protocol)).pipe(
        Config.withDefault(ProviderOptions.defaultBaseUrl(protocol)),
        Effect.mapError(() =>
          new UsageError({ detail: `${ProviderOptions.baseUrlVariable(protocol)} is not readable` })
        )
      )
    const baseUrlProblem = ProviderOptions.baseUrlProblem(baseUrl)
    if (baseUrlProblem !== undefined) {
      return yield* fail(`the base URL ${baseUrlProblem}, got ${JSON.stringify(baseUrl)}`)
    }
    const keyVariable = Option.getOrElse(parsed.apiKeyEnv, () => ProviderOptions.apiKeyVariable(protocol))
    if (!envName.test(keyVariable)) return yield* fail(`--api-key-env must name an environment variable`)
    const apiKey = yield* Config.redacted(keyVariable).pipe(
      Effect.mapError(() =>
        new UsageError({
          detail: `missing API key: set ${keyVariable}${
            Option.isNone(parsed.apiKeyEnv) ? " (or name another variable with --api-key-env)" : ""
          }`
        })
      )
    )
    if (Redacted.value(apiKey).trim() === "") return yield* fail(`missing API key: ${keyVariable} is empty`)
    // A key is sent in an HTTP header: a character that cannot go there (a trailing \r from a CRLF .env file, a
    // newline, a non-ASCII letter) would fail every send as a "connection reset". Name the variable, never the key.
    if (!headerSafe.test(Redacted.value(apiKey))) {
      return yield* fail(
        `${keyVariable} holds a character that cannot be sent in an HTTP header (a control character such as a ` +
          `trailing \\r from a CRLF .env file, a space, or a non-ASCII character)`
      )
    }
    const fleet = yield* resolveFleet(parsed, baseUrl, apiKey)
    const tools = Option.match(parsed.tools, {
      onNone: () => [],
      onSome: (list) => list.split(",").map((s) => s.trim()).filter((s) => s.length > 0)
    })
    return {
      protocol,
      baseUrl,
      apiKey,
      model: parsed.model.value,
      maxAttempts: parsed.maxAttempts,
      deadline: Duration.millis(Math.round(parsed.deadline * 1000)),
      backoffBase: Duration.millis(parsed.backoffBase),
      backoffMax: Duration.millis(parsed.backoffMax),
      idleTimeout: Duration.millis(parsed.idleTimeout),
      firstByteTimeout: Duration.millis(parsed.firstByteTimeout),
      maxReplyBytes: parsed.maxReplyBytes,
      recovery: !parsed.noRecovery,
      json: parsed.json,
      session: parsed.session,
      waitSession: parsed.waitSession,
      tools,
      workspace: Option.getOrElse(parsed.workspace, () => process.cwd()),
      system: parsed.system,
      maxTokens: parsed.maxTokens,
      debug: parsed.debug,
      ...(fleet === undefined ? {} : { fleet })
    }
  })
