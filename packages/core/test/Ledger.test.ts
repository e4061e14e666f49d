import { assert, describe, it } from "@effect/vitest"
import {
  ConfigProvider,
  Duration,
  Effect,
  Either,
  Exit,
  Fiber,
  Layer,
  Metric,
  Option,
  Ref,
  Stream,
  TestClock
} from "effect"
import * as Budget from "../src/Budget.js"
import * as Generation from "../src/Generation.js"
import * as Ledger from "../src/Ledger.js"
import * as Policy from "../src/Policy.js"
import * as Prices from "../src/Prices.js"
import * as ProviderRejection from "../src/ProviderRejection.js"
import * as Recovery from "../src/Recovery.js"
import * as Telemetry from "../src/RecoveryTelemetry.js"
import * as TransportError from "../src/TransportError.js"
import { recorder } from "./utils/notifications.js"
import { reset, status } from "./utils/scripted.js"

const noJitter = Policy.layer({ jitter: false })

const runToEnd = <A, E>(self: Effect.Effect<A, E>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(self)
    for (let i = 0; i < 100 && Option.isNone(yield* fiber.poll); i++) yield* TestClock.adjust(Duration.hours(1))
    return yield* Fiber.await(fiber)
  })

/** One send: its events, then its end (`finish` adds the terminal). */
interface Send {
  readonly events: ReadonlyArray<Generation.GenerationEvent>
  readonly end: "finish" | "eof" | TransportError.TransportError | ProviderRejection.ProviderRejection
}

const sendsOf = (sends: ReadonlyArray<Send>) =>
  Effect.map(Ref.make(0), (count) =>
    Stream.unwrap(Effect.gen(function*() {
      yield* Budget.reserve
      const n = yield* Ref.getAndUpdate(count, (k) => k + 1)
      const send = sends[Math.min(n, sends.length - 1)]
      const events = [...send.events]
      if (send.end === "finish") {
        events.push(Generation.Finish({ reason: "stop", providerReason: "stop", model: "m-1" }))
      }
      const body = Stream.fromIterable(events)
      return typeof send.end === "string" ? body : Stream.concat(body, Stream.fail(send.end))
    })))

const text = (t: string) => Generation.TextDelta({ text: t })
const usage = (usage: Generation.Usage, partial?: boolean) =>
  Generation.UsageEvent(partial === true ? { usage, partial } : { usage })

const request: Generation.GenerationRequest = {
  model: "m",
  system: "Be brief.", // 9
  messages: [{ role: "user", text: "Say hello to the world." }] // 23
}

describe("Ledger.entry, the policy", () => {
  const base = {
    attempt: 1,
    outcome: "discarded" as const,
    refused: false,
    outputChars: 10,
    requestChars: 40
  }
  const reported = { inputTokens: 12, outputTokens: 7 }
  const tokens = (input: number, output: number, cacheRead = 0, cacheWrite = 0): Ledger.Tokens => ({
    input,
    output,
    cacheRead,
    cacheWrite
  })
  const cases: ReadonlyArray<
    readonly [string, Partial<Ledger.Observed>, Ledger.Verdict, Ledger.Tokens, Ledger.Source, Ledger.Source]
  > = [
    ["no response", { phase: "none" }, "not-billed", tokens(0, 0), "none", "none"],
    ["an error status", { phase: "headers", refused: true }, "not-billed", tokens(0, 0), "none", "none"],
    [
      "a stream cut before content",
      { phase: "headers", outputChars: 0 },
      "estimated",
      tokens(10, 0),
      "estimated",
      "estimated"
    ],
    ["a stream cut after content", { phase: "content" }, "estimated", tokens(10, 3), "estimated", "estimated"],
    [
      "a cut after the provider reported its input",
      {
        phase: "content",
        startUsage: { inputTokens: 300, outputTokens: 1, cacheReadTokens: 200, cacheWriteTokens: 50 }
      },
      "estimated",
      tokens(300, 3, 200, 50),
      "reported",
      "estimated"
    ],
    [
      "an in-band error after content",
      { phase: "content", refused: true },
      "estimated",
      tokens(10, 3),
      "estimated",
      "estimated"
    ],
    [
      "a terminal with usage",
      { phase: "terminal", outcome: "committed", usage: reported },
      "exact",
      tokens(12, 7),
      "reported",
      "reported"
    ],
    [
      "a terminal without usage",
      { phase: "terminal", outcome: "committed" },
      "estimated",
      tokens(10, 3),
      "estimated",
      "estimated"
    ],
    ["a continued response", { phase: "content", outcome: "continued" }, "not-billed", tokens(0, 0), "none", "none"]
  ]
  for (const [name, observed, verdict, counts, input, output] of cases) {
    it(name, () => {
      const entry = Ledger.entry({ ...base, phase: "none", ...observed })
      assert.strictEqual(entry.verdict, verdict)
      assert.deepStrictEqual(entry.tokens, counts)
      assert.strictEqual(entry.input, input)
      assert.strictEqual(entry.output, output)
    })
  }

  it("without the request, an unreported input is none", () => {
    const entry = Ledger.entry({ ...base, requestChars: undefined, phase: "content" })
    assert.strictEqual(entry.input, "none")
    assert.strictEqual(entry.tokens.input, 0)
  })

  it("prices: uncached input, cache reads and writes at their prices (input's when absent), output", () => {
    const tokens = { input: 1_000_000, output: 500_000, cacheRead: 400_000, cacheWrite: 100_000 }
    assert.strictEqual(
      Ledger.cost(tokens, { input: 2, output: 8, cacheRead: 0.5 }),
      0.5 * 2 + 0.4 * 0.5 + 0.1 * 2 + 0.5 * 8
    )
  })

  it("requestChars counts the system text, the messages, tool calls and results, and the tools", () => {
    assert.strictEqual(Ledger.requestChars(request), 32)
    assert.strictEqual(
      Ledger.requestChars({
        model: "m",
        messages: [
          { role: "assistant", text: "ok", toolCalls: [{ id: "c", name: "add", arguments: { a: 1 } }] },
          { role: "tool", toolCallId: "c", name: "add", content: "2", isError: false }
        ],
        tools: [{ name: "add", description: "adds", parameters: { type: "object" } }]
      }),
      2 + 3 + 7 + 1 + 3 + 4 + 17
    )
  })
})

describe("Recovery's ledger", () => {
  it.effect("one entry per attempt: a cut after content estimated, a 429 not billed, the commit exact", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const generation = yield* sendsOf([
        { events: [text("Hello, "), text("wor")], end: reset },
        { events: [], end: status(429) },
        { events: [text("Hello, world"), usage({ inputTokens: 9, outputTokens: 4 })], end: "finish" }
      ])
      const exit = yield* runToEnd(
        Recovery.run(generation, { request }).pipe(Effect.provide(Layer.merge(noJitter, rec.layer)))
      )
      assert.isTrue(Exit.isSuccess(exit))
      const reply = Exit.isSuccess(exit) ? exit.value : undefined!
      const ledger = reply.ledger!
      assert.deepStrictEqual(ledger.entries.map((e) => [e.attempt, e.phase, e.outcome, e.verdict]), [
        [1, "content", "discarded", "estimated"],
        [2, "headers", "discarded", "not-billed"],
        [3, "terminal", "committed", "exact"]
      ])
      // "Hello, wor": 10 characters, 3 tokens; the request's 32 characters, 8 tokens
      assert.deepStrictEqual(ledger.entries[0].tokens, { input: 8, output: 3, cacheRead: 0, cacheWrite: 0 })
      assert.strictEqual(ledger.entries[0].model, "m")
      assert.strictEqual(ledger.entries[2].servedModel, "m-1")
      assert.deepStrictEqual(ledger.committed, {
        attempts: 1,
        billed: 1,
        tokens: { input: 9, output: 4, cacheRead: 0, cacheWrite: 0 },
        estimated: false
      })
      assert.deepStrictEqual(ledger.discarded, {
        attempts: 2,
        billed: 1,
        tokens: { input: 8, output: 3, cacheRead: 0, cacheWrite: 0 },
        estimated: true
      })
      const discarded = (yield* rec.all).flatMap((n) => n._tag === "AttemptDiscarded" ? [n.entry] : [])
      assert.deepStrictEqual(discarded, ledger.entries.slice(0, 2))
    }))

  it.effect("an exhausted reply's ledger is on Exhausted, priced with the user's prices", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const generation = yield* sendsOf([
        {
          events: [usage({ inputTokens: 1000, outputTokens: 1, cacheReadTokens: 600 }, true), text("abcdefgh")],
          end: reset
        }
      ])
      const exit = yield* runToEnd(
        Recovery.run(generation, { request }).pipe(
          Effect.provide(Layer.mergeAll(noJitter, rec.layer, Budget.layer({ maxAttempts: 2 }))),
          Effect.provide(Prices.layer({ m: { input: 2, output: 10, cacheRead: 1 } }))
        )
      )
      assert.isTrue(Exit.isFailure(exit))
      const exhausted = (yield* rec.all).find((n) => n._tag === "Exhausted")
      assert.isDefined(exhausted)
      const ledger = exhausted!._tag === "Exhausted" ? exhausted!.ledger! : undefined!
      assert.strictEqual(ledger.entries.length, 2)
      for (const e of ledger.entries) {
        assert.deepStrictEqual(e.tokens, { input: 1000, output: 2, cacheRead: 600, cacheWrite: 0 })
        assert.strictEqual(e.input, "reported")
        assert.strictEqual(e.output, "estimated")
        // 400 uncached at 2, 600 cached at 1, 2 output at 10, per million
        assert.strictEqual(e.cost, (400 * 2 + 600 * 1 + 2 * 10) / 1e6)
      }
      assert.strictEqual(ledger.discarded.cost, 2 * (400 * 2 + 600 * 1 + 2 * 10) / 1e6)
      assert.strictEqual(ledger.committed.attempts, 0)
      assert.strictEqual(ledger.committed.cost, 0)
    }))

  it.effect("a permanent rejection in the stream before content is not billed; Failed carries the ledger", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const generation = yield* sendsOf([
        { events: [], end: new ProviderRejection.ProviderRejection({ reason: "BadRequest", status: 400 }) }
      ])
      yield* runToEnd(Recovery.run(generation, { request }).pipe(Effect.provide(rec.layer)))
      const failed = (yield* rec.all).find((n) => n._tag === "Failed")
      const ledger = failed?._tag === "Failed" ? failed.ledger : undefined
      assert.deepStrictEqual(ledger?.entries.map((e) => [e.phase, e.verdict]), [["headers", "not-billed"]])
      assert.strictEqual(ledger?.discarded.billed, 0)
    }))

  it.effect("a tool call's name counts once, though every fragment of its arguments repeats it", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      const fragment = (index: number, name: string, argumentsDelta: string) =>
        Generation.ToolCallDelta({ index, id: `call_${index}`, name, argumentsDelta })
      const generation = yield* sendsOf([{
        events: [
          // as the providers send them: the call's start, then its arguments, each fragment naming the call
          fragment(0, "lookup", ""),
          fragment(0, "lookup", "{\"q\":"),
          fragment(0, "lookup", "\"abc\"}"),
          fragment(1, "add", "{}")
        ],
        end: reset
      }])
      yield* runToEnd(
        Recovery.run(generation, { request }).pipe(
          Effect.provide(Layer.merge(rec.layer, Budget.layer({ maxAttempts: 1 })))
        )
      )
      const entries = (yield* rec.all).flatMap((n) => n._tag === "AttemptDiscarded" ? [n.entry] : [])
      // "lookup", {"q":"abc"}, "add", {}: 22 characters, 6 tokens (a name counted on every fragment: 34, 9 tokens)
      assert.deepStrictEqual(entries.map((e) => e?.tokens.output), [6])
    }))

  it.effect("reprise.tokens counts committed and discarded tokens by kind", () =>
    Effect.gen(function*() {
      const counter = (outcome: string, kind: string) =>
        Metric.value(Telemetry.tokens.pipe(Metric.tagged("outcome", outcome), Metric.tagged("kind", kind)))
      const before = [
        (yield* counter("committed", "output")).count,
        (yield* counter("discarded", "output")).count,
        (yield* counter("discarded", "input")).count
      ]
      const generation = yield* sendsOf([
        { events: [text("x".repeat(40))], end: reset },
        { events: [text("done"), usage({ inputTokens: 9, outputTokens: 2 })], end: "finish" }
      ])
      yield* runToEnd(Recovery.run(generation, { request }).pipe(Effect.provide(noJitter)))
      const after = [
        (yield* counter("committed", "output")).count,
        (yield* counter("discarded", "output")).count,
        (yield* counter("discarded", "input")).count
      ]
      assert.deepStrictEqual(after.map((n, i) => n - before[i]), [2, 10, 8])
    }))
})

describe("Prices", () => {
  it("parse: a JSON price list, or what is wrong with it", () => {
    assert.deepStrictEqual(
      Prices.parse(`{"gpt-4.1": {"input": 2, "output": 8, "cacheRead": 0.5}}`),
      Either.right({ "gpt-4.1": { input: 2, output: 8, cacheRead: 0.5 } })
    )
    for (const bad of [`{"m": {"input": 2}}`, `{"m": {"input": -1, "output": 1}}`, `[1]`, `{oops`]) {
      assert.isTrue(Either.isLeft(Prices.parse(bad)), bad)
    }
  })

  it.effect("REPRISE_PRICES: absent is no prices; a bad value is a ConfigError naming the variable", () =>
    Effect.gen(function*() {
      const read = (env: Record<string, string>) =>
        Effect.either(Effect.withConfigProvider(Prices.config, ConfigProvider.fromMap(new Map(Object.entries(env)))))
      assert.deepStrictEqual(yield* read({}), Either.right({}))
      assert.deepStrictEqual(
        yield* read({ REPRISE_PRICES: `{"m": {"input": 1, "output": 2}}` }),
        Either.right({ m: { input: 1, output: 2 } })
      )
      const bad = yield* read({ REPRISE_PRICES: `{"m": {"input": "free"}}` })
      assert.isTrue(Either.isLeft(bad))
      assert.match(String(Either.isLeft(bad) ? bad.left : ""), /REPRISE_PRICES is not a price list: "m".input/)
      assert.deepStrictEqual(yield* read({ REPRISE_PRICES: "  " }), Either.right({}))
    }))

  it("lookup: the served model first, then the model asked for", () => {
    const list = { a: { input: 1, output: 1 }, b: { input: 2, output: 2 } }
    assert.strictEqual(Prices.lookup(list, "b", "a"), list.b)
    assert.strictEqual(Prices.lookup(list, "b-2025", "a"), list.a)
    assert.isUndefined(Prices.lookup(list, undefined, "c"))
    assert.isUndefined(Prices.lookup(list, "toString"))
  })
})
