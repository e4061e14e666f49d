/**
 * The sixteen failoverbench scenarios with the relay as the gateway: `Relay.layer` on a loopback port with a plan of
 * two routes (the scenario's model, then its fallback) in front of the loopback simulator serving the catalogue
 * (`@reprise/simulator/Failoverbench`, the full profile's delays; the pace between tokens 0), and between them and
 * the test a plain OpenAI-compatible streaming client, as failoverbench's `endpoint` adapter is: `fetch` POST
 * `/v1/chat/completions` with `stream: true` and `stream_options.include_usage`; the content is the concatenated
 * deltas, the model the chunks', the usage the usage chunk's; an HTTP error or an in-band `{"error": …}` chunk is an
 * error, and a success needs a `finish_reason` and then `[DONE]`. The grade's checks are assertions, as in
 * `failoverbench.test.ts` (the same scenarios through the library's plan): the complete canonical answer (or a clean
 * error for S13), the model and usage reported, what the provider saw, wall time, and a healthy call through the same
 * circuits afterwards.
 *
 * The relay runs in the test's runtime: its waits (backoff, Retry-After, the timeouts, the deadline, the circuits'
 * cool-downs, `hold` mode's keepalives) and the simulator's outage window are on the TestClock, stepped while the
 * sockets do their work.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as HttpServer from "@effect/platform/HttpServer"
import { assert, describe, it } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import * as Circuit from "@reprise/core/Circuit"
import * as Routes from "@reprise/core/Routes"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as Relay from "@reprise/server/Relay"
import * as Failoverbench from "@reprise/simulator/Failoverbench"
import * as Simulator from "@reprise/simulator/Simulator"
import { Clock, Context, Duration, Effect, Layer, Random, Redacted, TestClock } from "effect"
import { KEY } from "./support/chat.js"
import {
  checks,
  drive,
  interactive,
  isCanonical,
  type Measured,
  prompt,
  script,
  seen
} from "./support/failoverbench.js"

/** What the endpoint client got. */
interface Got {
  readonly ok: boolean
  readonly status: number
  readonly content: string
  readonly model: string | undefined
  readonly usage: unknown
  readonly error: string
}

/** One call of the `endpoint` adapter: a plain streaming Chat Completions request for `model` to the relay. */
const endpoint = (url: string, model: string) =>
  Effect.promise(async (): Promise<Got> => {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        model,
        messages: [{ role: "user", content: prompt }],
        stream: true,
        stream_options: { include_usage: true }
      })
    })
    const text = await response.text()
    if (response.status !== 200) {
      return { ok: false, status: response.status, content: "", model: undefined, usage: undefined, error: text }
    }
    let content = ""
    let reported: string | undefined
    let usage: unknown
    let error = ""
    let finished = false
    let done = false
    for (const line of text.split("\n")) {
      if (!line.startsWith("data:")) continue
      const data = line.slice(5).trim()
      if (data === "[DONE]") {
        done = finished
        continue
      }
      const chunk = JSON.parse(data)
      if (chunk.error !== undefined) {
        error = JSON.stringify(chunk.error)
        continue
      }
      if (typeof chunk.model === "string") reported = chunk.model
      if (chunk.usage) usage = chunk.usage
      for (const choice of chunk.choices ?? []) {
        content += choice.delta?.content ?? ""
        if (choice.finish_reason) finished = true
      }
    }
    return { ok: error === "" && finished && done, status: 200, content, model: reported, usage, error }
  })

/**
 * The relay with a plan of `models` (the last one declared larger) over the simulator's Chat Completions route, the
 * interactive bounds and the circuits given, on a free loopback port in the current scope: its URL.
 */
const relay = (sim: Simulator.Service, circuits: Circuit.Service, models: readonly [string, ...Array<string>]) =>
  Effect.gen(function*() {
    // the undici client lives as long as the relay: built in the same scope
    const client = yield* Layer.build(NodeHttpClient.layerUndici)
    const provider = yield* HttpProvider.make("openai-chat", {
      apiKey: Redacted.make(KEY),
      baseUrl: sim.baseUrl("openai-chat"),
      firstByteTimeout: interactive.firstByteTimeout,
      firstTokenTimeout: interactive.firstTokenTimeout,
      idleTimeout: interactive.idleTimeout
    }).pipe(Effect.provide(client))
    const routes = models.map((model, i): Routes.Route => ({
      provider,
      model,
      ...(i > 0 ? { contextWindow: interactive.fallbackContextWindow } : {})
    })) as [Routes.Route, ...Array<Routes.Route>]
    const served = Relay.layer({ port: 0, accessLog: () => Effect.void }).pipe(
      Layer.provide(Layer.mergeAll(
        Routes.layer(Routes.make(...routes)),
        Layer.succeed(Circuit.Circuit, circuits),
        Budget.layer({ deadline: interactive.deadline })
      ))
    )
    // the backoff's jitter from a pinned seed: the relay's fibers inherit it
    const context = yield* Effect.withRandom(Layer.build(served), Random.make(1))
    const address = Context.get(context, HttpServer.HttpServer).address
    if (address._tag !== "TcpAddress") throw new Error("not a TCP address")
    return `http://127.0.0.1:${address.port}`
  })

/** One call of the endpoint client, the TestClock stepped while it runs: what it got and the seconds it took. */
const through = (url: string, model: string) =>
  Effect.flatMap(drive(endpoint(url, model)), ({ exit, seconds }) => Effect.map(exit, (got) => ({ got, seconds })))

const complete = (got: Got) => got.ok && isCanonical(got.content)

/** A scenario's single call through a relay of its model and its fallback, fresh circuits; the checks' facts. */
const single = (id: string) =>
  Effect.gen(function*() {
    const scenario = Failoverbench.scenarios.find((s) => s.id === id)!
    const sim = yield* Simulator.Simulator
    yield* sim.setScript(script)
    const circuits = Circuit.makeMemory()
    const url = yield* relay(sim, circuits, [scenario.model, scenario.fallback])
    const since = yield* Clock.currentTimeMillis
    const { got, seconds } = yield* through(url, scenario.model)
    const primary = yield* seen(sim, scenario.model, since)
    const fallback = yield* seen(sim, scenario.fallback, since)
    // the alive probe: a healthy call through a relay over the same circuits
    const healthy = yield* relay(sim, circuits, [Failoverbench.healthyModel])
    const alive = complete((yield* through(healthy, Failoverbench.healthyModel)).got)
    return {
      got,
      seconds,
      primary,
      fallback,
      truncatedSuccess: got.ok && !complete(got),
      prefillRejections: [...primary, ...fallback].filter((r) => r.action === "400 prefill").length,
      alive
    }
  }).pipe(Effect.scoped)

const simulator = Simulator.layer()

/** What the endpoint client got of a scenario's call through the relay, in the catalogue's terms. */
const measured = (id: string) =>
  Effect.map(single(id), (r): Measured => ({
    complete: complete(r.got),
    failed: !r.got.ok,
    error: r.got.error,
    truncatedSuccess: r.truncatedSuccess,
    servedModel: r.got.model,
    usage: r.got.usage !== undefined,
    seconds: r.seconds,
    primary: r.primary,
    fallback: r.fallback,
    alive: r.alive
  }))

describe("failoverbench scenarios, through the relay with a plan of two routes", () => {
  for (const { check, id, title } of checks) {
    it.effect(`${id} ${title}`, () => Effect.map(measured(id), check).pipe(Effect.provide(simulator)))
  }

  it.effect("S13 in hold mode: nothing was shown, so the error is the response itself, with the provider's 400", () =>
    Effect.gen(function*() {
      const r = yield* single("S13")
      assert.isFalse(r.got.ok)
      assert.strictEqual(r.got.status, 400)
    }).pipe(Effect.provide(simulator)))

  it.effect("S15 primary down for 60 s: one relay's circuit serves from the fallback, probes, returns to the primary", () =>
    Effect.gen(function*() {
      const scenario = Failoverbench.scenarios.find((s) => s.id === "S15")!
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(script)
      const url = yield* relay(sim, Circuit.makeMemory(), [scenario.model, scenario.fallback])
      const reset = yield* Clock.currentTimeMillis
      const down = Failoverbench.timings.full.outageMs / 1000
      const items: Array<{ readonly sent: number; readonly ok: boolean; readonly model: string | undefined }> = []
      for (let i = 0; i < 20; i++) {
        const now = yield* Clock.currentTimeMillis
        if (reset + i * 4000 > now) yield* TestClock.adjust(Duration.millis(reset + i * 4000 - now))
        const sent = ((yield* Clock.currentTimeMillis) - reset) / 1000
        const { got, seconds } = yield* through(url, scenario.model)
        assert.isAtMost(seconds, 30, `request ${i} took ${seconds}s`)
        items.push({ sent, ok: complete(got), model: got.model })
      }
      const primary = yield* seen(sim, scenario.model, reset)
      const during = items.filter((it) => it.sent < down)
      // every request during the outage answered, by the fallback
      assert.isAbove(during.length, 0)
      assert.isTrue(during.every((it) => it.ok && it.model === scenario.fallback))
      // the primary answered again within 30 s of its recovery
      const back = items.find((it) => it.sent >= down && it.model === scenario.model)
      assert.isDefined(back)
      assert.isAtMost(back!.sent - down, 30)
      assert.isTrue(items.every((it) => it.ok))
      // with the circuit open, at most one primary attempt per request during the outage
      assert.isAtMost(primary.filter((p) => p.at < down).length, during.length)
    }).pipe(Effect.scoped, Effect.provide(simulator)))

  it.effect("S16 fail-over accounting: the chunks name the fallback's model and carry its usage", () =>
    Effect.gen(function*() {
      const r = yield* single("S16")
      assert.isTrue(complete(r.got), r.got.error)
      assert.include(r.got.model ?? "", Failoverbench.healthyModel)
      assert.isDefined(r.got.usage)
      assert.isAtMost(r.primary.length, 6)
    }).pipe(Effect.provide(simulator)))
})

describe("failoverbench scenarios, through one relay for the whole catalogue", () => {
  // A gateway is configured once: its fallback comes from its configuration, and the scenario (the primary's model)
  // from each request's `model`. This needs the relay to send a request's `model` to the plan's primary route.
  it.effect("the request's model becomes the primary route's model; the configured fallback still answers", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(script)
      const url = yield* relay(sim, Circuit.makeMemory(), [Failoverbench.healthyModel, Failoverbench.healthyModel])
      for (const id of ["S03", "S04"]) {
        const scenario = Failoverbench.scenarios.find((s) => s.id === id)!
        const since = yield* Clock.currentTimeMillis
        const { got } = yield* through(url, scenario.model)
        assert.isTrue(complete(got), got.error)
        const primary = yield* seen(sim, scenario.model, since)
        assert.isAtLeast(primary.length, 1, `${id}: the scenario's model was never asked`)
        assert.strictEqual(got.model, id === "S03" ? scenario.model : Failoverbench.healthyModel)
      }
    }).pipe(Effect.scoped, Effect.provide(simulator)))
})
