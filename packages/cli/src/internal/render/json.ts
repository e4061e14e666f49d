/**
 * `--json` output: one JSON object per line on stdout for every event of the turn (`attempt`, `delta`, `discard`,
 * `retry`, `route_switched`, `resume`, `cancel`, `fleet`, `tool_call`, `tool_result`, `commit`, `error`), and the notices on stderr as
 * in the other modes. Nothing is ever erased and no countdown is drawn, on a terminal too.
 *
 * The ledger (see `Ledger`) is in the events: a `discard` carries its attempt's `entry`, a `commit` its reply's
 * `ledger`, and an `error` the `ledger` of the reply recovery gave up on, when there is one. The stderr line of what
 * discarded attempts cost, written in the other modes, is not written.
 *
 * @internal
 */
import type * as Ledger from "@reprise/core/Ledger"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ExitCode from "../../ExitCode.js"
import type * as Output from "../../Output.js"
import type * as Render from "../../Render.js"
import type * as Sanitize from "../../Sanitize.js"
import * as Notices from "./notices.js"
import * as Spent from "./spent.js"

/** A delay in an event: whole milliseconds (a jittered backoff, a fleet's pause left, are fractional). */
const wholeMillis = (delay: Duration.Duration): number => Math.round(Duration.toMillis(delay))

const routeFailures = (error: unknown) => {
  const failures = Notices.routeFailuresOf(error)
  return failures.length === 0 ? {} : {
    routeFailures: failures.map((failure) => ({
      route: failure.route,
      name: failure.name,
      model: failure.model,
      message: failure.message
    }))
  }
}

const ledgerOf = (ledger: Ledger.Ledger | undefined) => ledger === undefined ? {} : { ledger }

/**
 * The `--json` renderer of one turn.
 *
 * @internal
 */
export const make = (
  output: Output.Service,
  sanitizer: Sanitize.Sanitizer,
  notices: Notices.Notices,
  requestedModel?: string | undefined
): Render.Render => {
  // scrubbed before it is serialised: JSON escapes a `"` or `\` in the key, and the escaped form would not match
  const event = (value: Record<string, unknown>) => output.stdout(JSON.stringify(sanitizer.scrubJson(value)) + "\n")
  // The deltas of the current attempt, held back where they might end in the first part of the key.
  const preview = sanitizer.stream()
  let attempt = 0
  let maxAttempts = 0
  let discarded: Notices.Discarded | undefined
  const spent = Spent.make()
  return {
    notifications: {
      notify: (n) => {
        spent.record(n)
        switch (n._tag) {
          case "AttemptStarted":
            maxAttempts = n.maxAttempts
            attempt = n.attempt
            preview.reset()
            return event({ type: "attempt", attempt: n.attempt })
          case "Preview": {
            if (n.event._tag !== "TextDelta" || n.event.text.length === 0) return Effect.void
            const text = preview.push(n.event.text)
            return text.length === 0 ? Effect.void : event({ type: "delta", attempt: n.attempt, text })
          }
          case "AttemptDiscarded":
            // what was held back is dropped with the attempt: it may be the key's first characters
            preview.reset()
            discarded = { attempt: n.attempt, chars: n.discardedText.length, error: n.error }
            return event({
              type: "discard",
              attempt: n.attempt,
              discardedChars: n.discardedText.length,
              // its ledger entry: how far it got, its tokens and whether they were billed
              entry: n.entry ?? null
            })
          case "RetryScheduled": {
            const delay = wholeMillis(n.delay)
            if (n.resume !== undefined) {
              return Effect.zipRight(
                event({
                  type: "retry",
                  attempt: n.nextAttempt,
                  delay,
                  source: n.delaySource,
                  resume: true,
                  keptChars: n.resume.keptChars
                }),
                output.stderr(notices.resuming(maxAttempts, n, n.resume))
              )
            }
            return Effect.zipRight(
              event({ type: "retry", attempt: n.nextAttempt, delay, source: n.delaySource }),
              discarded === undefined ? Effect.void : output.stderr(notices.retrying(discarded, maxAttempts, n))
            )
          }
          case "RouteSwitched":
            return Effect.zipRight(
              event({
                type: "route_switched",
                attempt: n.nextAttempt,
                from: n.from,
                to: n.to,
                reason: n.reason,
                failure: n.error === undefined ? null : Notices.shortReason(n.error)
              }),
              output.stderr(notices.routeSwitched(n, Notices.discardedBy(discarded, n)))
            )
          case "AttemptResumed":
            maxAttempts = n.maxAttempts
            attempt = n.attempt
            return Effect.zipRight(
              event({
                type: "resume",
                attempt: n.attempt,
                responseId: n.responseId,
                fromSequence: n.fromSequence,
                mode: n.mode
              }),
              output.stderr(notices.resumed(n))
            )
          case "ResponseCancelled":
            return Effect.zipRight(
              event({ type: "cancel", responseId: n.responseId, ok: n.error === undefined }),
              output.stderr(notices.cancelled(n))
            )
          case "FleetPaused":
          case "FleetUnavailable":
          case "FleetRestored":
            return Effect.zipRight(
              event(
                n._tag === "FleetPaused"
                  ? {
                    type: "fleet",
                    event: "paused",
                    attempt: n.attempt,
                    delay: wholeMillis(n.delay),
                    status: n.status
                  }
                  : n._tag === "FleetUnavailable"
                  ? { type: "fleet", event: "unavailable", detail: n.detail }
                  : { type: "fleet", event: "restored" }
              ),
              output.stderr(notices.fleet(n))
            )
          case "Committed":
            return Effect.void
          case "Exhausted":
          case "Failed":
            // a failed attempt's held-back text is never shown: it may be the start of the key
            preview.reset()
            return Effect.void
        }
      }
    },
    stop: Effect.void,
    commit: (commit) => {
      if (commit._tag === "ToolResult") {
        const result = commit.message
        return event({
          type: "tool_result",
          id: result.toolCallId,
          name: result.name,
          content: result.content,
          isError: result.isError
        })
      }
      discarded = undefined
      const reply = commit.reply
      // the committed attempt's held-back text, then the commit
      const rest = preview.flush()
      return Effect.zipRight(
        Effect.zipRight(
          rest.length === 0 ? Effect.void : event({ type: "delta", attempt, text: rest }),
          event({
            type: "commit",
            text: reply.text,
            finishReason: reply.finishReason,
            attempts: reply.attempts,
            toolCalls: reply.toolCalls.length,
            // the model as the provider named it, else the one asked for (the route's, or the request's)
            model: reply.model ?? reply.route?.model ?? requestedModel ?? null,
            route: reply.route === undefined
              ? null
              : { index: reply.route.index, name: reply.route.name, model: reply.route.model },
            usage: Option.match(reply.usage, {
              onNone: () => null,
              onSome: (usage) => ({ input_tokens: usage.inputTokens, output_tokens: usage.outputTokens })
            }),
            // every attempt of the reply, committed and discarded, with their totals
            ledger: reply.ledger ?? null
          })
        ),
        Effect.forEach(
          reply.toolCalls,
          (call) =>
            event({ type: "tool_call", id: call.id, name: call.name, arguments: sanitizer.scrubJson(call.arguments) }),
          { discard: true }
        )
      )
    },
    error: (error, debug) => {
      const outcome = ExitCode.classify(error)
      return Effect.zipRight(
        event({
          type: "error",
          class: outcome.class,
          message: notices.shown(outcome.message),
          exitCode: outcome.exitCode,
          // when every route of a plan failed: each route's last failure
          ...routeFailures(error),
          // when recovery gave up on a reply: what each of its attempts cost
          ...ledgerOf(spent.failed())
        }),
        output.stderr(notices.error(outcome, error, debug))
      ).pipe(Effect.as(outcome.exitCode))
    }
  }
}
