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
  readonly stop: () => Promise<void>
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
      resolve({
        url,
        pid: proc.pid!,
        stop: () =>
          new Promise<void>((done) => {
            if (proc.exitCode !== null) return done()
            proc.once("close", () => done())
            proc.stdin.end()
            setTimeout(() => proc.kill("SIGKILL"), 5000).unref()
          })
      })
    }
    proc.stdout.on("data", onData)
    proc.on("error", reject)
    proc.on("close", (code) => reject(new Error(`simulator exited early with ${code}: ${out}`)))
  })
