/**
 * Model scripts: a send is served by the script of the model its body names, on any route, with the faults a
 * scripted model can have, each checked over a real loopback request with `fetch`.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ScriptLoader from "@reprise/simulator/ScriptLoader"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Effect, Fiber, TestClock } from "effect"
import { chat, finished, hasDone, payloads, tokens } from "./support/chat.js"

const words = (n: number) => Array.from({ length: n }, (_, i) => `w${i + 1}`).join(" ")

const sixty = words(60)

const test = (name: string, body: (sim: Simulator.Service) => Effect.Effect<void, unknown>) =>
  it.live(name, () => Effect.provide(Effect.flatMap(Simulator.Simulator, body), Simulator.layer()))

const actions = (sim: Simulator.Service, model: string) =>
  Effect.map(sim.requestsFor(model), (records) => records.map((r) => r.action))

describe("model scripts", () => {
  test("a scripted model's requests take its steps in order, counted per model; others keep the route's", (sim) =>
    Effect.gen(function*() {
      yield* sim.setScript({
        routes: { "openai-chat": { reply: { text: "route reply" }, steps: [{ kind: "status", status: 500 }] } },
        models: {
          flaky: {
            reply: { text: "model reply" },
            steps: [{ kind: "status", status: 429, headers: { "retry-after": "2" } }, { kind: "reset" }]
          }
        }
      })
      const first = yield* chat(sim, "flaky")
      const other = yield* chat(sim, "unscripted")
      const second = yield* chat(sim, "flaky")
      const third = yield* chat(sim, "flaky")
      const otherAgain = yield* chat(sim, "unscripted")
      assert.strictEqual(first.status, 429)
      assert.strictEqual(first.headers?.get("retry-after"), "2")
      assert.strictEqual(JSON.parse(first.body).error.code, "rate_limit_exceeded")
      assert.strictEqual(other.status, 500, "the route's first step, untouched by the model's requests")
      assert.strictEqual(second.status, undefined)
      assert.strictEqual(second.outcome, "error")
      assert.strictEqual(third.status, 200)
      assert.strictEqual(tokens(third).join(""), "model reply")
      assert.strictEqual(tokens(otherAgain).join(""), "route reply")
      assert.deepStrictEqual(yield* actions(sim, "flaky"), ["429", "reset", "200"])
      assert.deepStrictEqual(yield* actions(sim, "unscripted"), ["500", "200"])
      const records = yield* sim.requestsFor("flaky")
      assert.deepStrictEqual(records.map((r) => r.stepIndex), [0, 1, undefined])
      assert.deepStrictEqual(records.map((r) => r.model), ["flaky", "flaky", "flaky"])
      assert.isTrue(
        records[0]!.receivedAt <= records[1]!.receivedAt && records[1]!.receivedAt <= records[2]!.receivedAt
      )
      assert.strictEqual(records[0]!.headers.authorization, "Bearer <redacted>")

      // setScript restarts the model at its first step and forgets its requests
      yield* sim.setScript({ models: { flaky: { steps: [{ kind: "status", status: 503 }] } } })
      assert.deepStrictEqual(yield* sim.requestsFor("flaky"), [])
      assert.strictEqual((yield* chat(sim, "flaky")).status, 503)
      assert.deepStrictEqual(yield* actions(sim, "flaky"), ["503"])
    }))

  test("then: every request after the steps gets it, so every attempt can fail", (sim) =>
    Effect.gen(function*() {
      yield* sim.setScript({
        models: {
          down: {
            then: {
              kind: "status",
              status: 400,
              error: { type: "invalid_request_error", code: "context_length_exceeded", message: "too long" }
            }
          }
        }
      })
      const replies = [yield* chat(sim, "down"), yield* chat(sim, "down"), yield* chat(sim, "down")]
      assert.deepStrictEqual(replies.map((r) => r.status), [400, 400, 400])
      assert.deepStrictEqual(JSON.parse(replies[0]!.body), {
        error: { message: "too long", type: "invalid_request_error", param: null, code: "context_length_exceeded" }
      })
      assert.deepStrictEqual(yield* actions(sim, "down"), [
        "400 context_length_exceeded",
        "400 context_length_exceeded",
        "400 context_length_exceeded"
      ])
    }))

  test("a generated Chat Completions reply names the requested model in every chunk and ends with usage", (sim) =>
    Effect.gen(function*() {
      yield* sim.setScript({ models: { "fb-like": { reply: { text: sixty } } } })
      const reply = yield* chat(sim, "fb-like", { includeUsage: true })
      const chunks = payloads(reply)
      assert.isTrue(chunks.every((c) => c.model === "fb-like"))
      assert.strictEqual(tokens(reply).length, 60)
      assert.strictEqual(tokens(reply).join(""), sixty)
      const finish = chunks.findIndex((c) => c.choices?.[0]?.finish_reason === "stop")
      assert.deepStrictEqual(chunks[finish + 1].choices, [])
      assert.deepStrictEqual(chunks[finish + 1].usage, { prompt_tokens: 12, completion_tokens: 60, total_tokens: 72 })
      assert.isTrue(hasDone(reply))
    }))

  test("eof after N tokens: the body ends cleanly with no terminating chunk", (sim) =>
    Effect.gen(function*() {
      yield* sim.setScript({ models: { cut: { reply: { text: sixty }, then: { kind: "eof", afterTokens: 40 } } } })
      const reply = yield* chat(sim, "cut")
      assert.strictEqual(reply.status, 200)
      assert.strictEqual(reply.outcome, "end")
      assert.strictEqual(tokens(reply).join(""), words(40))
      assert.isFalse(finished(reply))
      assert.isFalse(hasDone(reply))
      assert.deepStrictEqual(yield* actions(sim, "cut"), ["eof"])
    }))

  test("reset after N tokens: the connection fails after exactly those tokens", (sim) =>
    Effect.gen(function*() {
      yield* sim.setScript({ models: { cut: { reply: { text: sixty }, then: { kind: "reset", afterTokens: 40 } } } })
      const reply = yield* chat(sim, "cut")
      assert.strictEqual(reply.status, 200)
      assert.strictEqual(reply.outcome, "error")
      assert.strictEqual(tokens(reply).join(""), words(40))
      assert.isFalse(finished(reply))
    }))

  test("stall after N tokens: silent for durationMs, then the connection closes", (sim) =>
    Effect.gen(function*() {
      yield* sim.setScript({
        models: {
          stall: { reply: { text: sixty }, then: { kind: "stall", afterTokens: 20, durationMs: 300, then: "eof" } }
        }
      })
      const reply = yield* chat(sim, "stall")
      assert.strictEqual(reply.outcome, "end")
      assert.strictEqual(tokens(reply).join(""), words(20))
      assert.isFalse(finished(reply))
      const [record] = yield* sim.requestsFor("stall")
      const closed = yield* sim.awaitClose(record!.id)
      assert.strictEqual(closed.by, "server")
      assert.isAtLeast(closed.at - record!.receivedAt, 290)
      assert.strictEqual(record!.action, "stall")
    }))

  test("no response: no status line until the client gives up; then the exchange ends by the client", (sim) =>
    Effect.gen(function*() {
      yield* sim.setScript({ models: { mute: { then: { kind: "stall", durationMs: 120_000, then: "eof" } } } })
      const reply = yield* chat(sim, "mute", { abortAfterMs: 200 })
      assert.strictEqual(reply.status, undefined)
      assert.strictEqual(reply.outcome, "aborted")
      const [record] = yield* sim.requestsFor("mute")
      assert.strictEqual(record!.action, "stall")
      assert.strictEqual((yield* sim.awaitClose(record!.id)).by, "client")
      // with a short bound the server hangs up without a response
      yield* sim.setScript({ models: { mute: { then: { kind: "stall", durationMs: 100, then: "eof" } } } })
      const hungUp = yield* chat(sim, "mute")
      assert.strictEqual(hungUp.status, undefined)
      assert.strictEqual(hungUp.outcome, "error")
    }))

  test("slow first token: headers at once, the first token after delayMs, then the rest", (sim) =>
    Effect.gen(function*() {
      yield* sim.setScript({
        models: { slow: { reply: { text: sixty }, then: { kind: "slow-first-token", delayMs: 400, keepaliveMs: 100 } } }
      })
      const reply = yield* chat(sim, "slow")
      assert.strictEqual(reply.status, 200)
      assert.isBelow(reply.headersAt!, 200)
      assert.isAtLeast(reply.firstTokenAt!, 390)
      assert.strictEqual(tokens(reply).join(""), sixty)
      assert.isTrue(finished(reply))
      assert.isTrue(hasDone(reply))
      assert.include(reply.body, ": keepalive")
      assert.deepStrictEqual(yield* actions(sim, "slow"), ["slow-first-token"])
    }))

  test("malformed: the 10th event is not JSON, the stream otherwise completes", (sim) =>
    Effect.gen(function*() {
      yield* sim.setScript({
        models: {
          bad: { reply: { text: sixty }, then: { kind: "malformed" } },
          garbage: { reply: { text: sixty }, then: { kind: "malformed", afterEvents: 2, data: "garbage" } }
        }
      })
      const reply = yield* chat(sim, "bad")
      assert.strictEqual(reply.outcome, "end")
      assert.strictEqual(reply.events[9]!.data, `{"choices":[{"delta":`)
      assert.strictEqual(reply.events.filter((e, i) => i !== 9 && e.data !== "[DONE]").length, payloads(reply).length)
      assert.strictEqual(tokens(reply).join(""), sixty)
      assert.isTrue(finished(reply))
      assert.isTrue(hasDone(reply))
      const garbage = yield* chat(sim, "garbage")
      assert.strictEqual(garbage.events[2]!.data, "garbage")
      assert.deepStrictEqual(yield* actions(sim, "bad"), ["malformed"])
    }))

  test("no-done: finish reason and usage, no [DONE], a clean end", (sim) =>
    Effect.gen(function*() {
      yield* sim.setScript({ models: { nodone: { reply: { text: sixty }, then: { kind: "no-done" } } } })
      const reply = yield* chat(sim, "nodone", { includeUsage: true })
      assert.strictEqual(reply.outcome, "end")
      assert.isTrue(finished(reply))
      assert.isFalse(hasDone(reply))
      assert.deepStrictEqual(payloads(reply).at(-1).usage.completion_tokens, 60)
      assert.deepStrictEqual(JSON.parse(reply.events.at(-1)!.data).choices, [], "the usage chunk is the last event")
      assert.deepStrictEqual(yield* actions(sim, "nodone"), ["no-done"])
    }))

  test("rejectPrefill: a request ending with an assistant message gets 400 prefill_not_supported", (sim) =>
    Effect.gen(function*() {
      yield* sim.setScript({ models: { strict: { rejectPrefill: true, steps: [{ kind: "status", status: 500 }] } } })
      const prefill = [{ role: "user", content: "Say hi" }, { role: "assistant", content: "Hi, I" }]
      const refused = yield* chat(sim, "strict", { messages: prefill })
      assert.strictEqual(refused.status, 400)
      const error = JSON.parse(refused.body).error
      assert.strictEqual(error.type, "invalid_request_error")
      assert.strictEqual(error.code, "prefill_not_supported")
      assert.include(error.message, "assistant prefill is not supported")
      assert.strictEqual((yield* chat(sim, "strict")).status, 500, "a refused prefill takes no step")
      assert.strictEqual((yield* chat(sim, "strict")).status, 200)
      assert.deepStrictEqual(yield* actions(sim, "strict"), ["400 prefill", "500", "200"])
    }))

  test("a model's steps apply on every route and are counted across them", (sim) =>
    Effect.gen(function*() {
      yield* sim.setScript({
        models: {
          cut: {
            reply: { text: words(10) },
            steps: [{ kind: "status", status: 429 }],
            then: { kind: "eof", afterTokens: 3 }
          }
        }
      })
      const post = (path: string) =>
        Effect.promise(() =>
          fetch(`${sim.url}${path}`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ model: "cut", messages: [{ role: "user", content: "hi" }], stream: true })
          }).then(async (r) => ({ status: r.status, body: await r.text() }))
        )
      assert.strictEqual((yield* post("/v1/messages")).status, 429)
      const anthropic = yield* post("/v1/messages")
      assert.strictEqual(anthropic.status, 200)
      assert.strictEqual(anthropic.body.match(/"text_delta"/g)?.length, 3)
      assert.notInclude(anthropic.body, "message_stop")
      const responses = yield* post("/v1/responses")
      assert.strictEqual(responses.body.match(/event: response\.output_text\.delta/g)?.length, 3)
      assert.notInclude(responses.body, "response.completed")
      const records = yield* sim.requestsFor("cut")
      assert.deepStrictEqual(records.map((r) => [r.route, r.action]), [
        ["anthropic", "429"],
        ["anthropic", "eof"],
        ["openai-responses", "eof"]
      ])
    }))

  test("rejectPrefill reads the last item of a Responses input and answers with Anthropic's error shape", (sim) =>
    Effect.gen(function*() {
      yield* sim.setScript({ models: { strict: { rejectPrefill: true } } })
      const post = (path: string, body: unknown) =>
        Effect.promise(() =>
          fetch(`${sim.url}${path}`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify(body)
          }).then(async (r) => ({ status: r.status, body: await r.json() as any }))
        )
      const prefill = [{ role: "user", content: "hi" }, { role: "assistant", content: "Hel" }]
      const anthropic = yield* post("/v1/messages", { model: "strict", messages: prefill, stream: true })
      assert.strictEqual(anthropic.status, 400)
      assert.strictEqual(anthropic.body.type, "error")
      assert.strictEqual(anthropic.body.error.type, "invalid_request_error")
      const responses = yield* post("/v1/responses", { model: "strict", input: prefill, stream: true })
      assert.strictEqual(responses.status, 400)
      assert.strictEqual(responses.body.error.code, "prefill_not_supported")
      assert.deepStrictEqual(yield* actions(sim, "strict"), ["400 prefill", "400 prefill"])
    }))

  it.effect("outage: requests within forMs of setScript get its status, by the simulator's Clock (TestClock)", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript({ models: { flap: { outage: { forMs: 60_000, status: 503 } } } })
      assert.strictEqual((yield* chat(sim, "flap")).status, 503)
      yield* TestClock.adjust("59999 millis")
      assert.strictEqual((yield* chat(sim, "flap")).status, 503)
      yield* TestClock.adjust("1 millis")
      assert.strictEqual((yield* chat(sim, "flap")).status, 200)
      assert.deepStrictEqual(yield* actions(sim, "flap"), ["503", "503", "200"])
      // setScript starts the outage again
      yield* sim.setScript({ models: { flap: { outage: { forMs: 60_000, status: 503 } } } })
      assert.strictEqual((yield* chat(sim, "flap")).status, 503)
    }).pipe(Effect.provide(Simulator.layer())))

  it.effect("outage from the simulator's start when the script is given to make", () =>
    Effect.gen(function*() {
      const fiber = yield* Effect.fork(
        Effect.gen(function*() {
          const sim = yield* Simulator.Simulator
          const during = yield* chat(sim, "flap")
          yield* TestClock.adjust("2 seconds")
          const after = yield* chat(sim, "flap")
          return [during.status, after.status]
        }).pipe(
          Effect.provide(Simulator.layer({ script: { models: { flap: { outage: { forMs: 2000, status: 429 } } } } }))
        )
      )
      assert.deepStrictEqual(yield* Fiber.join(fiber), [429, 200])
    }))

  it.effect("model scripts are checked field by field", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(ScriptLoader.decode({
        models: { m: { then: { kind: "eof", afterTokens: -1 }, outage: { forMs: 0, status: 503 } } }
      }))
      assert.deepStrictEqual(error.issues, [
        "models.m.then.afterTokens: Expected a non-negative integer, actual -1",
        "models.m.outage.forMs: Expected a whole number of milliseconds between 1 and 600000, actual 0"
      ])
      const both = yield* Effect.flip(ScriptLoader.decode({
        models: { m: { steps: [{ kind: "reset", afterEvents: 1, afterTokens: 1 }] } }
      }))
      assert.deepStrictEqual(both.issues, ["models.m.steps[0]: give either afterEvents or afterTokens, not both"])
      const script: SimulatorScript.Script = yield* ScriptLoader.decode({
        models: { m: { rejectPrefill: true, then: { kind: "slow-first-token", delayMs: 10 } } }
      })
      assert.deepStrictEqual(script.models?.m?.then, { kind: "slow-first-token", delayMs: 10 })
    }))
})
