/**
 * Figure 9: the relay (`@reprise/server`) as a gateway. The simulator (its own process) serves one Chat Completions
 * stream (a recorded reply scaled up, `support/corpus.ts`), read five ways by the same client (`undici.request`,
 * `eventsource-parser`, `JSON.parse`, the text checked whole):
 *
 * - **direct**: against the simulator;
 * - **pass-through proxy**: a few lines of `node:http` + `undici.request` piping the upstream body to the client,
 *   in its own process (`bench/relay.ts serve proxy <upstream>`): the floor no relay beats;
 * - **reprise relay, live**: `Relay.layer({ port: 0 })` over `HttpProvider.layerUndici("openai-chat", …)` in its own
 *   process (`bench/relay.ts serve relay <upstream>`), each request with `X-Reprise-Preview: live` (content as it
 *   arrives, as a gateway passes it);
 * - **reprise relay, hold**: the same process, `X-Reprise-Preview: hold` (content only once the reply commits);
 * - **@portkey-ai/gateway**: its npm package's node entry (`build/start-server.js --port=… --headless`, what `npx
 *   @portkey-ai/gateway` runs), installed outside the repo (`REPRISE_BENCH_PORTKEY`, default `/tmp/portkey`: `npm i
 *   @portkey-ai/gateway@1.15.2` there), asked with its documented headers for an OpenAI-compatible host
 *   (`x-portkey-provider: openai`, `x-portkey-custom-host`). It is probed first; when it cannot serve, the figure
 *   records it as not runnable with the first error line of its log, and compares against the proxy instead.
 *
 * Two measures, each client's order rotating from round to round: (1) one stream at a time: time to the first
 * content delta at the client and the whole stream's time; (2) `streams` (200) at once: the wall time until all have
 * ended, as streams/s and MB/s of the upstream's body. Targets: added median time to first content (relay live −
 * direct) ≤ 2 ms; throughput at 200 streams ≥ 0.8× direct (and ≥ 1.5× Portkey when it runs).
 *
 * `REPRISE_BENCH_RELAY_PROF=<dir>` runs the relay's process with `--cpu-prof --cpu-prof-dir=<dir>`;
 * `REPRISE_BENCH_RELAY_CLIENTS=relayLive` measures only those clients (and direct);
 * `REPRISE_BENCH_RELAY_PACE=<ms>` has the upstream write one event every <ms> ms (a provider's pace, not a flood).
 */
import * as NodeRuntime from "@effect/platform-node/NodeRuntime"
import * as HttpServer from "@effect/platform/HttpServer"
import * as Message from "@reprise/core/Message"
import * as Recovery from "@reprise/core/Recovery"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as Relay from "@reprise/server/Relay"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import { createParser } from "eventsource-parser"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Net from "node:net"
import * as Path from "node:path"
import * as Stream from "node:stream"
import { Agent, request } from "undici"
import { build, materialize, mb, repoRoot } from "./support/corpus.js"
import * as Server from "./support/server.js"
import { fmt, plainNodeImports, summarize, type Summary, table } from "./support/stats.js"

export type Client = "direct" | "proxy" | "relayLive" | "relayHold" | "portkey" | "upstreamHalf"

export interface ClientResult {
  /** Time to the first content delta at the client, one stream at a time (ms). */
  readonly firstContent: Summary
  /** A whole stream, one at a time (ms). */
  readonly single: Summary
  /** `streams` streams at once, until all have ended (ms). */
  readonly concurrent: Summary
  /** Streams per second at 1 (from the median) and at `streams`. */
  readonly singlePerSecond: number
  readonly concurrentPerSecond: number
  readonly singleMBps: number
  readonly concurrentMBps: number
}

export interface RelayResult {
  readonly bytes: number
  readonly events: number
  readonly streams: number
  readonly singleRuns: number
  readonly concurrentRounds: number
  readonly clients: Partial<Record<Client, ClientResult>>
  readonly portkey: { readonly ran: true; readonly version: string } | {
    readonly ran: false
    readonly version?: string | undefined
    readonly error: string
  }
  /** relay live median time to first content − direct's (ms); target <= 2. */
  readonly addedFirstContentMs: number
  /** The same for the pass-through proxy: the floor. */
  readonly proxyAddedFirstContentMs: number
  readonly holdAddedFirstContentMs: number
  /** streams/s at `streams` of the relay (live) / direct; target >= 0.8. */
  readonly concurrentRatio: number
  readonly proxyConcurrentRatio: number
  readonly holdConcurrentRatio: number
  /** relay live / Portkey at `streams`; target >= 1.5 (only when Portkey runs). */
  readonly portkeyRatio?: number | undefined
  readonly singleRatio: number
  readonly proxySingleRatio: number
  /**
   * CPU time (user + system) of the proxy's and the relay's processes over every stream each served, warm-up included,
   * per stream (ms): the relay's is over its `live` and `hold` streams together. Context, not a target.
   */
  readonly cpuPerStreamMs: { readonly proxy: number; readonly relay: number }
}

const labels: Record<Client, string> = {
  direct: "direct (undici against the upstream)",
  proxy: "pass-through proxy (node:http + undici.request)",
  relayLive: "reprise relay, live",
  relayHold: "reprise relay, hold",
  portkey: "@portkey-ai/gateway",
  upstreamHalf: "context: Recovery.generate + a notification per event, no relay"
}

// --- the servers in their own processes -------------------------------------------------------------------------

interface Child {
  readonly url: string
  readonly log: () => string
  readonly stop: () => Promise<void>
}

/** Starts a process and resolves once `ready(out)` gives its URL. */
const spawnServer = (
  args: ReadonlyArray<string>,
  ready: (out: string) => string | undefined,
  options: ChildProcess.SpawnOptions = {}
): Promise<Child> =>
  new Promise((resolve, reject) => {
    const proc = ChildProcess.spawn(process.execPath, args, { stdio: ["pipe", "pipe", "pipe"], ...options })
    let out = ""
    let done = false
    const closed = new Promise<void>((end) => proc.once("close", () => end()))
    const stop = async () => {
      if (proc.exitCode === null && proc.signalCode === null) {
        proc.stdin!.end()
        proc.kill("SIGTERM")
      }
      const kill = setTimeout(() => proc.kill("SIGKILL"), 5000)
      await closed
      clearTimeout(kill)
    }
    const timer = setTimeout(() => {
      if (done) return
      done = true
      proc.kill("SIGKILL")
      reject(new Error(`${args.join(" ")}: not ready in 30 s: ${out.slice(-500)}`))
    }, 30_000)
    const onData = (d: Buffer) => {
      out += d.toString()
      if (done) return
      const url = ready(out)
      if (url === undefined) return
      done = true
      clearTimeout(timer)
      resolve({ url, log: () => out, stop })
    }
    proc.stdout!.on("data", onData)
    proc.stderr!.on("data", onData)
    proc.on("error", reject)
    proc.on("close", (code) => {
      if (done) return
      done = true
      clearTimeout(timer)
      reject(new Error(`${args.join(" ")} exited early with ${code}: ${out.slice(-500)}`))
    })
  })

/** The CPU time a server of `serve` printed as it stopped (ms). */
const printedCpu = (out: string): number => {
  const line = out.split("\n").find((l) => l.startsWith("{\"cpuMs\""))
  return line === undefined ? Number.NaN : (JSON.parse(line) as { cpuMs: number }).cpuMs
}

const printedUrl = (out: string): string | undefined => {
  for (const line of out.split("\n")) {
    if (!line.startsWith("{\"url\"")) continue
    try {
      return (JSON.parse(line) as { url: string }).url
    } catch {
      return undefined
    }
  }
  return undefined
}

const startOwn = (kind: "proxy" | "relay", upstream: string) => {
  const prof = process.env.REPRISE_BENCH_RELAY_PROF
  const flags = kind === "relay" && prof !== undefined ? ["--cpu-prof", `--cpu-prof-dir=${prof}`] : []
  return spawnServer(
    [...flags, ...plainNodeImports, Path.join(repoRoot, "bench/relay.ts"), "serve", kind, upstream],
    printedUrl,
    { cwd: repoRoot }
  )
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = Net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as Net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

const portkeyDir = () => process.env.REPRISE_BENCH_PORTKEY ?? "/tmp/portkey"

const startPortkey = async (): Promise<{ child: Child; version: string } | { error: string; version?: string }> => {
  const pkg = Path.join(portkeyDir(), "node_modules/@portkey-ai/gateway")
  const entry = Path.join(pkg, "build/start-server.js")
  if (!Fs.existsSync(entry)) {
    return {
      error: `not installed (npm i @portkey-ai/gateway@1.15.2 in ${portkeyDir()}, or set REPRISE_BENCH_PORTKEY)`
    }
  }
  const version = (JSON.parse(Fs.readFileSync(Path.join(pkg, "package.json"), "utf8")) as { version: string }).version
  const port = await freePort()
  try {
    const child = await spawnServer(
      [entry, `--port=${port}`, "--headless"],
      (out) => out.includes("Ready for connections") ? `http://127.0.0.1:${port}` : undefined,
      { cwd: portkeyDir() }
    )
    return { child, version }
  } catch (error) {
    return { error: String(error), version }
  }
}

/** `bench/relay.ts serve proxy|relay <upstream origin>`: prints `{"url": …}` and serves until stdin closes. */
const serve = (kind: string, upstream: string) => {
  // the CPU time the process used, user and system, for the figure's CPU per stream
  const exit = () => {
    const { system, user } = process.cpuUsage()
    console.log(JSON.stringify({ cpuMs: (user + system) / 1000 }))
    process.exit(0)
  }
  process.stdin.on("end", exit)
  process.stdin.resume()
  process.on("SIGTERM", exit)
  if (kind === "proxy") {
    // the floor: what a pass-through proxy does at the least: the request forwarded, the body piped back
    const server = Http.createServer((req, res) => {
      request(`${upstream}${req.url}`, {
        method: req.method as "POST",
        headers: {
          "content-type": req.headers["content-type"] ?? "application/json",
          accept: req.headers.accept ?? "*/*",
          authorization: req.headers.authorization ?? ""
        },
        body: req
      }).then(
        (up) => {
          res.writeHead(up.statusCode, { "content-type": String(up.headers["content-type"] ?? "text/event-stream") })
          Stream.pipeline(up.body, res, () => {})
        },
        () => {
          res.writeHead(502).end()
        }
      )
    })
    server.keepAliveTimeout = 60_000
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as Net.AddressInfo).port
      console.log(JSON.stringify({ url: `http://127.0.0.1:${port}` }))
    })
    return
  }
  const relay = Relay.layer({
    port: 0,
    preview: "live",
    maxConcurrent: 1000,
    accessLog: () => Effect.void
  }).pipe(
    Layer.provide(
      HttpProvider.layerUndici("openai-chat", {
        apiKey: Redacted.make("sk-bench-not-a-key"),
        baseUrl: `${upstream}/v1`
      })
    )
  )
  NodeRuntime.runMain(
    Effect.gen(function*() {
      const server = yield* HttpServer.HttpServer
      const address = server.address
      if (address._tag !== "TcpAddress") return yield* Effect.die(new Error("the relay is not on TCP"))
      console.log(JSON.stringify({ url: `http://127.0.0.1:${address.port}` }))
      return yield* Effect.never
    }).pipe(Effect.provide(relay)) as Effect.Effect<never, unknown>
  )
}

// --- the client ------------------------------------------------------------------------------------------------

const dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: null })

/** One stream: time to the first content delta and to the end; throws unless the whole text arrived. */
const read = async (
  baseUrl: string,
  headers: Record<string, string>,
  expected: string
): Promise<{ firstContent: number; total: number }> => {
  const started = performance.now()
  let firstContent = -1
  const response = await request(`${baseUrl}/chat/completions`, {
    method: "POST",
    dispatcher,
    headers: {
      "content-type": "application/json",
      accept: "text/event-stream",
      authorization: "Bearer sk-bench-not-a-key",
      ...headers
    },
    body: JSON.stringify({ model: "bench", stream: true, messages: [{ role: "user", content: "hi" }] })
  })
  if (response.statusCode !== 200) {
    const text = await response.body.text()
    throw new Error(`status ${response.statusCode}: ${text.slice(0, 200)}`)
  }
  const parts: Array<string> = []
  let finished = false
  const parser = createParser({
    onEvent: (event) => {
      if (event.data === "[DONE]") return
      const payload = JSON.parse(event.data)
      const choice = payload.choices?.[0]
      const text = choice?.delta?.content
      if (typeof text === "string" && text.length > 0) {
        if (firstContent < 0) firstContent = performance.now() - started
        parts.push(text)
      }
      if (choice?.finish_reason != null) finished = true
    }
  })
  const decoder = new TextDecoder()
  for await (const chunk of response.body) parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }))
  const total = performance.now() - started
  if (!finished) throw new Error("no finish_reason")
  const text = parts.join("")
  if (text !== expected) throw new Error(`wrong text (${text.length} of ${expected.length} characters)`)
  return { firstContent, total }
}

// --- the figure ------------------------------------------------------------------------------------------------

export const run = async (
  options: { sizeKB: number; singleRuns: number; warmup: number; streams: number; rounds: number }
): Promise<RelayResult> => {
  const corpus = build("openai-chat", options.sizeKB * 1024)
  const expected = corpus.text()
  const dir = Server.tempDir()
  const fixture = Path.join(dir, "chat.sse")
  Fs.writeFileSync(fixture, materialize(corpus))
  // `REPRISE_BENCH_RELAY_PACE=<ms>`: the upstream writes one event every <ms> ms instead of as fast as it can
  const pace = process.env.REPRISE_BENCH_RELAY_PACE
  const upstream = await Server.start(dir, {
    routes: {
      "openai-chat": {
        reply: { fixture, format: "wire" },
        ...(pace === undefined
          ? {}
          : { steps: [{ kind: "stream", pace: { everyMs: Number(pace), events: 1 } }], afterLast: "repeat-last" })
      }
    }
  })
  const stops: Array<() => Promise<unknown>> = [() => upstream.stop()]
  try {
    const proxy = await startOwn("proxy", upstream.url)
    stops.push(proxy.stop)
    const relay = await startOwn("relay", upstream.url)
    stops.push(relay.stop)
    const readers: Partial<Record<Client, () => Promise<{ firstContent: number; total: number }>>> = {
      direct: () => read(`${upstream.url}/v1`, {}, expected),
      proxy: () => read(`${proxy.url}/v1`, {}, expected),
      relayLive: () => read(`${relay.url}/v1`, { "x-reprise-preview": "live" }, expected),
      relayHold: () => read(`${relay.url}/v1`, { "x-reprise-preview": "hold" }, expected)
    }
    // context, not a way to read the stream: the relay's upstream half in the bench process (the provider, recovery,
    // and one notification per event, as the relay asks for them), without the relay's downstream writer
    const half = ManagedRuntime.make(
      HttpProvider.layerUndici("openai-chat", {
        apiKey: Redacted.make("sk-bench-not-a-key"),
        baseUrl: `${upstream.url}/v1`
      })
    )
    stops.push(() => half.dispose())
    readers.upstreamHalf = async () => {
      const started = performance.now()
      let firstContent = -1
      const notify = (note: RecoveryNotifications.Notification) => {
        if (firstContent < 0 && note._tag === "Preview" && note.event._tag === "TextDelta") {
          firstContent = performance.now() - started
        }
        return Effect.void
      }
      const reply = await half.runPromise(
        Recovery.generate({ model: "bench", messages: [Message.user("hi")] }).pipe(
          Effect.provideService(RecoveryNotifications.RecoveryNotifications, { notify })
        )
      )
      if (reply.text !== expected) throw new Error(`upstream half: wrong text (${reply.text.length} characters)`)
      return { firstContent, total: performance.now() - started }
    }
    let portkey: RelayResult["portkey"]
    const started = await startPortkey()
    if ("child" in started) {
      stops.push(started.child.stop)
      const headers = {
        "x-portkey-provider": "openai",
        "x-portkey-custom-host": `${upstream.url}/v1`
      }
      try {
        await read(`${started.child.url}/v1`, headers, expected)
        readers.portkey = () => read(`${started.child.url}/v1`, headers, expected)
        portkey = { ran: true, version: started.version }
      } catch (error) {
        await new Promise((resolve) => setTimeout(resolve, 200))
        const logLine = started.child.log().split("\n").map((l) => l.trim()).find((l) => /error|exception/i.test(l))
        portkey = {
          ran: false,
          version: started.version,
          error: `${error instanceof Error ? error.message : String(error)}; its log: ${logLine ?? "(nothing)"}`
        }
      }
    } else {
      portkey = { ran: false, version: started.version, error: started.error }
    }

    // `REPRISE_BENCH_RELAY_CLIENTS=direct,relayLive`: only these (to profile one); `direct` is always measured
    const only = process.env.REPRISE_BENCH_RELAY_CLIENTS?.split(",")
    const names = (Object.keys(readers) as Array<Client>).filter((who) =>
      only === undefined || who === "direct" || only.includes(who)
    )
    const orders = names.map((_, i) => [...names.slice(i), ...names.slice(0, i)])
    // one stream at a time
    for (let i = 0; i < options.warmup; i++) for (const who of names) await readers[who]!()
    const first: Partial<Record<Client, Array<number>>> = {}
    const single: Partial<Record<Client, Array<number>>> = {}
    for (const who of names) {
      first[who] = []
      single[who] = []
    }
    for (let i = 0; i < options.singleRuns; i++) {
      for (const who of orders[i % orders.length]) {
        const r = await readers[who]!()
        first[who]!.push(r.firstContent)
        single[who]!.push(r.total)
      }
    }
    // `streams` at once
    const burst = async (who: Client) => {
      const start = performance.now()
      await Promise.all(Array.from({ length: options.streams }, () => readers[who]!()))
      return performance.now() - start
    }
    for (const who of names) await burst(who)
    const concurrent: Partial<Record<Client, Array<number>>> = {}
    for (const who of names) concurrent[who] = []
    for (let i = 0; i < options.rounds; i++) {
      for (const who of orders[i % orders.length]) concurrent[who]!.push(await burst(who))
    }

    // the servers' CPU time over every stream they served (warm-up included), per stream
    await proxy.stop()
    await relay.stop()
    const served = (who: Client) =>
      names.includes(who) ? options.warmup + options.singleRuns + (1 + options.rounds) * options.streams : 0
    const perStream = (cpuMs: number, streams: number) => streams === 0 ? Number.NaN : cpuMs / streams
    const cpuPerStream = {
      proxy: perStream(printedCpu(proxy.log()), served("proxy")),
      relay: perStream(printedCpu(relay.log()), served("relayLive") + served("relayHold"))
    }

    const clients: Partial<Record<Client, ClientResult>> = {}
    for (const who of names) {
      const s = summarize(single[who]!)
      const c = summarize(concurrent[who]!)
      clients[who] = {
        firstContent: summarize(first[who]!),
        single: s,
        concurrent: c,
        singlePerSecond: 1000 / s.median,
        concurrentPerSecond: options.streams * 1000 / c.median,
        singleMBps: mb(corpus.size) / (s.median / 1000),
        concurrentMBps: mb(corpus.size) * options.streams / (c.median / 1000)
      }
    }
    const first1 = (who: Client) => clients[who]?.firstContent.median ?? Number.NaN
    const at1 = (who: Client) => clients[who]?.singlePerSecond ?? Number.NaN
    const atN = (who: Client) => clients[who]?.concurrentPerSecond ?? Number.NaN
    return {
      bytes: corpus.size,
      events: corpus.events,
      streams: options.streams,
      singleRuns: options.singleRuns,
      concurrentRounds: options.rounds,
      clients,
      portkey,
      addedFirstContentMs: first1("relayLive") - first1("direct"),
      proxyAddedFirstContentMs: first1("proxy") - first1("direct"),
      holdAddedFirstContentMs: first1("relayHold") - first1("direct"),
      concurrentRatio: atN("relayLive") / atN("direct"),
      proxyConcurrentRatio: atN("proxy") / atN("direct"),
      holdConcurrentRatio: atN("relayHold") / atN("direct"),
      portkeyRatio: clients.portkey === undefined
        ? undefined
        : atN("relayLive") / atN("portkey"),
      cpuPerStreamMs: cpuPerStream,
      singleRatio: at1("relayLive") / at1("direct"),
      proxySingleRatio: at1("proxy") / at1("direct")
    }
  } finally {
    for (const stop of stops.reverse()) await stop().catch(() => undefined)
    await dispatcher.close().catch(() => undefined)
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}

export const print = (r: RelayResult) => {
  const direct = r.clients.direct!
  table(
    `9. The relay as a gateway (${fmt(r.bytes / 1024, 0)} KB chat stream, ${r.events} events, from the simulator in ` +
      `its own process; each server in its own process; ${r.singleRuns} single streams and ${r.concurrentRounds} ` +
      `rounds of ${r.streams} at once per client, order rotating;\n` +
      `   first content = request sent -> first content delta parsed at the client; ratios = streams/s / direct's)`,
    [
      "client",
      "1st content ms",
      "added ms",
      "1 stream ms",
      "1: streams/s",
      "1: ratio",
      `${r.streams}: ms`,
      `${r.streams}: streams/s`,
      `${r.streams}: MB/s`,
      `${r.streams}: ratio`
    ],
    (Object.keys(labels) as Array<Client>).map((who) => {
      const c = r.clients[who]
      if (c === undefined) {
        return [
          labels[who],
          who === "portkey" && !r.portkey.ran ? "not runnable" : "not measured",
          "",
          "",
          "",
          "",
          "",
          "",
          "",
          ""
        ]
      }
      return [
        labels[who],
        fmt(c.firstContent.median, 2),
        fmt(c.firstContent.median - direct.firstContent.median, 2),
        fmt(c.single.median, 2),
        fmt(c.singlePerSecond, 1),
        `${fmt(c.singlePerSecond / direct.singlePerSecond)}x`,
        fmt(c.concurrent.median, 0),
        fmt(c.concurrentPerSecond, 1),
        fmt(c.concurrentMBps, 1),
        `${fmt(c.concurrentPerSecond / direct.concurrentPerSecond)}x`
      ]
    })
  )
  console.log(
    `   CPU per stream (user + system, warm-up included): pass-through proxy ${fmt(r.cpuPerStreamMs.proxy, 3)} ms, ` +
      `relay ${fmt(r.cpuPerStreamMs.relay, 3)} ms (live and hold)`
  )
  if (!r.portkey.ran) console.log(`   @portkey-ai/gateway ${r.portkey.version ?? ""}: not runnable: ${r.portkey.error}`)
}

if (process.argv[2] === "serve") serve(process.argv[3]!, process.argv[4]!)

/** `node --import tsx bench/relay.ts figure [sizeKB singleRuns warmup streams rounds]`: this figure alone. */
if (process.argv[2] === "figure") {
  const [sizeKB = 96, singleRuns = 30, warmup = 10, streams = 200, rounds = 5] = process.argv.slice(3).map(Number)
  run({ sizeKB, singleRuns, warmup, streams, rounds }).then(
    (r) => {
      print(r)
      console.log(JSON.stringify(r))
      process.exit(0)
    },
    (error) => {
      console.error(error)
      process.exit(1)
    }
  )
}
