/**
 * How a turn is shown. Three modes, chosen from `--json` and whether stdout is a terminal:
 *
 * - `plain` (stdout is not a TTY): stdout gets exactly the committed reply text and one newline; stderr gets one
 *   line per retry and one line for a final error.
 * - `tty`: previews stream live on stdout; when an attempt is discarded, a notice on stderr says how much was
 *   discarded and the replay starts on a fresh line. When stdout and stderr are one terminal that may be redrawn
 *   (`Output.Service.terminal`, see `Output.redrawAllowed`), a discarded preview that is still all on the screen is
 *   erased first, so the screen holds one answer, and a backoff shows a countdown (`reprise: retrying in 12s…`)
 *   that the next attempt clears.
 * - `json`: one JSON object per line on stdout: `attempt`, `delta`, `discard`, `retry`, `tool_call`, `tool_result`,
 *   `commit`, `error`; and with a background response (`--background`), `resume` and `cancel`.
 *
 * A background response that is continued after a cut (`RetryScheduled` with `resume`, then `AttemptResumed`) keeps
 * its preview: nothing is discarded, and the continuation's text extends what was shown. Its notices are
 * `reprise: attempt 1/11 failed (connection reset); kept 120 chars; resuming in 1.0s` and
 * `reprise: attempt 2/11 resumed response resp_… after event 812` (or `… by polling it until it finishes`); on a
 * terminal that may be redrawn the preview is erased before them and shown again after them, so the screen holds the
 * notices and then one answer. A background response left behind is cancelled on the server:
 * `reprise: cancelled background response resp_…` (or `could not cancel …: <reason>`).
 *
 * @since 0.1.0
 */
import type * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as TransportError from "@reprise/core/TransportError"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as ExitCode from "./ExitCode.js"
import * as Output from "./Output.js"
import * as Sanitize from "./Sanitize.js"

/**
 * @since 0.1.0
 * @category models
 */
export type Mode = "plain" | "tty" | "json"

/**
 * @since 0.1.0
 * @category models
 */
export const mode = (json: boolean, isTTY: boolean): Mode => json ? "json" : isTTY ? "tty" : "plain"

const line = (value: Record<string, unknown>) => JSON.stringify(value) + "\n"

/**
 * A short reason for a retry notice: `HTTP 503`, `connection reset`, `timed out`, ….
 *
 * @since 0.1.0
 * @category formatting
 */
export const shortReason = (error: unknown): string => {
  if (TransportError.isTransportError(error)) {
    switch (error.reason) {
      case "HttpStatus":
        return `HTTP ${error.status ?? "error"}`
      case "ProviderError":
        return error.providerCode ?? "provider error"
      case "Connect":
        return "connection failed"
      case "Reset":
        return "connection reset"
      case "PrematureEof":
        return "stream ended early"
      case "Timeout":
        return "timed out"
      case "TruncatedToolArguments":
        return "tool arguments truncated"
      case "ResumeGap":
        return "resumed response out of step"
    }
  }
  // a refusal that is continued (a resume the server would not stream: polled instead) or told (a failed cancel)
  if (ProviderRejection.isProviderRejection(error) && error.status !== undefined) return `HTTP ${error.status}`
  return ExitCode.classify(error).class
}

/**
 * Seconds with one decimal: `1.0s`, `60.0s`.
 *
 * @since 0.1.0
 * @category formatting
 */
export const seconds = (delay: Duration.Duration): string => `${(Duration.toMillis(delay) / 1000).toFixed(1)}s`

// -----------------------------------------------------------------------------
// redrawing a terminal
// -----------------------------------------------------------------------------

/** Clears the cursor's line and leaves the cursor in its first column. */
const clearLine = "\r\u001b[K"

/** Moves the cursor `rows` lines up, to the first column, and clears from there to the end of the screen. */
const clearRowsAbove = (rows: number) => `\u001b[${rows}F\u001b[J`

// Double-width ranges of East Asian text (Unicode's East_Asian_Width W and F), as terminals draw them.
const wideRanges: ReadonlyArray<readonly [number, number]> = [
  [0x1100, 0x115f],
  [0x231a, 0x231b],
  [0x2329, 0x232a],
  [0x2e80, 0x303e],
  [0x3041, 0x33ff],
  [0x3400, 0x4dbf],
  [0x4e00, 0x9fff],
  [0xa000, 0xa4cf],
  [0xa960, 0xa97f],
  [0xac00, 0xd7a3],
  [0xf900, 0xfaff],
  [0xfe10, 0xfe19],
  [0xfe30, 0xfe6f],
  [0xff00, 0xff60],
  [0xffe0, 0xffe6],
  [0x20000, 0x3fffd]
]
const zeroWidth = /^[\p{Mn}\p{Me}\u200b\u2060]$/u
const emoji = /^\p{Emoji_Presentation}$/u
// Where terminals disagree on the width: a joined emoji sequence, a presentation selector, flags, skin tones.
const disputed = /^[\u200c\u200d\ufe0e\ufe0f\u{1f1e6}-\u{1f1ff}\u{1f3fb}-\u{1f3ff}]$/u

/** The cells a character other than ASCII takes on a terminal: 0, 1 or 2, or `undefined` when it cannot be told. */
const cells = (char: string, code: number): number | undefined => {
  // C0 and C1 controls, DEL: they move the cursor or start a sequence
  if (code < 0xa0 || disputed.test(char)) return undefined
  if (zeroWidth.test(char)) return 0
  for (const [from, to] of wideRanges) {
    if (code < from) break
    if (code <= to) return 2
  }
  return emoji.test(char) ? 2 : 1
}

/**
 * Follows the cursor over what a preview writes, from the first column of a row, as the terminal wraps it: how many
 * rows down it went and whether it can still be told. Past the screen's height the first row has scrolled out of
 * reach and counting stops.
 */
const makeRows = () => {
  let columns = 0
  let limit = 0
  let row = 0
  let column = 0
  let written = false
  let known = false
  return {
    start: (size: { readonly columns: number; readonly rows: number }) => {
      columns = size.columns
      limit = size.rows
      row = 0
      column = 0
      written = false
      known = columns > 0 && limit > 0
    },
    write: (text: string) => {
      for (const char of text) {
        if (!known) return
        if (char === "\n") {
          row++
          column = 0
        } else if (char === "\r") {
          column = 0
        } else if (char === "\t") {
          // to the next tab stop, never past the last column
          if (column < columns) column = Math.min(columns - 1, (Math.floor(column / 8) + 1) * 8)
        } else {
          const code = char.codePointAt(0)!
          const width = code >= 0x20 && code < 0x7f ? 1 : cells(char, code)
          if (width === undefined) {
            // ESC, a backspace, a disputed emoji: the cursor went somewhere this does not follow
            known = false
            return
          }
          if (width === 0) continue
          written = true
          // a character that does not fit goes to the next row (a full row leaves the cursor on its last column)
          if (column + width > columns) {
            row++
            column = 0
          }
          column += width
        }
        if (row >= limit) known = false
      }
    },
    /** Stops following: what was written can no longer be erased (a notice was written in its middle). */
    forget: () => {
      known = false
    },
    /**
     * What erases everything written since {@link start}, when all of it is still on a screen of `size`; `""` when
     * nothing was written; `undefined` when it cannot be erased.
     */
    erase: (size: { readonly columns: number; readonly rows: number }): string | undefined => {
      if (!known || size.columns !== columns || row >= size.rows) return undefined
      if (row === 0) return written || column > 0 ? clearLine : ""
      return clearRowsAbove(row)
    }
  }
}

/**
 * The notification consumer of one turn.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (mode: Mode, sanitizer: Sanitize.Sanitizer = Sanitize.none) =>
  Effect.map(Output.Output, (output) => {
    const { scrub } = sanitizer
    // Server text in a notice: no key, no control characters.
    const shown = (text: string) => Sanitize.escapeControls(scrub(text))
    // scrubbed before it is serialised: JSON escapes a `"` or `\` in the key, and the escaped form would not match
    const json = (value: Record<string, unknown>) =>
      output.stdout(line(sanitizer.scrubJson(value) as Record<string, unknown>))
    // The live preview of the current attempt, held back where it might end in the first part of the key.
    const preview = sanitizer.stream()
    let attempt = 0
    let discarded: { attempt: number; chars: number; error: unknown } | undefined
    let maxAttempts = 0
    // Whether the TTY cursor is mid-line after a preview.
    let midLine = false

    // Where previews may be redrawn: a terminal, and not --json.
    const terminal = mode === "tty" ? output.terminal : undefined
    // The rows the current attempt's preview took on it.
    const rows = makeRows()
    // What erases the discarded preview once its retry is scheduled (a preview that is not replayed stays).
    let erase: string | undefined
    // Whether a discarded preview of this reply was left on the screen.
    let leftOnScreen = false
    // On a terminal that may be redrawn, what the current preview wrote (a resumed attempt's includes the text of the
    // attempts it continues): erased for the notices of a resume, it is shown again when the continuation starts.
    let shownText = ""
    let redraw: string | undefined

    const show = (text: string) => {
      midLine = !text.endsWith("\n")
      rows.write(text)
      if (terminal !== undefined) shownText += text
      return output.stdout(text)
    }
    const flushPreview = (attempt: number) => {
      const rest = preview.flush()
      if (rest.length === 0) return Effect.void
      if (mode === "json") return json({ type: "delta", attempt, text: rest })
      if (mode === "tty") return show(rest)
      return Effect.void
    }

    // The countdown of a backoff: one line on stderr, redrawn when the whole seconds left change, cleared when it
    // stops (the wait is over, the next attempt starts, or the waiting fiber is interrupted).
    let countdown: Fiber.RuntimeFiber<void> | undefined
    // When the running countdown ends (the Clock's milliseconds).
    let countdownEnd = 0
    const stopCountdown = Effect.suspend(() => {
      const fiber = countdown
      countdown = undefined
      return fiber === undefined ? Effect.void : Fiber.interrupt(fiber)
    })
    const startCountdown = (screen: Output.Terminal, delay: Duration.Duration) =>
      Effect.gen(function*() {
        const millis = Duration.toMillis(delay)
        if (!Number.isFinite(millis) || millis <= 0) return
        yield* countDownTo(screen, (yield* Clock.currentTimeMillis) + millis)
      })
    const countDownTo = (screen: Output.Terminal, end: number) =>
      Effect.gen(function*() {
        countdownEnd = end
        let drawn = false
        const draw = Effect.gen(function*() {
          while (true) {
            const left = end - (yield* Clock.currentTimeMillis)
            if (left <= 0) return
            const whole = Math.ceil(left / 1000)
            const text = `reprise: retrying in ${whole}s…`
            // a line that wraps could not be cleared from its start
            if (text.length >= screen.size().columns) return
            yield* output.stderr(clearLine + text)
            drawn = true
            yield* Effect.sleep(Duration.millis(left - (whole - 1) * 1000))
          }
        })
        const cleared = Effect.suspend(() => drawn ? output.stderr(clearLine) : Effect.void)
        // A child of the fiber that waits out the backoff, so interrupting that fiber (Ctrl-C) clears the line too.
        countdown = yield* Effect.fork(Effect.interruptible(Effect.ensuring(draw, cleared)))
      })
    // A line on stderr during a backoff: the countdown's line is cleared for it, and the countdown goes on below it.
    const aside = (text: string) =>
      Effect.suspend(() => {
        const again = countdown === undefined || terminal === undefined
          ? Effect.void
          : countDownTo(terminal, countdownEnd)
        return Effect.zipRight(Effect.zipRight(stopCountdown, output.stderr(text)), again)
      })

    const fleetNotice = (
      n: Extract<RecoveryNotifications.Notification, { _tag: "FleetPaused" | "FleetUnavailable" | "FleetRestored" }>
    ): Effect.Effect<void> => {
      if (n._tag === "FleetPaused") {
        const by = n.status === undefined ? "server pushback" : `a ${n.status}`
        const event = mode === "json"
          ? json({
            type: "fleet",
            event: "paused",
            attempt: n.attempt,
            delay: Duration.toMillis(n.delay),
            status: n.status
          })
          : Effect.void
        return Effect.zipRight(
          event,
          output.stderr(`reprise: waiting ${seconds(n.delay)}: the fleet is paused by ${by}\n`)
        )
      }
      const event = mode === "json"
        ? json(
          n._tag === "FleetUnavailable"
            ? { type: "fleet", event: "unavailable", detail: n.detail }
            : { type: "fleet", event: "restored" }
        )
        : Effect.void
      const text = n._tag === "FleetUnavailable"
        ? `reprise: the fleet is unavailable (${
          Sanitize.escapeControls(n.detail)
        }); going on with this process's own limits\n`
        : `reprise: the fleet is back; the retry budget and pauses are shared again\n`
      return Effect.zipRight(event, output.stderr(text))
    }

    // The resume of a background response: the attempt that was cut, then its continuation (`--background`).
    const resumeScheduled = (
      n: Extract<RecoveryNotifications.Notification, { _tag: "RetryScheduled" }>,
      resume: NonNullable<Extract<RecoveryNotifications.Notification, { _tag: "RetryScheduled" }>["resume"]>
    ): Effect.Effect<void> => {
      // Nothing was discarded: the preview (and what the sanitizer holds back of it) stays for the continuation. On a
      // terminal it is erased while the notices are written, if it can be, and shown again when the continuation
      // starts; otherwise the notices go on a line of their own and the continuation starts on the next one.
      let before: Effect.Effect<void> = Effect.void
      if (mode === "tty") {
        const erased = terminal === undefined ? undefined : rows.erase(terminal.size())
        if (erased !== undefined) {
          redraw = shownText
          shownText = ""
          if (erased !== "") before = output.stdout(erased)
        } else {
          rows.forget()
          if (midLine) before = output.stdout("\n")
        }
        midLine = false
      }
      const notice = output.stderr(
        `reprise: attempt ${n.nextAttempt - 1}/${maxAttempts} failed (${shown(shortReason(resume.error))}); ` +
          `kept ${resume.keptChars} chars; resuming in ${seconds(n.delay)}${
            n.delaySource === "retry-after" ? " (server Retry-After)" : ""
          }\n`
      )
      const event = mode === "json"
        ? json({
          type: "retry",
          attempt: n.nextAttempt,
          delay: Duration.toMillis(n.delay),
          source: n.delaySource,
          resume: true,
          keptChars: resume.keptChars
        })
        : Effect.void
      const wait = terminal === undefined ? Effect.void : startCountdown(terminal, n.delay)
      return Effect.zipRight(Effect.zipRight(before, event), Effect.zipRight(notice, wait))
    }

    const resumed = (n: Extract<RecoveryNotifications.Notification, { _tag: "AttemptResumed" }>) => {
      maxAttempts = n.maxAttempts
      attempt = n.attempt
      const how = n.mode === "stream"
        ? `after event ${n.fromSequence}`
        : `after event ${n.fromSequence} by polling it until it finishes`
      const notice = output.stderr(
        `reprise: attempt ${n.attempt}/${n.maxAttempts} resumed response ${shown(n.responseId)} ${how}\n`
      )
      const event = mode === "json"
        ? json({
          type: "resume",
          attempt: n.attempt,
          responseId: n.responseId,
          fromSequence: n.fromSequence,
          mode: n.mode
        })
        : Effect.void
      // the countdown's line is cleared first, as for a new attempt; the preview is not reset: it goes on, shown
      // again from its start below the notices when it was erased for them
      const again = Effect.suspend(() => {
        const text = redraw
        redraw = undefined
        if (text === undefined || terminal === undefined) return Effect.void
        rows.start(terminal.size())
        return text.length === 0 ? Effect.void : show(text)
      })
      return Effect.zipRight(Effect.zipRight(stopCountdown, event), Effect.zipRight(notice, again))
    }

    const cancelled = (n: Extract<RecoveryNotifications.Notification, { _tag: "ResponseCancelled" }>) => {
      const id = shown(n.responseId)
      const event = mode === "json"
        ? json({ type: "cancel", responseId: n.responseId, ok: n.error === undefined })
        : Effect.void
      // After a failure that is not replayed, or on Ctrl-C: what the preview showed stays, and the notice goes on a
      // line of its own (a discarded preview is only erased before a replay, which has been scheduled already).
      erase = undefined
      const fresh = mode === "tty" && midLine ? output.stdout("\n") : Effect.void
      midLine = false
      const text = n.error === undefined
        ? `reprise: cancelled background response ${id}\n`
        : `reprise: could not cancel background response ${id}: ${shown(shortReason(n.error))}\n`
      return Effect.zipRight(Effect.zipRight(fresh, event), aside(text))
    }

    const notify = (n: RecoveryNotifications.Notification): Effect.Effect<void> => {
      switch (n._tag) {
        case "AttemptStarted":
          maxAttempts = n.maxAttempts
          attempt = n.attempt
          preview.reset()
          erase = undefined
          shownText = ""
          redraw = undefined
          if (mode === "json") return json({ type: "attempt", attempt: n.attempt })
          // the line of the countdown is cleared before this attempt writes, and its preview starts in the first column
          return terminal === undefined
            ? Effect.void
            : Effect.zipRight(stopCountdown, Effect.sync(() => rows.start(terminal.size())))
        case "Preview": {
          if (n.event._tag !== "TextDelta" || n.event.text.length === 0 || mode === "plain") return Effect.void
          const text = preview.push(n.event.text)
          if (text.length === 0) return Effect.void
          if (mode === "json") return json({ type: "delta", attempt: n.attempt, text })
          return show(text)
        }
        case "AttemptDiscarded": {
          // What was held back is dropped with the discarded attempt, never shown: an attempt cut mid-key leaves the
          // key's first characters there. (So a notice's "discarded N chars" may count a few never shown.)
          preview.reset()
          discarded = { attempt: n.attempt, chars: n.discardedText.length, error: n.error }
          // On a terminal, a preview still all on the screen is erased once its retry is scheduled; until then it
          // stays, and the fresh line waits for the end of the reply (a failure that is not replayed).
          erase = terminal === undefined ? undefined : rows.erase(terminal.size())
          if (erase !== undefined) return Effect.void
          if (terminal !== undefined) leftOnScreen = true
          const fresh = mode === "tty" && midLine ? output.stdout("\n") : Effect.void
          midLine = false
          return mode === "json"
            ? json({ type: "discard", attempt: n.attempt, discardedChars: n.discardedText.length })
            : fresh
        }
        case "AttemptResumed":
          return resumed(n)
        case "ResponseCancelled":
          return cancelled(n)
        case "RetryScheduled": {
          if (n.resume !== undefined) return resumeScheduled(n, n.resume)
          const gone = erase === undefined || erase === "" ? Effect.void : output.stdout(erase)
          if (erase !== undefined) midLine = false
          erase = undefined
          const d = discarded
          const notice = d === undefined ? Effect.void : output.stderr(
            `reprise: attempt ${d.attempt}/${maxAttempts} failed (${
              shown(shortReason(d.error))
            }); discarded ${d.chars} chars; ` +
              `retrying in ${seconds(n.delay)}${n.delaySource === "retry-after" ? " (server Retry-After)" : ""}\n`
          )
          const event = mode === "json"
            ? json({ type: "retry", attempt: n.nextAttempt, delay: Duration.toMillis(n.delay), source: n.delaySource })
            : Effect.void
          const wait = terminal === undefined ? Effect.void : startCountdown(terminal, n.delay)
          return Effect.zipRight(Effect.zipRight(gone, event), Effect.zipRight(notice, wait))
        }
        // The fleet (--fleet): a wait for a pause other processes' pushback set, and its store going and coming back.
        // A discarded preview still to be erased goes first: a line on stderr would shift the rows it covers.
        case "FleetPaused":
        case "FleetUnavailable":
        case "FleetRestored": {
          const gone = erase === undefined || erase === "" ? Effect.void : output.stdout(erase)
          if (erase !== undefined) midLine = false
          erase = undefined
          return Effect.zipRight(Effect.zipRight(stopCountdown, gone), fleetNotice(n))
        }
        case "Committed":
        case "Exhausted":
        case "Failed": {
          erase = undefined
          redraw = undefined
          // only a committed attempt's held-back text is shown; a failed one's may be the start of the key
          const held = Effect.zipRight(
            stopCountdown,
            n._tag === "Committed" ? flushPreview(attempt) : Effect.sync(() => preview.reset())
          )
          const fresh = Effect.suspend(() => mode === "tty" && midLine ? output.stdout("\n") : Effect.void).pipe(
            Effect.tap(() => {
              midLine = false
            })
          )
          // A discarded preview left on a TTY cannot be taken back: say plainly that it was not the answer. (Erased
          // ones are gone, and their retry notices already said what was discarded.)
          const d = discarded
          const stillShown = terminal === undefined || leftOnScreen
          return n._tag !== "Committed" || d === undefined || mode !== "tty" || !stillShown
            ? Effect.zipRight(held, fresh)
            : Effect.zipRight(
              Effect.zipRight(held, fresh),
              output.stderr(
                // the committed attempt may have continued the response of the one after the discard (a resume)
                attempt === d.attempt + 1
                  ? `reprise: attempt ${attempt} committed; text shown by earlier attempts is not part of the answer\n`
                  : `reprise: attempt ${attempt} committed, continuing attempt ${d.attempt + 1}; text shown before ` +
                    `attempt ${d.attempt + 1} is not part of the answer\n`
              )
            )
        }
      }
    }

    return {
      notifications: { notify } satisfies RecoveryNotifications.Service,
      /**
       * Stops the countdown of a backoff, if one runs, and clears its line: for the end of a turn however it ended,
       * before anything else is written. (Without it the countdown still stops when the fiber that waits out the
       * backoff ends, interrupted or not, but only after that fiber's own finalizers.)
       */
      stop: stopCountdown,
      toolCall: (call: Message.ToolCall) =>
        mode === "json"
          ? json({ type: "tool_call", id: call.id, name: call.name, arguments: sanitizer.scrubJson(call.arguments) })
          : mode === "tty"
          ? output.stderr(
            `reprise: tool ${shown(call.name)}(${
              Sanitize.escapeControls(JSON.stringify(sanitizer.scrubJson(call.arguments)))
            })\n`
          )
          : Effect.void,
      toolResult: (result: Message.ToolResultMessage) =>
        mode === "json"
          ? json({
            type: "tool_result",
            id: result.toolCallId,
            name: result.name,
            content: result.content,
            isError: result.isError
          })
          : Effect.void,
      commit: (reply: Generation.Reply, final: boolean) => {
        discarded = undefined
        leftOnScreen = false
        if (mode === "json") {
          return json({
            type: "commit",
            text: reply.text,
            finishReason: reply.finishReason,
            attempts: reply.attempts,
            toolCalls: reply.toolCalls.length
          })
        }
        const incomplete = final && reply.incomplete
          ? output.stderr(`reprise: the reply is incomplete (finish reason ${shown(reply.providerFinishReason)})\n`)
          : Effect.void
        if (mode === "plain") {
          return final ? Effect.zipRight(output.stdout(scrub(reply.text) + "\n"), incomplete) : Effect.void
        }
        return incomplete
      },
      error: (error: unknown, debug: boolean) => {
        const outcome = ExitCode.classify(error)
        const detail = debug && error instanceof Error && error.stack !== undefined ? `\n${error.stack}` : ""
        const message = shown(outcome.message)
        return Effect.zipRight(
          mode === "json"
            ? json({ type: "error", class: outcome.class, message, exitCode: outcome.exitCode })
            : Effect.void,
          // a stack holds the server's message too: escape each of its lines, keep the line breaks
          output.stderr(
            `reprise: error [${outcome.class}]: ${message}${detail.split("\n").map(shown).join("\n")}\n`
          )
        ).pipe(Effect.as(outcome.exitCode))
      }
    }
  })
