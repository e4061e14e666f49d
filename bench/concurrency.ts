/**
 * Figure 3: many concurrent streams with faults. The simulator (its own process) serves a Chat Completions reply
 * whose script faults 1 request in 9 among the first N, so ~10 % of all attempts fail (reset mid-body, premature
 * EOF, 503, in-band `server_error`); every stream must still commit the right text. reprise (`Recovery.generate`,
 * undici client, 10 ms backoff, its defaults otherwise, unpaced) and a plain undici loop
 * with the same retry rule each run in a fresh child process
 * (`bench/concurrency.ts child <mode> <url> <n>`) so their peak RSS is their own. A third client is the floor: the
 * plain loop on the parts DESIGN §3 mandates (`support/effectClient.ts`: @effect/platform's `HttpClient` over undici,
 * its body as a `Stream`, `Effect.retry` with the same fixed spacing). A fourth is the least a client on that
 * `HttpClient` does (`EffectClient.chatLeast`: the undici body read in one promise, a recursive retry), which shows
 * what the platform's client costs by itself. The four take turns for `rounds` rounds (the order rotates; `npm run
 * bench` runs four, so each client takes each place once); the table shows medians, and the target is judged on the
 * largest peak. Each child also reports its CPU time over the run (every thread of the process, user and system),
 * which moves less from run to run than the wall time, and the simulator reports its own over that child (from the
 * moment it listens until it is stopped after the child). The simulator is the figure's bottleneck: with the plain
 * loop its CPU time is a little over the loop's wall (it uses some of the second core too), and a client that needs
 * more CPU leaves it less of the two cores, and takes longer. After the rounds, each Effect client runs once more with
 * the runtime's operation hook on (`opCounter`), not timed: the Effect operations per attempt, a count the machine
 * does not move.
 * Last, each client's live-heap probe (`runLive`): the heap it holds per stream with 1,000 streams stalled mid-reply,
 * what the collector copies while the figure runs; like the count, it moves by a fraction of a KB from run to run.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as HttpClient from "@effect/platform/HttpClient"
import * as Message from "@reprise/core/Message"
import * as Pacing from "@reprise/core/Pacing"
import * as Policy from "@reprise/core/Policy"
import * as Recovery from "@reprise/core/Recovery"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as RuntimeFlags from "effect/RuntimeFlags"
import * as RuntimeFlagsPatch from "effect/RuntimeFlagsPatch"
import * as Supervisor from "effect/Supervisor"
import * as DiagnosticsChannel from "node:diagnostics_channel"
import * as EffectClient from "./support/effectClient.js"
import { chatWithRetry } from "./support/plain.js"
import * as Server from "./support/server.js"
import { child, childMain, fmt, gc, memorySampler, summarize, type Summary, table } from "./support/stats.js"

const words = Array.from({ length: 240 }, (_, i) => `word${i % 37}`)
/** The reply every stream must commit (~1.6 KB of text, one delta per word). */
export const replyText = words.join(" ")

const faults = [
  { kind: "reset", afterBytes: 300 },
  { kind: "eof" },
  { kind: "status", status: 503 },
  { kind: "error" }
] as const

export const script = (streams: number) => {
  const steps: Array<unknown> = []
  let f = 0
  for (let i = 0; i < streams; i++) steps.push(i % 9 === 8 ? faults[f++ % faults.length] : { kind: "stream" })
  return {
    routes: { "openai-chat": { reply: { text: replyText }, steps, afterLast: "reply" } }
  }
}

/** Replies before the stalls of {@link liveScript}: each client's warm-up. */
const liveWarmReplies = 10

/**
 * The live-heap probe's script: {@link liveWarmReplies} whole replies, then every request stalls after 20 of its
 * events until the client goes away.
 */
export const liveScript = () => ({
  routes: {
    "openai-chat": {
      reply: { text: replyText },
      steps: [
        ...Array.from({ length: liveWarmReplies }, () => ({ kind: "stream" })),
        { kind: "stall", afterEvents: 20, durationMs: 600_000 }
      ],
      afterLast: "repeat-last"
    }
  }
})

export interface ChildResult {
  readonly mode: string
  readonly streams: number
  readonly attempts: number
  readonly ok: number
  readonly wallMs: number
  /** CPU time of the whole process (every thread: the main one and V8's helpers) over the run, user + system. */
  readonly cpuMs: number
  readonly rssBeforeMB: number
  readonly peakRssMB: number
  readonly peakHeapMB: number
  /** Operations the Effect runtime ran per attempt, counted in a run of its own (`count`); absent for the loop. */
  readonly opsPerAttempt?: number | undefined
  /**
   * The simulator's CPU time over this child (every thread of its process, from the moment it listened until it was
   * stopped after the child exited: the child's start and end are in it, when the simulator is idle but for the
   * connections' closing; set by the parent). The simulator is the figure's bottleneck.
   */
  readonly simulatorCpuMs?: number | undefined
}

/** What the live-heap probe (`child <mode> <url> <n> live`) measured. */
export interface LiveResult {
  readonly mode: string
  readonly streams: number
  /** The heap in use after a full collection with every stream stalled mid-reply, minus before, per stream (KB). */
  readonly liveKBPerStream: number
}

const MB = 1024 * 1024

/**
 * Counts the operations the Effect runtime runs for an effect and every fiber it forks, through the runtime's own hook
 * (a `Supervisor`'s `onEffect`, called for each operation once `OpSupervision` is on). Unlike time, the count does
 * not move with the machine: a change that takes operations off an attempt shows at once.
 */
const opCounter = () => {
  let ops = 0
  class Counter extends Supervisor.AbstractSupervisor<number> {
    readonly value = Effect.sync(() => ops)
    override onEffect() {
      ops++
    }
  }
  const counter = new Counter()
  return {
    counted: <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
      effect.pipe(
        Effect.supervised(counter),
        Effect.withRuntimeFlagsPatch(RuntimeFlagsPatch.enable(RuntimeFlags.OpSupervision))
      ),
    ops: () => ops
  }
}

/** A client of the figure: `replies(n)` runs n replies at once, each one's attempts and text counted. */
interface Client {
  readonly replies: (n: number) => Promise<void>
  readonly dispose: () => Promise<void>
  readonly attempts: () => number
  readonly ok: () => number
}

/** `REPRISE_BENCH_PACING=N` paces reprise's client, N attempts a turn of the event loop; unset, it runs unpaced. */
const pacingVariable = process.env.REPRISE_BENCH_PACING
const pacing = pacingVariable === undefined || pacingVariable === "" ? undefined : Number(pacingVariable)

const clientOf = async (
  mode: string,
  url: string,
  counted: <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R>
): Promise<Client> => {
  const baseUrl = `${url}/v1`
  let attempts = 0
  let ok = 0
  let replies: (n: number) => Promise<void>
  let dispose = async () => {}
  const all = <E, R>(
    streams: number,
    one: () => Effect.Effect<{ readonly text: string; readonly attempts: number }, E, R>
  ) =>
    counted(Effect.forEach(
      Array.from({ length: streams }),
      () =>
        Effect.map(one(), (result) => {
          attempts += result.attempts
          if (result.text === replyText) ok++
        }),
      { concurrency: "unbounded", discard: true }
    ))
  if (mode === "reprise") {
    const runtime = ManagedRuntime.make(Layer.mergeAll(
      HttpProvider.layerUndici("openai-chat", { apiKey: Redacted.make("sk-bench-not-a-key"), baseUrl }),
      Policy.layer({ backoffBase: Duration.millis(10), backoffMax: Duration.millis(100), jitter: false }),
      // `REPRISE_BENCH_PACING=N`: reprise's client paced, N attempts a turn of the event loop (docs/pacing.md)
      pacing === undefined ? Layer.empty : Pacing.layer({ attemptsPerTurn: pacing })
    ))
    await runtime.runPromise(Effect.void)
    dispose = () => runtime.dispose()
    const request = { model: "bench", messages: [Message.user("hi")] }
    replies = (n) => runtime.runPromise(all(n, () => Recovery.generate(request)))
  } else if (mode === "floor") {
    const runtime = ManagedRuntime.make(NodeHttpClient.layerUndici)
    await runtime.runPromise(Effect.void)
    dispose = () => runtime.dispose()
    const request = { model: "bench", messages: [{ role: "user", content: "hi" }], stream: true }
    replies = (n) =>
      runtime.runPromise(all(n, () => EffectClient.chatWithRetry(baseUrl, request, { attempts: 11, backoffMs: 10 })))
  } else if (mode === "least") {
    const runtime = ManagedRuntime.make(NodeHttpClient.layerUndici)
    const client = HttpClient.withScope(await runtime.runPromise(HttpClient.HttpClient))
    dispose = () => runtime.dispose()
    const request = { model: "bench", messages: [{ role: "user", content: "hi" }], stream: true }
    replies = (n) =>
      runtime.runPromise(
        all(n, () => EffectClient.chatLeastWithRetry(client, baseUrl, request, { attempts: 11, backoffMs: 10 }))
      )
  } else {
    const request = { model: "bench", messages: [{ role: "user", content: "hi" }], stream: true }
    replies = async (n) => {
      await Promise.all(Array.from({ length: n }, async () => {
        const result = await chatWithRetry(baseUrl, request, { attempts: 11, backoffMs: 10 })
        attempts += result.attempts
        if (result.text === replyText) ok++
      }))
    }
  }
  return { replies, dispose, attempts: () => attempts, ok: () => ok }
}

const runChild = async (mode: string, url: string, streams: number, count: boolean): Promise<ChildResult> => {
  const counter = opCounter()
  // the timed runs are not supervised: the hook is a call per operation
  const client = await clientOf(mode, url, (effect) => count ? counter.counted(effect) : effect)
  gc()
  const rssBefore = process.memoryUsage.rss()
  const sampler = memorySampler(5)
  const start = performance.now()
  const cpuStart = process.cpuUsage()
  await client.replies(streams)
  const wallMs = performance.now() - start
  const cpu = process.cpuUsage(cpuStart)
  const peaks = sampler.stop()
  await client.dispose()
  const attempts = client.attempts()
  return {
    mode,
    streams,
    attempts,
    ok: client.ok(),
    wallMs,
    cpuMs: (cpu.user + cpu.system) / 1000,
    rssBeforeMB: rssBefore / MB,
    peakRssMB: peaks.peakRss / MB,
    peakHeapMB: peaks.peakHeap / MB,
    // the loop runs no Effect: nothing to count
    opsPerAttempt: count && mode !== "baseline" && attempts > 0 ? counter.ops() / attempts : undefined
  }
}

/** One side over every round: the rounds themselves and the medians and spread of what the table shows. */
export interface Side {
  readonly mode: string
  readonly runs: ReadonlyArray<ChildResult>
  readonly attempts: number
  readonly wallMs: Summary
  readonly cpuMs: Summary
  /** The simulator's CPU time over each of the side's children (`ChildResult.simulatorCpuMs`), where it said. */
  readonly simulatorCpuMs: Summary
  readonly rssBeforeMB: Summary
  readonly peakRssMB: Summary
  /** (peak RSS − RSS before) per stream, KB. */
  readonly rssPerStreamKB: Summary
  /** Effect operations per attempt, from one run of its own with the runtime's hook on (none for the loop). */
  readonly opsPerAttempt: number | undefined
  /** The live-heap probe's heap per stalled stream, KB (`runLive`). */
  readonly liveKBPerStream: number
}

export interface ConcurrencyResult {
  readonly streams: number
  readonly rounds: number
  readonly faultedAttempts: number
  readonly reprise: Side
  readonly baseline: Side
  /** The plain loop on the mandated Effect parts (`support/effectClient.ts`). */
  readonly floor: Side
  /** The least a client on `HttpClient` does (`EffectClient.chatLeast`): the second floor. */
  readonly least: Side
  /** reprise median wall time / baseline median wall time. */
  readonly wallRatio: number
  /** reprise median peak RSS / baseline median peak RSS. */
  readonly rssRatio: number
  /** The same two ratios for the floor: the best reprise can reach on those parts. */
  readonly floorWallRatio: number
  readonly floorRssRatio: number
  /** The same two ratios for the least client on `HttpClient`. */
  readonly leastWallRatio: number
  readonly leastRssRatio: number
}

const side = (
  mode: string,
  runs: ReadonlyArray<ChildResult>,
  opsPerAttempt: number | undefined,
  liveKBPerStream: number
): Side => ({
  mode,
  runs,
  opsPerAttempt,
  liveKBPerStream,
  attempts: runs[0].attempts,
  wallMs: summarize(runs.map((r) => r.wallMs)),
  cpuMs: summarize(runs.map((r) => r.cpuMs)),
  // over the runs that have it (a simulator that could not say is left out, not counted as a number)
  simulatorCpuMs: summarize(runs.flatMap((r) => r.simulatorCpuMs === undefined ? [] : [r.simulatorCpuMs])),
  rssBeforeMB: summarize(runs.map((r) => r.rssBeforeMB)),
  peakRssMB: summarize(runs.map((r) => r.peakRssMB)),
  rssPerStreamKB: summarize(runs.map((r) => (r.peakRssMB - r.rssBeforeMB) * 1024 / r.streams))
})

export const run = async (options: { streams: number; rounds: number }): Promise<ConcurrencyResult> => {
  const dir = Server.tempDir()
  const modes = ["reprise", "baseline", "floor", "least"]
  // one child of this figure against a fresh simulator: its script counts requests from the start; the simulator's
  // CPU time over the child comes back with the child's result
  const childWith = async <A>(
    serverScript: unknown,
    mode: string,
    kind?: "count" | "live"
  ): Promise<A & { readonly simulatorCpuMs: number | undefined }> => {
    const server = await Server.start(dir, serverScript)
    let result: A
    try {
      result = await child("concurrency.ts", [
        "child",
        mode,
        server.url,
        String(options.streams),
        ...(kind === undefined ? [] : [kind])
      ])
    } catch (error) {
      await server.stop()
      throw error
    }
    return { ...result, simulatorCpuMs: await server.stop() }
  }
  const committed = (mode: string, result: ChildResult) => {
    if (result.ok !== options.streams) throw new Error(`${mode}: ${result.ok} of ${options.streams} streams committed`)
    return result
  }
  const results: Record<string, Array<ChildResult>> = { reprise: [], baseline: [], floor: [], least: [] }
  for (let round = 0; round < options.rounds; round++) {
    for (const mode of [...modes.slice(round % modes.length), ...modes.slice(0, round % modes.length)]) {
      results[mode].push(committed(mode, await childWith<ChildResult>(script(options.streams), mode)))
    }
  }
  // the operations of each Effect client, counted in one more run of it (not timed: the hook costs a call each)
  const ops: Record<string, number | undefined> = {}
  for (const mode of ["reprise", "floor", "least"]) {
    ops[mode] = committed(mode, await childWith<ChildResult>(script(options.streams), mode, "count")).opsPerAttempt
  }
  // what each client holds per reply in flight, measured with every stream stalled (not timed)
  const live: Record<string, number> = {}
  for (const mode of modes) {
    live[mode] = (await childWith<LiveResult>(liveScript(), mode, "live")).liveKBPerStream
  }
  const reprise = side("reprise", results.reprise, ops.reprise, live.reprise)
  const baseline = side("baseline", results.baseline, undefined, live.baseline)
  const floor = side("floor", results.floor, ops.floor, live.floor)
  const least = side("least", results.least, ops.least, live.least)
  return {
    streams: options.streams,
    rounds: options.rounds,
    faultedAttempts: Math.floor((options.streams + 1) / 9),
    reprise,
    baseline,
    floor,
    least,
    wallRatio: reprise.wallMs.median / baseline.wallMs.median,
    rssRatio: reprise.peakRssMB.median / baseline.peakRssMB.median,
    floorWallRatio: floor.wallMs.median / baseline.wallMs.median,
    floorRssRatio: floor.peakRssMB.median / baseline.peakRssMB.median,
    leastWallRatio: least.wallMs.median / baseline.wallMs.median,
    leastRssRatio: least.peakRssMB.median / baseline.peakRssMB.median
  }
}

export const print = (r: ConcurrencyResult) =>
  table(
    `3. ${r.streams} concurrent streams, ${r.faultedAttempts} faulted attempts (${
      fmt(100 * r.faultedAttempts / r.reprise.attempts, 1)
    } %); all committed the right text; medians of ${r.rounds} rounds (targets, issue #13: peak RSS < 320 MB, largest of the rounds, and <= 1.5x the plain loop; wall <= 1.3x unpaced, 1.2x paced)`,
    [
      "client",
      "attempts",
      "wall ms",
      "CPU ms",
      "simulator CPU ms",
      "streams/s",
      "RSS before MB",
      "peak RSS MB",
      "peak RSS min-max",
      "RSS/stream KB",
      "Effect ops/attempt",
      "live KB/stream, stalled",
      "wall ratio",
      "RSS ratio"
    ],
    [r.reprise, r.baseline, r.floor, r.least].map((c) => [
      c.mode === "reprise"
        ? "reprise (Recovery.generate)"
        : c.mode === "floor"
        ? "floor: the loop on HttpClient + Stream + Effect.retry"
        : c.mode === "least"
        ? "least on HttpClient: execute, the body in one promise, a recursive retry"
        : "plain undici + retry loop",
      String(c.attempts),
      fmt(c.wallMs.median, 0),
      fmt(c.cpuMs.median, 0),
      c.simulatorCpuMs.n === c.runs.length
        ? fmt(c.simulatorCpuMs.median, 0)
        : `n/a (${c.simulatorCpuMs.n} of ${c.runs.length})`,
      fmt(r.streams / (c.wallMs.median / 1000), 0),
      fmt(c.rssBeforeMB.median, 1),
      fmt(c.peakRssMB.median, 1),
      `${fmt(c.peakRssMB.min, 0)}-${fmt(c.peakRssMB.max, 0)}`,
      fmt(c.rssPerStreamKB.median, 1),
      c.opsPerAttempt === undefined ? "" : fmt(c.opsPerAttempt, 0),
      fmt(c.liveKBPerStream, 1),
      `${fmt(c.wallMs.median / r.baseline.wallMs.median)}x`,
      `${fmt(c.peakRssMB.median / r.baseline.peakRssMB.median)}x`
    ])
  )

/**
 * The live-heap probe: after {@link liveWarmReplies} whole replies, `streams` replies at once, each stalled by the
 * simulator after 20 events ({@link liveScript}); once every response has come and the heap has stopped growing, the
 * heap in use after a full collection, over what it was before they started, per stream. It measures what a client
 * holds for a reply in flight (what the collector copies while figure 3 runs), to within a fraction of a KB from run
 * to run, on any machine. The stalled replies are left to the process's exit.
 */
const runLive = async (mode: string, url: string, streams: number): Promise<LiveResult> => {
  const client = await clientOf(mode, url, (effect) => effect)
  await client.replies(liveWarmReplies)
  let responses = 0
  const onHeaders = () => {
    responses++
  }
  DiagnosticsChannel.subscribe("undici:request:headers", onHeaders)
  gc()
  const before = process.memoryUsage().heapUsed
  client.replies(streams).catch((error) => {
    console.error(`${mode}: a stalled reply failed: ${String(error)}`)
    process.exit(1)
  })
  const tick = () => new Promise((resolve) => setTimeout(resolve, 50))
  while (responses < streams) await tick()
  // the events before each stall are read after the headers: wait until a collected heap stops growing
  let last = 0
  for (let settled = 0; settled < 3;) {
    await tick()
    gc()
    const now = process.memoryUsage().heapUsed
    settled = Math.abs(now - last) < 0.005 * now ? settled + 1 : 0
    last = now
  }
  DiagnosticsChannel.unsubscribe("undici:request:headers", onHeaders)
  return { mode, streams, liveKBPerStream: (last - before) / 1024 / streams }
}

childMain<ChildResult | LiveResult>(([mode, url, n, kind]) =>
  kind === "live" ? runLive(mode, url, Number(n)) : runChild(mode, url, Number(n), kind === "count")
)
