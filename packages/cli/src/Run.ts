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
import * as Repl from "./Repl.js"
import * as Settings from "./Settings.js"
import * as Turn from "./Turn.js"

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
