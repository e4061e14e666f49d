/**
 * Where the CLI writes: stdout for answers (or NDJSON), stderr for notices. Behind a service so tests and the demo
 * can capture both streams.
 *
 * @since 0.1.0
 */
import * as Console from "effect/Console"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as fs from "node:fs"

/**
 * The terminal that stdout and stderr both write to, when what was written may be redrawn there
 * ({@link redrawAllowed}).
 *
 * @since 0.1.0
 * @category models
 */
export interface Terminal {
  /** Its size now, in character cells (it may change while the process runs). */
  readonly size: () => { readonly columns: number; readonly rows: number }
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly stdout: (text: string) => Effect.Effect<void>
  readonly stderr: (text: string) => Effect.Effect<void>
  /** Whether stdout is a terminal: previews then stream live. */
  readonly isTTY: boolean
  /**
   * Present when stdout and stderr are one terminal that may be redrawn: a discarded preview is then erased and a
   * backoff shows a countdown. Absent, output is written once and never taken back.
   */
  readonly terminal?: Terminal | undefined
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Output extends Context.Tag("@reprise/cli/Output")<Output, Service>() {}

const write = (stream: NodeJS.WriteStream) => (text: string): Effect.Effect<void> =>
  Effect.async<void>((resume) => {
    // Resolve once the chunk is handed to the OS, so that output is not lost when the process exits.
    stream.write(text, () => resume(Effect.void))
  })

/**
 * The exit code of a process whose reader went away (`reprise chat … | head -c 10`): 128 + SIGPIPE, what a shell
 * reports for a program that a closed pipe stopped.
 *
 * @since 0.1.0
 * @category constants
 */
export const brokenPipeExitCode = 141

/**
 * The exit code when stdout or stderr cannot be written for another reason (a full disk behind `> file`,
 * `> /dev/full`): 74, `EX_IOERR` of sysexits.h. What was committed before is in the session file.
 *
 * @since 0.1.0
 * @category constants
 */
export const outputErrorExitCode = 74

const onBrokenPipe = (error: NodeJS.ErrnoException) => {
  // The reader is gone, so nothing more can be said to it: stop at once, quietly, as Unix tools do.
  if (error.code === "EPIPE") process.exit(brokenPipeExitCode)
  // Any other write error: one line on stderr (if it can still be written), never a stack.
  try {
    fs.writeSync(2, `reprise: error: cannot write the output (${error.code ?? "unknown error"})\n`)
  } catch {
    // stderr is what failed
  }
  process.exit(outputErrorExitCode)
}

/**
 * The process's own stdout and stderr. When the reader of either goes away (a closed pipe), the process stops at
 * once with {@link brokenPipeExitCode}, printing nothing, instead of failing with Node's EPIPE stack.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerProcess: Layer.Layer<Output> = Layer.sync(Output, () => {
  for (const stream of [process.stdout, process.stderr]) {
    if (!stream.listeners("error").includes(onBrokenPipe)) stream.on("error", onBrokenPipe)
  }
  const terminal: Terminal = {
    // 0 when Node does not know it: nothing then fits, and nothing is erased
    size: () => ({ columns: process.stdout.columns ?? 0, rows: process.stdout.rows ?? 0 })
  }
  return {
    stdout: write(process.stdout),
    stderr: write(process.stderr),
    isTTY: process.stdout.isTTY === true,
    ...(redrawAllowed(process.stdout, process.stderr, process.env) ? { terminal } : {})
  }
})

/**
 * Collects output in memory; with `terminal`, as if written to a terminal of that size that may be redrawn.
 *
 * @since 0.1.0
 * @category layers
 */
export const makeCapture = (isTTY = false, terminal?: Terminal | undefined) => {
  const out: Array<string> = []
  const err: Array<string> = []
  const service: Service = {
    stdout: (text) => Effect.sync(() => void out.push(text)),
    stderr: (text) => Effect.sync(() => void err.push(text)),
    isTTY,
    ...(terminal === undefined ? {} : { terminal })
  }
  return {
    layer: Layer.succeed(Output, service),
    stdout: () => out.join(""),
    stderr: () => err.join("")
  }
}

/**
 * @since 0.1.0
 * @category accessors
 */
export const stdout = (text: string): Effect.Effect<void, never, Output> =>
  Effect.flatMap(Output, (o) => o.stdout(text))

/**
 * @since 0.1.0
 * @category accessors
 */
export const stderr = (text: string): Effect.Effect<void, never, Output> =>
  Effect.flatMap(Output, (o) => o.stderr(text))

const sgr = /\u001b\[[0-9;]*m/g

/**
 * Whether text written to a stream may carry colour: only on a terminal, and never when `NO_COLOR` is set to a
 * non-empty value (https://no-color.org).
 *
 * @since 0.1.0
 * @category colour
 */
export const colourAllowed = (stream: { readonly isTTY?: boolean | undefined }, env: NodeJS.ProcessEnv): boolean =>
  stream.isTTY === true && (env.NO_COLOR === undefined || env.NO_COLOR === "")

/**
 * Whether reprise may move the cursor to redraw what it wrote (erase a discarded preview, update a countdown): only
 * when stdout and stderr are both terminals (then, interactively, the same one) and nothing asks for plain output,
 * neither `NO_COLOR` set to a non-empty value nor `TERM=dumb`. Otherwise every byte written stays where it is.
 *
 * @since 0.1.0
 * @category terminal
 */
export const redrawAllowed = (
  stdout: { readonly isTTY?: boolean | undefined },
  stderr: { readonly isTTY?: boolean | undefined },
  env: NodeJS.ProcessEnv
): boolean => colourAllowed(stdout, env) && colourAllowed(stderr, env) && env.TERM !== "dumb"

/**
 * Removes SGR escape sequences (colour, bold) from text.
 *
 * @since 0.1.0
 * @category colour
 */
export const stripColour = (text: string): string => text.replace(sgr, "")

/**
 * Runs `effect` with a `Console` that drops colour from what it writes to a stream where colour is not allowed
 * ({@link colourAllowed}). @effect/cli writes its help, usage errors and `--version` through `Console`, always in
 * colour; reprise's own output has none.
 *
 * @since 0.1.0
 * @category colour
 */
export const withColourPolicy = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> => {
  const stdoutColour = colourAllowed(process.stdout, process.env)
  const stderrColour = colourAllowed(process.stderr, process.env)
  if (stdoutColour && stderrColour) return effect
  const plain = (args: ReadonlyArray<unknown>) => args.map((arg) => typeof arg === "string" ? stripColour(arg) : arg)
  return Console.consoleWith((console) =>
    Console.withConsole(effect, {
      ...console,
      log: (...args) => console.log(...(stdoutColour ? args : plain(args))),
      info: (...args) => console.info(...(stdoutColour ? args : plain(args))),
      error: (...args) => console.error(...(stderrColour ? args : plain(args))),
      warn: (...args) => console.warn(...(stderrColour ? args : plain(args)))
    })
  )
}
