/**
 * Where the CLI writes: stdout for answers (or NDJSON), stderr for notices. Behind a service so tests and the demo
 * can capture both streams.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly stdout: (text: string) => Effect.Effect<void>
  readonly stderr: (text: string) => Effect.Effect<void>
  /** Whether stdout is a terminal: previews then stream live. */
  readonly isTTY: boolean
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
 * The process's own stdout and stderr.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerProcess: Layer.Layer<Output> = Layer.sync(Output, () => ({
  stdout: write(process.stdout),
  stderr: write(process.stderr),
  isTTY: process.stdout.isTTY === true
}))

/**
 * Collects output in memory.
 *
 * @since 0.1.0
 * @category layers
 */
export const makeCapture = (isTTY = false) => {
  const out: Array<string> = []
  const err: Array<string> = []
  const service: Service = {
    stdout: (text) => Effect.sync(() => void out.push(text)),
    stderr: (text) => Effect.sync(() => void err.push(text)),
    isTTY
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
