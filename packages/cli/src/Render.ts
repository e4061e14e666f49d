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
    const flushPreview = (attempt: number) => {
      const rest = preview.flush()
      if (rest.length === 0) return Effect.void
      if (mode === "json") return json({ type: "delta", attempt, text: rest })
      if (mode === "tty") {
        midLine = !rest.endsWith("\n")
        return output.stdout(rest)
      }
      return Effect.void
    }
    let attempt = 0
    let discarded: { attempt: number; chars: number; error: unknown } | undefined
    let maxAttempts = 0
    // Whether the TTY cursor is mid-line after a preview.
    let midLine = false

    const notify = (n: RecoveryNotifications.Notification): Effect.Effect<void> => {
      switch (n._tag) {
        case "AttemptStarted":
          maxAttempts = n.maxAttempts
          attempt = n.attempt
          preview.reset()
          return mode === "json" ? json({ type: "attempt", attempt: n.attempt }) : Effect.void
        case "Preview": {
          if (n.event._tag !== "TextDelta" || n.event.text.length === 0 || mode === "plain") return Effect.void
          const text = preview.push(n.event.text)
          if (text.length === 0) return Effect.void
          if (mode === "json") return json({ type: "delta", attempt: n.attempt, text })
          midLine = !text.endsWith("\n")
          return output.stdout(text)
        }
        case "AttemptDiscarded": {
          // What was held back is dropped with the discarded attempt, never shown: an attempt cut mid-key leaves the
          // key's first characters there. (So a notice's "discarded N chars" may count a few never shown.)
          preview.reset()
          discarded = { attempt: n.attempt, chars: n.discardedText.length, error: n.error }
          const fresh = mode === "tty" && midLine ? output.stdout("\n") : Effect.void
          midLine = false
          return mode === "json"
            ? json({ type: "discard", attempt: n.attempt, discardedChars: n.discardedText.length })
            : fresh
        }
        case "RetryScheduled": {
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
          return Effect.zipRight(event, notice)
        }
        case "Committed":
        case "Exhausted":
        case "Failed": {
          // only a committed attempt's held-back text is shown; a failed one's may be the start of the key
          const held = n._tag === "Committed" ? flushPreview(attempt) : Effect.sync(() => preview.reset())
          const fresh = Effect.suspend(() => mode === "tty" && midLine ? output.stdout("\n") : Effect.void).pipe(
            Effect.tap(() => {
              midLine = false
            })
          )
          // A discarded preview on a TTY cannot be taken back: say plainly that it was not the answer.
          return n._tag === "Failed" || n._tag === "Exhausted" || discarded === undefined || mode !== "tty"
            ? Effect.zipRight(held, fresh)
            : Effect.zipRight(
              Effect.zipRight(held, fresh),
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
