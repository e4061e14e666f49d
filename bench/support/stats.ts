/**
 * Small statistics and reporting helpers shared by the figures.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import * as Url from "node:url"
import * as V8 from "node:v8"
import { repoRoot } from "./corpus.js"

export interface Summary {
  readonly n: number
  readonly median: number
  readonly p99: number
  readonly min: number
  readonly max: number
  /** Median absolute deviation. */
  readonly mad: number
}

export const quantile = (sorted: ReadonlyArray<number>, q: number): number => {
  if (sorted.length === 0) return Number.NaN
  const pos = (sorted.length - 1) * q
  const lo = Math.floor(pos)
  const hi = Math.ceil(pos)
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo)
}

export const summarize = (samples: ReadonlyArray<number>): Summary => {
  const sorted = [...samples].sort((a, b) => a - b)
  const median = quantile(sorted, 0.5)
  const deviations = sorted.map((x) => Math.abs(x - median)).sort((a, b) => a - b)
  return {
    n: sorted.length,
    median,
    p99: quantile(sorted, 0.99),
    min: sorted[0] ?? Number.NaN,
    max: sorted[sorted.length - 1] ?? Number.NaN,
    mad: quantile(deviations, 0.5)
  }
}

/** Runs `f` `warmup` times unmeasured, then `runs` times, and returns the wall times in milliseconds. */
export const timed = async (runs: number, warmup: number, f: () => Promise<unknown>): Promise<Array<number>> => {
  for (let i = 0; i < warmup; i++) await f()
  const out: Array<number> = []
  for (let i = 0; i < runs; i++) {
    const start = performance.now()
    await f()
    out.push(performance.now() - start)
  }
  return out
}

export const machine = () => {
  const cpus = Os.cpus()
  return {
    os: `${Os.type()} ${Os.release()} ${Os.arch()}`,
    cpuModel: cpus[0]?.model ?? "unknown",
    cores: cpus.length,
    totalMemMB: Math.round(Os.totalmem() / 1024 / 1024),
    node: process.version
  }
}

export const fmt = (x: number, digits = 2) =>
  Number.isFinite(x) ? x.toFixed(Math.abs(x) >= 100 ? Math.min(digits, 0) : digits) : String(x)

/** Prints a table with aligned columns. */
export const table = (title: string, header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>) => {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join("  ")
  console.log(`\n${title}`)
  console.log(line(header))
  console.log(widths.map((w) => "-".repeat(w)).join("  "))
  for (const row of rows) console.log(line(row))
}

/**
 * The flags that load tsx and then `plainNode.ts`, before a process's own module graph is loaded: Node's source maps
 * off for every module the figure loads (`plainNode.ts` says why).
 */
export const plainNodeImports: ReadonlyArray<string> = [
  "--import",
  "tsx",
  "--import",
  Url.pathToFileURL(Path.join(repoRoot, "bench/support/plainNode.ts")).href
]

/**
 * Runs a bench script in a fresh Node process (tsx loader, source maps off, `--expose-gc`) and returns the JSON it
 * prints last on stdout. A fresh process gives a clean peak RSS.
 */
export const child = (script: string, args: ReadonlyArray<string>, timeoutMs = 120_000): Promise<any> =>
  new Promise((resolve, reject) => {
    const proc = ChildProcess.spawn(
      process.execPath,
      ["--expose-gc", ...plainNodeImports, Path.join(repoRoot, "bench", script), ...args],
      { cwd: repoRoot, stdio: ["ignore", "pipe", "inherit"] }
    )
    let out = ""
    const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs)
    proc.stdout.on("data", (d) => (out += d))
    proc.on("error", reject)
    proc.on("close", (code) => {
      clearTimeout(timer)
      const last = out.trim().split("\n").pop() ?? ""
      if (code !== 0) return reject(new Error(`${script} ${args.join(" ")} exited with ${code}: ${out.slice(-500)}`))
      try {
        resolve(JSON.parse(last))
      } catch (error) {
        reject(new Error(`${script}: no JSON result: ${String(error)}: ${out.slice(-500)}`))
      }
    })
  })

/**
 * The entry of a figure's child process (`bench/<figure>.ts child …`, started by {@link child}): when this process is
 * one, runs `f` with the arguments after `child`, prints its result as the last line of JSON and exits (1 on a
 * failure, after printing it on stderr).
 */
export const childMain = <A>(f: (args: ReadonlyArray<string>) => Promise<A>): void => {
  if (process.argv[2] !== "child") return
  f(process.argv.slice(3)).then(
    (result) => {
      console.log(JSON.stringify(result))
      process.exit(0)
    },
    (error) => {
      console.error(error)
      process.exit(1)
    }
  )
}

/** A field of `/proc/self/status` in kB (`VmHWM`, the peak RSS; `VmRSS`, the RSS now), in bytes. */
const statusBytes = (status: string, field: "VmHWM" | "VmRSS"): number | undefined => {
  const found = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(status)
  return found === null ? undefined : Number(found[1]) * 1024
}

/** This process's peak RSS as the kernel keeps it (Linux: `VmHWM` in `/proc/self/status`), in bytes. */
const kernelPeakRss = (): number | undefined => {
  try {
    return statusBytes(Fs.readFileSync("/proc/self/status", "utf8"), "VmHWM")
  } catch {
    return undefined
  }
}

/**
 * Resets the kernel's peak RSS of this process to its RSS now (`/proc/self/clear_refs`, 5): false where it cannot, or
 * where the peak read back is not the RSS (the reset did not take).
 */
const resetKernelPeakRss = (): boolean => {
  try {
    Fs.writeFileSync("/proc/self/clear_refs", "5")
    const status = Fs.readFileSync("/proc/self/status", "utf8")
    const peak = statusBytes(status, "VmHWM")
    const now = statusBytes(status, "VmRSS")
    return peak !== undefined && now !== undefined && peak - now < 1024 * 1024
  } catch {
    return false
  }
}

/**
 * The peaks of RSS and heap from now until stopped. The RSS peak is the kernel's own (reset here, read once at the
 * stop): exact, and read without a system call while the figure runs. The heap is sampled every `everyMs` from V8's
 * statistics, which make none. Where the kernel's peak is not available (not Linux, or its reset did not take), RSS
 * is sampled with the heap.
 *
 * Until 2026-12-04 RSS was sampled here every `everyMs` (`process.memoryUsage.rss()`, twice a sample): a read of
 * `/proc/self/stat` that waits while the collector's threads change the memory map, on the main thread of the process
 * measured. In figure 3's children the samples took 35–95 ms of each run's main thread, up to 17 ms for one, and the
 * most in the client that collects the most (docs/performance.md, "How the bench measures: the changes of
 * 2026-12-04").
 */
export const memorySampler = (everyMs = 5) => {
  const kernel = resetKernelPeakRss()
  let peakRss = process.memoryUsage.rss()
  let peakHeap = V8.getHeapStatistics().used_heap_size
  const sample = () => {
    if (!kernel) {
      const rss = process.memoryUsage.rss()
      if (rss > peakRss) peakRss = rss
    }
    const heap = V8.getHeapStatistics().used_heap_size
    if (heap > peakHeap) peakHeap = heap
  }
  const timer = setInterval(sample, everyMs)
  return {
    sample,
    stop: () => {
      clearInterval(timer)
      sample()
      if (kernel) {
        const peak = kernelPeakRss()
        if (peak === undefined) throw new Error("the kernel's peak RSS could not be read back at the sampler's stop")
        peakRss = Math.max(peakRss, peak)
      }
      return { peakRss, peakHeap }
    }
  }
}

export const gc = () => {
  const g = (globalThis as { gc?: () => void }).gc
  if (g !== undefined) {
    g()
    g()
  }
}
