/**
 * Figure 2: end-to-end cost of a reply through reprise over loopback — the simulator (its own process) serving a
 * ~5 MB Chat Completions stream, the real undici client of `@effect/platform-node`, the provider's decoder and
 * `Recovery.generate` committing the reply — against plain `undici.request` + `eventsource-parser` + `JSON.parse`
 * reading the same stream and extracting the same text. Two more clients are floors: the plain one with the SSE
 * parser DESIGN §3 mandates (`@effect/experimental/Sse`) in place of `eventsource-parser`, and that one plus the
 * per-event Schema validation STYLE.md prescribes. No client built on those can be faster, so their ratios are the
 * best reprise can reach. The order of the clients rotates from run to run.
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
  readonly floor: Summary
  readonly floorSchema: Summary
  /** reprise median wall time / baseline median wall time (target <= 1.15). */
  readonly ratio: number
  /** floor median wall time / baseline median wall time: the best ratio a client on the mandated parser can reach. */
  readonly ceiling: number
  /** The same with per-event Schema validation as well. */
  readonly ceilingSchema: number
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
  const viaUndici = (parser: "eventsource-parser" | "effect", validate = false) => async () => {
    const text = await chat(baseUrl, { model: "bench", messages: [{ role: "user", content: "hi" }], stream: true }, {
      parser,
      validate
    })
    if (text !== expected) throw new Error(`plain undici (${parser}): wrong text (${text.length} characters)`)
  }
  const clients = {
    reprise: viaReprise,
    baseline: viaUndici("eventsource-parser"),
    floor: viaUndici("effect"),
    floorSchema: viaUndici("effect", true)
  }
  type Client = keyof typeof clients
  const names = Object.keys(clients) as Array<Client>
  // rotate the order so no client always runs on a warmer machine
  const orders = names.map((_, i) => [...names.slice(i), ...names.slice(0, i)])
  try {
    for (let i = 0; i < options.warmup; i++) {
      for (const run of Object.values(clients)) await run()
    }
    const times: Record<Client, Array<number>> = { reprise: [], baseline: [], floor: [], floorSchema: [] }
    for (let i = 0; i < options.runs; i++) {
      for (const who of orders[i % orders.length]) {
        const start = performance.now()
        await clients[who]()
        times[who].push(performance.now() - start)
      }
    }
    const reprise = summarize(times.reprise)
    const baseline = summarize(times.baseline)
    const floor = summarize(times.floor)
    const floorSchema = summarize(times.floorSchema)
    return {
      bytes: corpus.size,
      events: corpus.events,
      runs: options.runs,
      reprise,
      baseline,
      floor,
      floorSchema,
      ratio: reprise.median / baseline.median,
      ceiling: floor.median / baseline.median,
      ceilingSchema: floorSchema.median / baseline.median
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
    } MB chat stream, simulator in its own process; ratio = wall time / plain undici; target <= 1.15x;\n` +
      `   floors = plain undici + @effect/experimental/Sse (+ per-event Schema): the best a client on those can reach)`,
    ["client", "median ms", "MAD ms", "min ms", "max ms", "MB/s", "ratio"],
    [
      ["reprise (Recovery.generate)", r.reprise, r.ratio],
      ["floor: plain undici + @effect/experimental/Sse", r.floor, r.ceiling],
      ["floor + per-event Schema validation", r.floorSchema, r.ceilingSchema],
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
