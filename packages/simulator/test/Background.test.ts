/**
 * Background responses on the `openai-responses` route: a send with `"background": true` is kept by id with its
 * complete event list whatever happens to its connection, and resume GETs (`?stream=true&starting_after=N`), polls
 * and cancels are served from it, over real sockets, with the route's resume steps applied to resumes. The official
 * `openai` client's `responses.retrieve(id, { stream: true, starting_after })` and `responses.cancel(id)` work
 * against it. Ages are tested on the store with explicit arrival times (the server runs on the real clock).
 */
import { assert, describe, it } from "@effect/vitest"
import * as ScriptLoader from "@reprise/simulator/ScriptLoader"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Effect } from "effect"
import { createParser } from "eventsource-parser"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import OpenAI from "openai"
import * as Background from "../src/internal/background.js"
import * as Frames from "../src/internal/frames.js"
import * as Load from "../src/internal/load.js"
import * as Store from "../src/internal/store.js"

const fixturesDir = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../../fixtures")
// The recorded captures live beside the repository, in ../shared (as on CI).
const recordedDir = Path.resolve(fixturesDir, "../../shared/fixtures/recorded/openai-responses")
const capture = Path.join(recordedDir, "openai-tool-search.1.chunks.txt")

// -----------------------------------------------------------------------------
// a raw HTTP client
// -----------------------------------------------------------------------------

interface Received {
  readonly status: number | undefined
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
  /** `end`: the body ended cleanly; `error`: the connection failed. */
  readonly outcome: "end" | "error"
}

const send = (
  url: string,
  path: string,
  options: { readonly method?: string; readonly body?: unknown } = {}
): Effect.Effect<Received> =>
  Effect.async<Received>((resume) => {
    const chunks: Array<Buffer> = []
    let status: number | undefined
    let headers: Http.IncomingHttpHeaders = {}
    let done = false
    const finish = (outcome: Received["outcome"]) => {
      if (done) return
      done = true
      resume(Effect.succeed({ status, headers, body: Buffer.concat(chunks).toString("utf8"), outcome }))
    }
    const req = Http.request(url + path, {
      method: options.method ?? "GET",
      agent: false,
      headers: { "content-type": "application/json" }
    })
    req.on("response", (res) => {
      status = res.statusCode
      headers = res.headers
      res.on("data", (chunk: Buffer) => chunks.push(chunk))
      res.on("error", () => finish("error"))
      res.on("close", () => finish(res.complete ? "end" : "error"))
    })
    req.on("error", () => finish("error"))
    req.end(options.body === undefined ? undefined : JSON.stringify(options.body))
    return Effect.sync(() => req.destroy())
  })

const createBody = { model: "gpt-sim", input: "hi", stream: true, background: true }

/** A background send. */
const create = (sim: Simulator.Service, body: unknown = createBody) =>
  send(sim.url, "/v1/responses", { method: "POST", body })

const resume = (sim: Simulator.Service, id: string, startingAfter?: number) =>
  send(
    sim.url,
    `/v1/responses/${id}?stream=true${startingAfter === undefined ? "" : `&starting_after=${startingAfter}`}`
  )

const poll = (sim: Simulator.Service, id: string) => send(sim.url, `/v1/responses/${id}`)

const cancel = (sim: Simulator.Service, id: string) => send(sim.url, `/v1/responses/${id}/cancel`, { method: "POST" })

interface Event {
  readonly event: string | undefined
  readonly data: string
}

const events = (body: string): ReadonlyArray<Event> => {
  const out: Array<Event> = []
  createParser({ onEvent: (e) => out.push({ event: e.event, data: e.data }) }).feed(body)
  return out
}

const payloads = (body: string): ReadonlyArray<any> =>
  events(body).filter((e) => e.data !== "[DONE]").map((e) => JSON.parse(e.data))

const sequences = (body: string) => payloads(body).map((p) => p.sequence_number as number)

const idOf = (body: string): string => payloads(body)[0].response.id

/** The payloads of the capture, as a background response of that id keeps them. */
const captured = (id: string): ReadonlyArray<any> =>
  Fs.readFileSync(capture, "utf8").split("\n").filter((line) => line.trim() !== "").map((line) => {
    const payload = JSON.parse(line)
    return payload.response === undefined
      ? payload
      : { ...payload, response: { ...payload.response, id, background: true } }
  })

const test = (name: string, body: (sim: Simulator.Service) => Effect.Effect<void, unknown>) =>
  it.live(name, () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* body(sim)
    }).pipe(Effect.provide(Simulator.layer({ fixturesDir }))))

const responses = (sim: Simulator.Service, script: SimulatorScript.RouteScript) =>
  sim.setScript({ routes: { "openai-responses": script } })

const text = "Background responses keep running when the connection drops."

// -----------------------------------------------------------------------------

describe("background sends", () => {
  test("a background send streams created (queued), queued, in progress … completed, every object background", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, { reply: { text } })
      const r = yield* create(sim)
      assert.strictEqual(r.status, 200)
      assert.strictEqual(r.outcome, "end")
      const all = payloads(r.body)
      assert.deepStrictEqual(all.slice(0, 3).map((p) => [p.type, p.response.status]), [
        ["response.created", "queued"],
        ["response.queued", "queued"],
        ["response.in_progress", "in_progress"]
      ])
      assert.deepStrictEqual(sequences(r.body), all.map((_, i) => i))
      const last = all.at(-1)
      assert.strictEqual(last.type, "response.completed")
      assert.strictEqual(last.response.background, true)
      assert.strictEqual(last.response.store, true)
      assert.strictEqual(all.filter((p) => p.type === "response.output_text.delta").map((p) => p.delta).join(""), text)
      const id = idOf(r.body)
      assert.match(id, /^resp_/)
      assert.isTrue(all.every((p) => p.response === undefined || p.response.id === id))
      // Unique per response.
      const other = idOf((yield* create(sim)).body)
      assert.notStrictEqual(other, id)
      const [first] = yield* sim.requests
      assert.deepStrictEqual([first!.kind, first!.responseId, first!.step], ["send", id, "stream"])
      const info = yield* sim.backgroundResponse(id)
      assert.deepStrictEqual(
        [info?.status, info?.events, info?.requestId, info?.polls, info?.resumes, info?.cancels],
        ["completed", all.length, first!.id, 0, 0, 0]
      )
    }))

  test("an ordinary send is served as before: nothing is kept, the record names no response", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, { reply: { text } })
      const r = yield* create(sim, { model: "gpt-sim", input: "hi", stream: true })
      const all = payloads(r.body)
      assert.deepStrictEqual(all.slice(0, 2).map((p) => [p.type, p.response.status]), [
        ["response.created", "in_progress"],
        ["response.in_progress", "in_progress"]
      ])
      assert.isFalse("background" in all.at(-1).response)
      assert.deepStrictEqual(yield* sim.backgroundResponses, [])
      const [record] = yield* sim.requests
      assert.deepStrictEqual([record!.kind, record!.responseId], ["send", undefined])
      assert.strictEqual((yield* resume(sim, idOf(r.body))).status, 404)
    }))

  test("the subscription route has no background mode: background: true is served as an ordinary send", (sim) =>
    Effect.gen(function*() {
      yield* sim.setScript({ routes: { subscription: { reply: { text } } } })
      const r = yield* send(sim.url, "/subscription/responses", { method: "POST", body: createBody })
      assert.strictEqual(events(r.body).at(-1)?.data, "[DONE]")
      assert.strictEqual(JSON.parse(events(r.body)[0]!.data).response.status, "in_progress")
      assert.deepStrictEqual(yield* sim.backgroundResponses, [])
      const [record] = yield* sim.requests
      assert.deepStrictEqual([record!.kind, record!.responseId], ["send", undefined])
      const get = yield* send(sim.url, `/subscription/responses/${idOf(r.body)}?stream=true`)
      assert.strictEqual(get.status, 404)
    }))

  test("a reset after N events cuts the connection, but the response is kept whole", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, { reply: { text }, steps: [{ kind: "reset", afterEvents: 5 }] })
      const cut = yield* create(sim)
      assert.strictEqual(cut.outcome, "error")
      assert.deepStrictEqual(sequences(cut.body), [0, 1, 2, 3, 4])
      const id = idOf(cut.body)
      const info = yield* sim.backgroundResponse(id)
      assert.strictEqual(info?.status, "completed")
      const rest = yield* resume(sim, id, 4)
      assert.strictEqual(rest.outcome, "end")
      assert.strictEqual(sequences(rest.body)[0], 5)
      assert.strictEqual(payloads(rest.body).at(-1).type, "response.completed")
      assert.strictEqual(
        [...payloads(cut.body), ...payloads(rest.body)].filter((p) => p.type === "response.output_text.delta")
          .map((p) => p.delta).join(""),
        text
      )
    }))

  test("a status step refuses the send: no response is created", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, { steps: [{ kind: "status", status: 429 }] })
      const r = yield* create(sim)
      assert.strictEqual(r.status, 429)
      const [record] = yield* sim.requests
      assert.deepStrictEqual([record!.kind, record!.responseId, record!.step], ["send", undefined, "status"])
      assert.deepStrictEqual(yield* sim.backgroundResponses, [])
    }))

  test("without stream: true a background send answers the response object, queued", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, { reply: { text } })
      const r = yield* create(sim, { model: "gpt-sim", input: "hi", background: true })
      assert.strictEqual(r.status, 200)
      assert.match(String(r.headers["content-type"]), /^application\/json/)
      const object = JSON.parse(r.body)
      assert.deepStrictEqual([object.object, object.status, object.background], ["response", "queued", true])
      const polled = JSON.parse((yield* poll(sim, object.id)).body)
      assert.strictEqual(polled.status, "completed")
      assert.strictEqual(polled.output[0].content[0].text, text)
    }))
})

// -----------------------------------------------------------------------------

describe("resumes", () => {
  test("resume after each cut point of a recorded capture: the events before the cut and the suffix are the whole stream", (sim) =>
    Effect.gen(function*() {
      const total = captured("x").length
      // One background send per cut point, in order: the Nth send is reset after N events (0 … all of them).
      const cuts = Array.from({ length: total + 1 }, (_, n) => n)
      yield* responses(sim, {
        reply: { fixture: capture },
        steps: cuts.map((n): SimulatorScript.Step => ({ kind: "reset", afterEvents: n }))
      })
      for (const n of cuts) {
        const cut = yield* create(sim)
        // A reset after 0 events sends no event: the id comes from the record, as a client would have none.
        const [record] = (yield* sim.requests).slice(-1)
        const id = record!.responseId!
        assert.strictEqual(events(cut.body).length, n, `cut ${n}`)
        const seen = sequences(cut.body)
        const suffix = yield* (seen.length === 0 ? resume(sim, id) : resume(sim, id, seen.at(-1)!))
        const whole = yield* resume(sim, id)
        assert.strictEqual(suffix.status, 200)
        assert.strictEqual(suffix.outcome, "end")
        assert.deepStrictEqual([...events(cut.body), ...events(suffix.body)], events(whole.body), `cut ${n}`)
        // The whole stream is the capture, with the response's id and background: true.
        assert.deepStrictEqual(payloads(whole.body), captured(id), `cut ${n}`)
        assert.deepStrictEqual(sequences(whole.body), cuts.slice(0, total))
        if (n > 0) {
          assert.isFalse(payloads(suffix.body).some((p) => p.type === "response.created"), `cut ${n}`)
          assert.deepStrictEqual(sequences(suffix.body), cuts.slice(n, total), `cut ${n}: gap-free`)
        }
      }
      assert.strictEqual((yield* sim.backgroundResponses).length, cuts.length)
      assert.strictEqual(yield* sim.count("openai-responses", "send"), cuts.length)
      assert.strictEqual(yield* sim.count("openai-responses", "resume"), 2 * cuts.length)
    }))

  test("the send cut after 5 events, the first resume cut after 3, the second resume completes", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, {
        reply: { text },
        steps: [{ kind: "reset", afterEvents: 5 }],
        resume: { steps: [{ kind: "reset", afterEvents: 3 }] }
      })
      const first = yield* create(sim)
      const id = idOf(first.body)
      const second = yield* resume(sim, id, sequences(first.body).at(-1)!)
      assert.strictEqual(second.outcome, "error")
      assert.deepStrictEqual(sequences(second.body), [5, 6, 7])
      const third = yield* resume(sim, id, 7)
      assert.strictEqual(third.outcome, "end")
      const whole = yield* resume(sim, id)
      assert.deepStrictEqual(
        [...events(first.body), ...events(second.body), ...events(third.body)],
        events(whole.body)
      )
      const records = yield* sim.requestsTo("openai-responses")
      assert.deepStrictEqual(records.map((r) => [r.nth, r.kind, r.responseId, r.step, r.stepIndex]), [
        [1, "send", id, "reset", 0],
        [2, "resume", id, "reset", 0],
        [3, "resume", id, "stream", undefined],
        [4, "resume", id, "stream", undefined]
      ])
      assert.strictEqual(records[1]!.path, `/v1/responses/${id}?stream=true&starting_after=4`)
      assert.strictEqual(records[1]!.method, "GET")
      assert.strictEqual((yield* sim.backgroundResponse(id))?.resumes, 3)
    }))

  test("faults apply to resumes: a status, an eof before the terminal, an in-band error with the next sequence number", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, {
        reply: { text },
        resume: {
          steps: [
            { kind: "status", status: 503 },
            { kind: "eof" },
            { kind: "error", afterEvents: 2, error: { code: "server_error", message: "boom" } }
          ]
        }
      })
      const id = idOf((yield* create(sim)).body)
      const unavailable = yield* resume(sim, id, 3)
      assert.strictEqual(unavailable.status, 503)
      assert.strictEqual(JSON.parse(unavailable.body).error.type, "server_error")
      const eof = yield* resume(sim, id, 3)
      assert.strictEqual(eof.outcome, "end")
      assert.isFalse(payloads(eof.body).some((p) => p.type === "response.completed"))
      assert.strictEqual(sequences(eof.body)[0], 4)
      // Generated: created 0, queued 1, in_progress 2, output_item.added 3, content_part.added 4, deltas from 5.
      const failed = yield* resume(sim, id, 4)
      assert.deepStrictEqual(payloads(failed.body).map((p) => [p.type, p.sequence_number]), [
        ["response.output_text.delta", 5],
        ["response.output_text.delta", 6],
        ["error", 7]
      ])
      assert.strictEqual(payloads(failed.body)[2].message, "boom")
      // After the last step, the suffix in full.
      assert.strictEqual(payloads((yield* resume(sim, id, 3)).body).at(-1).type, "response.completed")
    }))

  test("a resume the server refuses takes no step; an unknown id is the API's 404", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, { reply: { text }, resume: { steps: [{ kind: "status", status: 500 }] } })
      const missing = yield* resume(sim, "resp_nope", 3)
      assert.strictEqual(missing.status, 404)
      assert.deepStrictEqual(JSON.parse(missing.body), {
        error: {
          message: "Response with id 'resp_nope' not found.",
          type: "invalid_request_error",
          param: null,
          code: null
        }
      })
      const id = idOf((yield* create(sim)).body)
      const bad = yield* send(sim.url, `/v1/responses/${id}?stream=true&starting_after=abc`)
      assert.strictEqual(bad.status, 400)
      assert.strictEqual(JSON.parse(bad.body).error.param, "starting_after")
      assert.strictEqual((yield* resume(sim, id, 3)).status, 500, "the step went to the first resume served")
      assert.strictEqual((yield* resume(sim, id, 3)).status, 200)
      const records = yield* sim.requestsTo("openai-responses")
      assert.deepStrictEqual(records.map((r) => [r.kind, r.step]), [
        ["resume", undefined],
        ["send", "stream"],
        ["resume", undefined],
        ["resume", "status"],
        ["resume", "stream"]
      ])
      // The unprefixed path works too (a base URL without /v1).
      assert.strictEqual((yield* send(sim.url, `/responses/${id}?stream=true&starting_after=3`)).status, 200)
    }))

  test("a cursor at or after the terminal event: an empty stream", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, { reply: { text } })
      const full = yield* create(sim)
      const last = sequences(full.body).at(-1)!
      for (const after of [last, last + 10]) {
        const r = yield* resume(sim, idOf(full.body), after)
        assert.deepStrictEqual([r.status, r.outcome, r.body], [200, "end", ""])
      }
    }))

  test("too old to stream: the API's 400, and polls still work", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, { reply: { text }, background: { streamForMs: 0 } })
      const id = idOf((yield* create(sim)).body)
      const old = yield* resume(sim, id, 3)
      assert.strictEqual(old.status, 400)
      assert.deepStrictEqual(JSON.parse(old.body), {
        error: {
          message: "This response can no longer be streamed because it is more than 0 milliseconds old.",
          type: "invalid_request_error",
          param: null,
          code: null
        }
      })
      assert.strictEqual(JSON.parse((yield* poll(sim, id)).body).status, "completed")
      assert.strictEqual((yield* sim.backgroundResponse(id))?.resumes, 0)

      // expire() does the same to a response of the default (five minutes).
      yield* responses(sim, { reply: { text } })
      const fresh = idOf((yield* create(sim)).body)
      assert.strictEqual((yield* resume(sim, fresh, 3)).status, 200)
      assert.isTrue(yield* sim.expire(fresh))
      const expired = yield* resume(sim, fresh, 3)
      assert.strictEqual(expired.status, 400)
      assert.match(JSON.parse(expired.body).error.message, /no longer be streamed .* more than 5 minutes old\.$/)
      assert.isTrue((yield* sim.backgroundResponse(fresh))?.expired)
      assert.isFalse(yield* sim.expire("resp_nope"))
    }))
})

// -----------------------------------------------------------------------------

describe("polls and cancels", () => {
  test("a poll answers the response object; in progress for the first inProgressPolls polls, then completed", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, { reply: { text }, background: { inProgressPolls: 2 } })
      const id = idOf((yield* create(sim)).body)
      const answers = []
      for (let i = 0; i < 3; i++) answers.push(JSON.parse((yield* poll(sim, id)).body))
      assert.deepStrictEqual(answers.map((a) => [a.id, a.status, a.output.length]), [
        [id, "in_progress", 0],
        [id, "in_progress", 0],
        [id, "completed", 1]
      ])
      assert.strictEqual(answers[2].output[0].content[0].text, text)
      assert.strictEqual(answers[2].background, true)
      const records = (yield* sim.requests).filter((r) => r.kind === "poll")
      assert.deepStrictEqual(records.map((r) => [r.responseId, r.step, r.stepIndex]), [
        [id, undefined, undefined],
        [id, undefined, undefined],
        [id, undefined, undefined]
      ])
      assert.strictEqual((yield* sim.backgroundResponse(id))?.polls, 3)
      assert.strictEqual((yield* poll(sim, "resp_nope")).status, 404)
    }))

  test("cancel of a running response: cancelled, idempotent, counted", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, { reply: { text }, background: { inProgressPolls: 1 } })
      const id = idOf((yield* create(sim)).body)
      const first = yield* cancel(sim, id)
      const again = yield* cancel(sim, id)
      assert.deepStrictEqual([first.status, again.status], [200, 200])
      const body = JSON.parse(first.body)
      assert.deepStrictEqual([body.id, body.status, body.output], [id, "cancelled", []])
      assert.deepStrictEqual(JSON.parse(again.body), body)
      assert.strictEqual(JSON.parse((yield* poll(sim, id)).body).status, "cancelled")
      const info = yield* sim.backgroundResponse(id)
      assert.deepStrictEqual([info?.status, info?.cancels], ["cancelled", 2])
      assert.strictEqual(yield* sim.count("openai-responses", "cancel"), 2)
      const records = (yield* sim.requests).filter((r) => r.kind === "cancel")
      assert.deepStrictEqual(records.map((r) => [r.method, r.path, r.responseId]), [
        ["POST", `/v1/responses/${id}/cancel`, id],
        ["POST", `/v1/responses/${id}/cancel`, id]
      ])
    }))

  test("cancel of a completed response: the API's 400, the response unchanged; an unknown id: 404", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, { reply: { text } })
      const id = idOf((yield* create(sim)).body)
      const refused = yield* cancel(sim, id)
      assert.strictEqual(refused.status, 400)
      assert.deepStrictEqual(JSON.parse(refused.body), {
        error: {
          message: "Cannot cancel a completed response.",
          type: "invalid_request_error",
          param: null,
          code: null
        }
      })
      assert.strictEqual(JSON.parse((yield* poll(sim, id)).body).status, "completed")
      assert.strictEqual((yield* sim.backgroundResponse(id))?.cancels, 1)
      assert.strictEqual((yield* cancel(sim, "resp_nope")).status, 404)
    }))

  test("other methods on a response path are a 405 without a route", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, {})
      const wrong = yield* send(sim.url, "/v1/responses/resp_x/cancel")
      assert.strictEqual(wrong.status, 405)
      const deleted = yield* send(sim.url, "/v1/responses/resp_x", { method: "DELETE" })
      assert.strictEqual(deleted.status, 405)
      assert.deepStrictEqual((yield* sim.requests).map((r) => [r.route, r.kind]), [
        [undefined, undefined],
        [undefined, undefined]
      ])
    }))
})

// -----------------------------------------------------------------------------

describe("background response store", () => {
  const frames = (id: string) =>
    Background.prepare(
      "openai-responses",
      Frames.make(Frames.fromChunks(Fs.readFileSync(capture, "utf8"), "openai-responses"), "openai-responses"),
      id
    )

  const store = (streamForMs: number) => {
    const responses = new Background.Responses(100)
    const r = responses.create({
      id: "resp_sim_1",
      route: "openai-responses",
      requestId: 1,
      createdAt: 1_000_000,
      ctx: { id: 1, model: undefined, created: 1000, background: true },
      frames: frames("resp_sim_1"),
      options: { ...Load.defaultBackground, streamForMs }
    })
    return { responses, r }
  }

  it("a resume is refused once the response is streamForMs old (five minutes by default), by arrival times", () => {
    const { responses } = store(Load.defaultStreamForMs)
    assert.isUndefined(responses.refuseResume("resp_sim_1", "3", 1_000_000 + 299_999))
    const old = responses.refuseResume("resp_sim_1", "3", 1_000_000 + 300_000)
    assert.deepStrictEqual(old, {
      status: 400,
      body: {
        error: {
          message: "This response can no longer be streamed because it is more than 5 minutes old.",
          type: "invalid_request_error",
          param: null,
          code: null
        }
      }
    })
    assert.strictEqual(responses.poll("resp_sim_1").status, 200, "polls do not expire")
  })

  it("resumes have their own steps and cursor, apart from the sends; forMs holds a resume step too", () => {
    const step = (kind: "eof" | "stream", forMs?: number): Load.LoadedStep => ({
      step: forMs === undefined ? { kind } : { kind, forMs },
      index: 0,
      source: undefined
    })
    const script = {
      ...Load.empty,
      "openai-responses": {
        ...Load.empty["openai-responses"],
        steps: [{ step: { kind: "reset" as const }, index: 0, source: undefined }],
        resume: { steps: [step("eof", 1000)], afterLast: "reply" as const }
      }
    }
    const store = new Store.Store(script, 100)
    const arrive = (kind: "send" | "resume", at: number) => {
      const { record } = store.arrive({
        route: "openai-responses",
        kind,
        method: kind === "send" ? "POST" : "GET",
        path: "/v1/responses",
        headers: {},
        body: undefined,
        receivedAt: at
      })
      return [record.kind, record.step, record.stepIndex, record.nth]
    }
    assert.deepStrictEqual(
      [arrive("resume", 0), arrive("send", 10), arrive("resume", 999), arrive("send", 1000), arrive("resume", 1000)],
      [
        ["resume", "eof", 0, 1],
        ["send", "reset", 0, 2],
        ["resume", "eof", 0, 3],
        ["send", "stream", undefined, 4],
        ["resume", "stream", undefined, 5]
      ]
    )
    assert.deepStrictEqual(
      [store.count("openai-responses"), store.count("openai-responses", "send"), store.count(undefined, "resume")],
      [5, 2, 3]
    )
  })

  it("another age is named in its unit", () => {
    const message = (ms: number) =>
      (store(ms).responses.refuseResume("resp_sim_1", null, 1_000_000 + ms) as any).body.error.message
    assert.match(message(30_000), /more than 30 seconds old\.$/)
    assert.match(message(60_000), /more than 1 minute old\.$/)
    assert.match(message(1500), /more than 1500 milliseconds old\.$/)
  })

  it("the kept frames: through the first terminal event, each response object with the id and background: true", () => {
    const kept = frames("resp_sim_9")
    assert.strictEqual(kept.terminal, kept.frames.length - 1)
    const objects = kept.frames.map(Frames.json).filter((p) => p.response !== undefined).map((p) => p.response)
    assert.isAbove(objects.length, 1)
    for (const object of objects) {
      assert.deepStrictEqual([object.id, object.background], ["resp_sim_9", true])
      // `background` keeps its place after `status`, as the API orders it.
      const keys = Object.keys(object)
      assert.strictEqual(keys[keys.indexOf("status") + 1], "background")
    }
    // A recording of several responses in a row keeps the first.
    const several = Path.join(recordedDir, "openai-reasoning-encrypted-content.1.chunks.txt")
    const first = Background.prepare(
      "openai-responses",
      Frames.make(Frames.fromChunks(Fs.readFileSync(several, "utf8"), "openai-responses"), "openai-responses"),
      "resp_sim_2"
    )
    assert.strictEqual(first.frames.length, 56)
    assert.strictEqual(Frames.json(first.frames.at(-1)!).type, "response.completed")
  })
})

// -----------------------------------------------------------------------------

describe("background scripts", () => {
  const decodeError = (input: unknown) => Effect.flip(ScriptLoader.decode(input))

  it.effect("resume steps name no reply; only the Responses route has background responses", () =>
    Effect.gen(function*() {
      const reply = yield* decodeError({
        routes: {
          "openai-responses": { resume: { steps: [{ kind: "stream" }, { kind: "eof", reply: { text: "x" } }] } }
        }
      })
      assert.deepStrictEqual(reply.issues, [
        `routes["openai-responses"].resume.steps[1].reply: a resume serves the stored response: a resume step names no reply`
      ])
      const chat = yield* decodeError({ routes: { "openai-chat": { resume: { steps: [] } } } })
      assert.deepStrictEqual(chat.issues, [
        `routes["openai-chat"].resume: only the openai-responses route has background responses`
      ])
      const age = yield* decodeError({ routes: { "openai-responses": { background: { streamForMs: 600_001 } } } })
      assert.deepStrictEqual(age.issues, [
        `routes["openai-responses"].background.streamForMs: Expected a whole number of milliseconds between 0 and 600000, actual 600001`
      ])
      const typo = yield* decodeError({ routes: { "openai-responses": { background: { inProgresPolls: 1 } } } })
      assert.match(typo.issues[0]!, /^routes\["openai-responses"\]\.background\.inProgresPolls: is unexpected/)
      const ok = yield* ScriptLoader.decode({
        routes: {
          "openai-responses": {
            steps: [{ kind: "reset", afterEvents: 5 }],
            resume: { steps: [{ kind: "reset", afterEvents: 3 }], afterLast: "reply" },
            background: { inProgressPolls: 1, streamForMs: 0 }
          }
        }
      })
      assert.deepStrictEqual(ok.routes?.["openai-responses"]?.background, { inProgressPolls: 1, streamForMs: 0 })
    }))
})

// -----------------------------------------------------------------------------

describe("openai client (official) against background responses", () => {
  const client = (sim: Simulator.Service) =>
    new OpenAI({ apiKey: "sk-simulator-dummy-key", baseURL: sim.baseUrl("openai-responses"), maxRetries: 0 })

  const collect = (stream: AsyncIterable<OpenAI.Responses.ResponseStreamEvent>, stopAfter = Infinity) =>
    Effect.promise(async () => {
      const out: Array<OpenAI.Responses.ResponseStreamEvent> = []
      for await (const event of stream) {
        out.push(event)
        if (out.length >= stopAfter) break
      }
      return out
    })

  const rejection = (f: () => Promise<unknown>) =>
    Effect.flatMap(
      Effect.promise(() =>
        f().then(() => ({ ok: true as const }), (error: unknown) => ({ ok: false as const, error }))
      ),
      (r) => r.ok ? Effect.dieMessage("expected a rejection") : Effect.succeed(r.error)
    )

  test("create({ background, stream }), stop reading, retrieve(id, { stream, starting_after }) yields the suffix", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, { reply: { fixture: capture } })
      const openai = client(sim)
      const head = yield* collect(
        yield* Effect.promise(() =>
          openai.responses.create({ model: "gpt-sim", input: "hi", background: true, stream: true })
        ),
        6
      )
      const created = head[0]!
      assert.strictEqual(created.type, "response.created")
      const id = created.type === "response.created" ? created.response.id : ""
      const cursor = head.at(-1)!.sequence_number
      const tail = yield* collect(
        yield* Effect.promise(() => openai.responses.retrieve(id, { stream: true, starting_after: cursor }))
      )
      assert.deepStrictEqual(
        [...head, ...tail].map((e) => e.sequence_number),
        captured(id).map((p) => p.sequence_number)
      )
      assert.notInclude(tail.map((e) => e.type), "response.created")
      const last = tail.at(-1)!
      assert.strictEqual(last.type, "response.completed")
      if (last.type === "response.completed") {
        assert.strictEqual(last.response.id, id)
        assert.strictEqual(last.response.background, true)
      }
      const [, resumed] = yield* sim.requestsTo("openai-responses")
      assert.strictEqual(resumed!.path, `/v1/responses/${id}?stream=true&starting_after=${cursor}`)
      assert.strictEqual(resumed!.headers.authorization, "Bearer <redacted>")

      // The stream helper resumes by id too: it replays from response.created and filters at the cursor itself.
      const helper = openai.responses.stream({ response_id: id, starting_after: cursor })
      const emitted: Array<number> = []
      helper.on("event", (event) => emitted.push(event.sequence_number))
      const final = yield* Effect.promise(() => helper.finalResponse())
      assert.deepStrictEqual([final.id, final.status], [id, "completed"])
      assert.deepStrictEqual(emitted, tail.map((e) => e.sequence_number))

      // retrieve(id) without stream polls: the response object, with output_text added by the client.
      const polled = yield* Effect.promise(() => openai.responses.retrieve(id))
      assert.strictEqual(polled.status, "completed")
      assert.isAbove(polled.output.length, 0)
    }))

  test("cancel(id) cancels a running response, again is the same, a finished one is a BadRequestError", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, { reply: { text }, background: { inProgressPolls: 1 } })
      const openai = client(sim)
      const events = yield* collect(
        yield* Effect.promise(() =>
          openai.responses.create({ model: "gpt-sim", input: "hi", background: true, stream: true })
        )
      )
      const id = events[0]!.type === "response.created" ? events[0]!.response.id : ""
      const cancelled = yield* Effect.promise(() => openai.responses.cancel(id))
      assert.deepStrictEqual([cancelled.id, cancelled.status], [id, "cancelled"])
      assert.strictEqual((yield* Effect.promise(() => openai.responses.cancel(id))).status, "cancelled")
      assert.strictEqual((yield* sim.backgroundResponse(id))?.cancels, 2)

      yield* responses(sim, { reply: { text } })
      const done = yield* collect(
        yield* Effect.promise(() =>
          openai.responses.create({ model: "gpt-sim", input: "hi", background: true, stream: true })
        )
      )
      const finished = done[0]!.type === "response.created" ? done[0]!.response.id : ""
      const refused = yield* rejection(() => openai.responses.cancel(finished))
      assert.instanceOf(refused, OpenAI.BadRequestError)
      assert.match(
        (refused as InstanceType<typeof OpenAI.BadRequestError>).message,
        /Cannot cancel a completed response\./
      )
      assert.instanceOf(yield* rejection(() => openai.responses.cancel("resp_nope")), OpenAI.NotFoundError)
    }))

  test("retrieve of a response too old to stream is a BadRequestError naming it; unknown ids a NotFoundError", (sim) =>
    Effect.gen(function*() {
      yield* responses(sim, { reply: { text }, background: { streamForMs: 0 } })
      const openai = client(sim)
      const events = yield* collect(
        yield* Effect.promise(() =>
          openai.responses.create({ model: "gpt-sim", input: "hi", background: true, stream: true })
        )
      )
      const id = events[0]!.type === "response.created" ? events[0]!.response.id : ""
      const old = yield* rejection(() => openai.responses.retrieve(id, { stream: true, starting_after: 3 }))
      assert.instanceOf(old, OpenAI.BadRequestError)
      assert.match((old as InstanceType<typeof OpenAI.BadRequestError>).message, /no longer be streamed/)
      assert.instanceOf(
        yield* rejection(() => openai.responses.retrieve("resp_nope", { stream: true, starting_after: 3 })),
        OpenAI.NotFoundError
      )
    }))
})
