/**
 * The bodies of `reprise chat` and `reprise repl`, loaded only when one of them runs: they pull in the HTTP client,
 * the providers and the session file, which `reprise --help` and `reprise simulate` do not need.
 *
 * @since 0.1.0
 */
import * as BuiltinTools from "@reprise/core/BuiltinTools"
import type * as Message from "@reprise/core/Message"
import * as Transcript from "@reprise/core/Transcript"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import { Exit } from "./ExitCode.js"
import * as Output from "./Output.js"
import * as Repl from "./Repl.js"
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

const withSession = <A, E, R>(
  settings: Settings.Settings,
  f: (history: ReadonlyArray<Message.Message>) => Effect.Effect<A, E, R>
) =>
  Effect.flatMap(
    Option.match(settings.session, { onNone: () => Effect.succeed([]), onSome: openSession }),
    (history) =>
      f(history).pipe(
        Effect.provide(Layer.merge(
          BuiltinTools.layer(settings.tools, { workspace: settings.workspace }),
          Turn.providerLayer(settings)
        ))
      )
  )

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
    const settings = yield* Settings.resolve(parsed)
    const code = yield* withSession(settings, (history) =>
      Effect.gen(function*() {
        const turn = yield* Turn.run(settings, history, prompt)
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
    const settings = yield* Settings.resolve(parsed)
    const code = yield* withSession(settings, (history) => Repl.run(settings, history))
    return yield* exitWith(code)
  })
