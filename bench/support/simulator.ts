/**
 * The loopback simulator in its own process, so its CPU time does not count against the client being measured:
 * `tsx bench/support/simulator.ts <script.json>` prints `{"url": …}` once it listens and runs until its stdin
 * closes (the parent exits or ends it).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Simulator from "@reprise/simulator/Simulator"
import * as Effect from "effect/Effect"

const scriptFile = process.argv[2]
if (scriptFile === undefined) throw new Error("usage: simulator.ts <script.json>")

process.stdin.on("end", () => process.exit(0))
process.stdin.on("close", () => process.exit(0))
process.stdin.resume()

NodeRuntime.runMain(
  Simulator.serve({
    scriptFile,
    log: false,
    maxRecords: 100,
    onListening: (simulator) => Effect.sync(() => console.log(JSON.stringify({ url: simulator.url })))
  })
)
