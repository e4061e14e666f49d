/**
 * Figure 4: recovery latency — from a fault to the next attempt's first byte, minus the scheduled backoff. The
 * simulator (in process, for its records) faults every other request (reset mid-body, premature EOF, 503, in-band
 * `server_error`, in turn); each reply is one fault then a clean stream. Backoff is 20 ms without jitter.
 *
 * - server view (the target): the faulted exchange's `closed.at` to the next request's `receivedAt` (simulator
 *   records, sub-millisecond timestamps), minus the `RetryScheduled` delay;
 * - client view: `AttemptDiscarded` to the next attempt's first `Preview` (`performance.now()`), minus the delay.
 *
 * The baseline is the plain undici loop sleeping the same 20 ms, measured the same way on the server. The floor is
 * that loop on the parts DESIGN §3 mandates (`support/effectClient.ts`: @effect/platform's `HttpClient` over undici,
 * its body as a `Stream`, `Effect.retry` with a fixed 20 ms `Schedule`), measured the same way. Its `Schedule` counts
 * the wait from when `Effect.retry` sees the failure; since fix 26 of docs/performance.md reprise counts it from when
 * the provider observed the failure, and recovers before the floor. The first few replies of each are a warm-up and
 * not counted.
 *
 * Each client runs alone in a fresh child process (`bench/latency.ts child <client> <replies>`), `rounds` times, the
 * order of the three rotating from round to round, and a client's gaps are pooled over its processes. Until
 * 2026-12-03 (docs/performance.md, "How the bench measures") the three ran one after the other in the bench's own
 * process: reprise always first, on code (undici, the simulator, the Effect runtime and the platform's client) that
 * the loop and the floor then found hot, and all three after figures 1 and 2 had run in that process.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Message from "@reprise/core/Message"
import * as Policy from "@reprise/core/Policy"
import * as Recovery from "@reprise/core/Recovery"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as EffectClient from "./support/effectClient.js"
import { chatWithRetry } from "./support/plain.js"
import { child, childMain, fmt, summarize, type Summary, table } from "./support/stats.js"

const backoffMs = 20
/**
 * Replies run first in each process and not counted, so the first connections and the first compilations are not
 * measured. The JIT is still warming after them, for every client alike (each in a fresh process): the figure measures
 * recovery early in a process's life, as the bench always has for reprise.
 */
const warmup = 4
const text = Array.from({ length: 60 }, (_, i) => `token${i}`).join(" ")
const faults = [
  { kind: "reset", afterBytes: 300 },
  { kind: "eof" },
  { kind: "status", status: 503 },
  { kind: "error" }
] as const

const script = (replies: number): SimulatorScript.Script => ({
  routes: {
    "openai-chat": {
      reply: { text },
      steps: Array.from(
        { length: replies },
        (_, i): ReadonlyArray<SimulatorScript.Step> => [faults[i % faults.length], { kind: "stream" }]
      ).flat(),
      afterLast: "reply"
    }
  }
})

export interface LatencyResult {
  /** Faults measured per process, after the warm-up. */
  readonly faults: number
  /** Processes per client. */
  readonly rounds: number
  readonly backoffMs: number
  /** Server view, ms: fault → next request, minus the backoff. */
  readonly reprise: Summary
  readonly baseline: Summary
  /** Server view of the floor: the loop on HttpClient + Stream + Effect.retry. */
  readonly floor: Summary
  /** Client view, ms: AttemptDiscarded → next attempt's first Preview, minus the backoff. */
  readonly repriseClient: Summary
  /** Scheduled delays reported by RetryScheduled (ms). */
  readonly scheduled: Summary
  /** Each process's median server-view gap (ms), per client, in the order they ran. */
  readonly perRound: Readonly<Record<Client, ReadonlyArray<number>>>
}

/** Server-side gaps: for every faulted request, the next request's arrival minus the fault's close, minus `delay`. */
const gaps = (records: ReadonlyArray<Simulator.RecordedRequest>, delays: ReadonlyArray<number>) => {
  const out: Array<number> = []
  let k = 0
  for (let i = 0; i + 1 < records.length; i++) {
    const r = records[i]
    if (r.step === "stream" || r.step === undefined) continue
    const closedAt = r.closed?.at
    if (closedAt === undefined) throw new Error(`request ${r.id} (${r.step}) has no close time`)
    out.push(records[i + 1].receivedAt - closedAt - (delays[k++] ?? backoffMs))
  }
  return out
}

type Client = "reprise" | "baseline" | "floor"

/** One client's replies against `sim`: the simulator's records of them, and (reprise) the delays and client view. */
const runClient = (
  sim: Simulator.Service,
  client: Client,
  total: number
): Effect.Effect<
  { records: ReadonlyArray<Simulator.RecordedRequest>; delays: Array<number>; client: Array<number> },
  unknown
> =>
  Effect.gen(function*() {
    const baseUrl = sim.baseUrl("openai-chat")
    yield* sim.setScript(script(total))
    const delays: Array<number> = []
    const clientView: Array<number> = []
    if (client === "reprise") {
      const request = { model: "bench", messages: [Message.user("hi")] }
      let discardedAt: number | undefined
      let pendingDelay = 0
      const notifications = RecoveryNotifications.layerCallback((n) =>
        Effect.sync(() => {
          switch (n._tag) {
            case "AttemptDiscarded":
              discardedAt = performance.now()
              break
            case "RetryScheduled":
              pendingDelay = Duration.toMillis(n.delay)
              delays.push(pendingDelay)
              break
            case "Preview":
              if (discardedAt !== undefined) {
                clientView.push(performance.now() - discardedAt - pendingDelay)
                discardedAt = undefined
              }
              break
          }
        })
      )
      const layer = Layer.mergeAll(
        HttpProvider.layerUndici("openai-chat", { apiKey: Redacted.make("sk-bench-not-a-key"), baseUrl }),
        Policy.layer({ backoffBase: Duration.millis(backoffMs), jitter: false }),
        notifications
      )
      yield* Effect.gen(function*() {
        for (let i = 0; i < total; i++) {
          const reply = yield* Recovery.generate(request)
          if (reply.text !== text || reply.attempts !== 2) {
            return yield* Effect.die(
              new Error(`reply ${i}: ${reply.attempts} attempts, ${reply.text.length} characters`)
            )
          }
        }
      }).pipe(Effect.provide(layer))
    } else if (client === "baseline") {
      // the plain loop, same faults, same backoff
      yield* Effect.promise(async () => {
        for (let i = 0; i < total; i++) {
          const result = await chatWithRetry(
            baseUrl,
            { model: "bench", messages: [{ role: "user", content: "hi" }], stream: true },
            { attempts: 3, backoffMs }
          )
          if (result.text !== text || result.attempts !== 2) throw new Error(`baseline reply ${i}: ${result.attempts}`)
        }
      })
    } else {
      // floor: the same loop on the mandated Effect parts
      yield* Effect.gen(function*() {
        for (let i = 0; i < total; i++) {
          const result = yield* EffectClient.chatWithRetry(
            baseUrl,
            { model: "bench", messages: [{ role: "user", content: "hi" }], stream: true },
            { attempts: 3, backoffMs }
          )
          if (result.text !== text || result.attempts !== 2) {
            return yield* Effect.die(new Error(`floor reply ${i}: ${result.attempts} attempts`))
          }
        }
      }).pipe(Effect.provide(NodeHttpClient.layerUndici))
    }
    return { records: yield* sim.requestsTo("openai-chat"), delays, client: clientView }
  })

/** What one child process measured: one client's server-view gaps (ms) after the warm-up, and reprise's client view. */
interface ChildResult {
  readonly gaps: ReadonlyArray<number>
  readonly clientView: ReadonlyArray<number>
  readonly delays: ReadonlyArray<number>
}

/** One client alone in this process, against an in-process simulator (for its records). */
const runChild = (client: Client, replies: number): Promise<ChildResult> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const sim = yield* Simulator.make({ maxRecords: 10_000 }).pipe(
      Effect.provide(Layer.merge(
        (yield* Effect.promise(() => import("@effect/platform-node/NodeFileSystem"))).layer,
        (yield* Effect.promise(() => import("@effect/platform-node/NodePath"))).layer
      ))
    )
    const out = yield* runClient(sim, client, replies + warmup)
    return {
      gaps: gaps(out.records, out.delays).slice(warmup),
      clientView: out.client.slice(warmup),
      delays: out.delays
    }
  })))

/**
 * Each client runs in a fresh child process, `rounds` times, the order of the three rotating from round to round, so
 * no client runs on code (undici, the simulator, the Effect runtime) that another client has already made hot, and
 * none inherits the JIT state and heap of the figures before it. The gaps of a client's rounds are pooled.
 */
export const run = async (options: { replies: number; rounds: number }): Promise<LatencyResult> => {
  const clients: ReadonlyArray<Client> = ["reprise", "baseline", "floor"]
  const results: Record<Client, Array<ChildResult>> = { reprise: [], baseline: [], floor: [] }
  for (let round = 0; round < options.rounds; round++) {
    const first = round % clients.length
    for (const client of [...clients.slice(first), ...clients.slice(0, first)]) {
      results[client].push(await child("latency.ts", ["child", client, String(options.replies)]))
    }
  }
  const pooled = (client: Client, pick: (r: ChildResult) => ReadonlyArray<number>) => results[client].flatMap(pick)
  return {
    faults: options.replies,
    rounds: options.rounds,
    backoffMs,
    reprise: summarize(pooled("reprise", (r) => r.gaps)),
    baseline: summarize(pooled("baseline", (r) => r.gaps)),
    floor: summarize(pooled("floor", (r) => r.gaps)),
    repriseClient: summarize(pooled("reprise", (r) => r.clientView)),
    scheduled: summarize(pooled("reprise", (r) => r.delays)),
    perRound: {
      reprise: results.reprise.map((r) => summarize(r.gaps).median),
      baseline: results.baseline.map((r) => summarize(r.gaps).median),
      floor: results.floor.map((r) => summarize(r.gaps).median)
    }
  }
}

export const print = (r: LatencyResult) =>
  table(
    `4. Recovery latency: fault -> next attempt, minus the scheduled backoff (${r.faults} faults in each of ${r.rounds} fresh processes per client, pooled; backoff ${r.backoffMs} ms; target (issue #13): median at most 1 ms over the plain loop's)`,
    ["measure", "median ms", "p99 ms", "min ms", "max ms", "per process"],
    (
      [
        ["reprise, server view (fault close -> next request)", r.reprise, r.perRound.reprise],
        ["plain undici loop, server view", r.baseline, r.perRound.baseline],
        ["floor: the loop on HttpClient + Stream + Effect.retry, server view", r.floor, r.perRound.floor],
        ["reprise, client view (discarded -> first preview)", r.repriseClient, []]
      ] as const
    ).map(([name, summary, perProcess]) => [
      name,
      fmt(summary.median),
      fmt(summary.p99),
      fmt(summary.min),
      fmt(summary.max),
      perProcess.map((x) => fmt(x)).join(" ")
    ])
  )

childMain(([client, replies]) => runChild(client as Client, Number(replies)))
