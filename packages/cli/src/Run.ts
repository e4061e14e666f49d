/**
 * The bodies of `reprise chat` and `reprise repl`, loaded only when one of them runs: they pull in the HTTP client,
 * the providers and the session file, which `reprise --help` and `reprise simulate` do not need.
 *
 * @since 0.1.0
 */
import type * as Message from "@reprise/core/Message"
import * as Transcript from "@reprise/core/Transcript"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as BuiltinTools from "./BuiltinTools.js"
import { Exit } from "./ExitCode.js"
import * as Output from "./Output.js"
import * as Repl from "./Repl.js"
import * as SessionLock from "./SessionLock.js"
import * as Settings from "./Settings.js"
import * as Turn from "./Turn.js"

/**
 * Reads the session and checks that it can be appended to, before anything is sent (and paid for). A torn last
 * line, a write that never completed, is left out with one notice on stderr; the next append removes it.
 */
const openSession = (path: string) =>
  Effect.gen(function*() {
    const contents = yield* Transcript.read(path)
    yield* Transcript.checkWritable(path)
    if (contents.torn !== undefined) {
      yield* Output.stderr(
        `reprise: ${path}:${contents.torn.line}: left out a torn last line (${contents.torn.bytes} bytes, an ` +
          `append that never completed; it was not committed)\n`
      )
    }
    return contents.messages
  })

/**
 * Runs `f` over the session's history with the turn's services, holding the session's lock (see
 * {@link SessionLock}) from before the history is read until `f` is done: no other process appends in between.
 * The wait for the lock and the read of the history are interruptible (Ctrl-C ends them).
 */
const withSession = <A, E, R>(
  settings: Settings.Settings,
  command: string,
  f: (history: ReadonlyArray<Message.Message>) => Effect.Effect<A, E, R>
) =>
  Effect.scoped(Effect.flatMap(
    Option.match(settings.session, {
      onNone: () => Effect.succeed([]),
      onSome: (path) =>
        Effect.interruptible(Effect.zipRight(
          SessionLock.acquire(path, {
            wait: settings.waitSession,
            command,
            onWait: (holder) =>
              Output.stderr(
                `reprise: ${path}: waiting for ${
                  holder === undefined ? "another process" : `pid ${holder.pid} (${holder.command})`
                } to finish its turn on the session…\n`
              )
          }),
          openSession(path)
        ))
    }),
    (history) =>
      f(history).pipe(
        Effect.provide(Layer.merge(
          BuiltinTools.layer(settings.tools, { workspace: settings.workspace }),
          Turn.providerLayer(settings)
        ))
      )
  ))

/**
 * Succeeds on 0, fails with {@link Exit} otherwise.
 *
 * @since 0.1.0
 * @category running
 */
export const exitWith = (code: number) => code === 0 ? Effect.void : Effect.fail(new Exit(code))

/**
 * `reprise chat`: one turn over the session's history.
 *
 * @since 0.1.0
 * @category running
 */
export const chat = (parsed: Settings.Parsed, prompt: string) =>
  Effect.gen(function*() {
    // `Cli.main` runs uninterruptibly; what may be interrupted says so. The commits may not (Chat.step), and once
    // the final reply is committed nothing interruptible is left: Ctrl-C then changes nothing, and the exit code
    // says committed (see Turn.run).
    const settings = yield* Effect.interruptible(Settings.resolve(parsed))
    const code = yield* withSession(settings, "reprise chat", (history) =>
      Effect.gen(function*() {
        const turn = yield* Turn.run(settings, history, prompt, Effect.interruptible)
        return turn.result._tag === "Right" ? 0 : yield* turn.render.error(turn.result.left, settings.debug)
      }))
    return yield* exitWith(code)
  })

/**
 * `reprise repl`: one turn per line of stdin.
 *
 * @since 0.1.0
 * @category running
 */
export const repl = (parsed: Settings.Parsed) =>
  Effect.gen(function*() {
    const settings = yield* Effect.interruptible(Settings.resolve(parsed))
    const code = yield* withSession(settings, "reprise repl", (history) =>
      Effect.interruptible(Repl.run(settings, history)))
    return yield* exitWith(code)
  })
