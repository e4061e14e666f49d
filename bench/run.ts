/**
 * `npm run bench`: every figure of DESIGN §6, each measured side by side with its baseline in the same run and
 * reported as ratios. Prints one table per figure and writes `bench/results.json` (machine, Node version, run
 * counts, medians and spread). Not part of `npm test` or `.ci/run`.
 *
 * `npm run bench -- --quick` runs fewer, smaller samples (a smoke test of the harness, not a measurement).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import * as Concurrency from "./concurrency.js"
import * as Decode from "./decode.js"
import * as E2e from "./e2e.js"
import * as Fleet from "./fleet.js"
import * as Growth from "./growth.js"
import * as Latency from "./latency.js"
import * as Process from "./process.js"
import * as Relay from "./relay.js"
import { repoRoot } from "./support/corpus.js"
import { fmt, machine, table } from "./support/stats.js"

const quick = process.argv.includes("--quick")

const settings = quick
  ? {
    decode: { sizeMB: 2, iterations: 2 },
    e2e: { sizeMB: 1, runs: 3, warmup: 1 },
    concurrency: { streams: 100, rounds: 1 },
    latency: { replies: 12, rounds: 1 },
    growth: { sizesMB: [1, 4] },
    coldStart: { runs: 3 },
    largeChat: { sizeMB: 2, runs: 1 },
    fleet: { workers: [8], replies: 60 },
    relay: { sizeKB: 96, singleRuns: 6, warmup: 2, streams: 20, rounds: 1 }
  }
  : {
    decode: { sizeMB: 10, iterations: 7 },
    e2e: { sizeMB: 5, runs: 24, warmup: 10 },
    concurrency: { streams: 1000, rounds: 4 },
    latency: { replies: 60, rounds: 3 },
    growth: { sizesMB: [1, 10, 100] },
    coldStart: { runs: 11 },
    largeChat: { sizeMB: 25, runs: 5 },
    fleet: { workers: [8, 32], replies: 600 },
    relay: { sizeKB: 96, singleRuns: 30, warmup: 10, streams: 200, rounds: 5 }
  }

type Reach = "yes" | "effect"

/**
 * A missed target is flagged when every floor of figures 3 and 4 measured in the same run misses it too: the Effect
 * floor (the plain loop on `HttpClient`, its body as the platform's `Stream`, `Effect.retry`) and, in figure 3, the
 * least a client on `HttpClient` does. Where the least client meets it, the parts DESIGN §3 mandates allow it and
 * the miss is reprise's own (docs/performance.md, "The Effect floor").
 */
const verdict = (ok: boolean, reachable: Reach) =>
  ok ? "met" : reachable === "effect" ? "MISSED; the floors miss too" : "MISSED"

/**
 * A target of figures 3 and 4 with the value of the Effect floor (`support/effectClient.ts`: the plain loop on
 * @effect/platform's `HttpClient` over undici, its body as a `Stream`, `Effect.retry`) and, in figure 3, of the least
 * client on that `HttpClient` (`chatLeast` there), each judged by the same test.
 */
const floorTarget = (
  figure: string,
  target: string,
  meets: (value: number) => boolean,
  values: { readonly value: number; readonly floor: number; readonly least?: number }
) => ({
  figure,
  target,
  ...values,
  met: meets(values.value),
  reachable: meets(values.floor) || (values.least !== undefined && meets(values.least))
    ? "yes" as const
    : "effect" as const
})

/**
 * A ratio target of figures 1 and 2 with the ceilings of the SSE parser DESIGN §3 used to mandate, alone and with
 * Schema per event: reprise has used neither since fixes 7 and 11 of docs/performance.md and measures above both, so
 * the ceilings are shown for the record and no verdict rests on them.
 */
const ratioTarget = (
  figure: string,
  target: string,
  meets: (ratio: number) => boolean,
  ratios: { readonly value: number; readonly ceiling: number; readonly schemaCeiling: number }
) => ({
  figure,
  target,
  ...ratios,
  met: meets(ratios.value)
})

const main = async () => {
  const started = performance.now()
  const info = machine()
  console.log(
    `reprise bench${quick ? " (quick)" : ""}: ${info.cpuModel}, ${info.cores} cores, ${info.totalMemMB} MB, ` +
      `${info.os}, Node ${info.node}`
  )
  const timings: Record<string, number> = {}
  const step = async <A>(name: string, f: () => Promise<A>): Promise<A> => {
    const t = performance.now()
    const a = await f()
    timings[name] = Math.round(performance.now() - t)
    return a
  }

  const decode = await step("decode", () => Decode.run(settings.decode))
  Decode.print(decode)
  const e2e = await step("e2e", () => E2e.run(settings.e2e))
  E2e.print(e2e)
  const concurrency = await step("concurrency", () => Concurrency.run(settings.concurrency))
  Concurrency.print(concurrency)
  const latency = await step("latency", () => Latency.run(settings.latency))
  Latency.print(latency)
  const growth = await step("growth", () => Growth.run(settings.growth))
  Growth.print(growth)
  const coldStart = await step("coldStart", () => Process.coldStart(settings.coldStart))
  Process.printColdStart(coldStart)
  const largeChat = await step("largeChat", () => Process.largeChat(settings.largeChat))
  Process.printLargeChat(largeChat)
  const fleet = await step("fleet", () => Fleet.run(settings.fleet))
  Fleet.print(fleet)
  const relay = await step("relay", () => Relay.run(settings.relay))
  Relay.print(relay)

  const targets = [
    ...decode.map((r) =>
      ratioTarget(`1. decode ${r.protocol} vs official`, ">= 1.5x", (x) => x >= 1.5, {
        value: r.ratioVsOfficial,
        ceiling: r.ceilingVsOfficial,
        schemaCeiling: r.schemaCeilingVsOfficial
      })
    ),
    ...decode.map((r) =>
      ratioTarget(`1. decode ${r.protocol} vs baseline`, ">= 0.6x", (x) => x >= 0.6, {
        value: r.ratioVsBaseline,
        ceiling: r.ceilingVsBaseline,
        schemaCeiling: r.schemaCeilingVsBaseline
      })
    ),
    ratioTarget("2. end-to-end wall time vs plain undici", "<= 1.15x", (x) => x <= 1.15, {
      value: e2e.ratio,
      ceiling: e2e.ceiling,
      schemaCeiling: e2e.ceilingSchema
    }),
    floorTarget(
      `3. peak RSS, ${concurrency.streams} streams (MB, largest of ${concurrency.rounds})`,
      "< 320",
      (x) => x < 320,
      {
        value: concurrency.reprise.peakRssMB.max,
        floor: concurrency.floor.peakRssMB.max,
        least: concurrency.least.peakRssMB.max
      }
    ),
    floorTarget(
      `3. peak RSS, ${concurrency.streams} streams, vs the plain retry loop (medians)`,
      "<= 1.5x",
      (x) => x <= 1.5,
      { value: concurrency.rssRatio, floor: concurrency.floorRssRatio, least: concurrency.leastRssRatio }
    ),
    floorTarget(
      `3. wall time, ${concurrency.streams} streams, vs the plain retry loop (medians)`,
      // unpaced, as the other clients run; paced (`REPRISE_BENCH_PACING`) the target is 1.2x (docs/performance.md)
      process.env.REPRISE_BENCH_PACING ? "<= 1.2x" : "<= 1.3x",
      (x) => x <= (process.env.REPRISE_BENCH_PACING ? 1.2 : 1.3),
      { value: concurrency.wallRatio, floor: concurrency.floorWallRatio, least: concurrency.leastWallRatio }
    ),
    floorTarget("4. recovery latency median minus the plain loop's (ms)", "<= +1", (x) => x <= 1, {
      value: latency.reprise.median - latency.baseline.median,
      floor: latency.floor.median - latency.baseline.median
    }),
    {
      figure: "5. time per MB, largest / middle size",
      target: "~1.0 (linear)",
      value: growth.timeLinearity,
      met: growth.timeLinearity < 1.25
    },
    {
      figure: "5. live heap, largest - smallest size (MB)",
      target: "~0 (flat)",
      value: growth.liveHeapSpreadMB,
      met: Math.abs(growth.liveHeapSpreadMB) < 5
    },
    {
      figure: "6. reprise --help, wall median (ms)",
      target: "<= 250",
      value: coldStart.help.median,
      met: coldStart.help.median <= 250
    },
    ...(coldStart.helpPeakRssMB === undefined ? [] : [{
      figure: "6. reprise --help, peak RSS median (MB)",
      target: "<= 100",
      value: coldStart.helpPeakRssMB.median,
      met: coldStart.helpPeakRssMB.median <= 100
    }]),
    {
      figure: "6. reprise chat, spawn to first request, median (ms)",
      target: "<= 300",
      value: coldStart.chatFirstRequest.median,
      met: coldStart.chatFirstRequest.median <= 300
    },
    {
      figure: `7. reprise chat vs openai SDK script, ${settings.largeChat.sizeMB} MB, wall`,
      target: "<= 0.8x",
      value: largeChat.ratio,
      met: largeChat.ratio <= 0.8
    },
    ...fleet.outages.map((o) => ({
      figure: `8. sends in an outage, ${o.workers} workers with the fleet (${o.alone} alone)`,
      target: `<= ${fmt(o.bound, 1)}`,
      value: o.shared,
      met: o.shared <= o.bound
    })),
    {
      figure: "8. added latency per send with the fleet layer, median (ms)",
      target: "<= 0.5",
      value: fleet.addedMedianMs,
      met: fleet.addedMedianMs <= 0.5
    },
    {
      figure: `9. relay (live) added median time to first content, 1 stream (ms; pass-through proxy ${
        fmt(relay.proxyAddedFirstContentMs)
      })`,
      target: "<= 2",
      value: relay.addedFirstContentMs,
      met: relay.addedFirstContentMs <= 2
    },
    {
      figure: `9. relay (live) throughput, ${relay.streams} streams, vs direct (pass-through proxy ${
        fmt(relay.proxyConcurrentRatio)
      }x)`,
      target: ">= 0.8x",
      value: relay.concurrentRatio,
      met: relay.concurrentRatio >= 0.8
    },
    relay.portkeyRatio === undefined
      ? {
        figure: `9. relay (live) throughput, ${relay.streams} streams, vs @portkey-ai/gateway: not runnable`,
        target: ">= 1.5x",
        value: Number.NaN,
        met: true,
        note: "not runnable"
      }
      : {
        figure: `9. relay (live) throughput, ${relay.streams} streams, vs @portkey-ai/gateway`,
        target: ">= 1.5x",
        value: relay.portkeyRatio,
        met: relay.portkeyRatio >= 1.5
      }
  ]
  table(
    "Targets (parser ceilings: the floors of the SSE parser DESIGN §3 used to mandate, alone and with per-event " +
      "Schema, for the record; Effect floor: the plain loop on HttpClient + Stream + Effect.retry; least on " +
      "HttpClient: execute, the body in one promise, a recursive retry; all this run)",
    [
      "figure",
      "target",
      "value",
      "parser ceiling",
      "+schema ceiling",
      "Effect floor",
      "least on HttpClient",
      "verdict"
    ],
    targets.map((t) => [
      t.figure,
      t.target,
      fmt(t.value),
      // three decimals: a ceiling just under a target must not print as meeting it
      "ceiling" in t ? fmt(t.ceiling, 3) : "",
      "schemaCeiling" in t ? fmt(t.schemaCeiling, 3) : "",
      "floor" in t ? fmt(t.floor, 3) : "",
      "least" in t && t.least !== undefined ? fmt(t.least, 3) : "",
      "note" in t ? t.note : verdict(t.met, "reachable" in t ? t.reachable : "yes")
    ])
  )

  const totalMs = Math.round(performance.now() - started)
  const results = {
    generatedAt: new Date().toISOString(),
    quick,
    machine: info,
    settings,
    durationMs: totalMs,
    figureDurationsMs: timings,
    decode,
    e2e,
    concurrency,
    latency,
    growth,
    coldStart,
    largeChat,
    fleet,
    relay,
    targets
  }
  const file = Path.join(repoRoot, "bench", "results.json")
  Fs.writeFileSync(file, JSON.stringify(results, null, 2) + "\n")
  console.log(`\nwrote ${Path.relative(process.cwd(), file)} in ${(totalMs / 1000).toFixed(1)} s`)
}

main().then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
