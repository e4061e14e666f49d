/**
 * The relay's Chat Completions endpoint over real loopback HTTP, in front of the simulator: each preview mode against
 * each fault (a cut before the first content byte, a cut after it, a 429 with `Retry-After`, a stall past the idle
 * timeout, a malformed chunk, a permanent 400 and 401): what the client got, byte for byte where it matters (one whole
 * answer or one error, never a splice; no success terminal after a failure in `live`; the rollback events of `reset`),
 * and what the upstream saw (sends per model).
 */
import { assert, describe, it } from "@effect/vitest"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Effect } from "effect"
import { chat, content, events, post, relay, UPSTREAM_KEY } from "./support.js"
import { assertLedger } from "./support/relayFaults.js"

const TEXT = "One two three four five six."
const reply = { text: TEXT }
const ok: SimulatorScript.Step = { kind: "stream" }

/** One model per fault, each failing its first request (or every request) and then answering. */
const faults: Record<string, SimulatorScript.ModelScript> = {
  "cut-before": { reply, steps: [{ kind: "reset", afterTokens: 0 }], then: ok },
  "cut-after": { reply, steps: [{ kind: "reset", afterTokens: 2 }], then: ok },
  "rate-limited": { reply, steps: [{ kind: "status", status: 429, headers: { "retry-after": "1" } }], then: ok },
  "stall": { reply, steps: [{ kind: "stall", afterTokens: 2, durationMs: 10_000, then: "eof" }], then: ok },
  "malformed": { reply, steps: [{ kind: "malformed", afterEvents: 3 }], then: ok },
  "bad-request": {
    reply,
    then: { kind: "status", status: 400, error: { code: "context_length_exceeded", message: "too long" } }
  },
  "unauthorized": { reply, then: { kind: "status", status: 401 } },
  "healthy": { reply, then: ok }
}

const script: SimulatorScript.Script = { models: faults }
const stream = (model: string, mode: string) => ({
  body: chat(model, { stream: true, stream_options: { include_usage: true } }),
  headers: { "x-reprise-preview": mode }
})

const run = (model: string, mode: string) =>
  Effect.gen(function*() {
    const h = yield* relay(script, { idleTimeoutMs: 300 })
    const req = stream(model, mode)
    const response = yield* post(`${h.url}/v1/chat/completions`, req.body, req.headers)
    const sends = (yield* h.sim.requestsFor(model)).length
    assert.notInclude(response.text, UPSTREAM_KEY)
    return { ...response, sends, log: h.log }
  }).pipe(Effect.scoped)

const chunks = (text: string) => events(text).filter((e) => e.event === undefined && !e.comment)
const finishes = (text: string) =>
  chunks(text).filter((e) => e.data.startsWith("{") && JSON.parse(e.data).choices?.[0]?.finish_reason != null)
const errors = (text: string) => chunks(text).filter((e) => e.data.startsWith("{\"error\""))

/** A whole answer: content once, one finish chunk, a usage chunk, `[DONE]` last, no error. */
const whole = (text: string) => {
  assert.strictEqual(content(text), TEXT)
  assert.strictEqual(finishes(text).length, 1)
  assert.strictEqual(errors(text).length, 0)
  assert.isTrue(text.endsWith("data: [DONE]\n\n"))
  const usage = chunks(text).map((e) => e.data).filter((d) => d.includes("\"usage\""))
  assert.strictEqual(usage.length, 1)
}

/** A live failure after content: what was shown, one error frame last, no finish chunk and no `[DONE]`. */
const failedClosed = (text: string, shown: string) => {
  assert.strictEqual(content(text), shown)
  assert.strictEqual(finishes(text).length, 0)
  assert.notInclude(text, "[DONE]")
  const errs = errors(text)
  assert.strictEqual(errs.length, 1)
  assert.isTrue(text.endsWith(errs[0]!.raw + "\n\n"))
}

describe("Relay Chat Completions: hold", () => {
  for (const model of ["cut-before", "cut-after", "rate-limited", "stall", "malformed"]) {
    it.live(`${model}: one whole answer, after two sends`, () =>
      Effect.gen(function*() {
        const r = yield* run(model, "hold")
        assert.strictEqual(r.status, 200)
        whole(r.text)
        // nothing but keepalive comments before the answer: the first chunk is the role chunk
        const first = chunks(r.text)[0]!
        assert.deepStrictEqual(JSON.parse(first.data).choices[0].delta, { role: "assistant", content: "" })
        assert.strictEqual(r.sends, 2)
        assert.strictEqual(r.log[0]!.attempts, 2)
      }), 20_000)
  }
})

describe("Relay Chat Completions: live", () => {
  for (const model of ["cut-before", "rate-limited"]) {
    it.live(`${model}: an attempt that showed nothing is dropped, one whole answer`, () =>
      Effect.gen(function*() {
        const r = yield* run(model, "live")
        assert.strictEqual(r.status, 200)
        whole(r.text)
        assert.strictEqual(r.sends, 2)
      }), 20_000)
  }
  for (const model of ["cut-after", "stall", "malformed"]) {
    it.live(
      `${model}: fails closed after the first content byte, no splice, no second send`,
      () =>
        Effect.gen(function*() {
          const r = yield* run(model, "live")
          assert.strictEqual(r.status, 200)
          failedClosed(r.text, "One two")
          assert.strictEqual(r.sends, 1)
        }),
      20_000
    )
  }
})

describe("Relay Chat Completions: reset", () => {
  const resetEvents = (text: string) =>
    events(text).filter((e) => e.event?.startsWith("reprise.")).map((e) => ({ event: e.event, ...JSON.parse(e.data) }))

  for (
    const [model, shown, reason] of [
      ["cut-before", "", "connection reset"],
      ["cut-after", "One two", "connection reset"],
      ["rate-limited", "", "HTTP 429"],
      ["stall", "One two", "timeout"],
      ["malformed", "One two", "malformed chunk"]
    ] as const
  ) {
    it.live(`${model}: attempt, rollback, attempt, content, commit, then the terminal`, () =>
      Effect.gen(function*() {
        const r = yield* run(model, "reset")
        assert.strictEqual(r.status, 200)
        const named = resetEvents(r.text)
        assert.deepStrictEqual(named.map((e) => e.event), [
          "reprise.attempt",
          "reprise.rollback",
          "reprise.attempt",
          "reprise.commit"
        ])
        const rollback = named[1]!
        assert.strictEqual(rollback.attempt, 1)
        assert.strictEqual(rollback.discardedChars, shown.length)
        assert.strictEqual(rollback.reason, reason)
        assert.strictEqual(rollback.nextAttempt, 2)
        assert.deepStrictEqual(rollback.choices, [])
        if (model === "rate-limited") assert.isAtLeast(rollback.delayMs, 1000)
        assert.strictEqual(named[3]!.attempt, 2)
        assert.strictEqual(named[3]!.attempts, 2)
        // the ledger: the rollback's entry, and every attempt's on the commit, the committed one exact
        assertLedger(model, rollback, named[3]!)
        // what the client keeps after the rollback is the committed answer; before it, what was shown
        const [before, after] = r.text.split("event: reprise.rollback")
        assert.strictEqual(content(before!), shown)
        whole(after!)
        // the commit comes before the finish chunk
        assert.isBelow(r.text.indexOf("event: reprise.commit"), r.text.indexOf("\"finish_reason\":\"stop\""))
        assert.strictEqual(r.sends, 2)
      }), 20_000)
  }
})

describe("Relay Chat Completions: reset across routes", () => {
  it.live(
    "a switch of route is a rollback naming the next route; the commit names the serving route",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({
          models: { flaky: { reply, then: { kind: "reset", afterTokens: 1 } }, healthy: { reply, then: ok } }
        }, { plan: ["flaky", "healthy"] })
        const r = yield* post(
          `${h.url}/v1/chat/completions`,
          chat("flaky", { stream: true, stream_options: { include_usage: true } }),
          {
            "x-reprise-preview": "reset"
          }
        )
        const named = events(r.text).filter((e) => e.event?.startsWith("reprise.")).map((e) => ({
          event: e.event,
          ...JSON.parse(e.data)
        }))
        assert.deepStrictEqual(named.map((e) => `${e.event} ${e.attempt}`), [
          "reprise.attempt 1",
          "reprise.rollback 1",
          "reprise.attempt 2",
          "reprise.rollback 2",
          "reprise.attempt 3",
          "reprise.commit 3"
        ])
        assert.deepStrictEqual(named[0]!.route, { index: 1, name: "openai-chat flaky", model: "flaky" })
        assert.isUndefined(named[1]!.route)
        assert.deepStrictEqual(named[3]!.route, { index: 2, name: "openai-chat healthy", model: "healthy" })
        assert.strictEqual(named[3]!.nextAttempt, 3)
        assert.strictEqual(named[5]!.model, "healthy")
        assert.deepStrictEqual(named[5]!.route, { index: 2, name: "openai-chat healthy", model: "healthy" })
        const [, after] = r.text.split(/event: reprise.rollback\ndata: \{"attempt":2[^\n]*\n\n/)
        whole(after!)
        // the chunks of the committed attempt name the fallback's model
        const models = chunks(after!).filter((e) => e.data.startsWith("{")).map((e) => JSON.parse(e.data).model)
        assert.isTrue(models.every((m) => m === "healthy"))
      }).pipe(Effect.scoped),
    20_000
  )
})

describe("Relay Chat Completions: permanent failures", () => {
  for (const mode of ["hold", "live", "reset"]) {
    it.live(
      `${mode}: an upstream 400 is the client's 400 with the provider's code, after one send`,
      () =>
        Effect.gen(function*() {
          const r = yield* run("bad-request", mode)
          assert.strictEqual(r.status, 400)
          const body = JSON.parse(r.text)
          assert.strictEqual(body.error.type, "invalid_request_error")
          assert.strictEqual(body.error.code, "context_length_exceeded")
          assert.strictEqual(r.sends, 1)
        }),
      20_000
    )
    it.live(`${mode}: an upstream 401 is a 502 (the client's key is not the upstream's)`, () =>
      Effect.gen(function*() {
        const r = yield* run("unauthorized", mode)
        assert.strictEqual(r.status, 502)
        const body = JSON.parse(r.text)
        assert.strictEqual(body.error.code, "upstream_authentication")
        assert.strictEqual(r.sends, 1)
      }), 20_000)
  }

  it.live("a 429 that outlasts the attempts is a 429 with Retry-After", () =>
    Effect.gen(function*() {
      const h = yield* relay({
        models: { busy: { reply, then: { kind: "status", status: 429, headers: { "retry-after": "1" } } } }
      }, { maxAttempts: 2 })
      const r = yield* post(`${h.url}/v1/chat/completions`, chat("busy", { stream: true }))
      assert.strictEqual(r.status, 429)
      assert.strictEqual(r.headers.get("retry-after"), "1")
      assert.strictEqual(JSON.parse(r.text).error.type, "rate_limit_error")
      assert.strictEqual((yield* h.sim.requestsFor("busy")).length, 2)
    }).pipe(Effect.scoped), 20_000)
})

describe("Relay Chat Completions: exhaustion", () => {
  it.live("a persistent 503 is a 503 with the upstream's Retry-After", () =>
    Effect.gen(function*() {
      const h = yield* relay({
        models: { down: { reply, then: { kind: "status", status: 503, headers: { "retry-after": "1" } } } }
      }, { maxAttempts: 2 })
      const r = yield* post(`${h.url}/v1/chat/completions`, chat("down", { stream: true }))
      assert.strictEqual(r.status, 503)
      assert.strictEqual(r.headers.get("retry-after"), "1")
      assert.strictEqual(JSON.parse(r.text).error.type, "overloaded_error")
    }).pipe(Effect.scoped), 20_000)

  it.live(
    "a Retry-After past the deadline is answered at once: 429 with that Retry-After, after one send",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({
          models: { later: { reply, then: { kind: "status", status: 429, headers: { "retry-after": "60" } } } }
        })
        const r = yield* post(`${h.url}/v1/chat/completions`, chat("later", { stream: true }))
        assert.strictEqual(r.status, 429)
        assert.strictEqual(r.headers.get("retry-after"), "60")
        assert.strictEqual((yield* h.sim.requestsFor("later")).length, 1)
      }).pipe(Effect.scoped),
    20_000
  )

  it.live("the deadline passed while replaying a transport failure: 504", () =>
    Effect.gen(function*() {
      const h = yield* relay({
        models: { broken: { reply, then: { kind: "stall", durationMs: 100, then: "eof" } } }
      }, { deadlineMs: 250, maxAttempts: 50 })
      const r = yield* post(`${h.url}/v1/chat/completions`, chat("broken", { stream: true }), {
        "x-reprise-preview": "live"
      })
      assert.strictEqual(r.status, 504)
      assert.strictEqual(JSON.parse(r.text).error.code, "deadline_exceeded")
      assert.isAtLeast((yield* h.sim.requestsFor("broken")).length, 2)
    }).pipe(Effect.scoped), 20_000)
})

describe("Relay Chat Completions: non-stream", () => {
  it.live("one chat.completion after a cut, with the committed attempt's usage", () =>
    Effect.gen(function*() {
      const h = yield* relay(script, { idleTimeoutMs: 300 })
      const r = yield* post(`${h.url}/v1/chat/completions`, chat("cut-after"))
      assert.strictEqual(r.status, 200)
      const body = JSON.parse(r.text)
      assert.strictEqual(body.object, "chat.completion")
      assert.strictEqual(body.choices[0].message.content, TEXT)
      assert.strictEqual(body.choices[0].finish_reason, "stop")
      assert.strictEqual(body.model, "cut-after")
      assert.isNumber(body.usage.prompt_tokens)
      assert.strictEqual((yield* h.sim.requestsFor("cut-after")).length, 2)
    }).pipe(Effect.scoped), 20_000)
})
