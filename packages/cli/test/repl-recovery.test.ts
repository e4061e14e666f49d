/**
 * `reprise repl` under faults, as a user drives it: the real binary reading prompts from stdin, against the
 * loopback simulator. A prompt whose turn fails after exhaustion prints its error, drops the prompts queued behind
 * it and keeps the committed transcript; the next prompt typed afterwards is sent with that transcript.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import { Effect } from "effect"
import { start } from "./support/cli.js"

const env = { OPENAI_API_KEY: "sk-repl-test" }

interface ChatBody {
  readonly messages: ReadonlyArray<{ readonly role: string; readonly content: string }>
}

describe("repl-recovery", () => {
  it.live(
    "a failed prompt drops the prompts queued behind it and keeps the transcript for the next one",
    () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* sim.setScript({
          routes: {
            "openai-chat": {
              steps: [
                { kind: "stream", reply: { text: "Paris." } },
                { kind: "status", status: 503 },
                { kind: "status", status: 503 },
                { kind: "stream", reply: { text: "Berlin." } },
                { kind: "stream", reply: { text: "Rome." } },
                { kind: "stream", reply: { text: "Madrid." } }
              ]
            }
          }
        })
        const repl = yield* start([
          "repl",
          "--base-url",
          sim.baseUrl("openai-chat"),
          "--model",
          "m",
          "--max-attempts",
          "2",
          "--backoff-base",
          "5",
          "--backoff-max",
          "10"
        ], env)

        yield* repl.write("Capital of France?\n")
        yield* repl.awaitStdout(/Paris\.\n/)

        // Two prompts arrive together: the first fails after exhaustion, the second was queued behind it.
        yield* repl.write("Capital of Spain?\nCapital of Italy?\n")
        yield* repl.awaitStderr(/dropped 1 queued prompt\n/)
        assert.match(repl.stderr(), /reprise: error \[RecoveryExhausted\.Attempts\]: gave up after 2 of 2 attempts/)
        assert.strictEqual(yield* sim.count("openai-chat"), 3)

        // Typed afterwards: sent with the committed transcript, without the failed or dropped prompts.
        yield* repl.write("Capital of Germany?\n")
        yield* repl.awaitStdout(/Berlin\.\n/)
        const fourth = (yield* sim.requestsTo("openai-chat"))[3].body as ChatBody
        assert.deepStrictEqual(fourth.messages.map((m) => [m.role, m.content]), [
          ["user", "Capital of France?"],
          ["assistant", "Paris."],
          ["user", "Capital of Germany?"]
        ])

        // Prompts queued behind successful turns are all answered, in order.
        yield* repl.write("And Italy?\nAnd Spain?\n")
        yield* repl.end
        const result = yield* repl.exit
        assert.strictEqual(result.code, 0)
        assert.strictEqual(result.stdout, "Paris.\nBerlin.\nRome.\nMadrid.\n")
        assert.strictEqual(yield* sim.count("openai-chat"), 6)
        const sixth = (yield* sim.requestsTo("openai-chat"))[5].body as ChatBody
        assert.deepStrictEqual(sixth.messages.map((m) => m.content), [
          "Capital of France?",
          "Paris.",
          "Capital of Germany?",
          "Berlin.",
          "And Italy?",
          "Rome.",
          "And Spain?"
        ])
        assert.notInclude(result.stdout + result.stderr, "Capital of Italy?")
      }).pipe(Effect.provide(Simulator.layer()), Effect.scoped),
    { timeout: 30_000 }
  )

  it.live("end of input after a failed prompt exits with that prompt's code", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript({ routes: { "openai-chat": { steps: [{ kind: "status", status: 401 }] } } })
      const repl = yield* start(["repl", "--base-url", sim.baseUrl("openai-chat"), "--model", "m"], env)
      yield* repl.write("hello\n")
      yield* repl.end
      const result = yield* repl.exit
      assert.strictEqual(result.code, 76)
      assert.include(result.stderr, "ProviderRejection.Authentication")
      assert.strictEqual(yield* sim.count("openai-chat"), 1)
    }).pipe(Effect.provide(Simulator.layer()), Effect.scoped), { timeout: 30_000 })
})
