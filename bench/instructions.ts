/**
 * Figure 3's clients counted in instructions, not timed: each client's child (`concurrency.ts child <mode>`) runs
 * under valgrind's cachegrind (`--cache-sim=no`), which counts every instruction the process executes, on every thread
 * (the collector's and the optimising compiler's too). Not part of `npm run bench`: valgrind runs a process about 50
 * times slower, so a client of 1,000 streams takes 4–5 minutes.
 *
 * Why: figure 3's CPU times move by ±20 % between runs of one build on a shared machine, so a change worth a few per
 * cent of a client's CPU needs many alternating pairs to show. The count moves by a few per cent at most (the JIT's
 * and the collector's timing still differ from run to run, and valgrind runs one thread at a time). Each client also
 * runs once with a single stream; that count (the process starting, loading its modules and one reply) is taken off,
 * so the figure is the work of the streams (docs/performance.md, "1,000 streams in instructions"). It counts
 * instructions, not time: a cache miss or a wait costs nothing in it.
 *
 * ```sh
 * npm run bench:instructions                      # reprise and the least client, 1,000 streams
 * npm run bench:instructions -- reprise floor --streams 200
 * ```
 *
 * Two children run at a time (one per core of a 2-core machine; the count does not depend on the core).
 */
import * as ChildProcess from "node:child_process"
import * as Os from "node:os"
import * as Path from "node:path"
import { script } from "./concurrency.js"
import { repoRoot } from "./support/corpus.js"
import * as Server from "./support/server.js"
import { fmt, plainNodeImports, table } from "./support/stats.js"

const modes = ["reprise", "least", "floor", "baseline"] as const
type Mode = (typeof modes)[number]

interface Count {
  readonly mode: Mode
  readonly streams: number
  readonly attempts: number
  readonly instructions: number
}

const usage = "usage: bench:instructions [reprise|least|floor|baseline …] [--streams N]"

const parse = (args: ReadonlyArray<string>): { readonly modes: ReadonlyArray<Mode>; readonly streams: number } => {
  const chosen: Array<Mode> = []
  let streams = 1000
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]
    if (arg === "--streams") {
      const value = Number(args[++i])
      if (!Number.isInteger(value) || value < 2) {
        throw new Error(`--streams must be a whole number of at least 2\n${usage}`)
      }
      streams = value
    } else if ((modes as ReadonlyArray<string>).includes(arg)) {
      chosen.push(arg as Mode)
    } else {
      throw new Error(`unknown argument ${JSON.stringify(arg)}\n${usage}`)
    }
  }
  return { modes: chosen.length === 0 ? ["reprise", "least"] : chosen, streams }
}

/** One child under cachegrind against a fresh simulator: the instructions it executed, and its result. */
const counted = async (mode: Mode, streams: number): Promise<Count> => {
  const server = await Server.start(Server.tempDir(), script(streams))
  try {
    const args = [
      "--tool=cachegrind",
      "--cache-sim=no",
      "--cachegrind-out-file=/dev/null",
      process.execPath,
      "--expose-gc",
      ...plainNodeImports,
      Path.join(repoRoot, "bench", "concurrency.ts"),
      "child",
      mode,
      server.url,
      String(streams)
    ]
    const { stderr, stdout } = await new Promise<{ stdout: string; stderr: string }>((resolve, reject) => {
      ChildProcess.execFile(
        "valgrind",
        args,
        { cwd: repoRoot, maxBuffer: 64 << 20 },
        (error, stdout, stderr) =>
          error === null
            ? resolve({ stdout, stderr })
            : reject(new Error(`${mode} (${streams} streams) under valgrind: ${error.message}\n${stderr.slice(-1000)}`))
      )
    })
    const refs = /I\s+refs:\s+([\d,]+)/.exec(stderr)
    if (refs === null) throw new Error(`${mode}: no instruction count in valgrind's output\n${stderr.slice(-1000)}`)
    const result = JSON.parse(stdout.trim().split("\n").pop() ?? "")
    if (result.ok !== streams) throw new Error(`${mode}: ${result.ok} of ${streams} streams committed`)
    return { mode, streams, attempts: result.attempts, instructions: Number(refs[1].replaceAll(",", "")) }
  } finally {
    await server.stop()
  }
}

/** `jobs` run `parallel` at a time, results in order. */
const pooled = async <A>(jobs: ReadonlyArray<() => Promise<A>>, parallel: number): Promise<Array<A>> => {
  const results: Array<A> = new Array(jobs.length)
  let next = 0
  const worker = async () => {
    while (next < jobs.length) {
      const i = next++
      results[i] = await jobs[i]()
    }
  }
  await Promise.all(Array.from({ length: Math.min(parallel, jobs.length) }, worker))
  return results
}

const main = async () => {
  const { modes: chosen, streams } = parse(process.argv.slice(2))
  const found = ChildProcess.spawnSync("valgrind", ["--version"], { encoding: "utf8" })
  if (found.error !== undefined || found.status !== 0) {
    throw new Error("valgrind was not found: install it (apt-get install valgrind) to count instructions")
  }
  const parallel = Math.max(1, Math.min(2, Os.availableParallelism()))
  const jobs = chosen.flatMap((mode) => [() => counted(mode, streams), () => counted(mode, 1)])
  const counts = await pooled(jobs, parallel)
  const work = chosen.map((mode, i) => {
    const whole = counts[2 * i]
    const alone = counts[2 * i + 1]
    return { mode, whole, alone, work: whole.instructions - alone.instructions }
  })
  const least = work.find((w) => w.mode === "least")
  const giga = (n: number) => fmt(n / 1e9, 2)
  table(
    `Figure 3 in instructions (cachegrind, ${streams} streams, every thread; ${found.stdout.trim()})`,
    ["client", "whole run (G)", "1 stream (G)", "the streams' work (G)", "per attempt (M)", "vs least"],
    work.map((w) => [
      w.mode,
      giga(w.whole.instructions),
      giga(w.alone.instructions),
      giga(w.work),
      fmt(w.work / w.whole.attempts / 1e6, 2),
      least === undefined ? "–" : `${fmt(w.work / least.work, 3)}×`
    ])
  )
}

main().catch((error) => {
  console.error(error instanceof Error ? error.message : error)
  process.exit(1)
})
