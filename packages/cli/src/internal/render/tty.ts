/**
 * Output on a terminal (stdout is a TTY, no `--json`): the previews stream live on stdout, the notices go to stderr,
 * and a discarded preview is followed by a notice saying how much was discarded, the replay starting on a fresh
 * line. After the answer or the error, a notice says what the turn's discarded attempts cost, when they cost anything.
 *
 * When stdout and stderr are one terminal that may be redrawn (`Output.Service.terminal`), a discarded preview that
 * is still all on the screen is erased once its retry is scheduled, so the screen holds one answer, and a backoff
 * shows a countdown on stderr that the next attempt clears. A resumed background response keeps its preview: it is
 * erased for the notices of the resume, if it can be, and shown again when the continuation starts.
 *
 * @internal
 */
import type * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Fiber from "effect/Fiber"
import * as ExitCode from "../../ExitCode.js"
import type * as Output from "../../Output.js"
import type * as Render from "../../Render.js"
import type * as Sanitize from "../../Sanitize.js"
import * as Notices from "./notices.js"
import * as Rows from "./rows.js"
import * as Spent from "./spent.js"

/**
 * The terminal renderer of one turn.
 *
 * @internal
 */
export const make = (
  output: Output.Service,
  sanitizer: Sanitize.Sanitizer,
  notices: Notices.Notices
): Render.Render => {
  // The live preview of the current attempt, held back where it might end in the first part of the key.
  const preview = sanitizer.stream()
  let attempt = 0
  let maxAttempts = 0
  let discarded: Notices.Discarded | undefined
  // Whether the cursor is mid-line after a preview.
  let midLine = false
  const spent = Spent.make()
  // after the turn's answer or its error: what its discarded attempts cost, when they cost anything
  const cost = Effect.suspend(() => {
    const totals = spent.discarded()
    return totals === undefined ? Effect.void : output.stderr(notices.discardedCost(totals))
  })

  // The terminal previews may be redrawn on, if any.
  const terminal = output.terminal
  // The rows the current attempt's preview took on it.
  const rows = Rows.makeRows()
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
  // The preview's line is ended before what follows it on the screen.
  const freshLine = Effect.suspend(() => {
    const fresh = midLine ? output.stdout("\n") : Effect.void
    midLine = false
    return fresh
  })
  // The discarded preview still to be erased, erased: before a notice, which would shift the rows it covers.
  const eraseDiscarded = Effect.suspend(() => {
    const gone = erase === undefined || erase === "" ? Effect.void : output.stdout(erase)
    if (erase !== undefined) midLine = false
    erase = undefined
    return gone
  })

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
  const startCountdown = (delay: Duration.Duration) =>
    Effect.gen(function*() {
      const millis = Duration.toMillis(delay)
      if (terminal === undefined || !Number.isFinite(millis) || millis <= 0) return
      yield* countDownTo(terminal, (yield* Clock.currentTimeMillis) + millis)
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
          const text = notices.countdown(whole)
          // a line that wraps could not be cleared from its start
          if (text.length >= screen.size().columns) return
          yield* output.stderr(Rows.clearLine + text)
          drawn = true
          yield* Effect.sleep(Duration.millis(left - (whole - 1) * 1000))
        }
      })
      const cleared = Effect.suspend(() => drawn ? output.stderr(Rows.clearLine) : Effect.void)
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

  const notify = (n: RecoveryNotifications.Notification): Effect.Effect<void> => {
    spent.record(n)
    switch (n._tag) {
      case "AttemptStarted":
        maxAttempts = n.maxAttempts
        attempt = n.attempt
        preview.reset()
        erase = undefined
        shownText = ""
        redraw = undefined
        // the line of the countdown is cleared before this attempt writes, and its preview starts in the first column
        return terminal === undefined
          ? Effect.void
          : Effect.zipRight(stopCountdown, Effect.sync(() => rows.start(terminal.size())))
      case "Preview": {
        if (n.event._tag !== "TextDelta" || n.event.text.length === 0) return Effect.void
        const text = preview.push(n.event.text)
        return text.length === 0 ? Effect.void : show(text)
      }
      case "AttemptDiscarded":
        // What was held back is dropped with the discarded attempt, never shown: an attempt cut mid-key leaves the
        // key's first characters there. (So a notice's "discarded N chars" may count a few never shown.)
        preview.reset()
        discarded = { attempt: n.attempt, chars: n.discardedText.length, error: n.error }
        // On a terminal, a preview still all on the screen is erased once its retry is scheduled; until then it
        // stays, and the fresh line waits for the end of the reply (a failure that is not replayed).
        erase = terminal === undefined ? undefined : rows.erase(terminal.size())
        if (erase !== undefined) return Effect.void
        if (terminal !== undefined) leftOnScreen = true
        return freshLine
      case "RetryScheduled": {
        if (n.resume !== undefined) return resumeScheduled(n, n.resume)
        const d = discarded
        return Effect.zipRight(
          Effect.zipRight(
            eraseDiscarded,
            d === undefined ? Effect.void : output.stderr(notices.retrying(d, maxAttempts, n))
          ),
          startCountdown(n.delay)
        )
      }
      case "AttemptResumed":
        return resumed(n)
      // the next attempt goes to another route, at once: the discarded preview is erased as before a replay
      case "RouteSwitched":
        return Effect.zipRight(
          Effect.zipRight(stopCountdown, eraseDiscarded),
          output.stderr(notices.routeSwitched(n, Notices.discardedBy(discarded, n)))
        )
      case "ResponseCancelled":
        // After a failure that is not replayed, or on Ctrl-C: what the preview showed stays, and the notice goes on a
        // line of its own (a discarded preview is only erased before a replay, which has been scheduled already).
        erase = undefined
        return Effect.zipRight(freshLine, aside(notices.cancelled(n)))
      // The fleet (--fleet): a wait for a pause other processes' pushback set, and its store going and coming back.
      case "FleetPaused":
      case "FleetUnavailable":
      case "FleetRestored":
        return Effect.zipRight(Effect.zipRight(stopCountdown, eraseDiscarded), output.stderr(notices.fleet(n)))
      // the reply reaches the screen through `commit`, once the turn has committed it
      case "Committed":
        return Effect.void
      case "Exhausted":
      case "Failed":
        erase = undefined
        redraw = undefined
        // a failed attempt's held-back text is never shown: it may be the start of the key
        preview.reset()
        return Effect.zipRight(stopCountdown, freshLine)
    }
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
    return Effect.zipRight(
      Effect.zipRight(before, output.stderr(notices.resuming(maxAttempts, n, resume))),
      startCountdown(n.delay)
    )
  }

  const resumed = (n: Extract<RecoveryNotifications.Notification, { _tag: "AttemptResumed" }>) => {
    maxAttempts = n.maxAttempts
    attempt = n.attempt
    // the countdown's line is cleared first, as for a new attempt; the preview is not reset: it goes on, shown
    // again from its start below the notices when it was erased for them
    const again = Effect.suspend(() => {
      const text = redraw
      redraw = undefined
      if (text === undefined || terminal === undefined) return Effect.void
      rows.start(terminal.size())
      return text.length === 0 ? Effect.void : show(text)
    })
    return Effect.zipRight(Effect.zipRight(stopCountdown, output.stderr(notices.resumed(n))), again)
  }

  return {
    notifications: { notify },
    stop: stopCountdown,
    commit: (commit) => {
      if (commit._tag === "ToolResult") return Effect.void
      const reply = commit.reply
      erase = undefined
      redraw = undefined
      const rest = preview.flush()
      // A discarded preview left on the screen cannot be taken back: say plainly that it was not the answer. (Erased
      // ones are gone, and their retry notices already said what was discarded.)
      const d = discarded
      const notTheAnswer = d !== undefined && (terminal === undefined || leftOnScreen)
        ? output.stderr(notices.notTheAnswer(attempt, d))
        : Effect.void
      discarded = undefined
      leftOnScreen = false
      return Effect.all([
        stopCountdown,
        // the committed attempt's held-back text completes its preview
        rest.length === 0 ? Effect.void : show(rest),
        freshLine,
        notTheAnswer,
        reply.toolCalls.length === 0 && reply.incomplete
          ? output.stderr(notices.incomplete(reply.providerFinishReason))
          : Effect.void,
        Effect.forEach(reply.toolCalls, (call) => output.stderr(notices.toolCall(call.name, call.arguments)), {
          discard: true
        }),
        // the answer is the turn's last reply
        reply.toolCalls.length === 0 ? cost : Effect.void
      ], { discard: true })
    },
    error: (error, debug) => {
      const outcome = ExitCode.classify(error)
      // on a line of its own: a preview is left open when the turn failed after recovery committed its reply (the
      // session could not be written)
      return Effect.all([freshLine, output.stderr(notices.error(outcome, error, debug)), cost], { discard: true }).pipe(
        Effect.as(outcome.exitCode)
      )
    }
  }
}
