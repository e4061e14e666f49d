/**
 * The failoverbench catalogue served by the simulator (the `fast` profile): every scenario model behaves as its
 * scenario says over a real Chat Completions request. The long silences are not waited out: a request to S06, S07
 * or S09 is given up after its first bytes (or their absence) were seen.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Failoverbench from "@reprise/simulator/Failoverbench"
import * as ScriptLoader from "@reprise/simulator/ScriptLoader"
import * as Simulator from "@reprise/simulator/Simulator"
import { Effect, TestClock } from "effect"
import { chat, finished, hasDone, payloads, tokens } from "./support/chat.js"

const test = (name: string, body: (sim: Simulator.Service) => Effect.Effect<void, unknown>) =>
  it.live(name, () =>
    Effect.provide(
      Effect.flatMap(Simulator.Simulator, body),
      Simulator.layer({ script: Failoverbench.script("fast") })
    ))

const model = (id: string) => Failoverbench.scenarios.find((s) => s.id === id)!.model

const actions = (sim: Simulator.Service, name: string) =>
  Effect.map(sim.requestsFor(name), (records) => records.map((r) => r.action))

const canonicalTokens = Failoverbench.canonicalAnswer.split(" ").length

describe("Failoverbench", () => {
  it("the canonical answer has exactly 60 words", () => {
    assert.strictEqual(Failoverbench.canonicalAnswer.trim().split(/\s+/).length, 60)
    assert.strictEqual(canonicalTokens, 60)
  })

  it("sixteen scenarios, S01 to S16, each with its own model and a healthy fallback", () => {
    const { scenarios } = Failoverbench
    assert.deepStrictEqual(
      scenarios.map((s) => s.id),
      Array.from({ length: 16 }, (_, i) => `S${String(i + 1).padStart(2, "0")}`)
    )
    assert.strictEqual(new Set(scenarios.map((s) => s.model)).size, 16)
    assert.isTrue(scenarios.every((s) => s.model.startsWith(`fb-${s.id.toLowerCase()}-`)))
    assert.deepStrictEqual(
      scenarios.filter((s) => s.fallback !== Failoverbench.healthyModel).map((s) => [s.id, s.fallback]),
      [["S14", Failoverbench.noPrefillModel]]
    )
  })

  it.effect("both profiles are valid scripts with a model script for every scenario and both fallbacks", () =>
    Effect.gen(function*() {
      for (const profile of ["full", "fast"] as const) {
        const script = yield* ScriptLoader.decode(Failoverbench.script(profile))
        assert.deepStrictEqual(
          Object.keys(script.models ?? {}).sort(),
          [Failoverbench.healthyModel, Failoverbench.noPrefillModel, ...Failoverbench.scenarios.map((s) => s.model)]
            .sort()
        )
      }
      const full = Failoverbench.script("full").models!
      assert.deepStrictEqual(full[model("S07")]!.then, {
        kind: "slow-first-token",
        delayMs: 20_000,
        pace: { everyMs: 15 }
      })
      assert.deepStrictEqual(full[model("S15")]!.outage, { forMs: 60_000, status: 503 })
    }))

  test("the healthy models answer the canonical answer, a word per delta; fb-ok-noprefill refuses a prefill", (sim) =>
    Effect.gen(function*() {
      for (const name of [Failoverbench.healthyModel, Failoverbench.noPrefillModel]) {
        const reply = yield* chat(sim, name, { includeUsage: true })
        assert.strictEqual(reply.status, 200)
        assert.strictEqual(tokens(reply).length, 60)
        assert.strictEqual(tokens(reply).join("").trim(), Failoverbench.canonicalAnswer)
        assert.isTrue(payloads(reply).every((p) => p.model === name))
        assert.deepStrictEqual(payloads(reply).at(-1).usage.completion_tokens, 60)
        assert.isTrue(hasDone(reply))
      }
      const prefill = [{ role: "user", content: "Why?" }, { role: "assistant", content: "A gateway earns" }]
      assert.strictEqual((yield* chat(sim, Failoverbench.healthyModel, { messages: prefill })).status, 200)
      const refused = yield* chat(sim, Failoverbench.noPrefillModel, { messages: prefill })
      assert.strictEqual(refused.status, 400)
      assert.strictEqual(JSON.parse(refused.body).error.code, "prefill_not_supported")
      assert.deepStrictEqual(yield* actions(sim, Failoverbench.noPrefillModel), ["200", "400 prefill"])
    }))

  test("S01 429 with Retry-After once; S03 500 once; S05 a reset once; then each is healthy", (sim) =>
    Effect.gen(function*() {
      const s01 = [yield* chat(sim, model("S01")), yield* chat(sim, model("S01"))]
      assert.deepStrictEqual(s01.map((r) => r.status), [429, 200])
      assert.strictEqual(s01[0]!.headers?.get("retry-after"), "2")
      assert.strictEqual(tokens(s01[1]!).length, 60)
      const s03 = [yield* chat(sim, model("S03")), yield* chat(sim, model("S03"))]
      assert.deepStrictEqual(s03.map((r) => r.status), [500, 200])
      const s05 = [yield* chat(sim, model("S05")), yield* chat(sim, model("S05"))]
      assert.deepStrictEqual(s05.map((r) => [r.status, r.outcome]), [[undefined, "error"], [200, "end"]])
      assert.deepStrictEqual(yield* actions(sim, model("S01")), ["429", "200"])
      assert.deepStrictEqual(yield* actions(sim, model("S03")), ["500", "200"])
      assert.deepStrictEqual(yield* actions(sim, model("S05")), ["reset", "200"])
    }))

  test("S02 429 without Retry-After, S04 and S16 503, S12 and S13 400 with their codes: every attempt", (sim) =>
    Effect.gen(function*() {
      const expected: ReadonlyArray<readonly [string, number, string | null]> = [
        ["S02", 429, "rate_limit_exceeded"],
        ["S04", 503, null],
        ["S16", 503, null],
        ["S12", 400, "context_length_exceeded"],
        ["S13", 400, "content_policy_violation"]
      ]
      for (const [id, status, code] of expected) {
        for (let attempt = 0; attempt < 3; attempt++) {
          const reply = yield* chat(sim, model(id))
          assert.strictEqual(reply.status, status, `${id} attempt ${attempt + 1}`)
          assert.isNull(reply.headers!.get("retry-after"))
          const error = JSON.parse(reply.body).error
          assert.strictEqual(error.code, code)
          if (status === 400) assert.strictEqual(error.type, "invalid_request_error")
        }
        assert.strictEqual((yield* sim.requestsFor(model(id))).length, 3)
      }
      assert.deepStrictEqual(yield* actions(sim, model("S12")), Array(3).fill("400 context_length_exceeded"))
    }))

  test("S08 and S14: every stream ends after 40 of 60 tokens with no finish reason and no [DONE]", (sim) =>
    Effect.gen(function*() {
      for (const id of ["S08", "S14", "S08"]) {
        const reply = yield* chat(sim, model(id))
        assert.strictEqual(reply.status, 200)
        assert.strictEqual(tokens(reply).length, 40)
        assert.isFalse(finished(reply))
        assert.isFalse(hasDone(reply))
      }
      assert.deepStrictEqual(yield* actions(sim, model("S08")), ["eof", "eof"])
    }))

  test("S10: the 10th event is not JSON and the stream completes; S11: complete without [DONE]", (sim) =>
    Effect.gen(function*() {
      const s10 = yield* chat(sim, model("S10"))
      assert.throws(() => JSON.parse(s10.events[9]!.data))
      assert.strictEqual(tokens(s10).length, 60)
      assert.isTrue(finished(s10))
      assert.isTrue(hasDone(s10))
      const s11 = yield* chat(sim, model("S11"), { includeUsage: true })
      assert.strictEqual(s11.outcome, "end")
      assert.strictEqual(tokens(s11).length, 60)
      assert.isTrue(finished(s11))
      assert.strictEqual(payloads(s11).at(-1).usage.total_tokens, 72)
      assert.isFalse(hasDone(s11))
    }))

  test("S06 sends nothing, S07 sends headers but no token yet, S09 stops after 20 tokens (given up early)", (sim) =>
    Effect.gen(function*() {
      const s06 = yield* chat(sim, model("S06"), { abortAfterMs: 300 })
      assert.strictEqual(s06.status, undefined)
      assert.strictEqual(s06.outcome, "aborted")
      const s07 = yield* chat(sim, model("S07"), { abortAfterMs: 500 })
      assert.strictEqual(s07.status, 200)
      assert.isBelow(s07.headersAt!, 300)
      assert.strictEqual(tokens(s07).length, 0)
      const s09 = yield* chat(sim, model("S09"), { abortAfterMs: 800 })
      assert.strictEqual(s09.status, 200)
      assert.strictEqual(s09.outcome, "aborted")
      assert.strictEqual(tokens(s09).length, 20)
      assert.isFalse(finished(s09))
      assert.deepStrictEqual(yield* actions(sim, model("S06")), ["stall"])
      assert.deepStrictEqual(yield* actions(sim, model("S07")), ["slow-first-token"])
      assert.deepStrictEqual(yield* actions(sim, model("S09")), ["stall"])
    }))

  it.effect("S15: 503 through the profile's outage after setScript, then healthy (TestClock)", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(Failoverbench.script("full"))
      const s15 = model("S15")
      assert.strictEqual((yield* chat(sim, s15)).status, 503)
      yield* TestClock.adjust("59 seconds")
      assert.strictEqual((yield* chat(sim, s15)).status, 503)
      yield* TestClock.adjust("1 second")
      const healthy = yield* chat(sim, s15)
      assert.strictEqual(healthy.status, 200)
      assert.strictEqual(tokens(healthy).length, 60)
      assert.deepStrictEqual(yield* actions(sim, s15), ["503", "503", "200"])
      yield* sim.setScript(Failoverbench.script("fast"))
      assert.strictEqual((yield* chat(sim, s15)).status, 503)
      yield* TestClock.adjust("8 seconds")
      assert.strictEqual((yield* chat(sim, s15)).status, 200)
    }).pipe(Effect.provide(Simulator.layer())))
})
