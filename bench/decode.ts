/**
 * Figure 1: decode throughput per protocol over a recorded stream scaled to ~10 MB, fed as 16 KiB byte chunks
 * through reprise's real provider pipeline (in-memory `HttpClient`), against a baseline loop (`eventsource-parser` +
 * `JSON.parse` + the terminal check), the official SDK decoder, and two floors (the baseline loop on
 * `@effect/experimental/Sse`, without and with per-event Schema validation), all over the same bytes. Ratios are
 * reprise's throughput over the other's (higher is better for reprise); a floor's ratios are reprise's ceilings.
 */
import { Bench } from "tinybench"
import { build, type Corpus, mb, protocols } from "./support/corpus.js"
import { baseline, type Decoder, floor, floorSchema, official, reprise } from "./support/decoders.js"
import { fmt, table } from "./support/stats.js"

export interface DecodeRow {
  readonly protocol: string
  readonly source: string
  readonly bytes: number
  readonly events: number
  readonly decoders: Record<string, { median: number; mad: number; min: number; max: number; samples: number }>
  readonly eventsPerSec: Record<string, number>
  readonly mbPerSec: Record<string, number>
  readonly ratioVsOfficial: number
  readonly ratioVsBaseline: number
  /**
   * The best ratios any decoder built on the mandated SSE parser can reach: the `floor` decoder (that parser and
   * `JSON.parse`, nothing else) against the official decoder and the baseline loop.
   */
  readonly ceilingVsOfficial: number
  readonly ceilingVsBaseline: number
  /** The same with per-event Schema validation (`floorSchema`). */
  readonly schemaCeilingVsOfficial: number
  readonly schemaCeilingVsBaseline: number
}

const decoders: Record<string, Decoder> = { reprise, floor, floorSchema, baseline, official }

const check = async (name: string, decoder: Decoder, corpus: Corpus) => {
  const result = await decoder(corpus)
  if (!result.finished || result.textLength !== corpus.textLength) {
    throw new Error(
      `${name}/${corpus.protocol}: decoded ${result.textLength} characters (finished: ${result.finished}), ` +
        `expected ${corpus.textLength}`
    )
  }
}

export const run = async (options: { sizeMB: number; iterations: number }) => {
  const rows: Array<DecodeRow> = []
  for (const protocol of protocols) {
    const corpus = build(protocol, options.sizeMB * 1024 * 1024)
    for (const [name, decoder] of Object.entries(decoders)) await check(name, decoder, corpus)
    const bench = new Bench({
      name: `decode ${protocol}`,
      iterations: options.iterations,
      time: 0,
      warmupIterations: 1,
      warmupTime: 0
    })
    for (const [name, decoder] of Object.entries(decoders)) bench.add(name, () => decoder(corpus).then(() => {}))
    await bench.run()
    const stats: DecodeRow["decoders"] = {}
    const eventsPerSec: Record<string, number> = {}
    const mbPerSec: Record<string, number> = {}
    for (const task of bench.tasks) {
      const result = task.result
      if (!("latency" in result)) throw new Error(`${protocol}/${task.name}: ${result.state}`)
      const l = result.latency
      stats[task.name] = { median: l.p50, mad: l.mad, min: l.min, max: l.max, samples: l.samplesCount }
      eventsPerSec[task.name] = corpus.events / (l.p50 / 1000)
      mbPerSec[task.name] = mb(corpus.size) / (l.p50 / 1000)
    }
    rows.push({
      protocol,
      source: corpus.source,
      bytes: corpus.size,
      events: corpus.events,
      decoders: stats,
      eventsPerSec,
      mbPerSec,
      ratioVsOfficial: stats.official.median / stats.reprise.median,
      ratioVsBaseline: stats.baseline.median / stats.reprise.median,
      ceilingVsOfficial: stats.official.median / stats.floor.median,
      ceilingVsBaseline: stats.baseline.median / stats.floor.median,
      schemaCeilingVsOfficial: stats.official.median / stats.floorSchema.median,
      schemaCeilingVsBaseline: stats.baseline.median / stats.floorSchema.median
    })
  }
  return rows
}

export const print = (rows: ReadonlyArray<DecodeRow>) =>
  table(
    `1. Decode throughput (~${
      fmt(mb(rows[0]?.bytes ?? 0), 0)
    } MB recorded stream, 16 KiB chunks; ratio = reprise throughput / other; targets (issue #13): >= 1.5x official, >= 0.6x baseline;\n` +
      "   floor = @effect/experimental/Sse + JSON.parse alone, +schema = and per-event Schema validation; ceiling = a floor's ratio, the best any decoder on it can do)",
    [
      "protocol",
      "MB",
      "events",
      "reprise MB/s",
      "reprise ev/s",
      "floor MB/s",
      "+schema MB/s",
      "official MB/s",
      "baseline MB/s",
      "vs official",
      "vs baseline",
      "ceiling vs official",
      "ceiling vs baseline",
      "+schema vs official",
      "+schema vs baseline"
    ],
    rows.map((r) => [
      r.protocol,
      fmt(mb(r.bytes), 1),
      String(r.events),
      fmt(r.mbPerSec.reprise, 1),
      fmt(r.eventsPerSec.reprise, 0),
      fmt(r.mbPerSec.floor, 1),
      fmt(r.mbPerSec.floorSchema, 1),
      fmt(r.mbPerSec.official, 1),
      fmt(r.mbPerSec.baseline, 1),
      `${fmt(r.ratioVsOfficial)}x`,
      `${fmt(r.ratioVsBaseline)}x`,
      `${fmt(r.ceilingVsOfficial)}x`,
      `${fmt(r.ceilingVsBaseline)}x`,
      `${fmt(r.schemaCeilingVsOfficial)}x`,
      `${fmt(r.schemaCeilingVsBaseline)}x`
    ])
  )
