/**
 * How a turn is shown. Three modes, chosen from `--json` and whether stdout is a terminal:
 *
 * - `plain` (stdout is not a TTY): stdout gets exactly the committed reply text and one newline; stderr gets one
 *   line per retry and one line for a final error.
 * - `tty`: previews stream live on stdout; when an attempt is discarded, a notice on stderr says how much was
 *   discarded and the replay starts on a fresh line.
 * - `json`: one JSON object per line on stdout: `attempt`, `delta`, `discard`, `retry`, `tool_call`, `tool_result`,
 *   `commit`, `error`.
 *
 * @since 0.1.0
 */
import type * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as TransportError from "@reprise/core/TransportError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExitCode from "./ExitCode.js"
import * as Output from "./Output.js"

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
    }
  }
  return ExitCode.classify(error).class
}

/**
 * Seconds with one decimal: `1.0s`, `60.0s`.
 *
 * @since 0.1.0
 * @category formatting
 */
export const seconds = (delay: Duration.Duration): string => `${(Duration.toMillis(delay) / 1000).toFixed(1)}s`

/**
 * The notification consumer of one turn.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (mode: Mode) =>
  Effect.map(Output.Output, (output) => {
    let discarded: { attempt: number; chars: number; error: unknown } | undefined
    let maxAttempts = 0
    // Whether the TTY cursor is mid-line after a preview.
    let midLine = false

    const notify = (n: RecoveryNotifications.Notification): Effect.Effect<void> => {
      switch (n._tag) {
        case "AttemptStarted":
          maxAttempts = n.maxAttempts
          return mode === "json" ? output.stdout(line({ type: "attempt", attempt: n.attempt })) : Effect.void
        case "Preview": {
          if (n.event._tag !== "TextDelta" || n.event.text.length === 0) return Effect.void
          if (mode === "json") return output.stdout(line({ type: "delta", attempt: n.attempt, text: n.event.text }))
          if (mode === "tty") {
            midLine = !n.event.text.endsWith("\n")
            return output.stdout(n.event.text)
          }
          return Effect.void
        }
        case "AttemptDiscarded": {
          discarded = { attempt: n.attempt, chars: n.discardedText.length, error: n.error }
          const fresh = mode === "tty" && midLine ? output.stdout("\n") : Effect.void
          midLine = false
          return mode === "json"
            ? output.stdout(line({ type: "discard", attempt: n.attempt, discardedChars: n.discardedText.length }))
            : fresh
        }
        case "RetryScheduled": {
          const d = discarded
          const notice = d === undefined ? Effect.void : output.stderr(
            `reprise: attempt ${d.attempt}/${maxAttempts} failed (${
              shortReason(d.error)
            }); discarded ${d.chars} chars; ` +
              `retrying in ${seconds(n.delay)}${n.delaySource === "retry-after" ? " (server Retry-After)" : ""}\n`
          )
          const json = mode === "json"
            ? output.stdout(
              line({ type: "retry", attempt: n.nextAttempt, delay: Duration.toMillis(n.delay), source: n.delaySource })
            )
            : Effect.void
          return Effect.zipRight(json, notice)
        }
        case "Committed":
        case "Exhausted":
        case "Failed": {
          const fresh = mode === "tty" && midLine ? output.stdout("\n") : Effect.void
          midLine = false
          // A discarded preview on a TTY cannot be taken back: say plainly that it was not the answer.
          return n._tag === "Failed" || n._tag === "Exhausted" || discarded === undefined || mode !== "tty"
            ? fresh
            : Effect.zipRight(
              fresh,
              output.stderr(
                `reprise: attempt ${
                  discarded.attempt + 1
                } committed; text shown by earlier attempts is not part of the answer\n`
              )
            )
        }
      }
    }

    return {
      notifications: { notify } satisfies RecoveryNotifications.Service,
      toolCall: (call: Message.ToolCall) =>
        mode === "json"
          ? output.stdout(line({ type: "tool_call", id: call.id, name: call.name, arguments: call.arguments }))
          : mode === "tty"
          ? output.stderr(`reprise: tool ${call.name}(${JSON.stringify(call.arguments)})\n`)
          : Effect.void,
      toolResult: (result: Message.ToolResultMessage) =>
        mode === "json"
          ? output.stdout(line({
            type: "tool_result",
            id: result.toolCallId,
            name: result.name,
            content: result.content,
            isError: result.isError
          }))
          : Effect.void,
      commit: (reply: Generation.Reply, final: boolean) => {
        discarded = undefined
        if (mode === "json") {
          return output.stdout(line({
            type: "commit",
            text: reply.text,
            finishReason: reply.finishReason,
            attempts: reply.attempts,
            toolCalls: reply.toolCalls.length
          }))
        }
        const incomplete = final && reply.incomplete
          ? output.stderr(`reprise: the reply is incomplete (finish reason ${reply.providerFinishReason})\n`)
          : Effect.void
        if (mode === "plain") return final ? Effect.zipRight(output.stdout(reply.text + "\n"), incomplete) : Effect.void
        return incomplete
      },
      error: (error: unknown, debug: boolean) => {
        const outcome = ExitCode.classify(error)
        const detail = debug && error instanceof Error && error.stack !== undefined ? `\n${error.stack}` : ""
        return Effect.zipRight(
          mode === "json"
            ? output.stdout(
              line({ type: "error", class: outcome.class, message: outcome.message, exitCode: outcome.exitCode })
            )
            : Effect.void,
          output.stderr(`reprise: error [${outcome.class}]: ${outcome.message}${detail}\n`)
        ).pipe(Effect.as(outcome.exitCode))
      }
    }
  })
