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
    const closed = new Promise<void>((done) => proc.once("close", () => done()))
    // what it prints: `{"url": …}` once it listens, `{"cpuMs": …}` as it exits
    let out = ""
    const printed = (key: string): unknown => {
      for (const line of out.split("\n")) {
        if (!line.startsWith(`{"${key}"`)) continue
        try {
          return (JSON.parse(line) as Record<string, unknown>)[key]
        } catch {
          return undefined
        }
      }
      return undefined
    }
    const stop = async (): Promise<number | undefined> => {
      const running = proc.exitCode === null && proc.signalCode === null
      if (running) proc.stdin.end()
      const kill = running ? setTimeout(() => proc.kill("SIGKILL"), 5000) : undefined
      await closed
      clearTimeout(kill)
      const cpuMs = printed("cpuMs")
      return typeof cpuMs === "number" && Number.isFinite(cpuMs) ? cpuMs : undefined
    }
    let listening = false
    proc.stdout.on("data", (d: Buffer) => {
      out += d.toString()
      if (listening) return
      const url = printed("url")
      if (typeof url !== "string") return
      listening = true
      resolve({ url, pid: proc.pid!, stop })
    })
    proc.on("error", reject)
    proc.on("close", (code) => reject(new Error(`simulator exited early with ${code}: ${out}`)))
  })
