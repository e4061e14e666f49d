/**
 * The `reprise` executable.
 *
 * Exit codes: 0 committed, 1 permanent provider error, 2 usage or configuration error, 75 transient failure not
 * recovered, 76 authentication or permission, 77 model not found, 130 interrupted.
 *
 * `bin/reprise.js` installs a SIGINT handler before this module is loaded (exit 130, nothing can have been sent
 * yet) and this module replaces it with the runtime's own, which interrupts the running command.
 *
 * @since 0.1.0
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as NodeTerminal from "@effect/platform-node/NodeTerminal"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as Layer from "effect/Layer"
import * as Cli from "./Cli.js"
import * as ExitCode from "./ExitCode.js"
import * as Output from "./Output.js"

const debug = process.argv.includes("--debug")

// Uninterruptible (the commands say what SIGINT may end); an interruption after the outcome was decided keeps it.
const program = Cli.program(process.argv)
const main = program.main.pipe(
  Output.withColourPolicy,
  Effect.provide(Layer.mergeAll(NodeFileSystem.layer, NodePath.layer, NodeTerminal.layer, Output.layerProcess))
)

NodeRuntime.runMain(main, {
  disableErrorReporting: true,
  teardown: (exit, onExit) => {
    const code = program.exitCode(exit as Exit.Exit<number, unknown>)
    if (code !== undefined || Exit.isSuccess(exit)) {
      // The outcome is decided; on 0 the runtime lets the event loop drain (sockets closing) and has removed its
      // SIGINT handler: a Ctrl-C then ends the process with that outcome, not as killed by the signal.
      process.on("SIGINT", () => process.exit(code ?? 0))
      // a SIGTERM while the event loop drains ends the process, as without reprise's listener
      process.removeListener("SIGTERM", absorb)
      return onExit(code ?? 0)
    }
    // A defect is a bug in reprise: one line, unless --debug asks for the whole cause with its stack.
    const detail = debug ? Cause.pretty(exit.cause) : Cause.pretty(exit.cause).split("\n")[0]
    process.stderr.write(`reprise: internal error: ${program.scrub(detail)}\n`)
    onExit(ExitCode.ExitCode.Permanent)
  }
})

// The runtime interrupts the command at the first SIGINT (or SIGTERM) and then retires its listener. A second one
// while the interrupted command shuts down (a background response's cancel, the final export: each bounded) would
// find no listener, and Node would end the process killed by the signal, without the shutdown's notices and its 130:
// it is absorbed instead, and the shutdown ends as the first signal made it end (a command's shutdown is bounded).
const absorb = () => {}
process.on("SIGINT", absorb)
process.on("SIGTERM", absorb)

// The runtime handles SIGINT from here on: retire the handler bin/reprise.js installed for the start-up.
const early = (globalThis as Record<symbol, unknown>)[Symbol.for("@reprise/cli/startupSigint")]
if (typeof early === "function") process.removeListener("SIGINT", early as () => void)
