/**
 * The relay's Responses endpoint (`POST /v1/responses`) over real loopback HTTP, in front of the simulator (whose
 * upstream route is Chat Completions: the relay converts): each preview mode against each fault (a cut before the
 * first content byte, a cut after it, a 429 with `Retry-After`, a stall past the idle timeout, a malformed chunk, a
 * permanent 400 and 401): the Responses events the client got, in order (`response.created` … `response.completed`,
 * or `error` then `response.failed` and nothing after), the `reset` mode's rollback and commit beside them, never the
 * discarded attempt's text in the committed output; and what the upstream saw (sends per model, a request closed when
 * its client went away).
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

const PATH = "/v1/responses"
const request = (model: string, extra: Record<string, unknown> = {}) => ({
  model,
  input: "Say hello.",
  stream: true,
  ...extra
})
const stream = (model: string, mode: string) => run(PATH, request(model), mode)

/** The text of the `response.output_text.delta` events among `fs`. */
const deltas = (fs: ReadonlyArray<Frame>) =>
  fs.filter((f) => f.event === "response.output_text.delta").map((f) => f.data.delta as string).join("")

/** The text of a response object's `message` items. */
const outputText = (response: any) =>
  (response.output as Array<any>).filter((item) => item.type === "message")
    .flatMap((item) => item.content.map((part: any) => part.text)).join("")

/** Every event's `type` is its `event:` name, and the sequence numbers count from 0 without a gap. */
const wellFormed = (text: string) => {
  const fs = protocolFrames(text)
  for (const f of fs) assert.strictEqual(f.data.type, f.event)
  assert.deepStrictEqual(fs.map((f) => f.data.sequence_number), fs.map((_, i) => i))
}

/**
 * A whole answer: `response.created`, `response.in_progress`, one message item whose deltas are the answer, closed,
 * then `response.completed` last, listing that item alone with its usage; no error.
 */
const whole = (text: string) => {
  wellFormed(text)
  const fs = protocolFrames(text)
  const names = fs.map((f) => f.event)
  assert.deepStrictEqual(names.slice(0, 4), [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added"
  ])
  assert.deepStrictEqual(names.slice(-4), [
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed"
  ])
  assert.strictEqual(deltas(fs), TEXT)
  assert.notInclude(names, "error")
  assert.notInclude(names, "response.failed")
  const completed = fs.at(-1)!
  assert.isTrue(text.endsWith(completed.raw + "\n\n"))
  assert.strictEqual(completed.data.response.status, "completed")
  assert.strictEqual(outputText(completed.data.response), TEXT)
  assert.strictEqual(completed.data.response.output.length, 1)
  assert.isAbove(completed.data.response.usage.output_tokens, 0)
  assert.strictEqual(fs.find((f) => f.event === "response.output_text.done")!.data.text, TEXT)
}

/** A live failure after content: what was shown, then `error` and `response.failed` last, no success terminal. */
const failedClosed = (text: string, shown: string) => {
  wellFormed(text)
  const fs = protocolFrames(text)
  const names = fs.map((f) => f.event)
  assert.deepStrictEqual(names.slice(0, 2), ["response.created", "response.in_progress"])
  assert.strictEqual(deltas(fs), shown)
  assert.deepStrictEqual(names.slice(-2), ["error", "response.failed"])
  assert.strictEqual(names.filter((n) => n === "error").length, 1)
  assert.notInclude(names, "response.completed")
  assert.notInclude(names, "response.incomplete")
  const [error, failed] = fs.slice(-2) as [Frame, Frame]
  assert.strictEqual(error.data.error.type, "server_error")
  assert.strictEqual(error.data.code, error.data.error.code)
  assert.strictEqual(failed.data.response.status, "failed")
  assert.strictEqual(failed.data.response.error.code, error.data.code)
  assert.isTrue(text.endsWith(failed.raw + "\n\n"))
}

describe("Relay Responses: hold", () => {
  for (const [model] of recoverable) {
    it.live(`${model}: one whole answer, after two sends`, () =>
      Effect.gen(function*() {
        const r = yield* stream(model, "hold")
        assert.strictEqual(r.status, 200)
        assert.strictEqual(r.headers.get("x-reprise-preview"), "hold")
        whole(r.text)
        // nothing but keepalive comments before the answer, and no reprise event
        const all = frames(r.text)
        const first = all.findIndex((f) => !f.comment)
        assert.strictEqual(all[first]!.event, "response.created")
        assert.strictEqual(repriseEvents(r.text).length, 0)
        assert.strictEqual(r.sends, 2)
        assert.strictEqual(r.log[0]!.attempts, 2)
      }), 20_000)
  }
})

describe("Relay Responses: live", () => {
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
          // the failed attempt's request is over (the stalled one closed by the relay)
          const closure = yield* r.sim.awaitClose(r.upstream[0]!.id)
          if (model === "stall") assert.strictEqual(closure.by, "client")
        }),
      20_000
    )
  }
})

describe("Relay Responses: reset", () => {
  for (const [model, shown, reason] of recoverable) {
    it.live(
      `${model}: attempt, rollback, attempt, content, commit, then response.completed`,
      () =>
        Effect.gen(function*() {
          const r = yield* stream(model, "reset")
          assert.strictEqual(r.status, 200)
          assert.strictEqual(r.headers.get("x-reprise-preview"), "reset")
          wellFormed(r.text)
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
          // no Chat Completions shape on another protocol's events
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
          // before the rollback, what the first attempt showed; after it, the answer alone
          assert.strictEqual(deltas(before), shown)
          assert.strictEqual(deltas(after), TEXT)
          // the response opens once, before any item, whichever attempt showed something first
          assert.strictEqual(all.filter((f) => f.event === "response.created").length, 1)
          if (shown.length === 0) {
            assert.deepStrictEqual(before.map((f) => f.event), ["reprise.attempt"])
          } else {
            assert.deepStrictEqual(before.slice(0, 3).map((f) => f.event), [
              "reprise.attempt",
              "response.created",
              "response.in_progress"
            ])
          }
          // the commit before the terminal, the terminal last, and nothing after it
          const completedAt = at("response.completed")
          assert.isBelow(at("reprise.commit"), completedAt)
          assert.strictEqual(completedAt, all.length - 1)
          // the next attempt's text went to a new item; the completed response lists only it, with the answer
          const completed = all[completedAt]!.data.response
          assert.strictEqual(outputText(completed), TEXT)
          assert.strictEqual(completed.output.length, 1)
          const committedItem = completed.output[0].id
          const addedAfter = after.filter((f) => f.event === "response.output_item.added").map((f) => f.data.item.id)
          assert.deepStrictEqual(addedAfter, [committedItem])
          const addedBefore = before.filter((f) => f.event === "response.output_item.added").map((f) => f.data.item.id)
          assert.notInclude(addedBefore, committedItem)
          if (shown.length > 0) assert.strictEqual(completed.output[0].id.endsWith("_0"), false)
          assert.notInclude(all.map((f) => f.event), "error")
          assert.strictEqual(r.sends, 2)
        }),
      20_000
    )
  }

  it.live(
    "a tool call cut mid-arguments: rolled back, the next attempt's one complete call committed",
    () =>
      Effect.gen(function*() {
        const r = yield* stream("tool-cut", "reset")
        assert.strictEqual(r.status, 200)
        wellFormed(r.text)
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
        const done = after.filter((f) => f.event === "response.function_call_arguments.done")
        assert.strictEqual(done.length, 1)
        assert.deepStrictEqual(JSON.parse(done[0]!.data.arguments), { city: "Paris", unit: "celsius" })
        const completed = all.at(-1)!
        assert.strictEqual(completed.event, "response.completed")
        const output = completed.data.response.output
        assert.strictEqual(output.length, 1)
        assert.strictEqual(output[0].type, "function_call")
        assert.strictEqual(output[0].name, "get_weather")
        assert.deepStrictEqual(JSON.parse(output[0].arguments), { city: "Paris", unit: "celsius" })
        assert.strictEqual(r.sends, 2)
      }),
    20_000
  )
})

describe("Relay Responses: permanent failures", () => {
  for (const mode of ["hold", "live", "reset"]) {
    it.live(
      `${mode}: an upstream 400 is the client's 400 with the provider's code, after one send`,
      () =>
        Effect.gen(function*() {
          const r = yield* stream("bad-request", mode)
          assert.strictEqual(r.status, 400)
          const body = JSON.parse(r.text)
          assert.strictEqual(body.error.type, "invalid_request_error")
          assert.strictEqual(body.error.code, "context_length_exceeded")
          assert.strictEqual(r.sends, 1)
        }),
      20_000
    )
    it.live(
      `${mode}: an upstream 401 is a 502 (the client's key is not the upstream's), after one send`,
      () =>
        Effect.gen(function*() {
          const r = yield* stream("unauthorized", mode)
          assert.strictEqual(r.status, 502)
          const body = JSON.parse(r.text)
          assert.strictEqual(body.error.type, "server_error")
          assert.strictEqual(body.error.code, "upstream_authentication")
          assert.strictEqual(r.sends, 1)
        }),
      20_000
    )
  }
})

describe("Relay Responses: non-stream", () => {
  it.live("one response object after a cut, with the committed attempt's usage", () =>
    Effect.gen(function*() {
      const r = yield* run(PATH, { model: "cut-after", input: "Say hello." }, "reset")
      assert.strictEqual(r.status, 200)
      const body = JSON.parse(r.text)
      assert.strictEqual(body.object, "response")
      assert.strictEqual(body.status, "completed")
      assert.strictEqual(outputText(body), TEXT)
      assert.strictEqual(body.output.length, 1)
      assert.strictEqual(body.model, "cut-after")
      assert.isAbove(body.usage.output_tokens, 0)
      assert.strictEqual(r.sends, 2)
    }), 20_000)
})

describe("Relay Responses: time", () => {
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
        assert.isTrue(text.startsWith(": reprise hold\n\nevent: response.created\n"))
        assert.strictEqual(text.split(": reprise hold").length - 1, 1)
        assert.strictEqual(deltas(protocolFrames(text)), TEXT)
        assert.strictEqual(protocolFrames(text).at(-1)!.event, "response.completed")
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

describe("Relay Responses: cancellation", () => {
  it.live(
    "live: a disconnect after content closes the upstream request, and nothing is sent again",
    () =>
      Effect.gen(function*() {
        const h = yield* relay(script, { idleTimeoutMs: 150 })
        const text = yield* readThenAbort(`${h.url}${PATH}`, request("slow"), "live", (t) => t.includes("w1\""))
        assert.include(text, "response.output_text.delta")
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
        assert.notInclude(text, "response.created")
        const [upstream] = yield* h.sim.requestsFor("slow")
        const closure = yield* h.sim.awaitClose(upstream!.id)
        assert.strictEqual(closure.by, "client")
        yield* Effect.sleep("400 millis")
        assert.strictEqual((yield* h.sim.requestsFor("slow")).length, 1)
      }).pipe(Effect.scoped),
    20_000
  )
})

describe("Relay Responses: failures in band and across routes", () => {
  it.live(
    "hold: a failure after keepalives is the opening, one error and response.failed, no success terminal",
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
        wellFormed(r.text)
        assert.deepStrictEqual(all.slice(firstEvent).map((f) => f.event), [
          "response.created",
          "response.in_progress",
          "error",
          "response.failed"
        ])
        assert.strictEqual(all.at(-2)!.data.error.type, "server_error")
        assert.strictEqual(all.at(-1)!.data.response.status, "failed")
        assert.deepStrictEqual(all.at(-1)!.data.response.output, [])
        assert.strictEqual((yield* h.sim.requestsFor("gone")).length, 1)
      }).pipe(Effect.scoped),
    20_000
  )

  it.live(
    "a 429 that outlasts the attempts is a 429 with Retry-After, in OpenAI's error shape",
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
        assert.strictEqual(body.error.code, "rate_limit_exceeded")
        assert.strictEqual((yield* h.sim.requestsFor("busy")).length, 2)
      }).pipe(Effect.scoped),
    20_000
  )

  it.live(
    "reset: a switch of route is a rollback naming the next route; the response names the serving model",
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
        wellFormed(r.text)
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
        assert.deepStrictEqual(named[5]!.route, { index: 2, name: "openai-chat healthy", model: "healthy" })
        const all = frames(r.text)
        const lastRollback = all.map((f) => f.event).lastIndexOf("reprise.rollback")
        assert.strictEqual(deltas(all.slice(0, lastRollback)), "OneOne")
        assert.strictEqual(deltas(all.slice(lastRollback)), TEXT)
        const completed = all.at(-1)!.data.response
        assert.strictEqual(all.at(-1)!.event, "response.completed")
        assert.strictEqual(completed.model, "healthy")
        assert.strictEqual(outputText(completed), TEXT)
        assert.strictEqual(completed.output.length, 1)
        // three items were shown, one per attempt that showed text, at increasing output indices
        const added = all.filter((f) => f.event === "response.output_item.added").map((f) => f.data.output_index)
        assert.deepStrictEqual(added, [0, 1, 2])
        assert.strictEqual(
          completed.output[0].id,
          all.filter((f) => f.event === "response.output_item.added").at(-1)!.data.item.id
        )
        assert.strictEqual((yield* h.sim.requestsFor("flaky")).length, 2)
        assert.strictEqual((yield* h.sim.requestsFor("healthy")).length, 1)
      }).pipe(Effect.scoped),
    20_000
  )
})

describe("Relay Responses: tool calls in live mode, keys", () => {
  it.live(
    "live: a tool call cut mid-arguments after it was shown fails closed, after one send",
    () =>
      Effect.gen(function*() {
        const r = yield* stream("tool-cut", "live")
        assert.strictEqual(r.status, 200)
        wellFormed(r.text)
        const names = protocolFrames(r.text).map((f) => f.event)
        assert.include(names, "response.function_call_arguments.delta")
        assert.notInclude(names, "response.function_call_arguments.done")
        assert.deepStrictEqual(names.slice(-2), ["error", "response.failed"])
        assert.notInclude(names, "response.completed")
        assert.strictEqual(r.sends, 1)
      }),
    20_000
  )

  it.live("without a relay key: 401 in OpenAI's shape, nothing sent upstream", () =>
    Effect.gen(function*() {
      const h = yield* relay(script, { keys: ["downstream-key"] })
      const r = yield* post(`${h.url}${PATH}`, request("healthy"))
      assert.strictEqual(r.status, 401)
      assert.strictEqual(JSON.parse(r.text).error.code, "invalid_api_key")
      assert.strictEqual((yield* h.sim.requestsFor("healthy")).length, 0)
      const ok = yield* post(`${h.url}${PATH}`, request("healthy"), { authorization: "Bearer downstream-key" })
      assert.strictEqual(ok.status, 200)
      whole(ok.text)
    }).pipe(Effect.scoped), 20_000)
})
