/**
 * The real `reprise` binary on a real terminal (a tmux pane of 100 × 30, against the loopback simulator): a replayed
 * answer takes the place of the discarded preview, so the screen holds one answer and the notices; a backoff shows a
 * countdown on stderr, cleared when the next attempt starts. (Piped output, byte for byte as before, is the subject
 * of cli.test.ts.)
 */
import { afterAll, assert, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import { Duration, Effect } from "effect"
import { bin } from "./support/cli.js"
import * as Tmux from "./support/tmux.js"

const socket = `reprise-tty-${process.pid}-${Math.random().toString(36).slice(2, 8)}`
afterAll(() => Tmux.killServer(socket))

const first = "The first line of the answer."
const answer = [
  first,
  "A second line, long enough to wrap twice on a terminal of one hundred columns: it goes on and on, past the right " +
  "edge of the pane, onto the next row, and on again, past the right edge once more, until it reaches a third row " +
  "of the pane, and stops.",
  "The end."
].join("\n")

/**
 * `reprise chat` in a clean environment, then its exit code, then a pause that keeps the pane (and its screen). The
 * shell survives a Ctrl-C to say the exit code (a trap is reset for the command it runs).
 */
const chat = (base: string) =>
  [
    "trap : INT;",
    "env -i",
    `TERM="$TERM"`,
    "OPENAI_API_KEY=sk-test-terminal",
    Tmux.quote(process.execPath),
    Tmux.quote(bin),
    "chat",
    "--base-url",
    Tmux.quote(base),
    "--model m --backoff-base 200 --backoff-max 200 go"
  ].join(" ") + `; echo "[exit $?]"; exec sleep 600`

const count = (text: string, part: string) => text.split(part).length - 1

layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(30) })(
  "reprise on a terminal",
  (it) => {
    it.effect("one answer on the screen after a replay; a countdown during the backoff, cleared by the next attempt", () =>
      Effect.gen(function*() {
        assert.isTrue(Tmux.available(), "tmux is needed for this suite")
        const sim = yield* Simulator.Simulator
        yield* sim.setScript({
          routes: {
            "openai-chat": {
              reply: { text: answer, deltaSize: 8 },
              steps: [
                // the preview wraps the second line onto a second row, slowly enough to be seen, then the socket is reset
                { kind: "reset", afterEvents: 30, pace: { everyMs: 25, events: 1 } },
                { kind: "status", status: 429, headers: { "retry-after": "2" } },
                { kind: "stream" }
              ]
            }
          }
        })
        const pane = yield* Tmux.open(socket, chat(sim.baseUrl("openai-chat")), { columns: 100, rows: 30 })

        // attempt 1 shows its preview: a line, then a line that the terminal wrapped
        yield* pane.waitFor("the first attempt's preview", (s) => s.includes(first) && s.includes("onto the next row"))
        // during the Retry-After wait: the preview is gone, the notices are there, and the countdown runs
        const waiting = yield* pane.waitFor("the countdown", (s) => s.includes("reprise: retrying in 2s…"))
        assert.strictEqual(count(waiting, first), 0, `the discarded preview was not erased:\n${waiting}`)
        assert.match(waiting.split("\n").at(-1)!, /^reprise: retrying in 2s…$/)
        yield* pane.waitFor("the countdown's next second", (s) => s.includes("reprise: retrying in 1s…"))

        const final = yield* pane.waitFor("the end of the command", (s) => s.includes("[exit "))
        const lines = final.split("\n")
        assert.strictEqual(lines.length, 7, final)
        assert.match(lines[0]!, /^reprise: attempt 1\/11 failed \(.+\); discarded \d+ chars; retrying in 0\.\ds$/)
        assert.strictEqual(
          lines[1],
          "reprise: attempt 2/11 failed (HTTP 429); discarded 0 chars; retrying in 2.0s (server Retry-After)"
        )
        // exactly one copy of the answer, where the countdown was, and no countdown left
        assert.strictEqual(lines.slice(2, 5).join("\n"), answer)
        assert.strictEqual(count(final, first), 1)
        assert.notInclude(final, "retrying in 1s…")
        assert.notInclude(final, "not part of the answer")
        // after the answer, what the cut attempt cost: its output estimated from the characters it had sent (chars/4)
        const discarded = Number(/discarded (\d+) chars/.exec(lines[0]!)![1])
        assert.match(
          lines[5]!,
          new RegExp(
            `^reprise: 1 attempt discarded ~\\d+ input and ~${Math.ceil(discarded / 4)} output tokens \\(estimated\\)$`
          )
        )
        assert.strictEqual(lines[6], "[exit 0]")
        assert.strictEqual(yield* sim.count("openai-chat"), 3)
      }))

    it.effect("Ctrl-C during the countdown clears its line; the process ends with 130", () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* sim.setScript({
          routes: { "openai-chat": { steps: [{ kind: "status", status: 429, headers: { "retry-after": "5" } }] } }
        })
        const pane = yield* Tmux.open(socket, chat(sim.baseUrl("openai-chat")), { columns: 100, rows: 30 })
        yield* pane.waitFor("the countdown", (s) => /^reprise: retrying in [45]s…$/m.test(s))
        yield* pane.keys("C-c")
        const final = yield* pane.waitFor("the end of the command", (s) => s.includes("[exit "))
        assert.deepStrictEqual(final.split("\n"), [
          "reprise: attempt 1/11 failed (HTTP 429); discarded 0 chars; retrying in 5.0s (server Retry-After)",
          "[exit 130]"
        ])
        assert.strictEqual(yield* sim.count("openai-chat"), 1)
      }))
  }
)
