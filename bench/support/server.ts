/**
 * Starting and stopping the simulator child process, and writing its script and fixtures to a temporary folder.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { repoRoot } from "./corpus.js"
import { plainNodeImports } from "./stats.js"

export interface Server {
  readonly url: string
  readonly pid: number
  /**
   * Ends the simulator; resolves with the CPU time it took from the moment it listened (ms, every thread), or
   * `undefined` if it could not say (it had exited already, or was killed).
   */
  readonly stop: () => Promise<number | undefined>
}

export const tempDir = (): string => Fs.mkdtempSync(Path.join(Os.tmpdir(), "reprise-bench-"))

/** Writes `script` (JSON) into `dir` and starts a simulator process serving it. */
export const start = (dir: string, script: unknown): Promise<Server> =>
  new Promise((resolve, reject) => {
    const file = Path.join(dir, `script-${Date.now()}-${Math.random().toString(36).slice(2)}.json`)
    Fs.writeFileSync(file, JSON.stringify(script))
    const proc = ChildProcess.spawn(
      process.execPath,
      [...plainNodeImports, Path.join(repoRoot, "bench/support/simulator.ts"), file],
      { cwd: repoRoot, stdio: ["pipe", "pipe", "inherit"] }
    )
    let out = ""
    const onData = (d: Buffer) => {
      out += d.toString()
      const line = out.split("\n").find((l) => l.startsWith("{"))
      if (line === undefined) return
      proc.stdout.off("data", onData)
      const { url } = JSON.parse(line) as { url: string }
      // what it prints as it exits: its CPU time since it listened
      let rest = ""
      proc.stdout.on("data", (d: Buffer) => {
        rest += d.toString()
      })
      const cpuMs = () => {
        const last = rest.split("\n").find((l) => l.startsWith("{\"cpuMs\""))
        return last === undefined ? undefined : (JSON.parse(last) as { cpuMs: number }).cpuMs
      }
      resolve({
        url,
        pid: proc.pid!,
        stop: () =>
          new Promise<number | undefined>((done) => {
            if (proc.exitCode !== null) return done(undefined)
            proc.once("close", () => done(cpuMs()))
            proc.stdin.end()
            setTimeout(() => proc.kill("SIGKILL"), 5000).unref()
          })
      })
    }
    proc.stdout.on("data", onData)
    proc.on("error", reject)
    proc.on("close", (code) => reject(new Error(`simulator exited early with ${code}: ${out}`)))
  })
