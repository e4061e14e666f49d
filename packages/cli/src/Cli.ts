/**
 * The `reprise` command line: `chat`, `repl`, `serve`, `simulate` and `demo`, built with @effect/cli. See the README for the
 * flags, environment variables and exit codes.
 *
 * This module only declares the commands and their options. What a command does lives in its own module (`Run`,
 * `Simulate`, `Demo`), imported when that command runs: `reprise --help` and a bad flag never load the HTTP client,
 * the providers or the simulator, which is most of the binary's start-up time (docs/cli.md, "Start-up"). Each
 * command's body runs inside `Telemetry.layer`: OTLP export of its spans and metrics when the standard `OTEL_*`
 * variables name an endpoint, and nothing loaded when they do not (docs/cli.md, "Tracing").
 *
 * @since 0.1.0
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import type * as Usage from "@effect/cli/Usage"
import * as Cause from "effect/Cause"
import * as Config from "effect/Config"
import * as Console from "effect/Console"
import * as Effect from "effect/Effect"
import * as EffectExit from "effect/Exit"
import { identity } from "effect/Function"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as CommandLine from "./CommandLine.js"
import * as ExitCode from "./ExitCode.js"
import * as Fallback from "./Fallback.js"
import * as Output from "./Output.js"
import * as Sanitize from "./Sanitize.js"
import * as Settings from "./Settings.js"
import * as Telemetry from "./Telemetry.js"

/**
 * The version `--version` prints; a test keeps it equal to the package's.
 *
 * @since 0.1.0
 * @category constants
 */
export const version = "0.1.0"

/**
 * The command ended with a non-zero exit code after reporting its outcome itself.
 *
 * @since 0.1.0
 * @category errors
 */
export const Exit = ExitCode.Exit

/**
 * @since 0.1.0
 * @category errors
 */
export type Exit = ExitCode.Exit

/** The variables a key is read from whatever the command line says: both protocols'. */
const standardKeyVariables: ReadonlyArray<string> = ["OPENAI_API_KEY", "ANTHROPIC_API_KEY"]

/**
 * A command's body with its spans and metrics exported as the standard OpenTelemetry variables say (`Telemetry`;
 * nothing is loaded without them), scrubbed of every key the command may hold: the standard variables', the one
 * `--api-key-env` names and each fallback route's (`key-env=VAR`). The exporters' scope is the command's: it closes, flushing the export, when the command ends
 * however it ends (its outcome, a failure, Ctrl-C), before the exit code is reported.
 */
const exported = <A, E, R>(
  self: Effect.Effect<A, E, R>,
  apiKeyEnv: Option.Option<string> = Option.none(),
  fallbacks: ReadonlyArray<string> = []
) =>
  Effect.provide(
    self,
    Layer.unwrapEffect(Effect.map(Fallback.keyVariables(fallbacks), (routeKeys) =>
      Telemetry.layer({
        serviceVersion: version,
        keyVariables: [...standardKeyVariables, ...Option.toArray(apiKeyEnv), ...routeKeys]
      })))
  )

const chat = Command.make(
  "chat",
  { ...Settings.options, prompt: Args.text({ name: "prompt" }) },
  ({ prompt, ...parsed }) =>
    exported(
      Effect.flatMap(Effect.promise(() => import("./Run.js")), (Run) => Run.chat(parsed, prompt)),
      parsed.apiKeyEnv,
      parsed.fallback
    )
).pipe(Command.withDescription("one turn (with its tool loop), headless"))

const repl = Command.make(
  "repl",
  Settings.options,
  (parsed) =>
    exported(
      Effect.flatMap(Effect.promise(() => import("./Run.js")), (Run) => Run.repl(parsed)),
      parsed.apiKeyEnv,
      parsed.fallback
    )
).pipe(Command.withDescription("interactive: one prompt per line on stdin"))

const serve = Command.make(
  "serve",
  {
    ...Settings.upstreamOptions,
    host: Options.text("host").pipe(
      Options.withDefault("127.0.0.1"),
      Options.withDescription("address to listen on; any but loopback needs keys (env REPRISE_SERVE_KEYS)")
    ),
    port: Options.integer("port").pipe(
      Options.withDefault(8787),
      Options.withDescription("port to listen on (0: any free port)")
    ),
    preview: Options.choice("preview", ["hold", "live", "reset"]).pipe(
      Options.withDefault("hold" as const),
      Options.withDescription(
        "preview mode of a request without X-Reprise-Preview: hold (whole answers), live, reset"
      )
    ),
    maxConcurrent: Options.integer("max-concurrent").pipe(
      Options.optional,
      Options.withDescription("replies served at once; beyond, 429 with Retry-After: 1 (default 64)")
    ),
    maxBodyBytes: Options.integer("max-body-bytes").pipe(
      Options.optional,
      Options.withDescription("largest request body in bytes; beyond, 413 (default 1048576)")
    )
  },
  ({ host, maxBodyBytes, maxConcurrent, port, preview, ...parsed }) =>
    exported(
      Effect.flatMap(
        Effect.promise(() => import("./Serve.js")),
        (Serve) => Effect.interruptible(Serve.run(parsed, { host, port, preview, maxConcurrent, maxBodyBytes }))
      ),
      parsed.apiKeyEnv,
      parsed.fallback
    )
).pipe(Command.withDescription("run the relay: an OpenAI/Anthropic-compatible endpoint with recovery, until SIGINT"))

const simulate = Command.make(
  "simulate",
  {
    port: Options.integer("port").pipe(
      Options.withDefault(0),
      Options.withDescription("port on 127.0.0.1 (0: any)")
    ),
    script: Options.text("script").pipe(
      Options.optional,
      Options.withDescription("fault script (JSON)")
    ),
    scenarios: Options.choice("scenarios", ["failoverbench"]).pipe(
      Options.optional,
      Options.withDescription("serve a scenario catalogue by model name instead of a script")
    ),
    profile: Options.choice("profile", ["full", "fast"]).pipe(
      Options.optional,
      Options.withDescription("the catalogue's timings: full (default) or fast")
    )
  },
  ({ port, profile, scenarios, script }) =>
    exported(Effect.flatMap(
      Effect.promise(() => import("./Simulate.js")),
      (Simulate) =>
        Effect.interruptible(Simulate.run({
          port,
          script: Option.getOrUndefined(script),
          scenarios: Option.getOrUndefined(scenarios),
          profile: Option.getOrUndefined(profile)
        }))
    ))
).pipe(Command.withDescription("run the loopback fault simulator in the foreground"))

const demo = Command.make(
  "demo",
  {},
  () =>
    exported(Effect.flatMap(
      Effect.promise(() => import("./Demo.js")),
      (Demo) =>
        Effect.flatMap(
          Effect.interruptible(Demo.run),
          (code) => code === 0 ? Effect.void : Effect.fail(new ExitCode.Exit(code))
        )
    ))
).pipe(Command.withDescription("a guided run against the embedded simulator: faults, replays, commit"))

const usages = new Map<string, Usage.Usage>([
  ["chat", Command.getUsage(chat)],
  ["repl", Command.getUsage(repl)],
  ["serve", Command.getUsage(serve)],
  ["simulate", Command.getUsage(simulate)],
  ["demo", Command.getUsage(demo)]
])

/**
 * @since 0.1.0
 * @category commands
 */
export const command = Command.make("reprise").pipe(
  Command.withDescription("an LLM client that survives dropped sockets, 429s and overloaded streams"),
  Command.withSubcommands([chat, repl, serve, simulate, demo])
)

const cli = Command.run(command, { name: "reprise", version })

/**
 * Runs the command line `argv` (`process.argv`: the executable and script first).
 *
 * @since 0.1.0
 * @category commands
 */
export const run = (argv: ReadonlyArray<string>) =>
  Effect.flatMap(
    CommandLine.normalize(usages, argv.slice(2)),
    (args) => withoutParserComplaints(cli([...argv.slice(0, 2), ...args]))
  )

/**
 * @effect/cli writes a bad command line's complaint with `Console.error`, bare, and fails with it: reprise writes it
 * itself, as every usage error, from the failure ({@link exitCodeOf}). Its help and `--version` go through
 * `Console.log`, kept. reprise's commands write through `Output`, never `Console`.
 */
const withoutParserComplaints = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Console.consoleWith((console) => Console.withConsole(self, { ...console, error: () => Effect.void }))

/**
 * Maps anything the CLI can fail with to an exit code, printing what was not printed yet: one line on stderr (and
 * an `error` event on stdout with `--json`), scrubbed with `scrub`; a bad command line too, with @effect/cli's
 * complaint as its message. A simulator script's issues keep a line each.
 *
 * @since 0.1.0
 * @category commands
 */
export const exitCodeOf = (error: unknown, json: boolean, scrub: (text: string) => string = identity) =>
  Effect.gen(function*() {
    if (error instanceof ExitCode.Exit) return error.code
    const outcome = ExitCode.classify(error)
    // one line of text whatever the error quotes (a file name, a line of a session): no escape sequence gets through;
    // a simulator script's issues, a list in reprise's own words, keep their lines, each escaped
    const message = outcome.class === "ScriptError"
      ? scrub(outcome.message).split("\n").map(Sanitize.escapeControls).join("\n")
      : Sanitize.escapeControls(scrub(outcome.message))
    if (json) {
      yield* Output.stdout(
        JSON.stringify({ type: "error", class: outcome.class, message, exitCode: outcome.exitCode }) + "\n"
      )
    }
    yield* Output.stderr(`reprise: error [${outcome.class}]: ${message}\n`)
    return outcome.exitCode
  })

/**
 * The whole command line `argv` to its exit code: {@link run}, then {@link exitCodeOf} for any failure. It runs
 * **uninterruptibly**: each command marks what Ctrl-C may end (a wait, a request, a stream, a running tool) with
 * `Effect.interruptible`, and nothing else is cut short; a commit in particular is never cut short.
 *
 * An interruption can still arrive after the exit code is decided (`reprise chat`'s final reply committed, its
 * text printed), and the runtime then reports the program as interrupted: {@link Program.exitCode} answers with the
 * decided code in that case, since nothing was lost. Before a code is decided an interruption is exit 130.
 *
 * @since 0.1.0
 * @category commands
 */
export interface Program {
  readonly main: Effect.Effect<number, never, RunRequirements>
  /**
   * Removes every key the process could hold (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, the variable named by
   * `--api-key-env`, those of the fallback routes) from a text, for what is printed outside a turn: errors before it starts, and a defect.
   * Known once `main` has started.
   */
  readonly scrub: (text: string) => string
  /** The process's exit code for how `main` ended; `undefined` for a defect (a bug: reported by the caller). */
  readonly exitCode: (exit: EffectExit.Exit<number, unknown>) => number | undefined
}

/**
 * What {@link program}'s `main` needs: the platform's file system and path, and an {@link Output.Output}.
 *
 * @since 0.1.0
 * @category commands
 */
export type RunRequirements = Effect.Effect.Context<ReturnType<typeof run>> | Output.Output

/** A flag's values in `argv`: `--name value` and `--name=value`, in order. */
const valuesOf = (argv: ReadonlyArray<string>, name: string): ReadonlyArray<string> => {
  const values: Array<string> = []
  argv.forEach((arg, i) => {
    if (arg === name && i + 1 < argv.length) values.push(argv[i + 1]!)
    else if (arg.startsWith(`${name}=`)) values.push(arg.slice(name.length + 1))
  })
  return values
}

/**
 * The variables a key may be read from: both protocols', the one `--api-key-env` names (its last value), and each
 * fallback route's (`key-env=VAR` of `--fallback` or `REPRISE_FALLBACKS`).
 */
const keyVariables = (argv: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<string>> =>
  Effect.map(
    Fallback.keyVariables(valuesOf(argv, "--fallback")),
    (routeKeys) =>
      [...standardKeyVariables, ...valuesOf(argv, "--api-key-env"), ...routeKeys].filter((name) =>
        /^[A-Za-z_][A-Za-z0-9_]*$/.test(name)
      )
  )

/**
 * See {@link Program}.
 *
 * @since 0.1.0
 * @category commands
 */
export const program = (argv: ReadonlyArray<string>): Program => {
  let decided: number | undefined
  let scrub: (text: string) => string = identity
  const json = argv.includes("--json")
  const keys = Effect.flatMap(keyVariables(argv), (names) =>
    Effect.forEach(
      names,
      (name) => Effect.orElseSucceed(Config.option(Config.redacted(name)), () => Option.none())
    )).pipe(Effect.map((found) => {
      const sanitizers = found.flatMap((key) => Option.isSome(key) ? [Sanitize.make(key.value).scrub] : [])
      return (text: string) => sanitizers.reduce((acc, clean) => clean(acc), text)
    }))
  return {
    main: Effect.uninterruptible(Effect.gen(function*() {
      scrub = yield* keys
      return yield* run(argv).pipe(
        Effect.as(ExitCode.ExitCode.Committed as number),
        Effect.catchAll((error) => exitCodeOf(error, json, scrub)),
        Effect.tap((code) => Effect.sync(() => (decided = code)))
      )
    })),
    scrub: (text) => scrub(text),
    exitCode: (exit) =>
      EffectExit.isSuccess(exit)
        ? exit.value
        : Cause.isInterruptedOnly(exit.cause)
        ? decided ?? ExitCode.ExitCode.Interrupted
        : undefined
  }
}
