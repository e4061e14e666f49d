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
 * its body as a `Stream`, `Effect.retry` with a fixed 20 ms `Schedule`), measured the same way: no client on those
 * parts recovers faster, so its gap over the loop bounds reprise's. The first few replies of each are a warm-up and
 * not counted.
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
import { fmt, summarize, type Summary, table } from "./support/stats.js"

const backoffMs = 20
/** Replies run first and not counted, so JIT compilation and the first connections are not measured. */
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
  readonly faults: number
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

export const run = (options: { replies: number }): Promise<LatencyResult> =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const sim = yield* Simulator.make({ maxRecords: 10_000 }).pipe(
      Effect.provide(Layer.merge(
        (yield* Effect.promise(() => import("@effect/platform-node/NodeFileSystem"))).layer,
        (yield* Effect.promise(() => import("@effect/platform-node/NodePath"))).layer
      ))
    )
    const baseUrl = sim.baseUrl("openai-chat")
    const request = { model: "bench", messages: [Message.user("hi")] }

    // reprise
    const total = options.replies + warmup
    yield* sim.setScript(script(total))
    const delays: Array<number> = []
    const client: Array<number> = []
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
              client.push(performance.now() - discardedAt - pendingDelay)
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
          return yield* Effect.die(new Error(`reply ${i}: ${reply.attempts} attempts, ${reply.text.length} characters`))
        }
      }
    }).pipe(Effect.provide(layer))
    const repriseRecords = yield* sim.requestsTo("openai-chat")

    // baseline: the plain loop, same faults, same backoff
    yield* sim.setScript(script(total))
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
    const baselineRecords = yield* sim.requestsTo("openai-chat")

    // floor: the same loop on the mandated Effect parts
    yield* sim.setScript(script(total))
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
    const floorRecords = yield* sim.requestsTo("openai-chat")
    return {
      faults: options.replies,
      backoffMs,
      reprise: summarize(gaps(repriseRecords, delays).slice(warmup)),
      baseline: summarize(gaps(baselineRecords, []).slice(warmup)),
      floor: summarize(gaps(floorRecords, []).slice(warmup)),
      repriseClient: summarize(client.slice(warmup)),
      scheduled: summarize(delays)
    }
  })))

export const print = (r: LatencyResult) =>
  table(
    `4. Recovery latency: fault -> next attempt, minus the scheduled backoff (${r.faults} faults, backoff ${r.backoffMs} ms; target (issue #13): median at most 1 ms over the plain loop's)`,
    ["measure", "median ms", "p99 ms", "min ms", "max ms"],
    [
      ["reprise, server view (fault close -> next request)", r.reprise],
      ["plain undici loop, server view", r.baseline],
      ["floor: the loop on HttpClient + Stream + Effect.retry, server view", r.floor],
      ["reprise, client view (discarded -> first preview)", r.repriseClient]
    ].map(([name, s]) => {
      const summary = s as Summary
      return [name as string, fmt(summary.median), fmt(summary.p99), fmt(summary.min), fmt(summary.max)]
    })
  )
