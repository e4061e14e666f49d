/**
 * `reprise repl`: one prompt per line on stdin, each a turn over the committed transcript.
 *
 * Lines typed (or piped) while a turn runs are queued behind it. When a turn fails (attempts or deadline exhausted,
 * a permanent error), the error is printed, the prompts queued behind it are dropped — they were written for an
 * answer that never came — and the committed transcript is kept: the next prompt is sent with it. At end of input
 * the process exits with the exit code of the last turn (0 when it committed).
 *
 * @since 0.1.0
 */
import * as Message from "@reprise/core/Message"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as readline from "node:readline"
import * as Output from "./Output.js"
import type * as Settings from "./Settings.js"
import * as Turn from "./Turn.js"

/**
 * Lines of stdin as a queue; `None` marks the end of input.
 */
const stdinLines = Effect.gen(function*() {
  const queue = yield* Queue.unbounded<Option.Option<string>>()
  yield* Effect.acquireRelease(
    Effect.sync(() => {
      const rl = readline.createInterface({ input: process.stdin, terminal: false })
      rl.on("line", (line) => Queue.unsafeOffer(queue, Option.some(line)))
      rl.on("close", () => Queue.unsafeOffer(queue, Option.none()))
      // Ctrl-C on a terminal reaches readline first: hand it to the runtime as the SIGINT it is.
      rl.on("SIGINT", () => process.kill(process.pid, "SIGINT"))
      return rl
    }),
    (rl) => Effect.sync(() => rl.close())
  )
  return queue
})

/**
 * Runs the read–turn loop until end of input.
 *
 * @since 0.1.0
 * @category repl
 */
export const run = (settings: Settings.Settings, initial: ReadonlyArray<Message.Message>) =>
  Effect.scoped(Effect.gen(function*() {
    const output = yield* Output.Output
    const lines = yield* stdinLines
    let history: ReadonlyArray<Message.Message> = initial
    let exitCode = 0
    const prompt = output.isTTY && !settings.json ? output.stderr("> ") : Effect.void
    while (true) {
      yield* prompt
      const next = yield* Queue.take(lines)
      if (Option.isNone(next)) break
      const text = next.value.trim()
      if (text.length === 0) continue
      const turn = yield* Turn.run(settings, history, text)
      history = [...history, ...turn.committed]
      if (turn.result._tag === "Right") {
        exitCode = 0
        continue
      }
      exitCode = yield* turn.render.error(turn.result.left, settings.debug)
      const queued = yield* Queue.takeAll(lines)
      const dropped = [...queued].filter((line) => Option.isSome(line) && line.value.trim().length > 0).length
      if (dropped > 0) yield* output.stderr(`reprise: dropped ${dropped} queued prompt${dropped === 1 ? "" : "s"}\n`)
      if ([...queued].some(Option.isNone)) break
    }
    return exitCode
  }))
