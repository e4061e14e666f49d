/**
 * pacing: with `Pacing.layer`, a burst of replies over real loopback HTTP (the simulator and the undici client) puts
 * its first requests on the wire while it builds the rest. When the simulator's server receives its first request,
 * undici has created only the requests of the turns before it (`undici:request:create`); unpaced (the default), every
 * request of the burst is created before the first is written, since nothing gives the event loop a turn until they
 * all are.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Message from "@reprise/core/Message"
import * as Pacing from "@reprise/core/Pacing"
import * as Recovery from "@reprise/core/Recovery"
import * as Simulator from "@reprise/simulator/Simulator"
import { Effect, Layer } from "effect"
import * as DiagnosticsChannel from "node:diagnostics_channel"
import { fastPolicy, provider } from "./support/chat.js"

const burst = 64
const request = { model: "pacing-model", messages: [Message.user("hi")] }

/** Runs the burst; returns how many requests undici had created when the server received its first, and the texts. */
const measure = (sim: Simulator.Service, pacing: Layer.Layer<never>) =>
  Effect.gen(function*() {
    let created = 0
    let createdAtFirst: number | undefined
    const onCreate = () => void created++
    const onArrival = () => void (createdAtFirst ??= created)
    DiagnosticsChannel.subscribe("undici:request:create", onCreate)
    DiagnosticsChannel.subscribe("http.server.request.start", onArrival)
    const replies = yield* Effect.forEach(Array.from({ length: burst }), () => Recovery.generate(request), {
      concurrency: "unbounded"
    }).pipe(
      Effect.provide(Layer.mergeAll(provider(sim, "openai-chat"), fastPolicy, pacing)),
      Effect.ensuring(Effect.sync(() => {
        DiagnosticsChannel.unsubscribe("undici:request:create", onCreate)
        DiagnosticsChannel.unsubscribe("http.server.request.start", onArrival)
      }))
    )
    return { created, createdAtFirst, texts: replies.map((reply) => reply.text) }
  })

describe("pacing over loopback", () => {
  it.live("a burst's first requests reach the server while the rest are built", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript({ routes: { "openai-chat": { reply: { text: "paced" } } } })
      const paced = yield* measure(sim, Pacing.layer({ attemptsPerTurn: 8 }))
      const unpaced = yield* measure(sim, Layer.empty)
      assert.deepStrictEqual(paced.texts, Array.from({ length: burst }, () => "paced"))
      assert.deepStrictEqual(unpaced.texts, paced.texts)
      assert.strictEqual(paced.created, burst)
      assert.strictEqual(unpaced.created, burst)
      // the server's first request arrives a few turns in, 8 requests a turn
      assert.isDefined(paced.createdAtFirst)
      assert.isAtMost(paced.createdAtFirst!, burst / 2)
      assert.strictEqual(unpaced.createdAtFirst, burst)
      assert.strictEqual(yield* sim.count("openai-chat"), 2 * burst)
    }).pipe(Effect.provide(Simulator.layer())))
})
