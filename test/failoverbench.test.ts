/**
 * The sixteen failoverbench scenarios, one test each, against the loopback simulator over real HTTP with the undici
 * client: the fault as the catalogue defines it (`@reprise/simulator/Failoverbench`, the full profile's delays; the
 * pace between tokens 0), a plan of two routes (the scenario's model, then its fallback) with the configuration
 * docs/routes.md gives for an interactive call, and the grade's checks as assertions: what the caller got (the
 * complete canonical answer, or a clean error for S13; the model and usage reported) and what the provider saw
 * (attempts per model, the gap between them, wall time), then a healthy call through the same circuits.
 *
 * The client's waits (backoff, Retry-After, the timeouts, the deadline, the circuits' cool-downs) and the simulator's
 * outage window run on the TestClock, stepped while the sockets do their work; the simulator's other delays (a
 * first token after 20 s, a 30 s stall, 120 s of silence) are real time that the client's timeouts end long before.
 */
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { assert, describe, it } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import * as Circuit from "@reprise/core/Circuit"
import * as Generation from "@reprise/core/Generation"
import * as Message from "@reprise/core/Message"
import * as Recovery from "@reprise/core/Recovery"
import * as Routes from "@reprise/core/Routes"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as Failoverbench from "@reprise/simulator/Failoverbench"
import * as Simulator from "@reprise/simulator/Simulator"
import { Cause, Clock, Duration, Effect, Exit, Layer, Option, Random, Redacted, TestClock } from "effect"
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

/** The HTTP provider of the simulator's Chat Completions route, with the interactive timeouts. */
const chatProvider = (sim: Simulator.Service) =>
  HttpProvider.make("openai-chat", {
    apiKey: Redacted.make(KEY),
    baseUrl: sim.baseUrl("openai-chat"),
    firstByteTimeout: interactive.firstByteTimeout,
    firstTokenTimeout: interactive.firstTokenTimeout,
    idleTimeout: interactive.idleTimeout
  })

/** One call through a plan of `models` (the last one declared larger), with the circuits given. */
const call = (
  sim: Simulator.Service,
  circuits: Circuit.Service,
  models: readonly [string, ...Array<string>]
) =>
  Effect.gen(function*() {
    const provider = yield* chatProvider(sim)
    const routes = models.map((model, i): Routes.Route => ({
      provider,
      model,
      ...(i > 0 ? { contextWindow: interactive.fallbackContextWindow } : {})
    })) as [Routes.Route, ...Array<Routes.Route>]
    return yield* Recovery.generate({ model: models[0], messages: [Message.user(prompt)] }).pipe(
      Effect.provide(Layer.mergeAll(
        Routes.layer(Routes.make(...routes)),
        Layer.succeed(Circuit.Circuit, circuits),
        Budget.layer({ deadline: interactive.deadline })
      )),
      // the backoff's jitter from a pinned seed: every run waits the same
      Effect.withRandom(Random.make(1))
    )
  }).pipe(Effect.provide(NodeHttpClient.layerUndici))

const complete = (exit: Exit.Exit<Generation.Reply, unknown>) => Exit.isSuccess(exit) && isCanonical(exit.value.text)

/** The alive probe: one healthy `fb-ok` call through the same circuits succeeds with the canonical answer. */
const alive = (sim: Simulator.Service, circuits: Circuit.Service) =>
  Effect.map(drive(call(sim, circuits, [Failoverbench.healthyModel])), ({ exit }) => complete(exit))

/** A scenario's single call: its model with its fallback, with fresh circuits; then the checks' measurements. */
const single = (id: string) =>
  Effect.gen(function*() {
    const scenario = Failoverbench.scenarios.find((s) => s.id === id)!
    const sim = yield* Simulator.Simulator
    yield* sim.setScript(script)
    const circuits = Circuit.makeMemory()
    const since = yield* Clock.currentTimeMillis
    const { exit, seconds } = yield* drive(call(sim, circuits, [scenario.model, scenario.fallback]))
    const primary = yield* seen(sim, scenario.model, since)
    const fallback = yield* seen(sim, scenario.fallback, since)
    const truncatedSuccess = Exit.isSuccess(exit) && !complete(exit)
    return {
      exit,
      seconds,
      primary,
      fallback,
      truncatedSuccess,
      reply: Exit.isSuccess(exit) ? exit.value : undefined,
      prefillRejections: [...primary, ...fallback].filter((r) => r.action === "400 prefill").length,
      alive: yield* alive(sim, circuits)
    }
  })

const simulator = Simulator.layer()

/** What the caller got of a scenario's call through the plan, in the catalogue's terms. */
const measured = (id: string) =>
  Effect.map(single(id), (r): Measured => ({
    complete: complete(r.exit),
    failed: Exit.isFailure(r.exit),
    error: Exit.isFailure(r.exit) ? Cause.pretty(r.exit.cause) : "",
    truncatedSuccess: r.truncatedSuccess,
    servedModel: r.reply?.model,
    usage: r.reply !== undefined && Option.isSome(r.reply.usage),
    seconds: r.seconds,
    primary: r.primary,
    fallback: r.fallback,
    alive: r.alive
  }))

describe("failoverbench scenarios, through a plan of two routes", () => {
  for (const { check, id, title } of checks) {
    it.effect(`${id} ${title}`, () => Effect.map(measured(id), check).pipe(Effect.provide(simulator)))
  }

  it.effect("the reply names the route that served it: the fallback, route 2, after the primary's failures", () =>
    Effect.gen(function*() {
      const r = yield* single("S16")
      assert.deepStrictEqual(r.reply?.route, { index: 2, name: "openai-chat fb-ok", model: "fb-ok" })
    }).pipe(Effect.provide(simulator)))

  it.effect("S15 primary down for 60 s: the circuit serves from the fallback, probes, and returns to the primary", () =>
    Effect.gen(function*() {
      const scenario = Failoverbench.scenarios.find((s) => s.id === "S15")!
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(script)
      const circuits = Circuit.makeMemory()
      const reset = yield* Clock.currentTimeMillis
      const down = Failoverbench.timings.full.outageMs / 1000
      const items: Array<{ readonly sent: number; readonly ok: boolean; readonly route: number | undefined }> = []
      for (let i = 0; i < 20; i++) {
        const now = yield* Clock.currentTimeMillis
        if (reset + i * 4000 > now) yield* TestClock.adjust(Duration.millis(reset + i * 4000 - now))
        const sent = ((yield* Clock.currentTimeMillis) - reset) / 1000
        const { exit, seconds } = yield* drive(call(sim, circuits, [scenario.model, scenario.fallback]))
        assert.isAtMost(seconds, 30, `request ${i} took ${seconds}s`)
        items.push({ sent, ok: complete(exit), route: Exit.isSuccess(exit) ? exit.value.route?.index : undefined })
      }
      const primary = yield* seen(sim, scenario.model, reset)
      const during = items.filter((it) => it.sent < down)
      // every request during the outage answered, by the fallback
      assert.isAbove(during.length, 0)
      assert.isTrue(during.every((it) => it.ok && it.route === 2))
      // the primary answered again within 30 s of its recovery
      const back = items.find((it) => it.sent >= down && it.route === 1)
      assert.isDefined(back)
      assert.isAtMost(back!.sent - down, 30)
      assert.isTrue(items.every((it) => it.ok))
      // with the circuit open, at most one primary attempt per request during the outage
      assert.isAtMost(primary.filter((p) => p.at < down).length, during.length)
    }).pipe(Effect.provide(simulator)))

  it.effect("S16 fail-over accounting: the reply names the fallback's model and carries its usage", () =>
    Effect.gen(function*() {
      const r = yield* single("S16")
      assert.isTrue(complete(r.exit))
      assert.include(r.reply!.model ?? "", Failoverbench.healthyModel)
      assert.strictEqual(r.reply!.route?.model, Failoverbench.healthyModel)
      assert.isTrue(Option.isSome(r.reply!.usage))
      assert.isAtMost(r.primary.length, 6)
    }).pipe(Effect.provide(simulator)))
})
