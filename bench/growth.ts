/**
 * Figure 5: cost growth. The Chat Completions recording scaled to 1, 10 and 100 MB is decoded by reprise's
 * provider pipeline and by the baseline loop, each size in a fresh child process (`bench/growth.ts child <decoder>
 * <MB>`) so its peak RSS is read cleanly. The body is generated while it is read (only one 64 KiB block is held),
 * and the consumer keeps a count of text characters, not the text, so any growth would be the decoder's own.
 * Linear time: ms per MB stays level. Flat memory: the peak RSS above the process's starting RSS stays level.
 * Each point times `passes` decodes (the median counts) and keeps the peaks over all of them.
 */
import { build, mb } from "./support/corpus.js"
import { baseline, reprise } from "./support/decoders.js"
import { child, childMain, fmt, gc, memorySampler, summarize, type Summary, table } from "./support/stats.js"

export interface GrowthPoint {
  readonly decoder: string
  readonly sizeMB: number
  readonly bytes: number
  /** The median of the timed passes. */
  readonly ms: number
  readonly passes: Summary
  readonly msPerMB: number
  readonly rssBeforeMB: number
  readonly peakRssMB: number
  readonly rssGrowthMB: number
  readonly peakHeapMB: number
  readonly heapBeforeMB: number
  /** The largest heap live after a forced collection during a second pass. */
  readonly liveHeapMB: number
}

const MB = 1024 * 1024

const passes = 3

const runChild = async (decoder: string, sizeMB: number): Promise<GrowthPoint> => {
  const corpus = build("openai-chat", sizeMB * MB)
  const decode = decoder === "reprise" ? reprise : baseline
  // warm the code paths on small streams, then measure from a collected heap
  for (let i = 0; i < 3; i++) await decode(build("openai-chat", 2 * MB))
  gc()
  const rssBefore = process.memoryUsage.rss()
  const heapBefore = process.memoryUsage().heapUsed
  const sampler = memorySampler(2)
  const times: Array<number> = []
  for (let i = 0; i < passes; i++) {
    const start = performance.now()
    const result = await decode(corpus)
    times.push(performance.now() - start)
    if (result.textLength !== corpus.textLength || !result.finished) throw new Error(`${decoder}: wrong result`)
  }
  const peaks = sampler.stop()
  const timing = summarize(times)
  const ms = timing.median
  // A second, untimed pass that collects garbage every 100 ms: the largest heap still live after a collection is
  // what the decoder retains (the peaks above include garbage not yet collected).
  gc()
  let liveHeap = process.memoryUsage().heapUsed
  const collector = setInterval(() => {
    gc()
    liveHeap = Math.max(liveHeap, process.memoryUsage().heapUsed)
  }, 100)
  await decode(corpus)
  clearInterval(collector)
  return {
    liveHeapMB: liveHeap / MB,
    decoder,
    sizeMB,
    bytes: corpus.size,
    ms,
    passes: timing,
    msPerMB: ms / mb(corpus.size),
    rssBeforeMB: rssBefore / MB,
    peakRssMB: peaks.peakRss / MB,
    rssGrowthMB: (peaks.peakRss - rssBefore) / MB,
    peakHeapMB: peaks.peakHeap / MB,
    heapBeforeMB: heapBefore / MB
  }
}

export interface GrowthResult {
  readonly points: ReadonlyArray<GrowthPoint>
  /** reprise ms/MB at the largest size over ms/MB at the middle one (1.0 = perfectly linear). */
  readonly timeLinearity: number
  /** reprise live heap at the largest size minus at the smallest, MB (0 = flat). */
  readonly liveHeapSpreadMB: number
}

export const run = async (options: { sizesMB: ReadonlyArray<number> }): Promise<GrowthResult> => {
  const points: Array<GrowthPoint> = []
  for (const decoder of ["reprise", "baseline"]) {
    for (const size of options.sizesMB) points.push(await child("growth.ts", ["child", decoder, String(size)]))
  }
  const r = points.filter((p) => p.decoder === "reprise")
  return {
    points,
    timeLinearity: r[r.length - 1].msPerMB / r[Math.max(0, r.length - 2)].msPerMB,
    liveHeapSpreadMB: r[r.length - 1].liveHeapMB - r[0].liveHeapMB
  }
}

export const print = (g: GrowthResult) => {
  const base = new Map(g.points.filter((p) => p.decoder === "baseline").map((p) => [p.sizeMB, p]))
  table(
    `5. Cost growth (chat recording scaled; fresh process per point, median of ${passes} passes; ratio = reprise / baseline): ms per MB level = linear, RSS growth level = flat`,
    [
      "decoder",
      "MB",
      "ms",
      "ms min-max",
      "ms/MB",
      "time ratio",
      "RSS before MB",
      "peak RSS MB",
      "RSS growth MB",
      "peak heap MB",
      "live heap MB"
    ],
    g.points.map((p) => [
      p.decoder,
      fmt(mb(p.bytes), 0),
      fmt(p.ms, 0),
      `${fmt(p.passes.min, 0)}-${fmt(p.passes.max, 0)}`,
      fmt(p.msPerMB, 1),
      p.decoder === "reprise" ? `${fmt(p.ms / base.get(p.sizeMB)!.ms)}x` : "1.00x",
      fmt(p.rssBeforeMB, 1),
      fmt(p.peakRssMB, 1),
      fmt(p.rssGrowthMB, 1),
      fmt(p.peakHeapMB, 1),
      fmt(p.liveHeapMB, 1)
    ])
  )
}

childMain(([decoder, sizeMB]) => runChild(decoder, Number(sizeMB)))
