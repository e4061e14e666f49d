/**
 * The `reprise` command line: `chat`, `repl`, `simulate` and `demo`, built with @effect/cli. See the README for the
 * flags, environment variables and exit codes.
 *
 * @since 0.1.0
 */
import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as ValidationError from "@effect/cli/ValidationError"
import * as BuiltinTools from "@reprise/core/BuiltinTools"
import type * as Message from "@reprise/core/Message"
import * as Transcript from "@reprise/core/Transcript"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Demo from "./Demo.js"
import * as ExitCode from "./ExitCode.js"
import * as Output from "./Output.js"
import * as Repl from "./Repl.js"
import * as Settings from "./Settings.js"
import * as Simulate from "./Simulate.js"
import * as Turn from "./Turn.js"

/**
 * The command ended with a non-zero exit code after reporting its outcome itself.
 *
 * @since 0.1.0
 * @category errors
 */
export class Exit {
  readonly _tag = "Exit"
  constructor(readonly code: number) {}
}

const withSession = <A, E, R>(
  settings: Settings.Settings,
  f: (history: ReadonlyArray<Message.Message>) => Effect.Effect<A, E, R>
) =>
  Effect.flatMap(
    Option.match(settings.session, { onNone: () => Effect.succeed([]), onSome: Transcript.load }),
    (history) =>
      f(history).pipe(
        Effect.provide(Layer.merge(
          BuiltinTools.layer(settings.tools, { workspace: settings.workspace }),
          Turn.providerLayer(settings)
        ))
      )
  )

const exitWith = (code: number) => code === 0 ? Effect.void : Effect.fail(new Exit(code))

const chat = Command.make(
  "chat",
  { ...Settings.options, prompt: Args.text({ name: "prompt" }) },
  ({ prompt, ...parsed }) =>
    Effect.gen(function*() {
      const settings = yield* Settings.resolve(parsed)
      const code = yield* withSession(settings, (history) =>
        Effect.gen(function*() {
          const turn = yield* Turn.run(settings, history, prompt)
          return turn.result._tag === "Right" ? 0 : yield* turn.render.error(turn.result.left, settings.debug)
        }))
      return yield* exitWith(code)
    })
).pipe(Command.withDescription("one turn (with its tool loop), headless"))

const repl = Command.make(
  "repl",
  Settings.options,
  (parsed) =>
    Effect.gen(function*() {
      const settings = yield* Settings.resolve(parsed)
      const code = yield* withSession(settings, (history) => Repl.run(settings, history))
      return yield* exitWith(code)
    })
).pipe(Command.withDescription("interactive: one prompt per line on stdin"))

const simulate = Command.make(
  "simulate",
  {
    port: Options.integer("port").pipe(Options.withDefault(0), Options.withDescription("port on 127.0.0.1 (0: any)")),
    script: Options.text("script").pipe(Options.optional, Options.withDescription("fault script (JSON)"))
  },
  ({ port, script }) => Simulate.run({ port, script: Option.getOrUndefined(script) })
).pipe(Command.withDescription("run the loopback fault simulator in the foreground"))

const demo = Command.make("demo", {}, () => Effect.flatMap(Demo.run, exitWith)).pipe(
  Command.withDescription("a guided run against the embedded simulator: faults, replays, commit")
)

/**
 * @since 0.1.0
 * @category commands
 */
export const command = Command.make("reprise").pipe(
  Command.withDescription("an LLM client that survives dropped sockets, 429s and overloaded streams"),
  Command.withSubcommands([chat, repl, simulate, demo])
)

/**
 * @since 0.1.0
 * @category commands
 */
export const run = Command.run(command, { name: "reprise", version: "0.1.0" })

/**
 * Maps anything the CLI can fail with to an exit code, printing what was not printed yet: one line on stderr (and
 * an `error` event on stdout with `--json`). @effect/cli has already explained a bad command line on stderr.
 *
 * @since 0.1.0
 * @category commands
 */
export const exitCodeOf = (error: unknown, json: boolean) =>
  Effect.gen(function*() {
    if (error instanceof Exit) return error.code
    const outcome = ExitCode.classify(error)
    const commandLine = ValidationError.isValidationError(error)
    const message = outcome.message
    if (json) {
      yield* Output.stdout(
        JSON.stringify({ type: "error", class: outcome.class, message, exitCode: outcome.exitCode }) + "\n"
      )
    }
    if (!commandLine) yield* Output.stderr(`reprise: error [${outcome.class}]: ${message}\n`)
    return outcome.exitCode
  })
