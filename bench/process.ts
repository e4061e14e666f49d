/**
 * Figures 6 and 7: whole processes, spawned as a user's shell would.
 *
 * 6. Cold start: `reprise --help` (spawn to exit) and `reprise chat` (spawn to its request's arrival at a loopback
 *    server), against `node -e 0` and a script that only imports `effect`. The commands are interleaved run by run
 *    so that a drift of the machine hits them alike. Peak RSS is read with GNU time (`/usr/bin/time -f %M`) in
 *    separate runs, when it is installed.
 * 7. `reprise chat` reading one large Chat Completions stream from the simulator (its own process) to stdout,
 *    against a script using the official `openai` SDK that prints the same text; both checked for the same output.
 */
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import type * as Net from "node:net"
import * as Path from "node:path"
import { build, materialize } from "./support/corpus.js"
import { repoRoot } from "./support/corpus.js"
import * as Server from "./support/server.js"
import { fmt, summarize, type Summary, table } from "./support/stats.js"

const bin = Path.join(repoRoot, "packages/cli/bin/reprise.js")
const gnuTime = "/usr/bin/time"
const key = { OPENAI_API_KEY: "sk-bench-not-a-key" }

const now = () => performance.timeOrigin + performance.now()

interface Exited {
  readonly code: number | null
  readonly stdout: string
  readonly stderr: string
  readonly wallMs: number
}

const spawn = (argv: ReadonlyArray<string>, env: Record<string, string> = {}, timeoutMs = 120_000) =>
  new Promise<Exited>((resolve, reject) => {
    const start = now()
    const proc = ChildProcess.spawn(argv[0]!, argv.slice(1), {
      cwd: repoRoot,
      env: { ...process.env, NO_COLOR: "1", ...env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    const out: Array<Buffer> = []
    let stderr = ""
    const timer = setTimeout(() => proc.kill("SIGKILL"), timeoutMs)
    proc.stdout.on("data", (d: Buffer) => out.push(d))
    proc.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d))
    proc.on("error", reject)
    proc.on("close", (code) => {
      clearTimeout(timer)
      resolve({ code, stdout: Buffer.concat(out).toString("utf8"), stderr, wallMs: now() - start })
    })
  })

/** Peak RSS in MB of one run of `argv`, by GNU time; undefined where it is not installed. */
const peakRss = async (argv: ReadonlyArray<string>, env: Record<string, string> = {}) => {
  if (!Fs.existsSync(gnuTime)) return undefined
  const result = await spawn([gnuTime, "-f", "%M", ...argv], env)
  const kb = Number(result.stderr.trim().split("\n").pop())
  return Number.isFinite(kb) ? kb / 1024 : undefined
}

/** A loopback server that notes when each request arrives and answers with a one-event chat stream. */
const arrivals = async () => {
  const times: Array<number> = []
  const server = Http.createServer((req, res) => {
    times.push(now())
    req.resume()
    res.writeHead(200, { "content-type": "text/event-stream" })
    res.end(
      `data: ${JSON.stringify({ choices: [{ index: 0, delta: { content: "ok" }, finish_reason: "stop" }] })}\n\n` +
        "data: [DONE]\n\n"
    )
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as Net.AddressInfo).port
  return {
    base: `http://127.0.0.1:${port}/v1`,
    last: () => times[times.length - 1]!,
    count: () => times.length,
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

export interface ColdStartResult {
  readonly runs: number
  readonly nodeEmpty: Summary
  readonly effectImport: Summary
  readonly help: Summary
  readonly chatFirstRequest: Summary
  readonly chatWall: Summary
  /** Peak RSS (MB) of `reprise --help`, `node -e 0` and the effect import; undefined without GNU time. */
  readonly helpPeakRssMB: Summary | undefined
  readonly nodeEmptyPeakRssMB: Summary | undefined
  readonly effectImportPeakRssMB: Summary | undefined
}

export const coldStart = async (options: { readonly runs: number }): Promise<ColdStartResult> => {
  const server = await arrivals()
  const nodeEmpty = [process.execPath, "-e", "0"]
  const effectImport = [process.execPath, "--input-type=module", "-e", "await import('effect')"]
  const help = [process.execPath, bin, "--help"]
  const chat = [process.execPath, bin, "chat", "--base-url", server.base, "--model", "bench", "hi"]
  const samples = { nodeEmpty: [] as Array<number>, effectImport: [] as Array<number>, help: [] as Array<number> }
  const firstRequest: Array<number> = []
  const chatWall: Array<number> = []
  const rss = { help: [] as Array<number>, nodeEmpty: [] as Array<number>, effectImport: [] as Array<number> }
  // one unmeasured round warms the file cache
  for (const argv of [nodeEmpty, effectImport, help, chat]) await spawn(argv, key)
  for (let i = 0; i < options.runs; i++) {
    samples.nodeEmpty.push((await spawn(nodeEmpty)).wallMs)
    samples.effectImport.push((await spawn(effectImport)).wallMs)
    const shown = await spawn(help)
    if (shown.code !== 0 || !shown.stdout.includes("reprise")) throw new Error(`reprise --help: ${shown.stderr}`)
    samples.help.push(shown.wallMs)
    const before = server.count()
    const start = now()
    const answered = await spawn(chat, key)
    if (answered.code !== 0 || answered.stdout !== "ok\n" || server.count() !== before + 1) {
      throw new Error(`reprise chat: exit ${answered.code}, ${JSON.stringify(answered.stdout)}, ${answered.stderr}`)
    }
    firstRequest.push(server.last() - start)
    chatWall.push(answered.wallMs)
    for (const [name, argv] of [["help", help], ["nodeEmpty", nodeEmpty], ["effectImport", effectImport]] as const) {
      const mb = await peakRss(argv)
      if (mb !== undefined) rss[name].push(mb)
    }
  }
  await server.close()
  const maybe = (xs: ReadonlyArray<number>) => xs.length > 0 ? summarize(xs) : undefined
  return {
    runs: options.runs,
    nodeEmpty: summarize(samples.nodeEmpty),
    effectImport: summarize(samples.effectImport),
    help: summarize(samples.help),
    chatFirstRequest: summarize(firstRequest),
    chatWall: summarize(chatWall),
    helpPeakRssMB: maybe(rss.help),
    nodeEmptyPeakRssMB: maybe(rss.nodeEmpty),
    effectImportPeakRssMB: maybe(rss.effectImport)
  }
}

export const printColdStart = (r: ColdStartResult) => {
  const row = (name: string, s: Summary, rssMB?: Summary) => [
    name,
    fmt(s.median, 1),
    `${fmt(s.min, 1)}–${fmt(s.max, 1)}`,
    fmt(s.median / r.nodeEmpty.median),
    fmt(s.median / r.effectImport.median),
    rssMB === undefined ? "" : fmt(rssMB.median, 1)
  ]
  table(
    `6. Cold start, whole process (${r.runs} interleaved runs each; wall ms)`,
    ["command", "median ms", "range", "vs node -e 0", "vs import effect", "peak RSS MB"],
    [
      row("node -e 0", r.nodeEmpty, r.nodeEmptyPeakRssMB),
      row("node: await import('effect')", r.effectImport, r.effectImportPeakRssMB),
      row("reprise --help", r.help, r.helpPeakRssMB),
      row("reprise chat: spawn to request", r.chatFirstRequest),
      row("reprise chat: whole run", r.chatWall)
    ]
  )
}

export interface LargeChatResult {
  readonly bytes: number
  readonly runs: number
  readonly reprise: Summary
  readonly openai: Summary
  /** reprise median wall / the openai SDK script's median wall. */
  readonly ratio: number
}

export const largeChat = async (options: { readonly sizeMB: number; readonly runs: number }) => {
  const corpus = build("openai-chat", options.sizeMB * 1024 * 1024)
  const expected = corpus.text() + "\n"
  const dir = Server.tempDir()
  const fixture = Path.join(dir, "large.sse")
  const wire = materialize(corpus)
  Fs.writeFileSync(fixture, wire)
  const server = await Server.start(dir, { routes: { "openai-chat": { reply: { fixture, format: "wire" } } } })
  const base = `${server.url}/v1`
  const viaReprise = [process.execPath, bin, "chat", "--base-url", base, "--model", "bench", "hi"]
  const viaSdk = [process.execPath, Path.join(repoRoot, "bench/support/openai-chat.mjs"), base]
  const times = { reprise: [] as Array<number>, openai: [] as Array<number> }
  for (let i = 0; i < options.runs + 1; i++) {
    // alternate the order; the first round is a warm-up
    const order = i % 2 === 0 ? (["reprise", "openai"] as const) : (["openai", "reprise"] as const)
    for (const who of order) {
      const result = await spawn(who === "reprise" ? viaReprise : viaSdk, key)
      if (result.code !== 0 || result.stdout !== expected) {
        throw new Error(`${who}: exit ${result.code}, ${result.stdout.length} of ${expected.length} chars`)
      }
      if (i > 0) times[who].push(result.wallMs)
    }
  }
  await server.stop()
  Fs.rmSync(dir, { recursive: true, force: true })
  const reprise = summarize(times.reprise)
  const openai = summarize(times.openai)
  return { bytes: wire.byteLength, runs: options.runs, reprise, openai, ratio: reprise.median / openai.median }
}

export const printLargeChat = (r: LargeChatResult) =>
  table(
    `7. One ${fmt(r.bytes / 1024 / 1024, 1)} MB chat stream to stdout, whole process (${r.runs} runs each)`,
    ["client", "median ms", "range", "vs openai SDK script"],
    [
      ["reprise chat", fmt(r.reprise.median, 0), `${fmt(r.reprise.min, 0)}–${fmt(r.reprise.max, 0)}`, fmt(r.ratio)],
      ["node + openai SDK", fmt(r.openai.median, 0), `${fmt(r.openai.min, 0)}–${fmt(r.openai.max, 0)}`, "1.00"]
    ]
  )
