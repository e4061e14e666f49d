/**
 * Figure 1: decode throughput per protocol, each in a fresh child process, over a recorded stream scaled to ~10 MB
 * and fed as 16 KiB byte chunks through reprise's real provider pipeline (in-memory `HttpClient`), read by its pull as
 * `Recovery` reads it (and, for the record, as a stream with `Stream.runForEachChunk`), against a baseline loop
 * (`eventsource-parser` + `JSON.parse` + the terminal check), the official SDK decoder, and two floors (the baseline
 * loop on `@effect/experimental/Sse`, without and with per-event Schema validation), all over the same bytes. Ratios
 * are the other decoder's time over reprise's, paired by round (higher is better for reprise); a floor's ratios are
 * reprise's ceilings.
 */
import { build, type Corpus, mb, type Protocol, protocols } from "./support/corpus.js"
import { baseline, type Decoder, floor, floorSchema, official, reprise, repriseStream } from "./support/decoders.js"
import { child, childMain, fmt, summarize, table } from "./support/stats.js"

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
  /** The same for reprise's stream read with `Stream.runForEachChunk` (`repriseStream`), for the record. */
  readonly streamVsOfficial: number
  readonly streamVsBaseline: number
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

const decoders: Record<string, Decoder> = { reprise, repriseStream, floor, floorSchema, baseline, official }

const check = async (name: string, decoder: Decoder, corpus: Corpus) => {
  const result = await decoder(corpus)
  if (!result.finished || result.textLength !== corpus.textLength) {
    throw new Error(
      `${name}/${corpus.protocol}: decoded ${result.textLength} characters (finished: ${result.finished}), ` +
        `expected ${corpus.textLength}`
    )
  }
}

/** Median of the paired ratios `other / reprise` of each round: both timed in the same round, next to each other. */
const pairedRatio = (times: Record<string, Array<number>>, other: string, subject: string): number =>
  summarize(times[other].map((t, i) => t / times[subject][i])).median

/**
 * One protocol's row, measured in this process: each protocol runs in a fresh child process (`run`), as an
 * application runs one provider. Run one after another in one process, the protocols' events go through the same
 * shared code (the SSE parser, the decoder's loop, `JSON.parse`'s callers), and the later protocols measured that
 * code after the JIT had seen four shapes: Anthropic, third, measured 0.85x and 0.59x the loop in two full runs of
 * one build (fix 20 of docs/performance.md).
 */
const measure = async (protocol: Protocol, options: { sizeMB: number; iterations: number }): Promise<DecodeRow> => {
  const names = Object.keys(decoders)
  const corpus = build(protocol, options.sizeMB * 1024 * 1024)
  for (const [name, decoder] of Object.entries(decoders)) await check(name, decoder, corpus)
  // One warm-up round, then `iterations` rounds of every decoder once, the order rotating from round to round, so
  // that a drift of the machine's speed falls on every decoder alike (a decoder's samples all in a row, as
  // tinybench takes them, measured ratios that moved by half between runs).
  for (const name of names) await decoders[name](corpus)
  const times: Record<string, Array<number>> = Object.fromEntries(names.map((name) => [name, []]))
  for (let round = 0; round < options.iterations; round++) {
    for (let k = 0; k < names.length; k++) {
      const name = names[(round + k) % names.length]
      const start = performance.now()
      await decoders[name](corpus)
      times[name].push(performance.now() - start)
    }
  }
  const stats: DecodeRow["decoders"] = {}
  const eventsPerSec: Record<string, number> = {}
  const mbPerSec: Record<string, number> = {}
  for (const name of names) {
    const l = summarize(times[name])
    stats[name] = { median: l.median, mad: l.mad, min: l.min, max: l.max, samples: l.n }
    eventsPerSec[name] = corpus.events / (l.median / 1000)
    mbPerSec[name] = mb(corpus.size) / (l.median / 1000)
  }
  return {
    protocol,
    source: corpus.source,
    bytes: corpus.size,
    events: corpus.events,
    decoders: stats,
    eventsPerSec,
    mbPerSec,
    ratioVsOfficial: pairedRatio(times, "official", "reprise"),
    ratioVsBaseline: pairedRatio(times, "baseline", "reprise"),
    streamVsOfficial: pairedRatio(times, "official", "repriseStream"),
    streamVsBaseline: pairedRatio(times, "baseline", "repriseStream"),
    ceilingVsOfficial: pairedRatio(times, "official", "floor"),
    ceilingVsBaseline: pairedRatio(times, "baseline", "floor"),
    schemaCeilingVsOfficial: pairedRatio(times, "official", "floorSchema"),
    schemaCeilingVsBaseline: pairedRatio(times, "baseline", "floorSchema")
  }
}

/** Figure 1: every protocol, each in a fresh child process (see {@link measure}). */
export const run = async (options: { sizeMB: number; iterations: number }): Promise<Array<DecodeRow>> => {
  const rows: Array<DecodeRow> = []
  for (const protocol of protocols) {
    rows.push(
      await child("decode.ts", ["child", protocol, String(options.sizeMB), String(options.iterations)], 600_000)
    )
  }
  return rows
}

export const print = (rows: ReadonlyArray<DecodeRow>) =>
  table(
    `1. Decode throughput (~${
      fmt(mb(rows[0]?.bytes ?? 0), 0)
    } MB recorded stream, 16 KiB chunks; ratio = median over rounds of other time / reprise time; targets (issue #13): >= 1.5x official, >= 0.6x baseline;\n` +
      "   reprise = the provider read by its pull, as Recovery reads it; via Stream = its stream read with Stream.runForEachChunk;\n" +
      "   floor = @effect/experimental/Sse + JSON.parse alone, +schema = and per-event Schema validation; ceiling = a floor's ratio, the best any decoder on it can do)",
    [
      "protocol",
      "MB",
      "events",
      "reprise MB/s",
      "reprise ev/s",
      "via Stream MB/s",
      "floor MB/s",
      "+schema MB/s",
      "official MB/s",
      "baseline MB/s",
      "vs official",
      "vs baseline",
      "via Stream vs official",
      "via Stream vs baseline",
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
      fmt(r.mbPerSec.repriseStream, 1),
      fmt(r.mbPerSec.floor, 1),
      fmt(r.mbPerSec.floorSchema, 1),
      fmt(r.mbPerSec.official, 1),
      fmt(r.mbPerSec.baseline, 1),
      `${fmt(r.ratioVsOfficial)}x`,
      `${fmt(r.ratioVsBaseline)}x`,
      `${fmt(r.streamVsOfficial)}x`,
      `${fmt(r.streamVsBaseline)}x`,
      `${fmt(r.ceilingVsOfficial)}x`,
      `${fmt(r.ceilingVsBaseline)}x`,
      `${fmt(r.schemaCeilingVsOfficial)}x`,
      `${fmt(r.schemaCeilingVsBaseline)}x`
    ])
  )

childMain(([protocol, sizeMB, iterations]) =>
  measure(protocol as Protocol, { sizeMB: Number(sizeMB), iterations: Number(iterations) })
)
