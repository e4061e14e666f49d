/**
 * resume: a cut background response of the Responses API continues as the same response (`Resumption`) instead of
 * being regenerated, through the real provider layer and undici against the loopback simulator's background
 * responses. For every cut point of recorded captures, the committed reply equals the uncut one and the previews
 * never show a character twice; a gap and a duplicate; a resume checked at its terminal against the response's output
 * (a hole or a repeated prefix is replayed, a skipped tail completed); an expired response (the poll fallback surfaces
 * the suffix only); a refused resume whose poll fails too (then replay); polls that cannot account for the response,
 * against a node:http server (replayed with the budget left); the cancel sent once when recovery gives up
 * or is interrupted; Retry-After on a resume; a tool call of a resumed response run once. Every wait runs under
 * TestClock (the sockets are real, so a test lets them work before it moves the clock).
 */
import { assert, describe, it } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import * as Chat from "@reprise/core/Chat"
import type * as Generation from "@reprise/core/Generation"
import * as Policy from "@reprise/core/Policy"
import * as Recovery from "@reprise/core/Recovery"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Chunk, Duration, Effect, Exit, Fiber, Layer, Option, TestClock } from "effect"
import * as Fs from "node:fs"
import * as Http from "node:http"
import type { AddressInfo } from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { countingTool, provider, recorder } from "./support/chat.js"
import {
  awaitSleepUntil,
  committed,
  failure,
  type Notification,
  ofTag,
  type Outcome,
  script,
  settle,
  simulator,
  start,
  when
} from "./support/e2e.js"

const route = "openai-responses" as const
const recordedDir = Path.resolve(
  Path.dirname(fileURLToPath(import.meta.url)),
  "../../shared/fixtures/recorded/openai-responses"
)
const capture = (name: string) => Path.join(recordedDir, name)

const request = (background: boolean): Generation.GenerationRequest => ({
  model: "sim-model",
  messages: [{ role: "user", text: "hello" }],
  ...(background ? { background: true } : {})
})

const text = "A long answer that survives two dropped connections, word after word, to its very end."

/** TestClock backoff: 10 ms, doubling, at most 40 ms, no jitter. */
const testPolicy = Policy.layer({ backoffBase: Duration.millis(10), backoffMax: Duration.millis(40), jitter: false })

const counts = Effect.gen(function*() {
  const sim = yield* Simulator.Simulator
  return {
    send: yield* sim.count(route, "send"),
    resume: yield* sim.count(route, "resume"),
    poll: yield* sim.count(route, "poll"),
    cancel: yield* sim.count(route, "cancel")
  }
})

/** Every text preview, in order, across attempts: what a consumer that keeps resumed previews has shown. */
const shown = (notes: ReadonlyArray<Notification>): string => {
  let out = ""
  for (const n of notes) {
    if (n._tag === "AttemptDiscarded") out = out.slice(0, out.length - n.discardedText.length)
    if (n._tag === "Preview" && n.event._tag === "TextDelta") out += n.event.text
  }
  return out
}

/** The parts of a reply a resume must not change. */
const essence = (reply: Generation.Reply) => ({
  text: reply.text,
  toolCalls: reply.toolCalls,
  finishReason: reply.finishReason,
  reasoningParts: reply.reasoningParts,
  usage: reply.usage
})

/** The chunk lines of a capture (one JSON event each). */
const chunks = (name: string): Array<Record<string, any>> =>
  Fs.readFileSync(capture(name), "utf8").split("\n").filter((line) => line.trim().length > 0).map((line) =>
    JSON.parse(line)
  )

/** Events of a capture through its first terminal (what a background response keeps). */
const eventsOf = (name: string) => {
  const all = chunks(name)
  const terminal = all.findIndex((e) =>
    ["response.completed", "response.incomplete", "response.failed", "response.done"].includes(e.type)
  )
  return terminal === -1 ? all : all.slice(0, terminal + 1)
}

const sse = (events: ReadonlyArray<Record<string, unknown>>): string =>
  events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join("")

const sseStep = (body: string): SimulatorScript.Step => ({
  kind: "status",
  status: 200,
  headers: { "content-type": "text/event-stream" },
  body
})

/**
 * A numbered background reply of `words` in the chunk format, written to a temporary file: `response.created` (0), one
 * text delta per word (1 …), and `response.completed` whose output holds the whole text.
 */
const wordsReply = (words: ReadonlyArray<string>) => {
  const response = { id: "resp_words", object: "response", status: "in_progress", output: [] }
  const text = words.join("")
  const message = {
    id: "msg_words",
    type: "message",
    role: "assistant",
    status: "completed",
    content: [{ type: "output_text", text, annotations: [] }]
  }
  const events: Array<Record<string, unknown>> = [
    { type: "response.created", sequence_number: 0, response },
    ...words.map((delta, i) => ({
      type: "response.output_text.delta",
      sequence_number: i + 1,
      item_id: "msg_words",
      output_index: 0,
      content_index: 0,
      delta
    })),
    {
      type: "response.completed",
      sequence_number: words.length + 1,
      response: { ...response, status: "completed", output: [message] }
    }
  ]
  const file = Path.join(Fs.mkdtempSync(Path.join(Os.tmpdir(), "reprise-resume-")), "words.chunks.txt")
  Fs.writeFileSync(file, events.map((e) => JSON.stringify(e)).join("\n"))
  return { file, events, text }
}

const run = (options: Parameters<typeof start>[1]) => Effect.flatMap(start(route, options), (started) => started.run)

/**
 * Under TestClock: runs one reply, passing each backoff of the test policy (10 ms, 20 ms, …) as the recovery loop
 * reaches it, and returns its outcome. Only a sleep ending exactly one backoff from now is passed: the timeouts'
 * sleeps (a minute away) never are.
 */
const drive = <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const fiber = yield* Effect.fork(self)
    let backoff = 10
    for (let i = 0; i < 10_000; i++) {
      const done = yield* Fiber.poll(fiber)
      if (Option.isSome(done)) return yield* Fiber.join(fiber)
      const now = yield* TestClock.currentTimeMillis
      if (Chunk.some(yield* TestClock.sleeps(), (at) => at === now + backoff)) {
        yield* TestClock.adjust(Duration.millis(backoff))
        backoff = Math.min(backoff * 2, 40)
      } else {
        yield* settle
      }
    }
    return assert.fail("the reply neither ended nor reached a backoff")
  })

const driven = (options: Parameters<typeof start>[1]) => drive(run(options))

describe("every cut point of a recorded capture", () => {
  // Every cut of two captures (text with reasoning items and function calls; a multi-turn shell run with hosted
  // tools), and of each other capture: none, after response.created, in the middle, and the one before the terminal.
  const full = new Set([
    "openai-reasoning-encrypted-content.1.chunks.txt",
    "openai-shell-container-multiturn.1.chunks.txt"
  ])
  const names = Fs.readdirSync(recordedDir).filter((name) => name.endsWith(".chunks.txt")).sort()

  for (const name of names) {
    it.effect(`${name}: cut, resume, the uncut reply`, () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        const events = eventsOf(name)
        yield* script(route, { reply: { fixture: capture(name) } })
        const uncut = committed(yield* driven({ request: request(true) }))
        const cuts = full.has(name)
          ? Array.from({ length: events.length + 1 }, (_, n) => n)
          : [...new Set([0, 1, Math.floor(events.length / 2), events.length - 1])]
        for (const n of cuts) {
          yield* sim.setScript({
            routes: { [route]: { reply: { fixture: capture(name) }, steps: [{ kind: "reset", afterEvents: n }] } }
          })
          const outcome = yield* driven({ request: request(true) })
          const reply = committed(outcome)
          const label = `${name}, cut after ${n} of ${events.length} events`
          assert.deepStrictEqual(essence(reply), essence(uncut), label)
          assert.strictEqual(shown(outcome.notes), uncut.text, `${label}: the previews, as shown`)
          const sent = yield* counts
          if (n === 0) {
            // nothing arrived, not even the response's id: replayed as a new response
            assert.deepStrictEqual(sent, { send: 2, resume: 0, poll: 0, cancel: 0 }, label)
            assert.strictEqual(reply.attempts, 2, label)
          } else if (n === events.length) {
            // the terminal arrived before the reset
            assert.deepStrictEqual(sent, { send: 1, resume: 0, poll: 0, cancel: 0 }, label)
          } else {
            assert.deepStrictEqual(sent, { send: 1, resume: 1, poll: 0, cancel: 0 }, label)
            assert.strictEqual(reply.attempts, 2, label)
            assert.strictEqual(ofTag(outcome.notes, "AttemptDiscarded").length, 0, label)
            const [send, resume] = yield* sim.requestsTo(route)
            const id = send!.responseId!
            const [resumed] = ofTag(outcome.notes, "AttemptResumed")
            assert.deepStrictEqual([resumed?.attempt, resumed?.responseId, resumed?.mode], [2, id, "stream"], label)
            // the cursor is the last event that arrived: the cut's, or one before it when the reset (a TCP RST)
            // dropped bytes the client had not read yet
            const cursor = resumed!.fromSequence
            assert.isAtMost(cursor, events[n - 1]!.sequence_number, label)
            assert.isAtLeast(cursor, 0, label)
            assert.strictEqual(resume?.path, `/v1/responses/${id}?stream=true&starting_after=${cursor}`, label)
          }
        }
      }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)), 60_000)
  }

  it.effect("events without sequence numbers: nothing to resume from, replayed", () =>
    Effect.gen(function*() {
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "reprise-resume-"))
      const unnumbered = Path.join(dir, "unnumbered.chunks.txt")
      const response = { id: "resp_x", object: "response", status: "in_progress", output: [] }
      Fs.writeFileSync(
        unnumbered,
        [
          { type: "response.created", response },
          { type: "response.output_text.delta", delta: "No numbers " },
          { type: "response.output_text.delta", delta: "here." },
          { type: "response.completed", response: { ...response, status: "completed" } }
        ].map((e) => JSON.stringify(e)).join("\n")
      )
      yield* script(route, { reply: { fixture: unnumbered }, steps: [{ kind: "reset", afterEvents: 2 }] })
      const outcome = yield* driven({ request: request(true) })
      assert.strictEqual(committed(outcome).text, "No numbers here.")
      assert.deepStrictEqual(yield* counts, { send: 2, resume: 0, poll: 0, cancel: 1 })
      assert.strictEqual(ofTag(outcome.notes, "AttemptDiscarded").length, 1)
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))

  it.effect("a cut inside an event: the cursor is the last whole event", () =>
    Effect.gen(function*() {
      yield* script(route, { reply: { text }, steps: [{ kind: "reset", afterBytes: 1500 }] })
      const outcome = yield* driven({ request: request(true) })
      assert.strictEqual(committed(outcome).text, text)
      assert.strictEqual(shown(outcome.notes), text)
      assert.deepStrictEqual(yield* counts, { send: 1, resume: 1, poll: 0, cancel: 0 })
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))
})

describe("the resumed stream must continue the cursor", () => {
  const name = "openai-shell-container-multiturn.1.chunks.txt"
  const events = eventsOf(name)
  const cut = 8
  const cursor = events[cut - 1]!.sequence_number as number

  it.effect("a duplicate: events at or before the cursor are dropped, nothing is shown twice", () =>
    Effect.gen(function*() {
      // a server that serves the resume from three events before the cursor
      yield* script(route, {
        reply: { fixture: capture(name) },
        steps: [{ kind: "reset", afterEvents: cut }],
        resume: { steps: [sseStep(sse(events.slice(cut - 3)))] }
      })
      const uncut = events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("")
      const outcome = yield* driven({ request: request(true) })
      assert.strictEqual(committed(outcome).text, uncut)
      assert.strictEqual(shown(outcome.notes), uncut)
      assert.deepStrictEqual(yield* counts, { send: 1, resume: 1, poll: 0, cancel: 0 })
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))

  it.effect("[DONE] before the terminal on a resume: a premature end like any other, resumed again", () =>
    Effect.gen(function*() {
      const name = "openai-shell-container-multiturn.1.chunks.txt"
      const events = eventsOf(name)
      yield* script(route, {
        reply: { fixture: capture(name) },
        steps: [{ kind: "reset", afterEvents: 5 }],
        resume: { steps: [sseStep(sse(events.slice(5, 9)) + "data: [DONE]\n\n")] }
      })
      const uncut = events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("")
      const outcome = yield* driven({ request: request(true) })
      assert.strictEqual(committed(outcome).text, uncut)
      assert.strictEqual(shown(outcome.notes), uncut)
      assert.deepStrictEqual(yield* counts, { send: 1, resume: 2, poll: 0, cancel: 0 })
      const resumes = (yield* (yield* Simulator.Simulator).requestsTo(route)).filter((r) => r.kind === "resume")
      assert.deepStrictEqual(resumes.map((r) => r.path.split("starting_after=")[1]), [
        String(events[4]!.sequence_number),
        String(events[8]!.sequence_number)
      ])
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))

  it.effect("a gap: a typed failure of that resume, then a poll that adds the suffix only", () =>
    Effect.gen(function*() {
      // the resume skips two events after the cursor
      yield* script(route, {
        reply: { text },
        steps: [{ kind: "reset", afterEvents: 6 }],
        resume: {
          steps: [sseStep(sse([{ type: "response.output_text.delta", sequence_number: 8, delta: "??" }]))]
        }
      })
      const outcome = yield* driven({ request: request(true) })
      const reply = committed(outcome)
      assert.strictEqual(reply.text, text)
      assert.strictEqual(shown(outcome.notes), text)
      assert.deepStrictEqual(yield* counts, { send: 1, resume: 1, poll: 1, cancel: 0 })
      const retries = ofTag(outcome.notes, "RetryScheduled")
      assert.deepStrictEqual(retries.map((r) => r.resume?.mode), ["stream", "poll"])
      const gap = retries[1]!.resume!.error as any
      assert.strictEqual(gap._tag, "TransportError")
      assert.strictEqual(gap.reason, "ResumeGap")
      assert.match(gap.message, /began with event 8, not event 6/)
      assert.deepStrictEqual(ofTag(outcome.notes, "AttemptResumed").map((r) => [r.attempt, r.mode]), [
        [2, "stream"],
        [3, "poll"]
      ])
      assert.strictEqual(reply.attempts, 3)
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))
})

describe("the terminal's output checks what a resume surfaced", () => {
  const words = ["Alpha ", "beta ", "gamma ", "delta ", "epsilon."]

  it.effect("a resume that skips an event after its first: a hole is never committed, the response is replayed", () =>
    Effect.gen(function*() {
      const { events, file, text } = wordsReply(words)
      // cut after "Alpha " (cursor 1); the resume continues at 2 as it must, then skips "gamma " (3)
      yield* script(route, {
        reply: { fixture: file },
        steps: [{ kind: "eof", afterEvents: 2 }],
        resume: { steps: [sseStep(sse([events[2]!, events[4]!, events[5]!, events[6]!]))] }
      })
      const outcome = yield* driven({ request: request(true) })
      const reply = committed(outcome)
      assert.strictEqual(reply.text, text)
      assert.strictEqual(shown(outcome.notes), text)
      // the ended response is not polled or cancelled: a new send
      assert.deepStrictEqual(yield* counts, { send: 2, resume: 1, poll: 0, cancel: 0 })
      const [discarded] = ofTag(outcome.notes, "AttemptDiscarded")
      assert.strictEqual(discarded?.attempt, 2)
      assert.strictEqual(discarded?.discardedText, "Alpha beta delta epsilon.")
      assert.strictEqual((discarded?.error as any).reason, "ResumeGap")
      assert.match((discarded?.error as any).message, /final text \(31 characters\) does not begin with the 25/)
      assert.strictEqual(reply.attempts, 3)
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))

  it.effect("a server that ignores starting_after and numbers from the cursor: no repeated prefix is committed", () =>
    Effect.gen(function*() {
      const { events, file, text } = wordsReply(words)
      // cut after "gamma " (cursor 3); the resume sends the whole response again, numbered from 4
      yield* script(route, {
        reply: { fixture: file },
        steps: [{ kind: "eof", afterEvents: 4 }],
        resume: { steps: [sseStep(sse(events.map((e, i) => ({ ...e, sequence_number: 4 + i }))))] }
      })
      const outcome = yield* driven({ request: request(true) })
      const reply = committed(outcome)
      assert.strictEqual(reply.text, text)
      assert.strictEqual(shown(outcome.notes), text)
      assert.deepStrictEqual(yield* counts, { send: 2, resume: 1, poll: 0, cancel: 0 })
      const [discarded] = ofTag(outcome.notes, "AttemptDiscarded")
      assert.strictEqual(discarded?.discardedText, "Alpha beta gamma Alpha beta gamma delta epsilon.")
      assert.strictEqual((discarded?.error as any).reason, "ResumeGap")
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))

  it.effect("a resume that skips the last text events: the terminal's output supplies only the rest", () =>
    Effect.gen(function*() {
      const { events, file, text } = wordsReply(words)
      // cut after "Alpha " (cursor 1); the resume sends "beta " and "gamma ", then the terminal
      yield* script(route, {
        reply: { fixture: file },
        steps: [{ kind: "eof", afterEvents: 2 }],
        resume: { steps: [sseStep(sse([events[2]!, events[3]!, events[6]!]))] }
      })
      const outcome = yield* driven({ request: request(true) })
      const reply = committed(outcome)
      assert.strictEqual(reply.text, text)
      assert.strictEqual(shown(outcome.notes), text)
      assert.deepStrictEqual(yield* counts, { send: 1, resume: 1, poll: 0, cancel: 0 })
      assert.strictEqual(ofTag(outcome.notes, "AttemptDiscarded").length, 0)
      const resumed = ofTag(outcome.notes, "Preview").filter((p) => p.attempt === 2 && p.event._tag === "TextDelta")
        .map((p) => (p.event as any).text)
      assert.deepStrictEqual(resumed, ["beta ", "gamma ", "delta epsilon."])
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))
})

describe("the poll fallback", () => {
  it.effect("an expired response: the resume's 400, then polls every second until it is done; only the suffix is surfaced", () =>
    Effect.gen(function*() {
      yield* script(route, {
        reply: { text },
        steps: [{ kind: "reset", afterEvents: 7 }],
        background: { streamForMs: 0, inProgressPolls: 2 }
      })
      const { notes, run: generation } = yield* start(route, { request: request(true) })
      const fiber = yield* Effect.fork(generation)
      yield* awaitSleepUntil(10) // the backoff before the resume
      yield* TestClock.adjust("10 millis")
      yield* awaitSleepUntil(1010) // refused: the poll at once, in progress: the next one a second later
      yield* TestClock.adjust("1 second")
      yield* awaitSleepUntil(2010)
      yield* TestClock.adjust("1 second")
      const outcome = yield* Fiber.join(fiber)
      const reply = committed(outcome)
      assert.strictEqual(reply.text, text)
      assert.strictEqual(shown(notes), text)
      assert.deepStrictEqual(yield* counts, { send: 1, resume: 1, poll: 3, cancel: 0 })
      // one send, one resume, one poll (its first GET) were debited; the two later polls were not
      assert.strictEqual(reply.attempts, 3)
      const retries = ofTag(notes, "RetryScheduled")
      assert.deepStrictEqual(retries.map((r) => [Duration.toMillis(r.delay), r.resume?.mode]), [[10, "stream"], [
        0,
        "poll"
      ]])
      const refusal = retries[1]!.resume!.error as any
      assert.strictEqual(refusal.status, 400)
      assert.match(refusal.message, /can no longer be streamed/)
      // the poll's previews are exactly what the response adds to what the cut stream had shown
      const before = ofTag(notes, "Preview").filter((p) => p.attempt === 1 && p.event._tag === "TextDelta")
        .map((p) => (p.event as any).text).join("")
      const polled = ofTag(notes, "Preview").filter((p) => p.attempt === 3 && p.event._tag === "TextDelta")
        .map((p) => (p.event as any).text)
      assert.isAbove(before.length, 0)
      assert.deepStrictEqual(polled, [text.slice(before.length)])
      assert.strictEqual(ofTag(notes, "AttemptDiscarded").length, 0)
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))

  it.effect("the budget's last send polls instead of streaming again", () =>
    Effect.gen(function*() {
      yield* script(route, { reply: { text }, steps: [{ kind: "reset", afterEvents: 5 }] })
      const outcome = yield* drive(
        run({ request: request(true) }).pipe(Effect.provide(Budget.layer({ maxAttempts: 2 })))
      )
      assert.strictEqual(committed(outcome).text, text)
      assert.deepStrictEqual(yield* counts, { send: 1, resume: 0, poll: 1, cancel: 0 })
      assert.deepStrictEqual(ofTag(outcome.notes, "AttemptResumed").map((r) => r.mode), ["poll"])
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))

  it.effect("a refused resume whose poll fails too: the attempt is discarded and replayed as a new response", () =>
    Effect.gen(function*() {
      // a response that failed on the server: the cut stream never showed it; the poll does
      const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "reprise-resume-"))
      const failed = Path.join(dir, "failed.chunks.txt")
      const response = { id: "resp_x", object: "response", status: "in_progress", output: [] }
      Fs.writeFileSync(
        failed,
        [
          { type: "response.created", sequence_number: 0, response },
          { type: "response.output_text.delta", sequence_number: 1, delta: "Half an ans" },
          { type: "response.output_text.delta", sequence_number: 2, delta: "wer that " },
          { type: "response.output_text.delta", sequence_number: 3, delta: "never ends." },
          {
            type: "response.failed",
            sequence_number: 4,
            response: {
              ...response,
              status: "failed",
              error: { code: "server_error", message: "The server had an error." }
            }
          }
        ].map((e) => JSON.stringify(e)).join("\n")
      )
      yield* script(route, {
        steps: [
          { kind: "reset", afterEvents: 3, reply: { fixture: failed } },
          { kind: "stream", reply: { text } }
        ],
        resume: { steps: [{ kind: "status", status: 404 }] }
      })
      const outcome = yield* driven({ request: request(true) })
      const reply = committed(outcome)
      assert.strictEqual(reply.text, text)
      assert.strictEqual(shown(outcome.notes), text)
      // the failed response is over on the server: nothing to cancel
      assert.deepStrictEqual(yield* counts, { send: 2, resume: 1, poll: 1, cancel: 0 })
      const [discarded] = ofTag(outcome.notes, "AttemptDiscarded")
      assert.strictEqual(discarded?.attempt, 3)
      assert.strictEqual(discarded?.discardedText, "Half an answer that ")
      assert.strictEqual((discarded?.error as any).providerCode, "server_error")
      const sends = (yield* (yield* Simulator.Simulator).requestsTo(route)).filter((r) => r.kind === "send")
      assert.deepStrictEqual(sends.map((r) => r.responseId), ["resp_sim_1", "resp_sim_4"])
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))
})

/**
 * A background server of its own (node:http, 127.0.0.1) whose polls answer `poll`: its first send is cut after
 * "Alpha beta " (a clean end without the terminal), every resume is the API's 400 for a response too old to stream,
 * so the next attempt polls; a later send is a new response, "Replayed answer.". `requests` lists each request's
 * method and URL.
 */
const pollServer = (poll: { readonly status: number; readonly body: string }) =>
  Effect.acquireRelease(
    Effect.async<{ readonly baseUrl: string; readonly requests: Array<string>; readonly server: Http.Server }>(
      (resume) => {
        const requests: Array<string> = []
        const json = (res: Http.ServerResponse, status: number, body: string) => {
          res.writeHead(status, { "content-type": "application/json" })
          res.end(body)
        }
        const server = Http.createServer((req, res) => {
          requests.push(`${req.method} ${req.url}`)
          req.resume()
          req.on("end", () => {
            const url = req.url ?? ""
            if (req.method === "POST" && url === "/v1/responses") {
              const first = requests.filter((r) => r === "POST /v1/responses").length === 1
              const id = first ? "resp_cut" : "resp_new"
              const response = { id, object: "response", status: "in_progress", output: [] }
              const deltas = first ? ["Alpha ", "beta "] : ["Replayed answer."]
              const events: Array<Record<string, unknown>> = [
                { type: "response.created", sequence_number: 0, response },
                ...deltas.map((delta, i) => ({ type: "response.output_text.delta", sequence_number: i + 1, delta }))
              ]
              if (!first) {
                const content = [{ type: "output_text", text: deltas.join("") }]
                events.push({
                  type: "response.completed",
                  sequence_number: deltas.length + 1,
                  response: { ...response, status: "completed", output: [{ type: "message", content }] }
                })
              }
              res.writeHead(200, { "content-type": "text/event-stream" })
              res.end(sse(events))
            } else if (req.method === "GET" && url.startsWith("/v1/responses/resp_cut?stream=true")) {
              json(
                res,
                400,
                JSON.stringify({
                  error: {
                    message: "This response can no longer be streamed because it is more than 5 minutes old.",
                    type: "invalid_request_error",
                    param: null,
                    code: null
                  }
                })
              )
            } else if (req.method === "GET" && url === "/v1/responses/resp_cut") {
              json(res, poll.status, poll.body)
            } else if (req.method === "POST" && url === "/v1/responses/resp_cut/cancel") {
              json(res, 200, JSON.stringify({ id: "resp_cut", object: "response", status: "cancelled", output: [] }))
            } else {
              json(res, 404, JSON.stringify({ error: { message: "no such route", type: "invalid_request_error" } }))
            }
          })
        })
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as AddressInfo
          resume(Effect.succeed({ baseUrl: `http://127.0.0.1:${port}/v1`, requests, server }))
        })
      }
    ),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

describe("a poll that cannot account for the response: the attempt is replayed with the budget left", () => {
  const message = (text: string) => [{ type: "message", content: [{ type: "output_text", text }] }]
  const cases: ReadonlyArray<{
    readonly name: string
    readonly poll: { readonly status: number; readonly body: string }
    readonly cancelled: boolean
    readonly because: RegExp
  }> = [
    {
      name: "a 404 after an expired resume (the response is gone: nothing to cancel)",
      poll: {
        status: 404,
        body: JSON.stringify({
          error: { message: "Response with id 'resp_cut' not found.", type: "invalid_request_error", code: null }
        })
      },
      cancelled: false,
      because: /the poll of the response was refused \(.*404/
    },
    {
      name: "a status the API does not define is not taken as completed",
      poll: {
        status: 200,
        body: JSON.stringify({ id: "resp_cut", status: "paused", output: message("Alpha beta gamma.") })
      },
      cancelled: true,
      because: /answered a status the API does not define/
    },
    {
      name: "another response's object",
      poll: {
        status: 200,
        body: JSON.stringify({ id: "resp_other", status: "completed", output: message("Alpha beta OTHER.") })
      },
      cancelled: true,
      because: /answered another response's object/
    },
    {
      name: "an object that does not decode",
      poll: { status: 200, body: "{\"id\": \"resp_cut\", \"status\": " },
      cancelled: true,
      because: /answered an object that does not decode/
    }
  ]

  for (const c of cases) {
    it.scoped(c.name, () =>
      Effect.gen(function*() {
        const server = yield* pollServer(c.poll)
        const outcome = yield* driven({ request: request(true), provider: { baseUrl: server.baseUrl } })
        const reply = committed(outcome)
        assert.strictEqual(reply.text, "Replayed answer.")
        assert.strictEqual(shown(outcome.notes), "Replayed answer.")
        assert.deepStrictEqual(server.requests.filter((r) => !r.endsWith("/cancel")), [
          "POST /v1/responses",
          "GET /v1/responses/resp_cut?stream=true&starting_after=2",
          "GET /v1/responses/resp_cut",
          "POST /v1/responses"
        ])
        assert.strictEqual(server.requests.includes("POST /v1/responses/resp_cut/cancel"), c.cancelled)
        // the send, the resume, the poll and the replay, each debited
        assert.strictEqual(reply.attempts, 4)
        const [discarded] = ofTag(outcome.notes, "AttemptDiscarded")
        assert.strictEqual(discarded?.attempt, 3)
        assert.strictEqual(discarded?.discardedText, "Alpha beta ")
        assert.strictEqual((discarded?.error as any)._tag, "TransportError")
        assert.strictEqual((discarded?.error as any).reason, "ResumeGap")
        assert.match((discarded?.error as any).message, c.because)
      }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))
  }
})

describe("giving up cancels the response, once", () => {
  it.effect("interrupted while streaming: exactly one cancel, not debited", () =>
    Effect.gen(function*() {
      // still running on the server (its polls see it in progress), so the cancel succeeds
      yield* script(route, {
        reply: { text },
        steps: [{ kind: "stall", afterEvents: 6 }],
        background: { inProgressPolls: 1000 }
      })
      const previews = yield* when((n) => (n._tag === "Preview" && n.event._tag === "TextDelta" ? n : undefined))
      const { notes, run: generation } = yield* start(route, {
        request: request(true),
        onNotification: previews.onNotification
      })
      const fiber = yield* Effect.fork(generation)
      yield* previews.await
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(yield* counts, { send: 1, resume: 0, poll: 0, cancel: 1 })
      const cancelled = ofTag(notes, "ResponseCancelled")
      assert.deepStrictEqual(cancelled.map((c) => [c.responseId, c.error === undefined]), [["resp_sim_1", true]])
      const response = yield* (yield* Simulator.Simulator).backgroundResponse("resp_sim_1")
      assert.strictEqual(response?.status, "cancelled")
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))

  it.effect("the deadline ends the polls: exhausted, and the response cancelled once", () =>
    Effect.gen(function*() {
      yield* script(route, {
        reply: { text },
        steps: [{ kind: "reset", afterEvents: 5 }],
        background: { inProgressPolls: 1000 }
      })
      // 2 attempts: the last one polls; the next poll (1 s later) would end past the 300 ms deadline
      const outcome = yield* drive(
        run({ request: request(true) }).pipe(
          Effect.provide(Budget.layer({ maxAttempts: 2, deadline: Duration.millis(300) }))
        )
      )
      assert.strictEqual(failure(outcome)._tag, "RecoveryExhausted")
      assert.strictEqual(failure(outcome).reason, "Deadline")
      assert.deepStrictEqual(yield* counts, { send: 1, resume: 0, poll: 1, cancel: 1 })
      assert.deepStrictEqual(
        ofTag(outcome.notes, "ResponseCancelled").map((c) => [c.responseId, c.error === undefined]),
        [["resp_sim_1", true]]
      )
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))

  it.effect("a response whose id never arrived cannot be cancelled: exhausted without a cancel", () =>
    Effect.gen(function*() {
      yield* script(route, { reply: { text }, steps: [{ kind: "reset" }] })
      const outcome = yield* drive(
        run({ request: request(true) }).pipe(Effect.provide(Budget.layer({ maxAttempts: 1 })))
      )
      assert.strictEqual(failure(outcome).reason, "Attempts")
      assert.deepStrictEqual(yield* counts, { send: 1, resume: 0, poll: 0, cancel: 0 })
      assert.strictEqual(ofTag(outcome.notes, "ResponseCancelled").length, 0)
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))

  it.effect("a permanent failure of a resume (401): surfaced, and the response cancelled once", () =>
    Effect.gen(function*() {
      yield* script(route, {
        reply: { text },
        steps: [{ kind: "reset", afterEvents: 5 }],
        resume: { steps: [{ kind: "status", status: 401 }] },
        background: { inProgressPolls: 1000 }
      })
      const outcome = yield* driven({ request: request(true) })
      assert.strictEqual(failure(outcome)._tag, "ProviderRejection")
      assert.strictEqual(failure(outcome).status, 401)
      assert.deepStrictEqual(yield* counts, { send: 1, resume: 1, poll: 0, cancel: 1 })
      assert.deepStrictEqual(ofTag(outcome.notes, "ResponseCancelled").map((c) => c.error === undefined), [true])
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))
})

describe("waits of a resume", () => {
  it.effect("Retry-After on a resume: the next resume waits exactly the server's 2 s", () =>
    Effect.gen(function*() {
      yield* script(route, {
        reply: { text },
        steps: [{ kind: "reset", afterEvents: 5 }],
        resume: { steps: [{ kind: "status", status: 429, headers: { "retry-after": "2" } }] }
      })
      const { notes, run: generation } = yield* start(route, { request: request(true) })
      const fiber = yield* Effect.fork(generation)
      yield* awaitSleepUntil(10)
      yield* TestClock.adjust("10 millis")
      yield* awaitSleepUntil(2010)
      yield* TestClock.adjust("2 seconds")
      const outcome = yield* Fiber.join(fiber)
      assert.strictEqual(committed(outcome).text, text)
      assert.strictEqual(shown(notes), text)
      assert.deepStrictEqual(
        ofTag(notes, "RetryScheduled").map((r) => [Duration.toMillis(r.delay), r.delaySource, r.resume?.mode]),
        [[10, "backoff", "stream"], [2000, "retry-after", "stream"]]
      )
      assert.deepStrictEqual(yield* counts, { send: 1, resume: 2, poll: 0, cancel: 0 })
      const resumes = (yield* (yield* Simulator.Simulator).requestsTo(route)).filter((r) => r.kind === "resume")
      assert.deepStrictEqual(resumes.map((r) => r.path), [
        "/v1/responses/resp_sim_1?stream=true&starting_after=4",
        "/v1/responses/resp_sim_1?stream=true&starting_after=4"
      ])
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))

  it.effect("a resume is debited: with 3 attempts, the send, a resume cut again, and the last send a poll", () =>
    Effect.gen(function*() {
      yield* script(route, {
        reply: { text },
        steps: [{ kind: "reset", afterEvents: 5 }],
        resume: { steps: [{ kind: "reset", afterEvents: 2 }] }
      })
      const { run: generation } = yield* start(route, { request: request(true) })
      const fiber = yield* Effect.fork(generation.pipe(Effect.provide(Budget.layer({ maxAttempts: 3 }))))
      yield* awaitSleepUntil(10)
      yield* TestClock.adjust("10 millis")
      yield* awaitSleepUntil(30)
      yield* TestClock.adjust("20 millis")
      const outcome = yield* Fiber.join(fiber)
      // 3 sends: the send, a resume cut after 2 events, and the last send as a poll (which finds it done)
      assert.strictEqual(committed(outcome).text, text)
      assert.deepStrictEqual(yield* counts, { send: 1, resume: 1, poll: 1, cancel: 0 })
      assert.strictEqual(committed(outcome).attempts, 3)
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))
})

describe("hooks and tools", () => {
  it.effect("a chunk hook's effects do not block a resume: nothing it saw is shown again", () =>
    Effect.gen(function*() {
      yield* script(route, { reply: { text }, steps: [{ kind: "reset", afterEvents: 9 }] })
      let seen = ""
      const sim = yield* Simulator.Simulator
      const reply = yield* drive(
        Recovery.generate(request(true), {
          hooks: {
            onChunk: (event) => Effect.sync(() => (seen += event._tag === "TextDelta" ? event.text : ""))
          }
        }).pipe(Effect.provide(provider(sim, route)))
      )
      assert.strictEqual(reply.text, text)
      assert.strictEqual(seen, text)
      assert.deepStrictEqual(yield* counts, { send: 1, resume: 1, poll: 0, cancel: 0 })
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))

  it.effect("a tool call of a resumed response runs once, with the arguments the server completed", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      const reply: SimulatorScript.Reply = {
        text: "Recording it now.",
        toolCalls: [{ name: "record", arguments: { line: "a line that is long enough to be cut in two" } }],
        deltaSize: 4
      }
      // find an event inside the call's arguments
      yield* script(route, { reply })
      const body = yield* Effect.promise(() =>
        fetch(sim.baseUrl(route) + "/responses", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "m", stream: true, background: true })
        }).then((r) => r.text())
      )
      const types = body.split("\n\n").flatMap((block) =>
        block.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)).type as string)
      )
      const firstArgs = types.indexOf("response.function_call_arguments.delta")
      assert.isAbove(firstArgs, 0)
      yield* sim.setScript({
        routes: {
          [route]: {
            steps: [{ kind: "reset", afterEvents: firstArgs + 2, reply }, { kind: "stream", reply: { text: "Done." } }]
          }
        }
      })
      const counting = countingTool()
      const notes = recorder()
      const result = yield* drive(
        Chat.step([{ role: "user", text: "Please record a line." }], { model: "chat-model", background: true }).pipe(
          Effect.provide(Layer.mergeAll(provider(sim, route), testPolicy, notes.layer, counting.layer))
        )
      )
      assert.strictEqual(result.reply.text, "Done.")
      assert.deepStrictEqual(counting.calls, ["a line that is long enough to be cut in two"])
      assert.strictEqual(notes.of("AttemptResumed").length, 1)
      assert.strictEqual(notes.of("AttemptDiscarded").length, 0)
      assert.deepStrictEqual(yield* counts, { send: 2, resume: 1, poll: 0, cancel: 0 })
    }).pipe(Effect.provide(simulator)))
})

describe("without background mode", () => {
  it.effect("the same cut replays, as before: a second send, no resume", () =>
    Effect.gen(function*() {
      yield* script(route, { reply: { text }, steps: [{ kind: "reset", afterEvents: 5 }] })
      const outcome: Outcome = yield* driven({ request: request(false) })
      assert.strictEqual(committed(outcome).text, text)
      assert.deepStrictEqual(yield* counts, { send: 2, resume: 0, poll: 0, cancel: 0 })
      assert.strictEqual(ofTag(outcome.notes, "AttemptDiscarded").length, 1)
      const [send] = yield* (yield* Simulator.Simulator).requestsTo(route)
      assert.notProperty(send?.body as object, "background")
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))

  it.effect("subscription ignores background: no background field, replay", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript({
        routes: { subscription: { reply: { text }, steps: [{ kind: "reset", afterEvents: 5 }] } }
      })
      const outcome = yield* drive(Effect.flatMap(start("subscription", { request: request(true) }), (s) => s.run))
      assert.strictEqual(committed(outcome).text, text)
      const sends = yield* sim.requestsTo("subscription")
      assert.strictEqual(sends.length, 2)
      assert.notProperty(sends[0]?.body as object, "background")
      assert.isFalse(Exit.isFailure(outcome.exit))
    }).pipe(Effect.provide(simulator), Effect.provide(testPolicy)))
})
