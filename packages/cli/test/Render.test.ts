import { assert, describe, it } from "@effect/vitest"
import * as Chat from "@reprise/core/Chat"
import * as Generation from "@reprise/core/Generation"
import * as ProviderFailure from "@reprise/core/ProviderFailure"
import { Notification } from "@reprise/core/RecoveryNotifications"
import { Duration, Effect, Fiber, Layer, Option, Redacted, TestClock } from "effect"
import * as Output from "../src/Output.js"
import * as Render from "../src/Render.js"
import * as Sanitize from "../src/Sanitize.js"

const reply = new Generation.Reply({
  text: "Hello there",
  reasoning: "",
  toolCalls: [],
  finishReason: "stop",
  providerFinishReason: "stop",
  usage: Option.none(),
  attempts: 2
})

/** What `Chat.step` reports once a reply is committed (the CLI's turn passes it to `Render.commit`). */
const commitOf = (reply: Generation.Reply) => Chat.Commit.Reply({ reply, message: reply.message })

const attemptsThenCommit = [
  Notification.AttemptStarted({ attempt: 1, maxAttempts: 11 }),
  Notification.Preview({ attempt: 1, event: Generation.TextDelta({ text: "Hel" }) }),
  Notification.Preview({ attempt: 1, event: Generation.TextDelta({ text: "lo wor" }) }),
  Notification.AttemptDiscarded({
    attempt: 1,
    discardedText: "Hello wor",
    discardedToolCalls: [],
    error: ProviderFailure.fromHttpStatus({ status: 503 })
  }),
  Notification.RetryScheduled({
    nextAttempt: 2,
    delay: Duration.millis(1000),
    delaySource: "backoff",
    remainingAttempts: 10,
    remainingTime: Duration.seconds(599)
  }),
  Notification.AttemptStarted({ attempt: 2, maxAttempts: 11 }),
  Notification.Preview({ attempt: 2, event: Generation.TextDelta({ text: "Hello there" }) }),
  Notification.Committed({ reply })
]

const play = (mode: Render.Mode, isTTY: boolean) =>
  Effect.gen(function*() {
    const capture = Output.makeCapture(isTTY)
    yield* Effect.gen(function*() {
      const render = yield* Render.make(mode)
      for (const n of attemptsThenCommit) yield* render.notifications.notify(n)
      yield* render.commit(commitOf(reply))
    }).pipe(Effect.provide(capture.layer))
    return { stdout: capture.stdout(), stderr: capture.stderr() }
  })

const retryLine = "reprise: attempt 1/11 failed (HTTP 503); discarded 9 chars; retrying in 1.0s\n"

describe("Render", () => {
  it.effect("plain: stdout is only the committed text; one retry line on stderr", () =>
    Effect.gen(function*() {
      const { stderr, stdout } = yield* play("plain", false)
      assert.strictEqual(stdout, "Hello there\n")
      assert.strictEqual(stderr, retryLine)
    }))

  it.effect("tty: previews live, the replay on a fresh line, and a notice that earlier text is not the answer", () =>
    Effect.gen(function*() {
      const { stderr, stdout } = yield* play("tty", true)
      assert.strictEqual(stdout, "Hello wor\nHello there\n")
      assert.strictEqual(
        stderr,
        retryLine + "reprise: attempt 2 committed; text shown by earlier attempts is not part of the answer\n"
      )
    }))

  it.effect("json: one event per line", () =>
    Effect.gen(function*() {
      const { stdout } = yield* play("json", false)
      const events = stdout.trim().split("\n").map((l) => JSON.parse(l))
      assert.deepStrictEqual(events, [
        { type: "attempt", attempt: 1 },
        { type: "delta", attempt: 1, text: "Hel" },
        { type: "delta", attempt: 1, text: "lo wor" },
        // a notification without an entry (recovery always gives one) and a reply without a ledger: null
        { type: "discard", attempt: 1, discardedChars: 9, entry: null },
        { type: "retry", attempt: 2, delay: 1000, source: "backoff" },
        { type: "attempt", attempt: 2 },
        { type: "delta", attempt: 2, text: "Hello there" },
        {
          type: "commit",
          text: "Hello there",
          finishReason: "stop",
          attempts: 2,
          toolCalls: 0,
          model: null,
          route: null,
          usage: null,
          ledger: null
        }
      ])
    }))

  it.effect("json: delays are whole milliseconds, a jittered backoff's and a fleet pause's too", () =>
    Effect.gen(function*() {
      const capture = Output.makeCapture(false)
      yield* Effect.gen(function*() {
        const render = yield* Render.make("json")
        yield* render.notifications.notify(Notification.AttemptStarted({ attempt: 1, maxAttempts: 11 }))
        yield* render.notifications.notify(Notification.FleetPaused({
          attempt: 1,
          delay: Duration.nanos(29_442_251_465n),
          status: 429,
          remainingTime: Duration.seconds(500)
        }))
        yield* render.notifications.notify(Notification.RetryScheduled({
          nextAttempt: 2,
          delay: Duration.millis(1843.62),
          delaySource: "backoff",
          remainingAttempts: 10,
          remainingTime: Duration.seconds(470)
        }))
      }).pipe(Effect.provide(capture.layer))
      const events = capture.stdout().trim().split("\n").map((l) => JSON.parse(l))
      assert.deepStrictEqual(events.slice(1), [
        { type: "fleet", event: "paused", attempt: 1, delay: 29442, status: 429 },
        { type: "retry", attempt: 2, delay: 1844, source: "backoff" }
      ])
      assert.strictEqual(capture.stderr(), "reprise: waiting 29.4s: the fleet is paused by a 429\n")
    }))

  it.effect("an incomplete finish is committed with a notice", () =>
    Effect.gen(function*() {
      const capture = Output.makeCapture(false)
      const truncated = new Generation.Reply({ ...reply, finishReason: "length", providerFinishReason: "length" })
      yield* Effect.flatMap(Render.make("plain"), (render) => render.commit(commitOf(truncated))).pipe(
        Effect.provide(capture.layer)
      )
      assert.strictEqual(capture.stdout(), "Hello there\n")
      assert.strictEqual(capture.stderr(), "reprise: the reply is incomplete (finish reason length)\n")
    }))

  it.effect("a committed reply reaches the output through commit only: the Committed notification writes nothing", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [Render.Mode, boolean]> = [["plain", false], ["tty", true], ["json", false]]
      for (const [mode, isTTY] of cases) {
        const capture = Output.makeCapture(isTTY)
        const [before, after] = yield* Effect.gen(function*() {
          const render = yield* Render.make(mode)
          for (const n of attemptsThenCommit) yield* render.notifications.notify(n)
          const before = capture.stdout() + capture.stderr()
          yield* render.commit(commitOf(reply))
          return [before, capture.stdout() + capture.stderr()] as const
        }).pipe(Effect.provide(capture.layer))
        const played = yield* play(mode, isTTY)
        assert.strictEqual(after, played.stdout + played.stderr, mode)
        assert.notInclude(before, "Hello there\n", mode)
        assert.notInclude(before, "commit", mode)
      }
    }))

  it("retry notices name the failure briefly", () => {
    assert.strictEqual(
      Render.shortReason(ProviderFailure.fromInBandError({ type: "overloaded_error" })),
      "overloaded_error"
    )
    assert.strictEqual(Render.seconds(Duration.millis(1500)), "1.5s")
  })
})

// -----------------------------------------------------------------------------
// a terminal that can be redrawn: stdout and stderr on one TTY, colour allowed
// -----------------------------------------------------------------------------

type Write = readonly ["out" | "err", string]

/** An Output on a terminal of `columns` × `rows` that records every write, in order, with the stream it went to. */
const terminal = (columns: number, rows: number) => {
  const writes: Array<Write> = []
  const service: Output.Service = {
    stdout: (text) => Effect.sync(() => void writes.push(["out", text])),
    stderr: (text) => Effect.sync(() => void writes.push(["err", text])),
    isTTY: true,
    terminal: { size: () => ({ columns, rows }) }
  }
  return { layer: Layer.succeed(Output.Output, service), writes }
}

const started = (attempt: number) => Notification.AttemptStarted({ attempt, maxAttempts: 11 })
const delta = (attempt: number, text: string) =>
  Notification.Preview({ attempt, event: Generation.TextDelta({ text }) })
const discard = (attempt: number, discardedText: string) =>
  Notification.AttemptDiscarded({
    attempt,
    discardedText,
    discardedToolCalls: [],
    error: ProviderFailure.fromHttpStatus({ status: 503 })
  })
const retry = (nextAttempt: number, millis: number) =>
  Notification.RetryScheduled({
    nextAttempt,
    delay: Duration.millis(millis),
    delaySource: "backoff",
    remainingAttempts: 10,
    remainingTime: Duration.seconds(599)
  })
const notice = (chars: number, delay: string) =>
  `reprise: attempt 1/11 failed (HTTP 503); discarded ${chars} chars; retrying in ${delay}\n`
const committedNotice = "reprise: attempt 2 committed; text shown by earlier attempts is not part of the answer\n"
const frame = (seconds: number) => `\r\x1b[Kreprise: retrying in ${seconds}s…`
const clear = "\r\x1b[K"

/**
 * Attempt 1 shows `shown` (in pieces) and fails; attempt 2 starts without any wait passing and commits "Hello there".
 * Returns every write.
 */
const replayOn = (columns: number, rows: number, shown: ReadonlyArray<string>, sanitizer?: Sanitize.Sanitizer) =>
  Effect.gen(function*() {
    const screen = terminal(columns, rows)
    yield* Effect.gen(function*() {
      const render = yield* Render.make("tty", sanitizer)
      yield* render.notifications.notify(started(1))
      for (const text of shown) yield* render.notifications.notify(delta(1, text))
      yield* render.notifications.notify(discard(1, shown.join("")))
      yield* render.notifications.notify(retry(2, 0))
      yield* render.notifications.notify(started(2))
      yield* render.notifications.notify(delta(2, "Hello there"))
      yield* render.notifications.notify(Notification.Committed({ reply }))
      yield* render.commit(commitOf(reply))
    }).pipe(Effect.provide(screen.layer))
    return screen.writes
  })

/** What attempt 1 wrote on stdout, then what followed it on stdout before attempt 2's text. */
const around = (writes: ReadonlyArray<Write>) => {
  const second = writes.findIndex(([on, text]) => on === "out" && text === "Hello there")
  const before = writes.slice(0, second)
  return {
    erase: before.filter(([on]) => on === "out").map(([, text]) => text).slice(-1)[0],
    after: writes.slice(second)
  }
}

describe("Render on a terminal that can be redrawn", () => {
  it.effect("a discarded preview that fits is erased before the notice; the replay takes its place, alone", () =>
    Effect.gen(function*() {
      const writes = yield* replayOn(20, 5, ["Hel", "lo wor"])
      assert.deepStrictEqual(writes, [
        ["out", "Hel"],
        ["out", "lo wor"],
        // one row: back to its first column, cleared to the end of the line
        ["out", "\r\x1b[K"],
        ["err", notice(9, "0.0s")],
        ["out", "Hello there"],
        ["out", "\n"]
      ])
    }))

  it.effect("the rows counted follow the terminal's wrapping, newlines and wide characters", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, string]> = [
        // 12 characters on 10 columns, a newline, 2 more: three rows, the cursor on the third
        [["abcdefghij", "kl\nxy"], "\x1b[2F\x1b[J"],
        // exactly one full row: the cursor waits at the last column, no wrap yet
        [["abcdefghij"], "\r\x1b[K"],
        // a full row then a newline: the cursor on the second row
        [["abcdefghij\n"], "\x1b[1F\x1b[J"],
        // six double-width characters: five fill the row, the sixth wraps
        [["漢字漢字漢字"], "\x1b[1F\x1b[J"],
        // a double-width character never splits over the edge: 9 + 2 cells wrap
        [["abcdefghi", "漢"], "\x1b[1F\x1b[J"],
        // combining marks take no cell
        [["e\u0301".repeat(10)], "\r\x1b[K"],
        // three rows of a four-row screen, the cursor on the fourth
        [["a\nb\nc\n"], "\x1b[3F\x1b[J"]
      ]
      for (const [shown, erase] of cases) {
        const writes = yield* replayOn(10, 4, shown)
        assert.strictEqual(around(writes).erase, erase, JSON.stringify(shown))
        assert.notInclude(writes.map(([, text]) => text).join(""), committedNotice)
      }
    }))

  it.effect("a preview taller than the screen, or one that moves the cursor itself, is left as today", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<ReadonlyArray<string>> = [
        // five rows on a four-row screen: the first scrolled out of reach
        ["a\nb\nc\nd\ne"],
        // 41 characters on 10 columns: five rows
        ["x".repeat(41)],
        // an escape sequence, a backspace: where the cursor went is not known
        ["red \x1b[31mtext"],
        ["ab\bc"],
        // an emoji sequence whose width terminals disagree on
        ["family 👨‍👩‍👧"]
      ]
      for (const shown of cases) {
        const writes = yield* replayOn(10, 4, shown)
        const text = shown.join("")
        assert.deepStrictEqual(writes, [
          ["out", text],
          ["out", "\n"],
          ["err", notice(text.length, "0.0s")],
          ["out", "Hello there"],
          ["out", "\n"],
          ["err", committedNotice]
        ], JSON.stringify(shown))
      }
    }))

  it.effect("the rows erased are those written: the characters held back for the key never reached the screen", () =>
    Effect.gen(function*() {
      const key = "sk-live-0123456789abcdef"
      const sanitizer = Sanitize.make(Redacted.make(key))
      // 50 characters of text, then the key's first 10: the last 23 characters (key length − 1) are held back, so
      // 37 were written, two rows of 20 (all 60 would take three)
      const writes = yield* replayOn(20, 5, ["x".repeat(50), key.slice(0, 10)], sanitizer)
      assert.strictEqual(writes.filter(([on]) => on === "out").slice(0, 2).map(([, t]) => t).join(""), "x".repeat(37))
      assert.strictEqual(around(writes).erase, "\x1b[1F\x1b[J")
      assert.notInclude(writes.map(([, text]) => text).join(""), key.slice(0, 6))
    }))

  it.effect("during a backoff, a countdown on stderr each second, cleared when the next attempt starts", () =>
    Effect.gen(function*() {
      const screen = terminal(80, 24)
      const render = yield* Effect.provide(Render.make("tty"), screen.layer)
      const errors = () => screen.writes.filter(([on]) => on === "err").map(([, text]) => text)
      yield* render.notifications.notify(started(1))
      yield* render.notifications.notify(discard(1, ""))
      yield* render.notifications.notify(retry(2, 2500))
      yield* TestClock.adjust(0)
      assert.deepStrictEqual(errors(), [notice(0, "2.5s"), frame(3)])
      yield* TestClock.adjust(499)
      assert.deepStrictEqual(errors(), [notice(0, "2.5s"), frame(3)])
      yield* TestClock.adjust(1)
      assert.deepStrictEqual(errors(), [notice(0, "2.5s"), frame(3), frame(2)])
      yield* TestClock.adjust(1000)
      assert.deepStrictEqual(errors(), [notice(0, "2.5s"), frame(3), frame(2), frame(1)])
      // the wait is over: no `0s` frame, the line is cleared, once, before the next attempt writes
      yield* TestClock.adjust(1000)
      yield* render.notifications.notify(started(2))
      assert.deepStrictEqual(errors(), [notice(0, "2.5s"), frame(3), frame(2), frame(1), clear])
      yield* TestClock.adjust(5000)
      assert.strictEqual(errors().length, 5, "the countdown stopped")
      yield* render.notifications.notify(delta(2, "Hello there"))
      assert.deepStrictEqual(screen.writes.at(-1), ["out", "Hello there"])
    }))

  it.effect("an attempt that starts early (the countdown still running) clears the line first", () =>
    Effect.gen(function*() {
      const screen = terminal(80, 24)
      const render = yield* Effect.provide(Render.make("tty"), screen.layer)
      yield* render.notifications.notify(started(1))
      yield* render.notifications.notify(discard(1, ""))
      yield* render.notifications.notify(retry(2, 5000))
      yield* TestClock.adjust(1000)
      yield* render.notifications.notify(started(2))
      yield* render.notifications.notify(delta(2, "Hi"))
      assert.deepStrictEqual(screen.writes.slice(1), [["err", frame(5)], ["err", frame(4)], ["err", clear], [
        "out",
        "Hi"
      ]])
      yield* TestClock.adjust(10_000)
      assert.strictEqual(screen.writes.length, 5)
    }))

  it.effect("interrupting the backoff (Ctrl-C) clears the countdown line", () =>
    Effect.gen(function*() {
      const screen = terminal(80, 24)
      const render = yield* Effect.provide(Render.make("tty"), screen.layer)
      yield* render.notifications.notify(started(1))
      yield* render.notifications.notify(discard(1, ""))
      // as the recovery loop does: notify, then sleep for the delay
      const waiting = yield* Effect.fork(
        Effect.zipRight(render.notifications.notify(retry(2, 3000)), Effect.sleep(Duration.millis(3000)))
      )
      yield* TestClock.adjust(1000)
      yield* Fiber.interrupt(waiting)
      assert.deepStrictEqual(screen.writes.slice(1), [["err", frame(3)], ["err", frame(2)], ["err", clear]])
      yield* TestClock.adjust(10_000)
      assert.strictEqual(screen.writes.length, 4)
    }))

  it.effect("stop (the end of a turn, an interrupted one too) clears the countdown at once", () =>
    Effect.gen(function*() {
      const screen = terminal(80, 24)
      const render = yield* Effect.provide(Render.make("tty"), screen.layer)
      yield* render.notifications.notify(started(1))
      yield* render.notifications.notify(discard(1, ""))
      const waiting = yield* Effect.fork(
        Effect.zipRight(render.notifications.notify(retry(2, 3000)), Effect.sleep(Duration.millis(3000)))
      )
      yield* TestClock.adjust(0)
      yield* render.stop
      assert.deepStrictEqual(screen.writes.slice(1), [["err", frame(3)], ["err", clear]])
      yield* render.stop
      yield* Fiber.interrupt(waiting)
      yield* TestClock.adjust(10_000)
      assert.strictEqual(screen.writes.length, 3)
    }))

  it.effect("a failure that is not replayed leaves the preview, as today", () =>
    Effect.gen(function*() {
      const screen = terminal(80, 24)
      const render = yield* Effect.provide(Render.make("tty"), screen.layer)
      const error = ProviderFailure.fromHttpStatus({ status: 400 })
      for (
        const n of [
          started(1),
          delta(1, "Half an ans"),
          discard(1, "Half an ans"),
          Notification.Failed({ error })
        ]
      ) yield* render.notifications.notify(n)
      assert.deepStrictEqual(screen.writes, [["out", "Half an ans"], ["out", "\n"]])
    }))

  it.effect("--json on a terminal: no erasing, no countdown", () =>
    Effect.gen(function*() {
      const onTerminal = Output.makeCapture(true, { size: () => ({ columns: 80, rows: 24 }) })
      const piped = Output.makeCapture(false)
      for (const capture of [onTerminal, piped]) {
        yield* Effect.gen(function*() {
          const render = yield* Render.make("json")
          for (const n of attemptsThenCommit) yield* render.notifications.notify(n)
          yield* TestClock.adjust(5000)
          yield* render.commit(commitOf(reply))
        }).pipe(Effect.provide(capture.layer))
      }
      assert.strictEqual(onTerminal.stdout(), piped.stdout())
      assert.strictEqual(onTerminal.stderr(), retryLine)
    }))
})

describe("Output.redrawAllowed", () => {
  it("only when stdout and stderr are terminals and neither NO_COLOR nor TERM=dumb asks for plain output", () => {
    const tty = { isTTY: true }
    const pipe = { isTTY: false }
    assert.isTrue(Output.redrawAllowed(tty, tty, { TERM: "xterm-256color" }))
    assert.isTrue(Output.redrawAllowed(tty, tty, { TERM: "xterm", NO_COLOR: "" }))
    assert.isTrue(Output.redrawAllowed(tty, tty, {}))
    assert.isFalse(Output.redrawAllowed(pipe, tty, { TERM: "xterm" }))
    assert.isFalse(Output.redrawAllowed(tty, pipe, { TERM: "xterm" }))
    assert.isFalse(Output.redrawAllowed(tty, tty, { TERM: "xterm", NO_COLOR: "1" }))
    assert.isFalse(Output.redrawAllowed(tty, tty, { TERM: "dumb" }))
  })
})
