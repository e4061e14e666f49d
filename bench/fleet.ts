/**
 * Figure 8: the fleet (`@reprise/fleet`, over a real `redis-server` started on a free loopback port).
 *
 * - **Outage**: `workers` concurrent replies (each its own Redis connection, as separate processes would have)
 *   against a simulator that answers every request with a 503; backoff 20 ms, capped at 100 ms, so that without a
 *   fleet each reply spends its 11 attempts during the outage. Sends counted by the simulator, alone and with the
 *   fleet at its defaults (20 %, 10 replays per second, 10 s), against the bound
 *   `first attempts × (1 + ratio) + floor × seconds`.
 * - **Added latency per send**: sequential successful replies against the simulator, with and without the fleet
 *   layer, in alternating rounds; the difference of the medians of the reply times is the cost the layer adds to a
 *   send. What a send waits for is a `deposit` answered from the pause the process follows (its credit is sent in
 *   the background: docs/fleet.md, "Following the pause"); both it and one script round trip are timed too.
 */
import * as FleetLimits from "@reprise/core/FleetLimits"
import * as Message from "@reprise/core/Message"
import * as Policy from "@reprise/core/Policy"
import * as Recovery from "@reprise/core/Recovery"
import * as RedisFleet from "@reprise/fleet/RedisFleet"
import * as RetryBudget from "@reprise/fleet/RetryBudget"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as Simulator from "@reprise/simulator/Simulator"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Redacted from "effect/Redacted"
import * as ChildProcess from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { fmt, summarize, type Summary, table } from "./support/stats.js"

export interface FleetOutage {
  readonly workers: number
  readonly alone: number
  readonly shared: number
  readonly seconds: number
  readonly bound: number
  readonly refused: number
}

export interface FleetResult {
  readonly outages: ReadonlyArray<FleetOutage>
  readonly replies: number
  /** Reply wall time without the fleet layer (ms). */
  readonly without: Summary
  /** Reply wall time with the fleet layer (ms). */
  readonly with: Summary
  /** Median with minus median without (ms). */
  readonly addedMedianMs: number
  /** One `deposit` as a send waits for it (ms): answered from the followed pause, credited in the background. */
  readonly deposit: Summary
  /** One script round trip to Redis (a `withdraw`, ms). */
  readonly roundTrip: Summary
}

const freePort = () =>
  new Promise<number>((resolve) => {
    const server = Net.createServer()
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as Net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

/** A throwaway redis-server; resolves once it accepts connections. */
const redisServer = Effect.acquireRelease(
  Effect.promise(async () => {
    const port = await freePort()
    const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "reprise-bench-redis-"))
    const child = ChildProcess.spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir],
      { stdio: ["ignore", "pipe", "ignore"] }
    )
    await new Promise<void>((resolve, reject) => {
      let out = ""
      child.stdout!.setEncoding("utf8").on("data", (d: string) => {
        out += d
        if (out.includes("Ready to accept connections")) resolve()
      })
      child.on("exit", (code) => reject(new Error(`redis-server exited (${code}): is it installed?`)))
      // not installed (ENOENT): a clear error, not an unhandled 'error' event that kills the bench
      child.on(
        "error",
        (error) =>
          reject(new Error(`redis-server could not be started (${error.message}): apt-get install redis-server`))
      )
    })
    return { url: `redis://127.0.0.1:${port}/0`, child, dir }
  }),
  ({ child, dir }) =>
    Effect.sync(() => {
      child.kill("SIGKILL")
      Fs.rmSync(dir, { recursive: true, force: true })
    })
)

const request = { model: "bench", messages: [Message.user("hi")] }
const apiKey = Redacted.make("sk-bench-not-a-key")

export const run = (options: { readonly workers: ReadonlyArray<number>; readonly replies: number }) =>
  Effect.runPromise(Effect.scoped(Effect.gen(function*() {
    const redis = yield* redisServer
    const sim = yield* Simulator.make({ maxRecords: 20_000 }).pipe(
      Effect.provide(Layer.merge(
        (yield* Effect.promise(() => import("@effect/platform-node/NodeFileSystem"))).layer,
        (yield* Effect.promise(() => import("@effect/platform-node/NodePath"))).layer
      ))
    )
    const baseUrl = sim.baseUrl("openai-chat")
    const provider = HttpProvider.layerUndici("openai-chat", { apiKey, baseUrl })
    const hard = Policy.layer({ backoffBase: Duration.millis(20), backoffMax: Duration.millis(100) })

    // --- outage ---------------------------------------------------------------------------------------------
    const outages: Array<FleetOutage> = []
    for (const workers of options.workers) {
      const name = `bench-outage-${workers}-${process.pid}`
      const replies = (fleet: boolean) =>
        Effect.forEach(
          Array.from({ length: workers }, () => 0),
          () =>
            Effect.either(Recovery.generate(request)).pipe(
              Effect.provide(Layer.mergeAll(
                provider,
                hard,
                fleet ? RedisFleet.layer({ url: redis.url, name }) : Layer.empty
              ))
            ),
          { concurrency: "unbounded" }
        )
      const outage = {
        routes: {
          "openai-chat": { steps: [{ kind: "status" as const, status: 503 }], afterLast: "repeat-last" as const }
        }
      }
      yield* sim.setScript(outage)
      yield* replies(false)
      const alone = yield* sim.count("openai-chat")
      yield* sim.setScript(outage)
      const shared = yield* replies(true)
      const records = yield* sim.requestsTo("openai-chat")
      const times = records.map((r) => r.receivedAt)
      const seconds = Math.floor((Math.max(...times) - Math.min(...times) + 50) / 1000) + 2
      const { floor, ratio } = RetryBudget.defaultSettings
      outages.push({
        workers,
        alone,
        shared: records.length,
        seconds,
        bound: workers * (1 + ratio) + floor * seconds,
        refused: shared.filter((r) =>
          r._tag === "Left" && r.left._tag === "RecoveryExhausted" && r.left.reason === "FleetBudget"
        ).length
      })
    }

    // --- added latency per send -----------------------------------------------------------------------------
    yield* sim.setScript({ routes: { "openai-chat": { reply: { text: "ok" } } } })
    const fleet = yield* RedisFleet.make({ url: redis.url, name: `bench-latency-${process.pid}` })
    const timeReplies = (withFleet: boolean, n: number) =>
      Effect.gen(function*() {
        const out: Array<number> = []
        for (let i = 0; i < n; i++) {
          const started = performance.now()
          const reply = yield* Recovery.generate(request)
          out.push(performance.now() - started)
          if (reply.text !== "ok") return yield* Effect.die(new Error("unexpected reply"))
        }
        return out
      }).pipe(
        Effect.provide(provider),
        withFleet ? Effect.provideService(FleetLimits.FleetLimits, fleet) : (self) => self
      )
    yield* timeReplies(true, 50)
    yield* timeReplies(false, 50)
    const without: Array<number> = []
    const withFleet: Array<number> = []
    const rounds = 6
    for (let round = 0; round < rounds; round++) {
      const per = Math.ceil(options.replies / rounds)
      if (round % 2 === 0) {
        without.push(...yield* timeReplies(false, per))
        withFleet.push(...yield* timeReplies(true, per))
      } else {
        withFleet.push(...yield* timeReplies(true, per))
        without.push(...yield* timeReplies(false, per))
      }
    }
    // what a send waits for (answered from the followed pause, its credit sent in the background), and one script
    // round trip to Redis (a withdrawal: the fleet's own budget, nobody else's)
    const deposits: Array<number> = []
    const roundTrips: Array<number> = []
    for (let i = 0; i < options.replies; i++) {
      const started = performance.now()
      yield* fleet.deposit
      deposits.push(performance.now() - started)
      const sent = performance.now()
      yield* fleet.withdraw
      roundTrips.push(performance.now() - sent)
    }
    const w = summarize(without)
    const f = summarize(withFleet)
    return {
      outages,
      replies: options.replies,
      without: w,
      with: f,
      addedMedianMs: f.median - w.median,
      deposit: summarize(deposits),
      roundTrip: summarize(roundTrips)
    } satisfies FleetResult
  })))

export const print = (r: FleetResult) => {
  table(
    "8a. Fleet: sends during an outage (every request a 503; backoff 20-100 ms; fleet defaults 20 %, 10/s, 10 s)",
    ["workers", "sends alone", "sends with the fleet", "bound", "seconds", "ended by FleetBudget"],
    r.outages.map((o) => [
      String(o.workers),
      String(o.alone),
      String(o.shared),
      fmt(o.bound, 1),
      String(o.seconds),
      `${o.refused}/${o.workers}`
    ])
  )
  table(
    `8b. Fleet: added latency per send, ${r.replies} sequential replies each way, loopback (target: <= 0.5 ms median)`,
    ["measure", "median ms", "p99 ms", "min ms", "max ms"],
    [
      ["reply without the fleet layer", r.without],
      ["reply with the fleet layer (Redis)", r.with],
      ["one deposit, as a send waits for it", r.deposit],
      ["one script round trip (withdraw)", r.roundTrip]
    ].map(([name, s]) => {
      const summary = s as Summary
      return [name as string, fmt(summary.median, 3), fmt(summary.p99, 3), fmt(summary.min, 3), fmt(summary.max, 3)]
    }).concat([["added per send (median with - median without)", fmt(r.addedMedianMs, 3), "", "", ""]])
  )
}
