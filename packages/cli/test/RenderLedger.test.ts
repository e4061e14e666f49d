/**
 * The line of what a turn's discarded attempts cost, in each output mode, from the ledgers its notifications carry:
 * its forms (one or several attempts, exact or estimated, with or without input tokens and a cost), a turn of several
 * replies summed, and after an error.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Chat from "@reprise/core/Chat"
import * as Generation from "@reprise/core/Generation"
import * as Ledger from "@reprise/core/Ledger"
import type * as Prices from "@reprise/core/Prices"
import * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as RecoveryExhausted from "@reprise/core/RecoveryExhausted"
import { Notification } from "@reprise/core/RecoveryNotifications"
import { Duration, Effect, Option } from "effect"
import * as Output from "../src/Output.js"
import * as Render from "../src/Render.js"

const prices: Prices.PriceList = { "test-model": { input: 2, output: 8 } }

/** A discarded attempt cut after `outputChars` characters of content, of a request of `requestChars`. */
const cut = (attempt: number, outputChars: number, requestChars?: number, list?: Prices.PriceList) =>
  Ledger.entry({
    attempt,
    model: "test-model",
    phase: "content",
    outcome: "discarded",
    refused: false,
    outputChars,
    ...(requestChars === undefined ? {} : { requestChars })
  }, list)

/** An attempt that ended with its usage: committed, or discarded after its terminal (exact). */
const ended = (
  attempt: number,
  outcome: Ledger.Outcome,
  usage: Generation.Usage,
  list?: Prices.PriceList
) =>
  Ledger.entry({
    attempt,
    model: "test-model",
    phase: "terminal",
    outcome,
    refused: false,
    usage,
    outputChars: 0
  }, list)

const notBilled = (attempt: number) =>
  Ledger.entry({ attempt, phase: "headers", outcome: "discarded", refused: true, outputChars: 0 })

const replyWith = (ledger: Ledger.Ledger | undefined, toolCalls: Generation.Reply["toolCalls"] = []) =>
  new Generation.Reply({
    text: toolCalls.length === 0 ? "the answer" : "",
    reasoning: "",
    toolCalls,
    finishReason: toolCalls.length === 0 ? "stop" : "tool_calls",
    providerFinishReason: toolCalls.length === 0 ? "stop" : "tool_calls",
    usage: Option.none(),
    attempts: 2,
    ...(ledger === undefined ? {} : { ledger })
  })

const committedUsage = { inputTokens: 10, outputTokens: 2 }

/** Each reply told committed (`Committed`), then committed by the turn (`Render.commit`), in `mode`. */
const turn = (mode: Render.Mode, replies: ReadonlyArray<Generation.Reply>) =>
  Effect.gen(function*() {
    const capture = Output.makeCapture(mode === "tty")
    yield* Effect.gen(function*() {
      const render = yield* Render.make(mode)
      for (const reply of replies) {
        yield* render.notifications.notify(Notification.Committed({ reply }))
        yield* render.commit(Chat.Commit.Reply({ reply, message: reply.message }))
      }
    }).pipe(Effect.provide(capture.layer))
    return { stdout: capture.stdout(), stderr: capture.stderr() }
  })

const lineOf = (ledger: Ledger.Ledger) => Effect.map(turn("plain", [replyWith(ledger)]), ({ stderr }) => stderr)

describe("Render: what discarded attempts cost", () => {
  it.effect("estimated output only: `~`, separators, `(estimated)`; one attempt or several", () =>
    Effect.gen(function*() {
      // 12,560 characters: 3,140 tokens by chars/4; no request characters known, so no input tokens
      const one = Ledger.make([cut(1, 12_560), ended(2, "committed", committedUsage)])
      assert.strictEqual(yield* lineOf(one), "reprise: 1 attempt discarded ~3,140 output tokens (estimated)\n")
      const two = Ledger.make([cut(1, 6_000), cut(2, 6_561), ended(3, "committed", committedUsage)])
      assert.strictEqual(yield* lineOf(two), "reprise: 2 attempts discarded ~3,141 output tokens (estimated)\n")
    }))

  it.effect("input tokens when there are some; exact counts without `~`, `(exact)`", () =>
    Effect.gen(function*() {
      const estimated = Ledger.make([cut(1, 12_560, 4_816), ended(2, "committed", committedUsage)])
      assert.strictEqual(
        yield* lineOf(estimated),
        "reprise: 1 attempt discarded ~1,204 input and ~3,140 output tokens (estimated)\n"
      )
      // an attempt that ended with its usage and was discarded all the same
      const exact = Ledger.make([
        ended(1, "discarded", { inputTokens: 1_500, outputTokens: 20 }),
        ended(2, "committed", committedUsage)
      ])
      assert.strictEqual(
        yield* lineOf(exact),
        "reprise: 1 attempt discarded 1,500 input and 20 output tokens (exact)\n"
      )
    }))

  it.effect("with prices: the cost, 4 decimals; none when nothing discarded was billed, or there is no ledger", () =>
    Effect.gen(function*() {
      const priced = Ledger.make([cut(1, 12_560, 4_816, prices), ended(2, "committed", committedUsage, prices)], true)
      // (1,204 × 2 + 3,140 × 8) / 1,000,000 = 0.027528
      assert.strictEqual(
        yield* lineOf(priced),
        "reprise: 1 attempt discarded ~1,204 input and ~3,140 output tokens (estimated), cost ~0.0275\n"
      )
      const unbilled = Ledger.make([notBilled(1), ended(2, "committed", committedUsage, prices)], true)
      assert.strictEqual(yield* lineOf(unbilled), "")
      assert.strictEqual((yield* turn("plain", [replyWith(undefined)])).stderr, "")
    }))

  it.effect("a turn of several replies: their discarded attempts together, once, after the answer", () =>
    Effect.gen(function*() {
      const call = { id: "call_1", name: "now", arguments: {} }
      const first = Ledger.make([cut(1, 400, 40, prices), ended(2, "committed", committedUsage, prices)], true)
      const second = Ledger.make([cut(1, 800, 40, prices), ended(2, "committed", committedUsage, prices)], true)
      const replies = [replyWith(first, [call]), replyWith(second)]
      const { stderr, stdout } = yield* turn("plain", replies)
      assert.strictEqual(stdout, "the answer\n")
      // 100 + 200 output tokens, 10 + 10 input tokens: (20 × 2 + 300 × 8) / 1,000,000
      assert.strictEqual(
        stderr,
        "reprise: 2 attempts discarded ~20 input and ~300 output tokens (estimated), cost ~0.0024\n"
      )
      // a reply without a price for its model: no cost for the turn, the tokens still
      const unpriced = Ledger.make([cut(1, 800, 40), ended(2, "committed", committedUsage)], true)
      const mixed = yield* turn("plain", [replyWith(first, [call]), replyWith(unpriced)])
      assert.strictEqual(mixed.stderr, "reprise: 2 attempts discarded ~20 input and ~300 output tokens (estimated)\n")
    }))

  it.effect("tty: the same line after the answer; json: none, the ledger is in the commit", () =>
    Effect.gen(function*() {
      const ledger = Ledger.make([cut(1, 12_560), ended(2, "committed", committedUsage)])
      // (on a terminal the answer is its previews, none here)
      const tty = yield* turn("tty", [replyWith(ledger)])
      assert.strictEqual(tty.stderr, "reprise: 1 attempt discarded ~3,140 output tokens (estimated)\n")
      const json = yield* turn("json", [replyWith(ledger)])
      assert.strictEqual(json.stderr, "")
      const commit = JSON.parse(json.stdout.trim().split("\n").at(-1)!)
      assert.deepStrictEqual(commit.ledger, JSON.parse(JSON.stringify(ledger)))
    }))

  it.effect("after an exhausted reply: the error, then the line; json's error event carries the ledger", () =>
    Effect.gen(function*() {
      const ledger = Ledger.make([cut(1, 4_000, 400), cut(2, 4_000, 400)])
      const error = new RecoveryExhausted.RecoveryExhausted({
        reason: "Attempts",
        attempts: 2,
        maxAttempts: 2,
        elapsed: Duration.seconds(3),
        lastError: ProviderFailure.fromHttpStatus({ status: 503 }),
        errors: []
      })
      for (const mode of ["plain", "tty", "json"] as const) {
        const capture = Output.makeCapture(mode === "tty")
        const code = yield* Effect.gen(function*() {
          const render = yield* Render.make(mode)
          yield* render.notifications.notify(Notification.Exhausted({ error, ledger }))
          return yield* render.error(error, false)
        }).pipe(Effect.provide(capture.layer))
        assert.strictEqual(code, 75)
        const lines = capture.stderr().split("\n")
        assert.match(lines[0]!, /^reprise: error \[RecoveryExhausted\.Attempts\]: /)
        if (mode === "json") {
          assert.deepStrictEqual(lines.slice(1), [""])
          const event = JSON.parse(capture.stdout().trim())
          assert.strictEqual(event.type, "error")
          assert.deepStrictEqual(event.ledger, JSON.parse(JSON.stringify(ledger)))
        } else {
          assert.deepStrictEqual(lines.slice(1), [
            "reprise: 2 attempts discarded ~200 input and ~2,000 output tokens (estimated)",
            ""
          ])
        }
      }
    }))
})
