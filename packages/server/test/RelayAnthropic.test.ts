/**
 * The relay's Anthropic Messages endpoint (`POST /v1/messages`) over real loopback HTTP, in front of the simulator
 * (whose upstream route is Chat Completions: the relay converts): each preview mode against each fault (a cut before
 * the first content byte, a cut after it, a 429 with `Retry-After`, a stall past the idle timeout, a malformed chunk,
 * a permanent 400 and 401): the Messages events the client got, in order (`message_start` … `message_stop`, or
 * `event: error` last and nothing after), the `reset` mode's rollback and commit beside them, never the discarded
 * attempt's text in the committed blocks; and what the upstream saw (sends per model, a request closed when its
 * client went away).
 */
import { assert, describe, it } from "@effect/vitest"
import { Duration, Effect, Fiber, Option, TestClock } from "effect"
import { post, relay } from "./support.js"
import {
  assertLedger,
  type Frame,
  frames,
  protocolFrames,
  readThenAbort,
  recoverable,
  repriseEvents,
  run,
  script,
  TEXT,
  waitFor
} from "./support/relayFaults.js"

const PATH = "/v1/messages"
const request = (model: string, extra: Record<string, unknown> = {}) => ({
  model,
  max_tokens: 256,
  messages: [{ role: "user", content: "Say hello." }],
  stream: true,
  ...extra
})
const stream = (model: string, mode: string) => run(PATH, request(model), mode)

/** The text of the `text_delta`s among `fs`. */
const deltas = (fs: ReadonlyArray<Frame>) =>
  fs.filter((f) => f.event === "content_block_delta" && f.data.delta.type === "text_delta")
    .map((f) => f.data.delta.text as string).join("")

/** Every event's `type` is its `event:` name; each block is started once, stopped once, and deltas fall between. */
const wellFormed = (text: string) => {
  const fs = protocolFrames(text)
  for (const f of fs) assert.strictEqual(f.data.type, f.event)
  const open = new Set<number>()
  const seen = new Set<number>()
  for (const f of fs) {
    if (f.event === "content_block_start") {
      assert.isFalse(seen.has(f.data.index), `block ${f.data.index} started twice`)
      open.add(f.data.index)
      seen.add(f.data.index)
    } else if (f.event === "content_block_delta") {
      assert.isTrue(open.has(f.data.index), `a delta of block ${f.data.index}, which is not open`)
    } else if (f.event === "content_block_stop") {
      assert.isTrue(open.delete(f.data.index), `block ${f.data.index} stopped but not open`)
    }
  }
  return open
}

/**
 * A whole answer: `message_start`, one text block whose deltas are the answer, stopped, then `message_delta` with
 * `end_turn` and the usage and `message_stop` last; no error.
 */
const whole = (text: string) => {
  assert.strictEqual(wellFormed(text).size, 0)
  const fs = protocolFrames(text)
  const names = fs.map((f) => f.event)
  assert.deepStrictEqual(names.slice(0, 2), ["message_start", "content_block_start"])
  assert.deepStrictEqual(names.slice(-3), ["content_block_stop", "message_delta", "message_stop"])
  assert.strictEqual(names.filter((n) => n === "content_block_start").length, 1)
  assert.strictEqual(deltas(fs), TEXT)
  assert.notInclude(names, "error")
  const delta = fs.at(-2)!.data
  assert.strictEqual(delta.delta.stop_reason, "end_turn")
  assert.isAbove(delta.usage.output_tokens, 0)
  assert.isTrue(text.endsWith(fs.at(-1)!.raw + "\n\n"))
}

/** A live failure after content: what was shown, then one `event: error` last; no `message_delta`, no `message_stop`. */
const failedClosed = (text: string, shown: string) => {
  wellFormed(text)
  const fs = protocolFrames(text)
  const names = fs.map((f) => f.event)
  assert.strictEqual(names[0], "message_start")
  assert.strictEqual(deltas(fs), shown)
  assert.strictEqual(names.at(-1), "error")
  assert.strictEqual(names.filter((n) => n === "error").length, 1)
  assert.notInclude(names, "message_delta")
  assert.notInclude(names, "message_stop")
  const error = fs.at(-1)!
  assert.strictEqual(error.data.error.type, "api_error")
  assert.isTrue(error.data.error.message.startsWith("upstream: "))
  assert.isTrue(text.endsWith(error.raw + "\n\n"))
}

describe("Relay Anthropic: hold", () => {
  for (const [model] of recoverable) {
    it.live(`${model}: one whole answer, after two sends`, () =>
      Effect.gen(function*() {
        const r = yield* stream(model, "hold")
        assert.strictEqual(r.status, 200)
        assert.strictEqual(r.headers.get("x-reprise-preview"), "hold")
        whole(r.text)
        const all = frames(r.text)
        const first = all.findIndex((f) => !f.comment)
        assert.strictEqual(all[first]!.event, "message_start")
        // written after the commit: the model that served the reply
        assert.strictEqual(all[first]!.data.message.model, model)
        assert.strictEqual(repriseEvents(r.text).length, 0)
        assert.strictEqual(r.sends, 2)
        assert.strictEqual(r.log[0]!.attempts, 2)
      }), 20_000)
  }
})

describe("Relay Anthropic: live", () => {
  for (const model of ["cut-before", "rate-limited"]) {
    it.live(`${model}: an attempt that showed nothing is dropped, one whole answer`, () =>
      Effect.gen(function*() {
        const r = yield* stream(model, "live")
        assert.strictEqual(r.status, 200)
        whole(r.text)
        assert.strictEqual(repriseEvents(r.text).length, 0)
        assert.strictEqual(r.sends, 2)
      }), 20_000)
  }
  for (const model of ["cut-after", "stall", "malformed"]) {
    it.live(
      `${model}: fails closed after the first content byte, no splice, no second send`,
      () =>
        Effect.gen(function*() {
          const r = yield* stream(model, "live")
          assert.strictEqual(r.status, 200)
          failedClosed(r.text, "One two")
          assert.strictEqual(r.sends, 1)
          const closure = yield* r.sim.awaitClose(r.upstream[0]!.id)
          if (model === "stall") assert.strictEqual(closure.by, "client")
        }),
      20_000
    )
  }
})

describe("Relay Anthropic: reset", () => {
  for (const [model, shown, reason] of recoverable) {
    it.live(`${model}: attempt, rollback, attempt, content, commit, then message_stop`, () =>
      Effect.gen(function*() {
        const r = yield* stream(model, "reset")
        assert.strictEqual(r.status, 200)
        assert.strictEqual(r.headers.get("x-reprise-preview"), "reset")
        assert.strictEqual(wellFormed(r.text).size, 0)
        const named = repriseEvents(r.text)
        assert.deepStrictEqual(named.map((e) => e.event), [
          "reprise.attempt",
          "reprise.rollback",
          "reprise.attempt",
          "reprise.commit"
        ])
        const rollback = named[1]!
        assert.strictEqual(rollback.attempt, 1)
        assert.strictEqual(rollback.discardedChars, shown.length)
        assert.strictEqual(rollback.discardedToolCalls, 0)
        assert.strictEqual(rollback.reason, reason)
        assert.strictEqual(rollback.nextAttempt, 2)
        assert.isUndefined(rollback.choices)
        if (model === "rate-limited") assert.isAtLeast(rollback.delayMs, 1000)
        assert.strictEqual(named[2]!.attempt, 2)
        assert.strictEqual(named[3]!.attempt, 2)
        assert.strictEqual(named[3]!.attempts, 2)
        assert.strictEqual(named[3]!.model, model)
        // the ledger: the rollback's entry, and every attempt's on the commit, the committed one exact
        assertLedger(model, rollback, named[3]!)

        const all = frames(r.text)
        const at = (event: string) => all.findIndex((f) => f.event === event)
        const rollbackAt = at("reprise.rollback")
        const before = all.slice(0, rollbackAt)
        const after = all.slice(rollbackAt)
        assert.strictEqual(deltas(before), shown)
        assert.strictEqual(deltas(after), TEXT)
        assert.strictEqual(all.filter((f) => f.event === "message_start").length, 1)
        const startedBefore = before.filter((f) => f.event === "content_block_start").map((f) => f.data.index)
        const startedAfter = after.filter((f) => f.event === "content_block_start").map((f) => f.data.index)
        if (shown.length === 0) {
          assert.deepStrictEqual(before.map((f) => f.event), ["reprise.attempt"])
          assert.deepStrictEqual(startedAfter, [0])
        } else {
          assert.deepStrictEqual(before.slice(0, 3).map((f) => f.event), [
            "reprise.attempt",
            "message_start",
            "content_block_start"
          ])
          // the discarded attempt's block is stopped before the rollback; the next attempt's text is a new block
          assert.strictEqual(before.at(-1)!.event, "content_block_stop")
          assert.deepStrictEqual(startedBefore, [0])
          assert.deepStrictEqual(startedAfter, [1])
        }
        // the blocks started after the rollback hold the answer alone
        const kept = after.filter((f) => f.event === "content_block_delta" && startedAfter.includes(f.data.index))
        assert.strictEqual(deltas(kept), TEXT)
        // the commit before the terminal, message_stop last
        assert.isBelow(at("reprise.commit"), at("message_delta"))
        assert.strictEqual(at("message_stop"), all.length - 1)
        assert.notInclude(all.map((f) => f.event), "error")
        assert.strictEqual(r.sends, 2)
      }), 20_000)
  }

  it.live(
    "a tool call cut mid-arguments: rolled back, the next attempt's one complete call committed",
    () =>
      Effect.gen(function*() {
        const r = yield* stream("tool-cut", "reset")
        assert.strictEqual(r.status, 200)
        assert.strictEqual(wellFormed(r.text).size, 0)
        const named = repriseEvents(r.text)
        assert.deepStrictEqual(named.map((e) => e.event), [
          "reprise.attempt",
          "reprise.rollback",
          "reprise.attempt",
          "reprise.commit"
        ])
        assert.strictEqual(named[1]!.discardedToolCalls, 1)
        const all = frames(r.text)
        const after = all.slice(all.findIndex((f) => f.event === "reprise.rollback"))
        const starts = after.filter((f) => f.event === "content_block_start")
        assert.strictEqual(starts.length, 1)
        assert.strictEqual(starts[0]!.data.content_block.type, "tool_use")
        assert.strictEqual(starts[0]!.data.content_block.name, "get_weather")
        const json = after.filter((f) => f.event === "content_block_delta" && f.data.index === starts[0]!.data.index)
          .map((f) => f.data.delta.partial_json).join("")
        assert.deepStrictEqual(JSON.parse(json), { city: "Paris", unit: "celsius" })
        assert.strictEqual(all.at(-2)!.data.delta.stop_reason, "tool_use")
        assert.strictEqual(r.sends, 2)
      }),
    20_000
  )
})

describe("Relay Anthropic: permanent failures", () => {
  for (const mode of ["hold", "live", "reset"]) {
    it.live(`${mode}: an upstream 400 is the client's 400, after one send`, () =>
      Effect.gen(function*() {
        const r = yield* stream("bad-request", mode)
        assert.strictEqual(r.status, 400)
        const body = JSON.parse(r.text)
        assert.strictEqual(body.type, "error")
        assert.strictEqual(body.error.type, "invalid_request_error")
        assert.include(body.error.message, "too long")
        assert.strictEqual(r.sends, 1)
      }), 20_000)
    it.live(
      `${mode}: an upstream 401 is a 502 (the client's key is not the upstream's), after one send`,
      () =>
        Effect.gen(function*() {
          const r = yield* stream("unauthorized", mode)
          assert.strictEqual(r.status, 502)
          const body = JSON.parse(r.text)
          assert.strictEqual(body.type, "error")
          assert.strictEqual(body.error.type, "api_error")
          assert.strictEqual(r.sends, 1)
        }),
      20_000
    )
  }
})

describe("Relay Anthropic: non-stream", () => {
  it.live("one message after a cut, with the committed attempt's usage", () =>
    Effect.gen(function*() {
      const r = yield* run(PATH, { ...request("cut-after"), stream: false }, "reset")
      assert.strictEqual(r.status, 200)
      const body = JSON.parse(r.text)
      assert.strictEqual(body.type, "message")
      assert.deepStrictEqual(body.content, [{ type: "text", text: TEXT }])
      assert.strictEqual(body.stop_reason, "end_turn")
      assert.strictEqual(body.model, "cut-after")
      assert.isAbove(body.usage.output_tokens, 0)
      assert.strictEqual(r.sends, 2)
    }), 20_000)
})

describe("Relay Anthropic: time", () => {
  it.effect(
    "hold: one keepalive comment per interval of the Clock, then the committed answer",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({
          models: { late: { reply: { text: TEXT }, then: { kind: "slow-first-token", delayMs: 1_000 } } }
        }, { idleTimeoutMs: 60_000, firstByteTimeoutMs: 60_000 })
        const realTurns = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 20)))
        const response = yield* Effect.fork(Effect.promise(() =>
          fetch(`${h.url}${PATH}`, {
            method: "POST",
            headers: { "content-type": "application/json", "x-reprise-preview": "hold" },
            body: JSON.stringify(request("late"))
          })
        ))
        for (let i = 0; i < 200 && (yield* h.sim.requestsFor("late")).length === 0; i++) yield* realTurns
        yield* TestClock.adjust(Duration.millis(4_999))
        for (let i = 0; i < 5; i++) yield* realTurns
        // no byte yet: not even the status line
        assert.isTrue(Option.isNone(yield* Fiber.poll(response)))
        yield* TestClock.adjust(Duration.millis(1))
        const r = yield* Fiber.join(response)
        assert.strictEqual(r.status, 200)
        const text = yield* Effect.promise(() => r.text())
        assert.isTrue(text.startsWith(": reprise hold\n\nevent: message_start\n"))
        assert.strictEqual(text.split(": reprise hold").length - 1, 1)
        assert.strictEqual(deltas(protocolFrames(text)), TEXT)
        assert.strictEqual(protocolFrames(text).at(-1)!.event, "message_stop")
      }).pipe(Effect.scoped),
    20_000
  )

  it.effect("reset: a 429's Retry-After is waited on the Clock before the second send", () =>
    Effect.gen(function*() {
      const h = yield* relay(script, { idleTimeoutMs: 60_000, firstByteTimeoutMs: 60_000 })
      const realTurns = Effect.promise(() => new Promise<void>((resolve) => setTimeout(resolve, 20)))
      const response = yield* Effect.fork(Effect.promise(() =>
        fetch(`${h.url}${PATH}`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-reprise-preview": "reset" },
          body: JSON.stringify(request("rate-limited"))
        }).then(async (r) => ({ status: r.status, text: await r.text() }))
      ))
      for (let i = 0; i < 200 && (yield* h.sim.requestsFor("rate-limited")).length === 0; i++) yield* realTurns
      for (let i = 0; i < 5; i++) yield* realTurns
      yield* TestClock.adjust(Duration.millis(999))
      for (let i = 0; i < 5; i++) yield* realTurns
      assert.strictEqual((yield* h.sim.requestsFor("rate-limited")).length, 1)
      yield* TestClock.adjust(Duration.millis(1_000))
      const r = yield* Fiber.join(response)
      assert.strictEqual(r.status, 200)
      const rollback = repriseEvents(r.text)[1]!
      assert.strictEqual(rollback.event, "reprise.rollback")
      assert.isAtLeast(rollback.delayMs, 1000)
      assert.strictEqual(deltas(protocolFrames(r.text)), TEXT)
      assert.strictEqual((yield* h.sim.requestsFor("rate-limited")).length, 2)
    }).pipe(Effect.scoped), 20_000)
})

describe("Relay Anthropic: cancellation", () => {
  it.live(
    "live: a disconnect after content closes the upstream request, and nothing is sent again",
    () =>
      Effect.gen(function*() {
        const h = yield* relay(script, { idleTimeoutMs: 150 })
        const text = yield* readThenAbort(`${h.url}${PATH}`, request("slow"), "live", (t) => t.includes("w1\""))
        assert.include(text, "text_delta")
        assert.notInclude(text, "w39")
        const [upstream] = yield* h.sim.requestsFor("slow")
        const closure = yield* h.sim.awaitClose(upstream!.id)
        assert.strictEqual(closure.by, "client")
        // an idle timeout would have replayed it by now
        yield* Effect.sleep("400 millis")
        assert.strictEqual((yield* h.sim.requestsFor("slow")).length, 1)
        const log = yield* waitFor(Effect.sync(() => h.log), (log) => log.length === 1)
        assert.strictEqual(log[0]!.attempts, 1)
      }).pipe(Effect.scoped),
    20_000
  )

  it.live(
    "hold: a disconnect while holding closes the upstream request, and nothing is sent again",
    () =>
      Effect.gen(function*() {
        const h = yield* relay(script, { idleTimeoutMs: 150, keepalive: "50 millis" })
        const text = yield* readThenAbort(
          `${h.url}${PATH}`,
          request("slow"),
          "hold",
          (t) => t.includes(": reprise hold")
        )
        assert.notInclude(text, "message_start")
        const [upstream] = yield* h.sim.requestsFor("slow")
        const closure = yield* h.sim.awaitClose(upstream!.id)
        assert.strictEqual(closure.by, "client")
        yield* Effect.sleep("400 millis")
        assert.strictEqual((yield* h.sim.requestsFor("slow")).length, 1)
      }).pipe(Effect.scoped),
    20_000
  )
})

describe("Relay Anthropic: failures in band and across routes", () => {
  it.live(
    "hold: a failure after keepalives is message_start and one error, no message_stop",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({ models: { gone: { then: { kind: "stall", durationMs: 300, then: "eof" } } } }, {
          keepalive: "50 millis",
          maxAttempts: 1
        })
        const r = yield* post(`${h.url}${PATH}`, request("gone"))
        assert.strictEqual(r.status, 200)
        const all = frames(r.text)
        const firstEvent = all.findIndex((f) => !f.comment)
        assert.isAtLeast(firstEvent, 2)
        assert.isTrue(all.slice(0, firstEvent).every((f) => f.raw === ": reprise hold"))
        assert.deepStrictEqual(all.slice(firstEvent).map((f) => f.event), ["message_start", "error"])
        assert.strictEqual(all.at(-1)!.data.type, "error")
        assert.strictEqual(all.at(-1)!.data.error.type, "api_error")
        assert.strictEqual((yield* h.sim.requestsFor("gone")).length, 1)
      }).pipe(Effect.scoped),
    20_000
  )

  it.live(
    "a 429 that outlasts the attempts is a 429 with Retry-After, in Anthropic's error shape",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({
          models: {
            busy: { reply: { text: TEXT }, then: { kind: "status", status: 429, headers: { "retry-after": "1" } } }
          }
        }, { maxAttempts: 2 })
        const r = yield* post(`${h.url}${PATH}`, request("busy"), { "x-reprise-preview": "live" })
        assert.strictEqual(r.status, 429)
        assert.strictEqual(r.headers.get("retry-after"), "1")
        const body = JSON.parse(r.text)
        assert.strictEqual(body.type, "error")
        assert.strictEqual(body.error.type, "rate_limit_error")
        assert.strictEqual((yield* h.sim.requestsFor("busy")).length, 2)
      }).pipe(Effect.scoped),
    20_000
  )

  it.live(
    "reset: a switch of route is a rollback naming the next route; the blocks of each attempt are closed",
    () =>
      Effect.gen(function*() {
        const h = yield* relay({
          models: {
            flaky: { reply: { text: TEXT }, then: { kind: "reset", afterTokens: 1 } },
            healthy: { reply: { text: TEXT }, then: { kind: "stream" } }
          }
        }, { plan: ["flaky", "healthy"] })
        const r = yield* post(`${h.url}${PATH}`, request("flaky"), { "x-reprise-preview": "reset" })
        assert.strictEqual(r.status, 200)
        assert.strictEqual(wellFormed(r.text).size, 0)
        const named = repriseEvents(r.text)
        assert.deepStrictEqual(named.map((e) => `${e.event} ${e.attempt}`), [
          "reprise.attempt 1",
          "reprise.rollback 1",
          "reprise.attempt 2",
          "reprise.rollback 2",
          "reprise.attempt 3",
          "reprise.commit 3"
        ])
        assert.deepStrictEqual(named[3]!.route, { index: 2, name: "openai-chat healthy", model: "healthy" })
        assert.strictEqual(named[5]!.model, "healthy")
        const all = frames(r.text)
        const lastRollback = all.map((f) => f.event).lastIndexOf("reprise.rollback")
        assert.strictEqual(deltas(all.slice(0, lastRollback)), "OneOne")
        assert.strictEqual(deltas(all.slice(lastRollback)), TEXT)
        // one block per attempt that showed text, at increasing indices; the answer is the last one's
        const starts = all.filter((f) => f.event === "content_block_start").map((f) => f.data.index)
        assert.deepStrictEqual(starts, [0, 1, 2])
        const kept = all.filter((f) => f.event === "content_block_delta" && f.data.index === 2)
        assert.strictEqual(deltas(kept), TEXT)
        // message_start was written with the first content: the requested model, as documented
        assert.strictEqual(all.find((f) => f.event === "message_start")!.data.message.model, "flaky")
        assert.strictEqual(all.at(-1)!.event, "message_stop")
        assert.strictEqual((yield* h.sim.requestsFor("flaky")).length, 2)
        assert.strictEqual((yield* h.sim.requestsFor("healthy")).length, 1)
      }).pipe(Effect.scoped),
    20_000
  )
})

describe("Relay Anthropic: tool calls in live mode, keys", () => {
  it.live(
    "live: a tool call cut mid-arguments after it was shown fails closed, after one send",
    () =>
      Effect.gen(function*() {
        const r = yield* stream("tool-cut", "live")
        assert.strictEqual(r.status, 200)
        wellFormed(r.text)
        const fs = protocolFrames(r.text)
        const names = fs.map((f) => f.event)
        assert.strictEqual(fs.find((f) => f.event === "content_block_start")!.data.content_block.type, "tool_use")
        assert.strictEqual(names.at(-1), "error")
        assert.notInclude(names, "message_delta")
        assert.notInclude(names, "message_stop")
        assert.strictEqual(r.sends, 1)
      }),
    20_000
  )

  it.live(
    "without a relay key: 401 in Anthropic's shape, nothing sent upstream; x-api-key is a key",
    () =>
      Effect.gen(function*() {
        const h = yield* relay(script, { keys: ["downstream-key"] })
        const r = yield* post(`${h.url}${PATH}`, request("healthy"))
        assert.strictEqual(r.status, 401)
        assert.deepStrictEqual(JSON.parse(r.text).error.type, "authentication_error")
        assert.strictEqual(JSON.parse(r.text).type, "error")
        assert.strictEqual((yield* h.sim.requestsFor("healthy")).length, 0)
        const ok = yield* post(`${h.url}${PATH}`, request("healthy"), { "x-api-key": "downstream-key" })
        assert.strictEqual(ok.status, 200)
        whole(ok.text)
      }).pipe(Effect.scoped),
    20_000
  )
})
