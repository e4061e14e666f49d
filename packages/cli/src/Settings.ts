/**
 * The options shared by `reprise chat` and `reprise repl`, and their validation. Flags win over the environment; a bad
 * value in either is a usage error (exit 2), never a silent fallback.
 *
 * ## Settings, declared once
 *
 * The attempts and the deadline (`Budget`), the backoff (`Policy`), the timeouts and the reply bound
 * (`ProviderOptions`) are not declared here: each has one `Config` in its own module, with its environment variable,
 * its default and its range, the same `Config` that `Budget.layerConfig`, `Policy.layerConfig` and
 * `HttpProvider.layerConfig` read. This module only names the flag that stands in front of each variable
 * (`--max-attempts` for `REPRISE_MAX_ATTEMPTS`, …). {@link resolve} reads `Budget.config`, `Policy.config` and the
 * three provider Configs over a `ConfigProvider` made of the flags the user gave, in front of the environment: a
 * flag wins over its variable, the variable over the default, and a bad value gets its owner's message, naming what
 * the user gave:
 *
 * - a flag: `--max-attempts must be at least 1, got 0`;
 * - a variable: the `ConfigError` as Effect writes it, which is also what `Budget.layerConfig` fails with,
 *   `(Invalid data at REPRISE_MAX_ATTEMPTS: "must be at least 1")`;
 * - a rule between two settings: its message with the settings named as given,
 *   `--backoff-max (10) must not be smaller than --backoff-base (20)`.
 *
 * A flag's number is in decimal notation (`CommandLine.normalize` refuses `0x10`, `1e3` and `many` before the
 * parser reads it), and so is a variable's (`Range.integer`, `Range.number`).
 *
 * The fleet's settings are read the same way, with the fleet's own Configs (`FleetOptions`): `--fleet` and
 * `--fleet-name` in front of `REPRISE_FLEET_URL` and `REPRISE_FLEET_NAME`, and the budget's and the timeout's
 * variables behind them, checked only when a fleet is named. A bad URL or name is reported under its flag, whichever
 * gave it (`--fleet must start with redis:// or rediss:// (redis://HOST:PORT/DB), got http://…`).
 *
 * One setting is the CLI's own: `--background` ({@link backgroundConfig}, `REPRISE_BACKGROUND`), which asks for the
 * provider's background mode on every reply of a turn (`Chat.turn`'s `background`). A library caller sets that option
 * (or `GenerationRequest.background`) in code; only the CLI reads it from the environment, so its `Config` is
 * declared here, and read the same way as the others.
 *
 * The prices of the ledger's costs (`Prices`) come from the JSON file `--prices FILE` names, else from
 * `REPRISE_PRICES` (`Prices.variable`), decoded with `Prices.PriceList` as `Prices.config` decodes the variable; a file
 * that cannot be read, or a value that is not a price list, is a usage error on one line naming the file or the
 * variable: `REPRISE_PRICES is not a price list: "gpt-4.1".input: Expected a non-negative number, actual -1`.
 *
 * The settings of fallback routes are read the same way: the circuits' with `Circuit`'s Configs
 * (`--circuit-threshold`, `--circuit-cooldown` in front of `REPRISE_CIRCUIT_THRESHOLD`, `REPRISE_CIRCUIT_COOLDOWN`),
 * the primary route's limit and window with the CLI's own (`Fallback.routeAttemptsConfig`,
 * `Fallback.contextWindowConfig`), and the first-token timeout with the providers' (`--first-token-timeout` in front
 * of `ProviderOptions.firstTokenTimeoutConfig`). The routes themselves are `Fallback.resolve`'s: `--fallback`, or
 * `REPRISE_FALLBACKS` without it.
 *
 * @since 0.1.0
 */
import * as Options from "@effect/cli/Options"
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Circuit from "@reprise/core/Circuit"
import type * as Prices from "@reprise/core/Prices"
import * as FleetOptions from "@reprise/fleet/FleetOptions"
import * as ProviderOptions from "@reprise/providers/ProviderOptions"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Struct from "effect/Struct"
import { UsageError } from "./ExitCode.js"
import * as Fallback from "./Fallback.js"
import * as ApiKey from "./internal/apiKey.js"
import * as Background from "./internal/background.js"
import { fleetFlag, resolveFleet } from "./internal/fleetSettings.js"
import { flag, owned, readOwned } from "./internal/ownedSettings.js"
import * as PriceFile from "./internal/prices.js"

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
  /** Time from the send to the first event of content, on every route (`--first-token-timeout`); none by default. */
  readonly firstTokenTimeout: Option.Option<Duration.Duration>
  /**
   * The routes after the primary (`--fallback`, `REPRISE_FALLBACKS`), in order; empty: no plan of routes, the single
   * provider of `protocol`, `baseUrl` and `model`.
   */
  readonly fallbacks: ReadonlyArray<Fallback.Fallback>
  /** The primary route's sends before a transient failure leaves it (`--route-attempts`); a plan's only. */
  readonly routeAttempts: Option.Option<number>
  /** The context window the primary route declares, in tokens (`--context-window`); a plan's only. */
  readonly contextWindow: Option.Option<number>
  /** The settings of the routes' circuits (`--circuit-threshold`, `--circuit-cooldown`); a plan's only. */
  readonly circuit: Circuit.Settings
  /** The largest response body one attempt may read (`--max-reply-bytes`). */
  readonly maxReplyBytes: number
  /**
   * openai-chat: ask for usage in the stream (`stream_options.include_usage`); off with `--no-stream-usage` or
   * `REPRISE_STREAM_USAGE=false`, for a compatible server that rejects the option.
   */
  readonly streamUsage: boolean
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
  /**
   * Run every reply in the provider's background mode (`--background`, `REPRISE_BACKGROUND`): a cut
   * `openai-responses` stream is continued instead of replayed. The other protocols have no background mode and
   * ignore it.
   */
  readonly background: boolean
  /**
   * The fleet this process shares its retry budget and pushback with (`--fleet`, `--fleet-name`), if any: the
   * options of `RedisFleet.layer`.
   */
  readonly fleet?: FleetOptions.Options | undefined
  /**
   * The user's prices per million tokens by model (`--prices FILE`, `REPRISE_PRICES`; see `Prices`): the ledger's
   * costs. Empty: tokens only.
   */
  readonly prices: Prices.PriceList
}

/**
 * The environment variable of {@link backgroundConfig}.
 *
 * @since 0.1.0
 * @category config
 */
export const backgroundVariable = Background.variable

/**
 * `REPRISE_BACKGROUND`: whether the requests of a turn run in the provider's background mode, as `Config.boolean`
 * reads it (`true`/`false`, `yes`/`no`, `on`/`off`, `1`/`0`); default `false`, which an empty (or blank) value is
 * too, as an unset one, the way the `OTEL_*` variables are read. `--background` stands in front of it.
 *
 * @since 0.1.0
 * @category config
 */
export const backgroundConfig: Config.Config<boolean> = Background.config

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
  maxAttempts: flag(owned.maxAttempts, Options.integer, (env) => `attempts per reply, counting the first (${env})`),
  deadline: flag(
    owned.deadline,
    Options.float,
    (env) => `seconds after which no attempt starts and no wait begins (${env})`
  ),
  backoffBase: flag(owned.backoffBase, Options.integer, (env) => `first wait in ms (${env})`),
  backoffMax: flag(owned.backoffMax, Options.integer, (env) => `longest backoff in ms (${env})`),
  idleTimeout: flag(
    owned.idleTimeout,
    Options.integer,
    (env) => `ms without stream progress before a retryable timeout (${env})`
  ),
  firstByteTimeout: flag(owned.firstByteTimeout, Options.integer, (env) => `ms to wait for response headers (${env})`),
  firstTokenTimeout: flag(
    owned.firstTokenTimeout,
    Options.integer,
    (env) => `ms from the send to the first token before a retryable timeout, on every route (${env}; default none)`
  ),
  fallback: Options.text("fallback").pipe(
    Options.repeated,
    // shown as optional in the usage line
    Options.withDefault<ReadonlyArray<string>>([]),
    Options.withDescription(
      `a route to fall back to, after the primary (--provider, --model): ${Fallback.form}, options attempts=N, ` +
        `context=TOKENS, key-env=VAR; repeat for routes 3, 4, … (env ${Fallback.variable}: specs separated by spaces ` +
        `or ;)`
    )
  ),
  routeAttempts: flag(
    owned.routeAttempts,
    Options.integer,
    (env) =>
      // `Routes.defaultAttempts`, written out: `Routes` (and the `Provider` it imports) is not loaded for --help
      `with --fallback: sends on the primary route before a transient failure leaves it (${env}; default 2)`
  ),
  contextWindow: flag(
    owned.contextWindow,
    Options.integer,
    (env) => `with --fallback: the primary route's context window in tokens; an overflow moves to a larger one (${env})`
  ),
  circuitThreshold: flag(
    owned.circuitThreshold,
    Options.integer,
    (env) =>
      `with --fallback: consecutive transient failures that open a route's circuit (${env}; default ` +
      `${Circuit.defaultSettings.failureThreshold})`
  ),
  circuitCooldown: flag(
    owned.circuitCooldown,
    Options.integer,
    (env) =>
      `with --fallback: ms an open circuit skips its route before one probe (${env}; default ` +
      `${Duration.toMillis(Circuit.defaultSettings.coolDown)})`
  ),
  maxReplyBytes: flag(
    owned.maxReplyBytes,
    Options.integer,
    (env) =>
      "largest response body one attempt may read, in bytes; a longer reply fails, permanently " +
      `(${env}, default ${ProviderOptions.defaultMaxReplyBytes / (1024 * 1024)} MiB)`
  ),
  // A flag: given, it is `false` in front of the variable; left out, the variable (or the default) decides.
  streamUsage: Options.boolean("no-stream-usage").pipe(
    Options.map((given) => given ? Option.some(false) : Option.none<boolean>()),
    Options.withDescription(
      `openai-chat: do not ask for usage in the stream (stream_options.include_usage), for a compatible server that ` +
        `rejects it; replies are then billed by estimate in the ledger (env ${ProviderOptions.streamUsageVariable})`
    )
  ),
  // A flag: given, it is `true` in front of the variable; left out, the variable (or the default) decides.
  background: Options.boolean("background").pipe(
    Options.map((given) => given ? Option.some(true) : Option.none<boolean>()),
    Options.withDescription(
      `openai-responses: run each reply in background mode, so that a cut stream is continued instead of replayed; ` +
        `no effect on the other protocols (env ${backgroundVariable})`
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
  prices: Options.text("prices").pipe(
    Options.optional,
    Options.withDescription(
      "JSON file of prices per million tokens by model, {\"MODEL\": {\"input\": N, \"output\": N}}, to price what " +
        "discarded attempts cost (env REPRISE_PRICES: the same JSON)"
    )
  ),
  fleet: fleetFlag(
    "fleet",
    "share one retry budget and Retry-After pauses with other processes over Redis: redis://HOST:PORT/DB " +
      `(env ${FleetOptions.urlVariable}; see docs/fleet.md)`
  ),
  fleetName: fleetFlag(
    "fleet-name",
    `the fleet to join (env ${FleetOptions.nameVariable}; default: the base URL and a hash of the key)`
  )
}

/**
 * The options that say where replies go and how they are recovered, without those of a conversation (the session,
 * the tools, the output, the prompt's settings): the options of `reprise serve`, whose clients send the conversation.
 *
 * @since 0.1.0
 * @category options
 */
export const upstreamOptions = Struct.omit(
  options,
  "noRecovery",
  "json",
  "session",
  "waitSession",
  "tools",
  "workspace",
  "system",
  "maxTokens",
  "debug",
  "background"
)

/**
 * @since 0.1.0
 * @category models
 */
export type UpstreamParsed = {
  readonly [K in keyof typeof upstreamOptions]: (typeof upstreamOptions)[K] extends Options.Options<infer A> ? A
    : never
}

/**
 * @since 0.1.0
 * @category models
 */
export type Parsed = {
  readonly [K in keyof typeof options]: (typeof options)[K] extends Options.Options<infer A> ? A : never
}

const fail = (detail: string) => Effect.fail(new UsageError({ detail }))

/**
 * Reads the owned settings (see the module's doc), resolves the base URL and the key, and returns the settings of a
 * turn. The key is read with
 * `Config.redacted`: a missing key is a usage error whatever the base URL, and the key is never printed.
 *
 * @since 0.1.0
 * @category constructors
 */
export const resolve = (parsed: Parsed): Effect.Effect<Settings, UsageError, FileSystem.FileSystem> =>
  Effect.gen(function*() {
    const protocol = parsed.provider
    if (Option.isNone(parsed.model) || parsed.model.value.trim() === "") {
      return yield* fail("a model is required: pass --model NAME or set REPRISE_MODEL")
    }
    const values = yield* readOwned(parsed)
    if (Option.isSome(parsed.maxTokens) && parsed.maxTokens.value < 1) {
      return yield* fail(`--max-tokens must be at least 1, got ${parsed.maxTokens.value}`)
    }
    const prices = yield* Effect.mapError(PriceFile.resolve(parsed.prices), (detail) => new UsageError({ detail }))
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
    if (!ApiKey.variableName.test(keyVariable)) return yield* fail(`--api-key-env must name an environment variable`)
    const apiKey = yield* ApiKey.read(
      keyVariable,
      Option.isNone(parsed.apiKeyEnv) ? " (or name another variable with --api-key-env)" : ""
    ).pipe(Effect.mapError((detail) => new UsageError({ detail })))
    const fleet = yield* resolveFleet(parsed, baseUrl, apiKey)
    const fallbacks = yield* Fallback.resolve(parsed.fallback).pipe(
      Effect.mapError((detail) => new UsageError({ detail }))
    )
    const tools = Option.match(parsed.tools, {
      onNone: () => [],
      onSome: (list) => list.split(",").map((s) => s.trim()).filter((s) => s.length > 0)
    })
    return {
      protocol,
      baseUrl,
      apiKey,
      model: parsed.model.value,
      maxAttempts: values.budget.maxAttempts,
      deadline: values.budget.deadline,
      backoffBase: values.policy.backoffBase,
      backoffMax: values.policy.backoffMax,
      idleTimeout: values.idleTimeout,
      firstByteTimeout: values.firstByteTimeout,
      firstTokenTimeout: values.firstTokenTimeout,
      fallbacks,
      routeAttempts: values.routeAttempts,
      contextWindow: values.contextWindow,
      circuit: values.circuit,
      maxReplyBytes: values.maxReplyBytes,
      streamUsage: values.streamUsage,
      recovery: !parsed.noRecovery,
      json: parsed.json,
      session: parsed.session,
      waitSession: parsed.waitSession,
      tools,
      workspace: Option.getOrElse(parsed.workspace, () => process.cwd()),
      system: parsed.system,
      maxTokens: parsed.maxTokens,
      debug: parsed.debug,
      background: values.background,
      prices,
      // the fleet's circuits (shared over Redis) with the settings of --circuit-threshold and --circuit-cooldown
      ...(fleet === undefined ? {} : { fleet: { ...fleet, circuit: values.circuit } })
    }
  })

/**
 * {@link resolve} for the {@link upstreamOptions}: the settings of the conversation's options at their defaults
 * (recovery on, no session, no tools), which a caller of these options does not read.
 *
 * @since 0.1.0
 * @category constructors
 */
export const resolveUpstream = (
  parsed: UpstreamParsed
): Effect.Effect<Settings, UsageError, FileSystem.FileSystem> =>
  resolve({
    ...parsed,
    noRecovery: false,
    json: false,
    session: Option.none(),
    waitSession: false,
    tools: Option.none(),
    workspace: Option.none(),
    system: Option.none(),
    maxTokens: Option.none(),
    debug: false,
    background: Option.none()
  })
