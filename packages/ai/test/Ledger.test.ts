/**
 * The ledger in `@effect/ai`'s output: a reply's finish part carries every attempt's entry in `metadata.reprise.ledger`
 * beside the committed attempt's usage, and a failed reply's `AiError` carries it in `RecoveryAiError.facts`. Over
 * the real undici provider of each protocol against the loopback simulator, on the TestClock.
 */
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Response from "@effect/ai/Response"
import { assert, describe, layer } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import * as Ledger from "@reprise/core/Ledger"
import { Chunk, Effect, Fiber, Layer, Option, Schema, Stream } from "effect"
import * as RecoveryAiError from "../src/RecoveryAiError.js"
import {
  beforeCut,
  cut,
  exactBackoff,
  failureOf,
  fresh,
  model,
  passBackoffUntil,
  protocols,
  recorder,
  script,
  simulator
} from "./support.js"

/** The committed attempt's usage, as the simulator reports it. */
const committedUsage = { inputTokens: 21, outputTokens: 5 }

const committedReply = { kind: "stream", reply: { text: "the committed answer", usage: committedUsage } } as const

/** The ledger of a finish part, checked against the schema (so it is also plain JSON data). */
const ledgerOf = (finish: Response.FinishPart | undefined): Ledger.Ledger => {
  assert.isDefined(finish, "a finish part")
  const ledger = Schema.decodeUnknownSync(Ledger.Ledger)(finish!.metadata.reprise?.ledger)
  assert.deepStrictEqual(JSON.parse(JSON.stringify(ledger)), ledger)
  return ledger
}

layer(simulator, { excludeTestServices: true })("the ledger in @effect/ai's output", (it) => {
  for (const protocol of protocols) {
    describe(protocol, () => {
      // Checks what both APIs must show for a reply cut after content, then committed.
      const checkCutThenCommitted = (finish: Response.FinishPart | undefined, discardedText: string) => {
        const ledger = ledgerOf(finish)
        assert.deepStrictEqual(ledger.entries.map((e) => [e.attempt, e.phase, e.outcome, e.verdict]), [
          [1, "content", "discarded", "estimated"],
          [2, "terminal", "committed", "exact"]
        ])
        const [discarded, committed] = ledger.entries
        // the cut attempt's output is estimated from what it streamed before the cut
        assert.strictEqual(discarded.output, "estimated")
        assert.strictEqual(discarded.tokens.output, Ledger.estimateTokens(discardedText.length))
        assert.deepStrictEqual([committed.input, committed.output], ["reported", "reported"])
        assert.deepStrictEqual(committed.tokens, { input: 21, output: 5, cacheRead: 0, cacheWrite: 0 })
        assert.deepStrictEqual(ledger.committed.tokens, committed.tokens)
        assert.deepStrictEqual([ledger.discarded.attempts, ledger.discarded.billed, ledger.discarded.estimated], [
          1,
          1,
          true
        ])
        assert.deepStrictEqual(ledger.discarded.tokens, discarded.tokens)
        // the usage stays the committed attempt's, not the sum over attempts
        assert.deepStrictEqual(
          [finish!.usage.inputTokens, finish!.usage.outputTokens, finish!.usage.totalTokens],
          [21, 5, 26]
        )
        assert.strictEqual(finish!.metadata.reprise?.attempts, 2)
      }

      it.effect("generateText: a cut after content, then a commit: two entries on the finish, the usage committed", () =>
        Effect.gen(function*() {
          yield* script(protocol, { steps: [cut, committedReply] })
          const rec = yield* recorder
          const fiber = yield* Effect.fork(
            LanguageModel.generateText({ prompt: "hello" }).pipe(Effect.provide(rec.layer))
          )
          yield* passBackoffUntil(1000)
          const response = yield* Fiber.join(fiber)
          assert.strictEqual(response.text, "the committed answer")
          const discarded = (yield* rec.notes).find((n) => n._tag === "AttemptDiscarded")
          assert.strictEqual(discarded?._tag === "AttemptDiscarded" && discarded.discardedText, beforeCut)
          const finish = response.content.find((p): p is Response.FinishPart => p.type === "finish")
          checkCutThenCommitted(finish, beforeCut)
          // the entry the notification told is the one in the ledger
          assert.deepStrictEqual(discarded?._tag === "AttemptDiscarded" && discarded.entry, ledgerOf(finish).entries[0])
        }).pipe(Effect.provide(model(protocol)), Effect.provide(exactBackoff), fresh))

      it.effect("streamText: the same ledger on the finish part, which comes last", () =>
        Effect.gen(function*() {
          yield* script(protocol, { steps: [cut, committedReply] })
          const fiber = yield* Effect.fork(Stream.runCollect(LanguageModel.streamText({ prompt: "hello" })))
          yield* passBackoffUntil(1000)
          const parts = Chunk.toArray(yield* Fiber.join(fiber))
          const finish = parts.at(-1)
          assert.strictEqual(finish?.type, "finish")
          checkCutThenCommitted(finish as Response.FinishPart, beforeCut)
        }).pipe(Effect.provide(model(protocol)), Effect.provide(exactBackoff), fresh))
    })
  }

  it.effect("an exhausted reply: its AiError's facts carry the ledger the Exhausted notification told", () =>
    Effect.gen(function*() {
      yield* script("openai-chat", { steps: [cut, cut, committedReply] })
      const rec = yield* recorder
      const fiber = yield* Effect.fork(
        Effect.exit(LanguageModel.generateText({ prompt: "hello" }).pipe(Effect.provide(rec.layer)))
      )
      yield* passBackoffUntil(1000)
      const error = failureOf(yield* Fiber.join(fiber))
      const facts = Option.getOrThrow(RecoveryAiError.facts(error))
      assert.strictEqual((facts.error as any)._tag, "RecoveryExhausted")
      const exhausted = (yield* rec.notes).find((n) => n._tag === "Exhausted")
      assert.isDefined(facts.ledger)
      assert.strictEqual(facts.ledger, exhausted?._tag === "Exhausted" ? exhausted.ledger : undefined)
      assert.deepStrictEqual(facts.ledger!.entries.map((e) => [e.outcome, e.verdict]), [
        ["discarded", "estimated"],
        ["discarded", "estimated"]
      ])
      assert.deepStrictEqual([facts.ledger!.committed.attempts, facts.ledger!.discarded.billed], [0, 2])
    }).pipe(
      Effect.provide(model("openai-chat").pipe(Layer.provide(Budget.layer({ maxAttempts: 2 })))),
      Effect.provide(exactBackoff),
      fresh
    ))

  it.effect("a permanent failure: the ledger of the Failed notification, one entry not billed", () =>
    Effect.gen(function*() {
      yield* script("anthropic", { steps: [{ kind: "status", status: 401 }] })
      const error = failureOf(yield* Effect.exit(LanguageModel.generateText({ prompt: "hello" })))
      const facts = Option.getOrThrow(RecoveryAiError.facts(error))
      assert.strictEqual(facts.attempts, 1)
      assert.deepStrictEqual(facts.ledger?.entries.map((e) => [e.phase, e.outcome, e.verdict]), [
        ["headers", "discarded", "not-billed"]
      ])
      assert.deepStrictEqual(facts.ledger?.discarded.billed, 0)
    }).pipe(Effect.provide(model("anthropic")), Effect.provide(exactBackoff), fresh))
})
