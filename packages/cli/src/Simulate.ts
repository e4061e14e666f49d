/**
 * `reprise simulate`: the loopback fault simulator in the foreground, until SIGINT, serving a script file
 * (`--script`) or a scenario catalogue (`--scenarios failoverbench [--profile full|fast]`).
 *
 * @since 0.1.0
 */
import * as Failoverbench from "@reprise/simulator/Failoverbench"
import * as Simulator from "@reprise/simulator/Simulator"
import * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import * as Effect from "effect/Effect"
import * as ExitCode from "./ExitCode.js"
import * as Output from "./Output.js"

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  readonly port: number
  readonly script: string | undefined
  readonly scenarios: "failoverbench" | undefined
  readonly profile: Failoverbench.Profile | undefined
}

const usage = (detail: string) => Effect.fail(new ExitCode.UsageError({ detail }))

/** The lines that name the catalogue's models: the healthy ones, then one per scenario. */
const catalogue = (profile: Failoverbench.Profile): ReadonlyArray<string> => [
  `failoverbench scenarios (${profile} profile), by model name:`,
  `  ${Failoverbench.healthyModel.padEnd(24)} healthy`,
  `  ${Failoverbench.noPrefillModel.padEnd(24)} healthy, refuses assistant prefill`,
  ...Failoverbench.scenarios.map((s) => `  ${s.model.padEnd(24)} ${s.id} ${s.title} (fallback ${s.fallback})`)
]

/**
 * Prints the URL and the base URL of every route on stdout (one `route base-url` pair per line after the first
 * line; with `--scenarios`, then the catalogue's models, one per line), then serves until interrupted.
 *
 * @since 0.1.0
 * @category running
 */
export const run = (options: Options) =>
  Effect.gen(function*() {
    const output = yield* Output.Output
    if (!Number.isInteger(options.port) || options.port < 0 || options.port > 65535) {
      return yield* usage(`--port must be between 0 and 65535, got ${options.port}`)
    }
    if (options.scenarios !== undefined && options.script !== undefined) {
      return yield* usage("--scenarios and --script are exclusive: give one of them")
    }
    if (options.profile !== undefined && options.scenarios === undefined) {
      return yield* usage("--profile sets the timings of --scenarios: give --scenarios failoverbench with it")
    }
    const profile = options.profile ?? "full"
    return yield* Simulator.serve({
      port: options.port,
      scriptFile: options.script,
      script: options.scenarios === undefined ? undefined : Failoverbench.script(profile),
      log: true,
      onListening: (simulator) =>
        output.stdout(
          [
            `reprise simulator listening on ${simulator.url}`,
            ...SimulatorScript.routes.map((route) => `${route} ${simulator.baseUrl(route)}`),
            ...(options.scenarios === undefined ? [] : catalogue(profile)),
            ""
          ].join("\n")
        )
    })
  })
