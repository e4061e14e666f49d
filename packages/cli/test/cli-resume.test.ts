/**
 * `reprise chat --background` (and `REPRISE_BACKGROUND`): the real binary against the loopback simulator's background
 * responses. A cut `openai-responses` stream is continued from its last event (one send, one resume, the answer once,
 * the notices on stderr, the `retry`/`resume` events with `--json`); without the setting, or on another protocol, it
 * is replayed; a bad value is a usage error; Ctrl-C cancels the response on the server. Then the same on a real
 * terminal (tmux), and the renderer's own handling of a countdown around the resume and cancel notices.
 */
import { afterAll, assert, layer } from "@effect/vitest"
import * as Chat from "@reprise/core/Chat"
import * as Generation from "@reprise/core/Generation"
import { Notification } from "@reprise/core/RecoveryNotifications"
import * as TransportError from "@reprise/core/TransportError"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Duration, Effect, Layer, Option, TestClock } from "effect"
import * as Output from "../src/Output.js"
import * as Render from "../src/Render.js"
import { bin, run, setup, start } from "./support/cli.js"
import * as Tmux from "./support/tmux.js"

// A key shorter than 4 characters is not scrubbed (Sanitize.make), so the renderer holds back none of a preview (it
// holds back the last `key length − 1` characters of a longer key's): the first attempt's deltas are on stdout before
// the cut, and they are exactly the kept preview.
const KEY = "QZ1"
const env = { OPENAI_API_KEY: KEY }
const answer = "A long answer that survives a dropped connection, whole and once."
/** Events the send serves before the socket is reset; the sequence numbers of the generated events start at 0. */
const cut = 8

const chat = (base: string, ...extra: ReadonlyArray<string>) => [
  "chat",
  "--base-url",
  base,
  "--model",
  "m",
  "--backoff-base",
  "1",
  "--backoff-max",
  "2",
  ...extra,
  "go"
]
const responses = (base: string, ...extra: ReadonlyArray<string>) =>
  chat(base, "--provider", "openai-responses", ...extra)

/** The send is reset after {@link cut} events; the resume (and a replayed send) serve the rest, or all of it. */
const cutSend: SimulatorScript.RouteScript = { reply: { text: answer }, steps: [{ kind: "reset", afterEvents: cut }] }

/** {@link setup} on `route`, with the counts of its sends, resumes and cancels and what its first request carried. */
const scripted = (route: SimulatorScript.Route, script: SimulatorScript.RouteScript) =>
  Effect.map(setup(script, route), ({ base, sim }) => {
    const requests = sim.requestsTo(route)
    return {
      sim,
      base,
      sends: sim.count(route, "send"),
      resumes: sim.count(route, "resume"),
      cancels: sim.count(route, "cancel"),
      firstBody: Effect.map(requests, (all) => all[0]?.body as Record<string, unknown> | undefined),
      responseId: Effect.map(requests, (all) => all[0]?.responseId)
    }
  })

const failedLine = /^reprise: attempt 1\/11 failed \(connection reset\); kept (\d+) chars; resuming in 0\.0s$/
const resumedLine = (id: string) => `reprise: attempt 2/11 resumed response ${id} after event ${cut - 1}`

layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(30) })(
  "reprise chat --background",
  (it) => {
    it.effect("a cut Responses stream is resumed: one send, one resume, the answer once", () =>
      Effect.gen(function*() {
        const { base, cancels, firstBody, responseId, resumes, sends } = yield* scripted("openai-responses", cutSend)
        const result = yield* run(responses(base, "--background"), env)
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(result.stdout, answer + "\n")
        const id = (yield* responseId)!
        assert.match(id, /^resp_sim_\d+$/)
        const lines = result.stderr.split("\n")
        assert.strictEqual(lines.length, 3, result.stderr)
        const kept = Number(failedLine.exec(lines[0]!)?.[1])
        assert.isTrue(kept > 0 && kept < answer.length, result.stderr)
        assert.strictEqual(lines[1], resumedLine(id))
        assert.strictEqual(lines[2], "")
        assert.strictEqual((yield* firstBody)?.background, true)
        assert.strictEqual(yield* sends, 1)
        assert.strictEqual(yield* resumes, 1)
        // a response that completed is not cancelled
        assert.strictEqual(yield* cancels, 0)
      }))

    it.effect("REPRISE_BACKGROUND=1 does the same; the flag wins over a variable that says no, or is not a boolean", () =>
      Effect.gen(function*() {
        for (const [extra, value] of [[[], "1"], [["--background"], "no"], [["--background"], "maybe"]] as const) {
          const { base, resumes, sends } = yield* scripted("openai-responses", cutSend)
          const result = yield* run(responses(base, ...extra), { ...env, REPRISE_BACKGROUND: value })
          assert.strictEqual(result.code, 0, `${value}: ${result.stderr}`)
          assert.strictEqual(result.stdout, answer + "\n")
          assert.include(result.stderr, "resumed response resp_sim_")
          // the cut attempt's response was continued, not discarded: billed once, no line of discarded cost
          assert.notMatch(result.stderr, /attempts? discarded/)
          assert.deepStrictEqual([yield* sends, yield* resumes], [1, 1], value)
        }
      }))

    it.effect("--json: the retry event says resume, a resume event names the response and its cursor", () =>
      Effect.gen(function*() {
        const { base, responseId } = yield* scripted("openai-responses", cutSend)
        const result = yield* run(responses(base, "--background", "--json"), env)
        assert.strictEqual(result.code, 0, result.stderr)
        const events = result.stdout.trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>)
        const id = (yield* responseId)!
        const types = events.map((e) => e.type)
        // no discard, and the resumed attempt has no `attempt` event of its own
        assert.deepStrictEqual(types.filter((t) => t !== "delta"), ["attempt", "retry", "resume", "commit"])
        const retry = events.find((e) => e.type === "retry")!
        const firstDeltas = events.filter((e) => e.type === "delta" && e.attempt === 1).map((e) => e.text).join("")
        assert.deepStrictEqual(retry, {
          type: "retry",
          attempt: 2,
          delay: retry.delay,
          source: "backoff",
          resume: true,
          keptChars: firstDeltas.length
        })
        assert.deepStrictEqual(events.find((e) => e.type === "resume"), {
          type: "resume",
          attempt: 2,
          responseId: id,
          fromSequence: cut - 1,
          mode: "stream"
        })
        // the continuation's deltas extend the first attempt's: together they are the answer, once
        assert.strictEqual(events.filter((e) => e.type === "delta").map((e) => e.text).join(""), answer)
        assert.isTrue(events.filter((e) => e.type === "delta" && e.attempt === 2).length > 0)
        const { ledger, model: _model, usage: _usage, ...commit } = events.at(-1)! as Record<string, any>
        // the cut attempt is billed once, on the attempt that ended its response: nothing was discarded
        assert.deepStrictEqual(ledger.entries.map((e: any) => [e.attempt, e.outcome, e.verdict]), [
          [1, "continued", "not-billed"],
          [2, "committed", "exact"]
        ])
        assert.strictEqual(ledger.discarded.billed, 0)
        assert.deepStrictEqual(commit, {
          type: "commit",
          text: answer,
          finishReason: "stop",
          attempts: 2,
          toolCalls: 0,
          route: null
        })
        // stderr has the same notices as without --json
        assert.match(result.stderr.split("\n")[0]!, failedLine)
        assert.strictEqual(result.stderr.split("\n")[1], resumedLine(id))
      }))

    it.effect("a resume the server refuses (too old to stream) is followed by a poll: the rest of the answer, once", () =>
      Effect.gen(function*() {
        const { base, responseId, sends, sim } = yield* scripted("openai-responses", {
          ...cutSend,
          // every resume is refused with the API's 400 "can no longer be streamed"
          background: { streamForMs: 0 }
        })
        const result = yield* run(responses(base, "--background"), env)
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(result.stdout, answer + "\n")
        const id = (yield* responseId)!
        const lines = result.stderr.split("\n")
        assert.strictEqual(lines.length, 5, result.stderr)
        assert.match(lines[0]!, failedLine)
        assert.strictEqual(lines[1], resumedLine(id))
        assert.match(lines[2]!, /^reprise: attempt 2\/11 failed \(HTTP 400\); kept \d+ chars; resuming in 0\.0s$/)
        assert.strictEqual(
          lines[3],
          `reprise: attempt 3/11 resumed response ${id} after event ${cut - 1} by polling it until it finishes`
        )
        assert.strictEqual(yield* sends, 1)
        assert.strictEqual(yield* sim.count("openai-responses", "poll"), 1)
      }))

    it.effect("without --background the cut stream is replayed: a second send, no resume (REPRISE_BACKGROUND unset, off or empty)", () =>
      Effect.gen(function*() {
        // an empty (or blank) value is unset, as the OTEL_* variables are
        for (const variable of [undefined, "off", "", " "]) {
          const { base, firstBody, resumes, sends } = yield* scripted("openai-responses", cutSend)
          const result = yield* run(
            responses(base),
            variable === undefined ? env : { ...env, REPRISE_BACKGROUND: variable }
          )
          assert.strictEqual(result.code, 0, result.stderr)
          assert.strictEqual(result.stdout, answer + "\n")
          assert.match(
            result.stderr,
            /^reprise: attempt 1\/11 failed \(connection reset\); discarded \d+ chars; retrying in 0\.0s\nreprise: 1 attempt discarded ~\d+ input and ~\d+ output tokens \(estimated\)\n$/
          )
          assert.notProperty((yield* firstBody) ?? {}, "background")
          assert.deepStrictEqual([yield* sends, yield* resumes], [2, 0])
        }
      }))

    it.effect("REPRISE_BACKGROUND=maybe: exit 2, one line naming the variable, nothing sent", () =>
      Effect.gen(function*() {
        const { base, sim } = yield* scripted("openai-responses", cutSend)
        const result = yield* run(responses(base), { ...env, REPRISE_BACKGROUND: "maybe" })
        assert.strictEqual(result.code, 2)
        assert.strictEqual(
          result.stderr,
          `reprise: error [UsageError]: (Invalid data at REPRISE_BACKGROUND: "Expected a boolean value but received \"maybe\"")\n`
        )
        assert.strictEqual(result.stdout, "")
        assert.strictEqual(yield* sim.count(), 0)
      }))

    it.effect("--background on openai-chat changes nothing: the request has no background field, the cut is replayed", () =>
      Effect.gen(function*() {
        const { base, firstBody, sends } = yield* scripted("openai-chat", cutSend)
        const result = yield* run(chat(base, "--background"), env)
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(result.stdout, answer + "\n")
        assert.match(
          result.stderr,
          /^reprise: attempt 1\/11 failed \(connection reset\); discarded \d+ chars; retrying in 0\.0s\nreprise: 1 attempt discarded ~\d+ input and ~\d+ output tokens \(estimated\)\n$/
        )
        assert.notProperty((yield* firstBody) ?? {}, "background")
        assert.strictEqual(yield* sends, 2)
      }))

    it.effect("Ctrl-C while a background response streams: exit 130 and one cancel, said on stderr", () =>
      Effect.gen(function*() {
        // inProgressPolls: the response still runs on the server, and the cancel succeeds; without it the simulator's
        // response is finished at once, and the cancel is refused
        for (const running of [true, false]) {
          const { base, cancels, responseId } = yield* scripted("openai-responses", {
            reply: { text: answer },
            steps: [{ kind: "stall", afterEvents: cut, keepaliveMs: 100 }],
            ...(running ? { background: { inProgressPolls: 1 } } : {})
          })
          const child = yield* start(responses(base, "--background", "--json"), env)
          // a delta on stdout: the stream has named its response, and stalls
          yield* child.awaitStdout(/"type":"delta"/)
          child.child.kill("SIGINT")
          const result = yield* child.exit
          assert.strictEqual(result.code, 130, result.stderr)
          const id = (yield* responseId)!
          assert.strictEqual(yield* cancels, 1)
          assert.strictEqual(
            result.stderr,
            running
              ? `reprise: cancelled background response ${id}\n`
              : `reprise: could not cancel background response ${id}: HTTP 400\n`
          )
          const events = result.stdout.trim().split("\n").map((line) => JSON.parse(line) as Record<string, unknown>)
          assert.deepStrictEqual(events.at(-1), { type: "cancel", responseId: id, ok: running })
          assert.isFalse(events.some((e) => e.type === "commit"))
        }
      }).pipe(Effect.scoped))
  }
)

// -----------------------------------------------------------------------------
// on a terminal
// -----------------------------------------------------------------------------

const socket = `reprise-resume-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
afterAll(() => Tmux.killServer(socket))

const first = "The first line of the answer."
const long = [
  first,
  "A second line, long enough to wrap on a terminal of one hundred columns: it goes on past the right edge of the " +
  "pane, onto the next row, and stops.",
  "The end."
].join("\n")

layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(30) })(
  "reprise chat --background on a terminal",
  (it) => {
    it.effect("the kept preview goes on below the notices: one answer on the screen", () =>
      Effect.gen(function*() {
        assert.isTrue(Tmux.available(), "tmux is needed for this suite")
        const sim = yield* Simulator.Simulator
        yield* sim.setScript({
          routes: {
            "openai-responses": {
              reply: { text: long, deltaSize: 8 },
              // the preview reaches the wrapped second line, slowly enough to be seen, then the socket is reset
              steps: [{ kind: "reset", afterEvents: 24, pace: { everyMs: 20, events: 1 } }]
            }
          }
        })
        const command = [
          "env -i",
          `TERM="$TERM"`,
          `OPENAI_API_KEY=${KEY}`,
          Tmux.quote(process.execPath),
          Tmux.quote(bin),
          "chat --provider openai-responses --background --base-url",
          Tmux.quote(sim.baseUrl("openai-responses")),
          "--model m --backoff-base 300 --backoff-max 300 go"
        ].join(" ") + `; echo "[exit $?]"; exec sleep 600`
        const pane = yield* Tmux.open(socket, command, { columns: 100, rows: 30 })
        yield* pane.waitFor("the first attempt's preview", (s) => s.includes(first) && s.includes("past the right"))
        const final = yield* pane.waitFor("the end of the command", (s) => s.includes("[exit "))
        const lines = final.split("\n")
        const id = (yield* sim.requestsTo("openai-responses"))[0]!.responseId!
        assert.strictEqual(lines.length, 6, final)
        assert.match(
          lines[0]!,
          /^reprise: attempt 1\/11 failed \(connection reset\); kept \d+ chars; resuming in 0\.\ds$/
        )
        assert.strictEqual(lines[1], `reprise: attempt 2/11 resumed response ${id} after event 23`)
        // the preview was erased for the notices and shown again below them: the answer once, whole
        assert.strictEqual(lines.slice(2, 5).join("\n"), long)
        assert.strictEqual(final.split(first).length - 1, 1)
        assert.notInclude(final, "retrying in")
        assert.notInclude(final, "not part of the answer")
        assert.strictEqual(lines[5], "[exit 0]")
        assert.deepStrictEqual(
          [yield* sim.count("openai-responses", "send"), yield* sim.count("openai-responses", "resume")],
          [1, 1]
        )
      }))
  }
)

// -----------------------------------------------------------------------------
// the renderer: the countdown around the resume and cancel notices
// -----------------------------------------------------------------------------

// (`layer` with its test services: a `layer` with `excludeTestServices` above replaced the module's own `it.effect`)
layer(Layer.empty)("Render, background responses", (it) => {
  const reset = new TransportError.TransportError({ reason: "Reset" })
  const delta = (attempt: number, text: string) =>
    Notification.Preview({ attempt, event: Generation.TextDelta({ text }) })
  const scheduled = (delay: number) =>
    Notification.RetryScheduled({
      nextAttempt: 2,
      delay: Duration.millis(delay),
      delaySource: "backoff",
      remainingAttempts: 10,
      remainingTime: Duration.seconds(500),
      resume: { responseId: "resp_1", fromSequence: 6, mode: "stream", keptChars: 5, error: reset }
    })
  const reply = new Generation.Reply({
    text: "Hello world",
    reasoning: "",
    toolCalls: [],
    finishReason: "stop",
    providerFinishReason: "stop",
    usage: Option.none(),
    attempts: 2
  })
  const resumed = (mode: "stream" | "poll") =>
    Notification.AttemptResumed({ attempt: 2, maxAttempts: 11, responseId: "resp_1", fromSequence: 6, mode })

  it.effect("plain: the notices, no discard; a poll says so; a cancel, and a cancel that failed", () =>
    Effect.gen(function*() {
      const capture = Output.makeCapture(false)
      yield* Effect.gen(function*() {
        const render = yield* Render.make("plain")
        for (
          const n of [
            Notification.AttemptStarted({ attempt: 1, maxAttempts: 11 }),
            delta(1, "Hello"),
            scheduled(1500),
            resumed("poll"),
            Notification.ResponseCancelled({ responseId: "resp_\u001b[2J1", error: undefined }),
            Notification.ResponseCancelled({ responseId: "resp_1", error: reset })
          ]
        ) yield* render.notifications.notify(n)
      }).pipe(Effect.provide(capture.layer))
      assert.strictEqual(capture.stdout(), "")
      assert.strictEqual(
        capture.stderr(),
        "reprise: attempt 1/11 failed (connection reset); kept 5 chars; resuming in 1.5s\n" +
          "reprise: attempt 2/11 resumed response resp_1 after event 6 by polling it until it finishes\n" +
          "reprise: cancelled background response resp_\\x1b[2J1\n" +
          "reprise: could not cancel background response resp_1: connection reset\n"
      )
    }))

  it.effect("on a terminal: the preview is erased for the notices and shown again; the countdown is cleared", () =>
    Effect.gen(function*() {
      const capture = Output.makeCapture(true, { size: () => ({ columns: 80, rows: 24 }) })
      yield* Effect.gen(function*() {
        const render = yield* Render.make("tty")
        const notify = render.notifications.notify
        yield* notify(Notification.AttemptStarted({ attempt: 1, maxAttempts: 11 }))
        yield* notify(delta(1, "Hello"))
        yield* notify(scheduled(3000))
        yield* Effect.yieldNow()
        yield* TestClock.adjust(Duration.millis(1000))
        yield* notify(resumed("stream"))
        yield* notify(delta(2, " world"))
        yield* notify(Notification.Committed({ reply }))
        yield* render.commit(Chat.Commit.Reply({ reply, message: reply.message }))
      }).pipe(Effect.provide(capture.layer))
      assert.strictEqual(capture.stdout(), "Hello\r\u001b[KHello world\n")
      assert.strictEqual(
        capture.stderr(),
        "reprise: attempt 1/11 failed (connection reset); kept 5 chars; resuming in 3.0s\n" +
          "\r\u001b[Kreprise: retrying in 3s…\r\u001b[Kreprise: retrying in 2s…\r\u001b[K" +
          "reprise: attempt 2/11 resumed response resp_1 after event 6\n"
      )
    }))

  it.effect("on a terminal: a cancel during a countdown gets a line of its own, and the countdown goes on", () =>
    Effect.gen(function*() {
      const capture = Output.makeCapture(true, { size: () => ({ columns: 80, rows: 24 }) })
      yield* Effect.gen(function*() {
        const render = yield* Render.make("tty")
        const notify = render.notifications.notify
        yield* notify(Notification.AttemptStarted({ attempt: 1, maxAttempts: 11 }))
        yield* notify(Notification.RetryScheduled({
          nextAttempt: 2,
          delay: Duration.millis(2000),
          delaySource: "backoff",
          remainingAttempts: 10,
          remainingTime: Duration.seconds(500)
        }))
        yield* Effect.yieldNow()
        yield* notify(Notification.ResponseCancelled({ responseId: "resp_1", error: undefined }))
        yield* Effect.yieldNow()
        yield* TestClock.adjust(Duration.millis(1500))
        yield* render.stop
      }).pipe(Effect.provide(capture.layer))
      assert.strictEqual(
        capture.stderr(),
        "\r\u001b[Kreprise: retrying in 2s…\r\u001b[K" +
          "reprise: cancelled background response resp_1\n" +
          "\r\u001b[Kreprise: retrying in 2s…\r\u001b[Kreprise: retrying in 1s…\r\u001b[K"
      )
    }))
})
