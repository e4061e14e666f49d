/**
 * The loopback simulator in its own process, so its CPU time does not count against the client being measured:
 * `tsx bench/support/simulator.ts <script.json>` prints `{"url": …}` once it listens and runs until its stdin
 * closes (the parent exits or ends it). Before it exits it prints `{"cpuMs": …}`: the CPU time it took from the
 * moment it listened (every thread, user and system), which is what serving its clients cost it (figure 3 reports it
 * next to the client's own; idle, it takes 2–15 ms over 2 s).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as Simulator from "@reprise/simulator/Simulator"
import * as Effect from "effect/Effect"

const scriptFile = process.argv[2]
if (scriptFile === undefined) throw new Error("usage: simulator.ts <script.json>")

let listening: NodeJS.CpuUsage | undefined
let exiting = false
const exit = () => {
  if (exiting) return
  exiting = true
  if (listening === undefined) process.exit(0)
  const cpu = process.cpuUsage(listening)
  process.stdout.write(`${JSON.stringify({ cpuMs: (cpu.user + cpu.system) / 1000 })}\n`, () => process.exit(0))
}
process.stdin.on("end", exit)
process.stdin.on("close", exit)
process.stdin.resume()

NodeRuntime.runMain(
  Simulator.serve({
    scriptFile,
    log: false,
    maxRecords: 100,
    onListening: (simulator) =>
      Effect.sync(() => {
        listening = process.cpuUsage()
        console.log(JSON.stringify({ url: simulator.url }))
      })
  })
)
