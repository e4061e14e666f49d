/**
 * `reprise simulate`: the loopback fault simulator in the foreground, until SIGINT.
 *
 * @since 0.1.0
 */
import * as Simulator from "@reprise/simulator/Simulator"
import * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import * as Effect from "effect/Effect"
import * as ExitCode from "./ExitCode.js"
import * as Output from "./Output.js"

/**
 * Prints the URL and the base URL of every route on stdout (one `route base-url` pair per line after the first
 * line), then serves until interrupted.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (options: { readonly port: number; readonly script: string | undefined }) =>
  Effect.gen(function*() {
    const output = yield* Output.Output
    if (!Number.isInteger(options.port) || options.port < 0 || options.port > 65535) {
      return yield* Effect.fail(
        new ExitCode.UsageError({ detail: `--port must be between 0 and 65535, got ${options.port}` })
      )
    }
    return yield* Simulator.serve({
      port: options.port,
      scriptFile: options.script,
      log: true,
      onListening: (simulator) =>
        output.stdout(
          [
            `reprise simulator listening on ${simulator.url}`,
            ...SimulatorScript.routes.map((route) => `${route} ${simulator.baseUrl(route)}`),
            ""
          ].join("\n")
        )
    })
  })
