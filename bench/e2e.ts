/**
 * Figure 2: end-to-end cost of a reply through reprise over loopback — the simulator (its own process) serving a
 * ~5 MB Chat Completions stream, the real undici client of `@effect/platform-node`, the provider's decoder and
 * `Recovery.generate` committing the reply — against plain `undici.request` + `eventsource-parser` + `JSON.parse`
 * reading the same stream and extracting the same text. Runs alternate between the two.
 */
import * as Message from "@reprise/core/Message"
import * as Recovery from "@reprise/core/Recovery"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as ManagedRuntime from "effect/ManagedRuntime"
import * as Redacted from "effect/Redacted"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { build, materialize, mb } from "./support/corpus.js"
import { chat } from "./support/plain.js"
import * as Server from "./support/server.js"
import { fmt, summarize, type Summary, table } from "./support/stats.js"

export interface E2eResult {
  readonly bytes: number
  readonly events: number
  readonly runs: number
  readonly reprise: Summary
  readonly baseline: Summary
  /** reprise median wall time / baseline median wall time (target <= 1.15). */
  readonly ratio: number
}

export const run = async (options: { sizeMB: number; runs: number; warmup: number }): Promise<E2eResult> => {
  const corpus = build("openai-chat", options.sizeMB * 1024 * 1024)
  const expected = corpus.text()
  const dir = Server.tempDir()
  const fixture = Path.join(dir, "chat.sse")
  Fs.writeFileSync(fixture, materialize(corpus))
  const server = await Server.start(dir, { routes: { "openai-chat": { reply: { fixture, format: "wire" } } } })
  const baseUrl = `${server.url}/v1`
  const runtime = ManagedRuntime.make(
    HttpProvider.layerUndici("openai-chat", { apiKey: Redacted.make("sk-bench-not-a-key"), baseUrl })
  )
  const request = { model: "bench", messages: [Message.user("hi")] }
  const viaReprise = async () => {
    const reply = await runtime.runPromise(Recovery.generate(request))
    if (reply.text !== expected) throw new Error(`reprise: wrong text (${reply.text.length} characters)`)
  }
  const viaUndici = async () => {
    const text = await chat(baseUrl, { model: "bench", messages: [{ role: "user", content: "hi" }], stream: true })
    if (text !== expected) throw new Error(`plain undici: wrong text (${text.length} characters)`)
  }
  try {
    for (let i = 0; i < options.warmup; i++) {
      await viaReprise()
      await viaUndici()
    }
    const times = { reprise: [] as Array<number>, baseline: [] as Array<number> }
    for (let i = 0; i < options.runs; i++) {
      // alternate the order so neither side always runs on a warmer machine
      const order = i % 2 === 0 ? (["reprise", "baseline"] as const) : (["baseline", "reprise"] as const)
      for (const who of order) {
        const start = performance.now()
        await (who === "reprise" ? viaReprise() : viaUndici())
        times[who].push(performance.now() - start)
      }
    }
    const reprise = summarize(times.reprise)
    const baseline = summarize(times.baseline)
    return {
      bytes: corpus.size,
      events: corpus.events,
      runs: options.runs,
      reprise,
      baseline,
      ratio: reprise.median / baseline.median
    }
  } finally {
    await runtime.dispose()
    await server.stop()
    Fs.rmSync(dir, { recursive: true, force: true })
  }
}

export const print = (r: E2eResult) =>
  table(
    `2. End-to-end over loopback (${
      fmt(mb(r.bytes), 1)
    } MB chat stream, simulator in its own process; ratio = reprise wall time / plain undici; target <= 1.15x)`,
    ["client", "median ms", "MAD ms", "min ms", "max ms", "MB/s", "ratio"],
    [
      ["reprise (Recovery.generate)", r.reprise, r.ratio],
      ["plain undici + eventsource-parser", r.baseline, 1]
    ].map(([name, s, ratio]) => {
      const summary = s as Summary
      return [
        name as string,
        fmt(summary.median, 1),
        fmt(summary.mad, 1),
        fmt(summary.min, 1),
        fmt(summary.max, 1),
        fmt(mb(r.bytes) / (summary.median / 1000), 1),
        `${fmt(ratio as number)}x`
      ]
    })
  )
