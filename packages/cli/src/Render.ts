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
 *   `commit`, `error`; and with a background response (`--background`), `resume` and `cancel`; with fallback routes
 *   (`--fallback`), `route_switched`. The ledger (see `Ledger`) is in them: `discard` has the attempt's `entry`,
 *   `commit` the reply's `ledger`, `error` the `ledger` of the reply recovery gave up on.
 *
 * In `plain` and `tty`, a turn whose discarded attempts were billed (`Ledger.hasDiscardedCost`) ends, after its answer
 * or its error, with one line on stderr saying what they cost, its replies together:
 * `reprise: 2 attempts discarded ~1,204 input and ~3,140 output tokens (estimated), cost ~0.0123` (the cost with
 * prices only: `--prices`, `REPRISE_PRICES`).
 *
 * With fallback routes, a reply that leaves a route says so on stderr in every mode:
 * `reprise: route 1 (openai-chat gpt-4.1) failed (HTTP 503); switching to route 2 (anthropic claude-sonnet-4)`, or
 * `reprise: route 1 (…) skipped: circuit open; switching to route 2 (…)`; and an error that ended every route lists
 * each route's last failure on a line of its own after the error's line.
 *
 * A background response that is continued after a cut (`RetryScheduled` with `resume`, then `AttemptResumed`) keeps
 * its preview: nothing is discarded, and the continuation's text extends what was shown. Its notices are
 * `reprise: attempt 1/11 failed (connection reset); kept 120 chars; resuming in 1.0s` and
 * `reprise: attempt 2/11 resumed response resp_… after event 812` (or `… by polling it until it finishes`); on a
 * terminal that may be redrawn the preview is erased before them and shown again after them, so the screen holds the
 * notices and then one answer. A background response left behind is cancelled on the server:
 * `reprise: cancelled background response resp_…` (or `could not cancel …: <reason>`).
 *
 * A renderer hears of a turn through two doors: Recovery's notifications (attempts, previews, retries, the fleet)
 * while a reply is being produced, and {@link Render.commit} with each of `Chat.step`'s commits once it is kept in
 * the session. A committed reply reaches the output only through the second: the `Committed` notification is not
 * rendered, and a plain answer on stdout is text the session holds.
 *
 * Each mode is its own module (`internal/render/plain.ts`, `json.ts`, `tty.ts`); the texts of the notices, the same
 * in every mode, are in `internal/render/notices.ts`.
 *
 * @since 0.1.0
 */
import type * as Chat from "@reprise/core/Chat"
import type * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Json from "./internal/render/json.js"
import * as Notices from "./internal/render/notices.js"
import * as Plain from "./internal/render/plain.js"
import * as Tty from "./internal/render/tty.js"
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

/**
 * The renderer of one turn.
 *
 * @since 0.1.0
 * @category models
 */
export interface Render {
  /** Recovery's notifications, while each reply is produced. */
  readonly notifications: RecoveryNotifications.Service
  /**
   * Stops the countdown of a backoff, if one runs, and clears its line: for the end of a turn however it ended,
   * before anything else is written. (Without it the countdown still stops when the fiber that waits out the
   * backoff ends, interrupted or not, but only after that fiber's own finalizers.)
   */
  readonly stop: Effect.Effect<void>
  /**
   * A commit of the turn (`Chat.Options.onCommit`), once it is kept: a reply (the answer when it asks for no tools,
   * else its tool calls, about to run) or a tool's result.
   */
  readonly commit: (commit: Chat.Commit) => Effect.Effect<void>
  /** The error that ended the turn, on stderr (and as an `error` event with `--json`); returns its exit code. */
  readonly error: (error: unknown, debug: boolean) => Effect.Effect<number>
}

/**
 * A short reason for a retry notice: `HTTP 503`, `connection reset`, `timed out`, ….
 *
 * @since 0.1.0
 * @category formatting
 */
export const shortReason: (error: unknown) => string = Notices.shortReason

/**
 * Seconds with one decimal: `1.0s`, `60.0s`.
 *
 * @since 0.1.0
 * @category formatting
 */
export const seconds: (delay: Duration.Duration) => string = Notices.seconds

/**
 * The renderer of one turn in `mode`, writing to the `Output`; `sanitizer` keeps the key out of everything written.
 * `model` is the model the turn asks for: a `--json` `commit` names it when neither the provider nor a route named
 * the one that served the reply.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (
  mode: Mode,
  sanitizer: Sanitize.Sanitizer = Sanitize.none,
  model?: string | undefined
): Effect.Effect<Render, never, Output.Output> =>
  Effect.map(Output.Output, (output) => {
    const notices = Notices.make(sanitizer)
    switch (mode) {
      case "plain":
        return Plain.make(output, sanitizer, notices)
      case "json":
        return Json.make(output, sanitizer, notices, model)
      case "tty":
        return Tty.make(output, sanitizer, notices)
    }
  })
