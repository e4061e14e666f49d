/**
 * `plain` output (stdout is not a terminal, no `--json`): stdout gets exactly the committed answer and one newline;
 * stderr gets the notices, and after the answer or the error what the turn's discarded attempts cost, when they cost
 * anything. No preview is shown.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as ExitCode from "../../ExitCode.js"
import type * as Output from "../../Output.js"
import type * as Render from "../../Render.js"
import type * as Sanitize from "../../Sanitize.js"
import * as Notices from "./notices.js"
import * as Spent from "./spent.js"

/**
 * The plain renderer of one turn.
 *
 * @internal
 */
export const make = (
  output: Output.Service,
  sanitizer: Sanitize.Sanitizer,
  notices: Notices.Notices
): Render.Render => {
  let maxAttempts = 0
  let discarded: Notices.Discarded | undefined
  const spent = Spent.make()
  // after the turn's answer or its error: what its discarded attempts cost, when they cost anything
  const cost = Effect.suspend(() => {
    const totals = spent.discarded()
    return totals === undefined ? Effect.void : output.stderr(notices.discardedCost(totals))
  })
  return {
    notifications: {
      notify: (n) => {
        spent.record(n)
        switch (n._tag) {
          case "AttemptStarted":
            maxAttempts = n.maxAttempts
            return Effect.void
          case "AttemptDiscarded":
            discarded = { attempt: n.attempt, chars: n.discardedText.length, error: n.error }
            return Effect.void
          case "RetryScheduled":
            if (n.resume !== undefined) return output.stderr(notices.resuming(maxAttempts, n, n.resume))
            return discarded === undefined ? Effect.void : output.stderr(notices.retrying(discarded, maxAttempts, n))
          case "RouteSwitched":
            return output.stderr(notices.routeSwitched(n, Notices.discardedBy(discarded, n)))
          case "AttemptResumed":
            maxAttempts = n.maxAttempts
            return output.stderr(notices.resumed(n))
          case "ResponseCancelled":
            return output.stderr(notices.cancelled(n))
          case "FleetPaused":
          case "FleetUnavailable":
          case "FleetRestored":
            return output.stderr(notices.fleet(n))
          case "Preview":
          case "Committed":
          case "Exhausted":
          case "Failed":
            return Effect.void
        }
      }
    },
    stop: Effect.void,
    commit: (commit) => {
      if (commit._tag === "ToolResult") return Effect.void
      discarded = undefined
      const reply = commit.reply
      // only the final reply is the answer; a reply that asks for tools is followed by another
      if (reply.toolCalls.length > 0) return Effect.void
      return Effect.all([
        output.stdout(sanitizer.scrub(reply.text) + "\n"),
        reply.incomplete ? output.stderr(notices.incomplete(reply.providerFinishReason)) : Effect.void,
        cost
      ], { discard: true })
    },
    error: (error, debug) => {
      const outcome = ExitCode.classify(error)
      return Effect.as(Effect.zipRight(output.stderr(notices.error(outcome, error, debug)), cost), outcome.exitCode)
    }
  }
}
