/**
 * The fault matrix: every protocol × every fault kind of the loopback simulator, over real HTTP with the undici
 * client. Each case scripts its route "fault, then the full stream", runs one `Recovery.generate`, and checks the
 * request count read from the simulator (2 when the fault is replayed, else 1), the class of the first attempt's
 * failure (from the `AttemptDiscarded` notification), the final result (the committed reply, or the surfaced
 * failure), and the ledger: the first attempt's entry (the phase it reached and its billing verdict), and the
 * committed attempt's, exact with the usage the simulator sent. The cases come from the table in
 * test/support/matrix.ts, which docs/fault-matrix.md shows.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Recovery from "@reprise/core/Recovery"
import * as Simulator from "@reprise/simulator/Simulator"
import { Duration, Effect, Layer } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { errorClass, fastPolicy, provider, recorder } from "./support/chat.js"
import {
  committedVerdictOn,
  failureOn,
  matrix,
  on,
  protocols,
  renderTable,
  resultOn,
  sendsOf
} from "./support/matrix.js"

/** What the fault's attempt serves (when it serves a body at all). */
const doomed = {
  text: "A doomed first attempt that never commits.",
  toolCalls: [{ name: "lookup", arguments: { query: "from the doomed attempt" } }],
  usage: { inputTokens: 13, outputTokens: 55 }
}
/** What the full stream serves. */
const whole = {
  text: "The matrix reply, committed whole.",
  toolCalls: [{ name: "lookup", arguments: { query: "from the committed attempt" } }],
  usage: { inputTokens: 21, outputTokens: 34 }
}

const request = { model: "matrix-model", messages: [{ role: "user" as const, text: "go" }] }

describe.concurrent("fault matrix", () => {
  for (const protocol of protocols) {
    for (const row of matrix) {
      it.live(`${protocol} × ${row.fault}`, () =>
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          const step = row.step(protocol)
          yield* sim.setScript({
            routes: {
              [protocol]: {
                reply: whole,
                steps: [step.kind === "status" || step.reply !== undefined ? step : { ...step, reply: doomed }, {
                  kind: "stream"
                }]
              }
            }
          })
          const notes = recorder()
          const result = yield* Recovery.generate(request).pipe(
            Effect.either,
            Effect.provide(Layer.mergeAll(provider(sim, protocol, row.timeouts), fastPolicy, notes.layer))
          )

          const expectedFailure = failureOn(row, protocol)
          const discarded = notes.of("AttemptDiscarded")
          if (expectedFailure === "none") {
            assert.deepStrictEqual(discarded, [])
          } else {
            assert.strictEqual(discarded.length, 1)
            assert.strictEqual(errorClass(discarded[0].error), expectedFailure)
            // A tool call whose JSON never completed is never surfaced as a complete call.
            if (step.kind === "truncated-tool-call" || expectedFailure === "TransportError.TruncatedToolArguments") {
              assert.deepStrictEqual(discarded[0].discardedToolCalls, [])
              assert.isFalse(notes.of("Preview").some((p) => p.attempt === 1 && p.event._tag === "ToolCallComplete"))
            }
          }
          // Every attempt made a request, and no other request was made.
          assert.strictEqual(yield* sim.count(protocol), sendsOf(row))
          assert.strictEqual(notes.of("AttemptStarted").length, sendsOf(row))

          const expected = resultOn(row, protocol)
          if (expected === "committed") {
            assert.isTrue(result._tag === "Right", `expected a commit, got ${result._tag === "Left" && result.left}`)
            const reply = result._tag === "Right" ? result.right : undefined
            // The committed reply is exactly the attempt that reached its terminal: the fault's preview is gone.
            const served = sendsOf(row) === 1 ? doomed : whole
            assert.strictEqual(reply?.text, served.text)
            assert.deepStrictEqual(
              reply?.toolCalls.map((c) => ({ name: c.name, arguments: c.arguments })),
              served.toolCalls
            )
            assert.strictEqual(reply?.attempts, sendsOf(row))
          } else {
            assert.isTrue(result._tag === "Left")
            // Not replayed: the failure surfaces unchanged, not wrapped in an exhaustion.
            assert.strictEqual(errorClass(result._tag === "Left" ? result.left : undefined), expected)
            assert.strictEqual(notes.of("Failed").length, 1)
            assert.deepStrictEqual(notes.of("RetryScheduled"), [])
          }

          // The ledger: the first attempt's entry, as the notifications and the reply carry it.
          const ledger = result._tag === "Right" ? result.right.ledger : notes.of("Failed")[0]?.ledger
          assert.strictEqual(ledger?.entries.length, sendsOf(row))
          const first = expectedFailure === "none" ? ledger?.entries[0] : discarded[0].entry
          if (expectedFailure !== "none") assert.deepStrictEqual(ledger?.entries[0], first)
          assert.deepStrictEqual(
            [first?.attempt, first?.phase, first?.verdict],
            [1, on(row.entry.phase, protocol), row.entry.verdict]
          )
          if (first?.verdict === "not-billed") {
            assert.deepStrictEqual(first.tokens, { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 })
            assert.deepStrictEqual([first.input, first.output], ["none", "none"])
          } else if (first?.verdict === "estimated") {
            // output is estimated from what the attempt produced: nothing before its first content
            assert.strictEqual(first.output, "estimated")
            assert.strictEqual(first.tokens.output > 0, first.phase === "content")
            // input from the request ("go": 1 token), or the input a provider reports at the start (Anthropic's
            // message_start, where the provider reads it)
            if (protocol === "anthropic" && first.input === "reported") {
              // the usage of the reply the step served: the doomed one's, its own, or the simulator's default (12)
              const served = "reply" in step && step.reply !== undefined
                ? step.reply.usage?.inputTokens ?? 12
                : undefined
              assert.strictEqual(first.tokens.input, served ?? doomed.usage.inputTokens)
            } else {
              assert.deepStrictEqual([first.input, first.tokens.input], ["estimated", 1])
            }
          }
          const verdict = committedVerdictOn(row, protocol)
          const kept = ledger?.entries.find((e) => e.outcome === "committed")
          if (verdict === undefined) {
            assert.isUndefined(kept)
          } else {
            // exactly the usage the served stream reported
            const { usage } = sendsOf(row) === 1 ? doomed : whole
            assert.deepStrictEqual([kept?.attempt, kept?.phase, kept?.verdict, kept?.input, kept?.output], [
              sendsOf(row),
              "terminal",
              verdict,
              "reported",
              "reported"
            ])
            assert.deepStrictEqual(kept?.tokens, {
              input: usage.inputTokens,
              output: usage.outputTokens,
              cacheRead: 0,
              cacheWrite: 0
            })
          }
          if (row.replayed) {
            const [retry] = notes.of("RetryScheduled")
            assert.strictEqual(retry?.delaySource, row.fault === "429 + Retry-After" ? "retry-after" : "backoff")
            if (row.fault === "429 + Retry-After") assert.strictEqual(retry && Duration.toMillis(retry.delay), 30)
          }
        }).pipe(Effect.provide(Simulator.layer())))
    }
  }
})

describe("docs/fault-matrix.md", () => {
  it("shows the table the matrix test runs", () => {
    const here = Path.dirname(fileURLToPath(import.meta.url))
    const doc = Fs.readFileSync(Path.resolve(here, "../docs/fault-matrix.md"), "utf8")
    assert.include(doc, renderTable())
  })
})
