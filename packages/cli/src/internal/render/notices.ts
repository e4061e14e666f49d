/**
 * The texts of the CLI's notices on stderr, one function per notice, whatever the output mode that writes it. Text
 * that came from the server (a reason, a response id, a tool's name) is scrubbed of the key and its control
 * characters escaped here, so no mode can forget to.
 *
 * @internal
 */
import * as Ledger from "@reprise/core/Ledger"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as RecoveryExhausted from "@reprise/core/RecoveryExhausted"
import type * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import type * as Routes from "@reprise/core/Routes"
import * as TransportError from "@reprise/core/TransportError"
import * as Duration from "effect/Duration"
import * as ExitCode from "../../ExitCode.js"
import * as Sanitize from "../../Sanitize.js"

type Notification<Tag extends RecoveryNotifications.Notification["_tag"]> = Extract<
  RecoveryNotifications.Notification,
  { readonly _tag: Tag }
>

/**
 * A short reason for a retry notice: `HTTP 503`, `connection reset`, `timed out`, ….
 *
 * @internal
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
      case "MalformedChunk":
        return "malformed chunk"
    }
  }
  // a refusal that is continued (a resume the server would not stream: polled instead) or told (a failed cancel)
  if (ProviderRejection.isProviderRejection(error) && error.status !== undefined) return `HTTP ${error.status}`
  return ExitCode.classify(error).class
}

/**
 * Why a route was left, as its notice and its `--json` event say it: the failure's short reason (`HTTP 503`, `timed
 * out`), `context overflow` for an overflow, `circuit open` for a route skipped without a send.
 *
 * @internal
 */
export const switchReason = (n: Notification<"RouteSwitched">): string =>
  n.reason === "CircuitOpen"
    ? "circuit open"
    : n.reason === "ContextOverflow"
    ? "context overflow"
    : n.error === undefined
    ? n.reason
    : shortReason(n.error)

/**
 * Each route's last failure, when the error ended a plan whose every route failed (see `Routes`); empty otherwise.
 *
 * @internal
 */
export const routeFailuresOf = (error: unknown): ReadonlyArray<Routes.RouteFailure> =>
  (TransportError.isTransportError(error) || ProviderRejection.isProviderRejection(error) ||
      RecoveryExhausted.isRecoveryExhausted(error))
    ? error.routeFailures ?? []
    : []

/**
 * Seconds with one decimal: `1.0s`, `60.0s`.
 *
 * @internal
 */
export const seconds = (delay: Duration.Duration): string => `${(Duration.toMillis(delay) / 1000).toFixed(1)}s`

/**
 * An attempt that failed and was discarded.
 *
 * @internal
 */
export interface Discarded {
  readonly attempt: number
  readonly chars: number
  readonly error: unknown
}

/**
 * How many characters the route left by a switch had shown in its last attempt: its discard's, when that attempt is
 * the one just before the switch's next attempt (a route skipped without a send discarded nothing).
 *
 * @internal
 */
export const discardedBy = (discarded: Discarded | undefined, n: Notification<"RouteSwitched">): number =>
  discarded !== undefined && n.reason !== "CircuitOpen" && discarded.attempt === n.nextAttempt - 1 ? discarded.chars : 0

/**
 * What the discarded attempts of `ledgers` (the ledgers of a turn's replies) cost together: their counts summed,
 * estimated when any is, and a cost when every one has a cost; `undefined` when no discarded attempt was billed
 * (`Ledger.hasDiscardedCost`).
 *
 * @internal
 */
export const discardedOf = (ledgers: ReadonlyArray<Ledger.Ledger>): Ledger.Totals | undefined => {
  const billed = ledgers.filter(Ledger.hasDiscardedCost).map((ledger) => ledger.discarded)
  if (billed.length === 0) return undefined
  const sum = (count: (totals: Ledger.Totals) => number) => billed.reduce((acc, totals) => acc + count(totals), 0)
  const priced = billed.every((totals) => totals.cost !== undefined)
  return {
    attempts: sum((totals) => totals.attempts),
    billed: sum((totals) => totals.billed),
    tokens: {
      input: sum((totals) => totals.tokens.input),
      output: sum((totals) => totals.tokens.output),
      cacheRead: sum((totals) => totals.tokens.cacheRead),
      cacheWrite: sum((totals) => totals.tokens.cacheWrite)
    },
    estimated: billed.some((totals) => totals.estimated),
    ...(priced ? { cost: sum((totals) => totals.cost ?? 0) } : {})
  }
}

/** A count with thousands separators: `3,140`. */
const grouped = (count: number): string => String(Math.round(count)).replace(/\B(?=(\d{3})+(?!\d))/g, ",")

/**
 * The notices of one turn, with the turn's sanitizer.
 *
 * @internal
 */
export interface Notices {
  /** Server text as a notice shows it: no key, no control characters. */
  readonly shown: (text: string) => string
  /** `reprise: attempt 1/11 failed (HTTP 503); discarded 9 chars; retrying in 1.0s` */
  readonly retrying: (
    discarded: Discarded,
    maxAttempts: number,
    scheduled: Notification<"RetryScheduled">
  ) => string
  /** `reprise: attempt 1/11 failed (connection reset); kept 120 chars; resuming in 1.0s` */
  readonly resuming: (
    maxAttempts: number,
    scheduled: Notification<"RetryScheduled">,
    resume: NonNullable<Notification<"RetryScheduled">["resume"]>
  ) => string
  /** `reprise: attempt 2/11 resumed response resp_… after event 812` (or `… by polling it until it finishes`) */
  readonly resumed: (resumed: Notification<"AttemptResumed">) => string
  /** `reprise: cancelled background response resp_…` (or `could not cancel …: <reason>`) */
  readonly cancelled: (cancelled: Notification<"ResponseCancelled">) => string
  /**
   * `reprise: route 1 (openai-chat gpt-4.1) failed (HTTP 503); switching to route 2 (anthropic claude-sonnet-4)`, with
   * `; discarded N chars` before the switch when the route's attempt had shown some; or, for a route skipped without
   * a send, `reprise: route 2 (…) skipped: circuit open; switching to route 3 (…)`.
   */
  readonly routeSwitched: (switched: Notification<"RouteSwitched">, discardedChars: number) => string
  /** A wait for the fleet's pause, its store going, its store coming back. */
  readonly fleet: (notification: Notification<"FleetPaused" | "FleetUnavailable" | "FleetRestored">) => string
  /** The line of a backoff's countdown, without its line end: `reprise: retrying in 12s…` */
  readonly countdown: (wholeSeconds: number) => string
  /** A committed reply after a discarded preview that is still on the screen: that text was not the answer. */
  readonly notTheAnswer: (committedAttempt: number, discarded: Discarded) => string
  /** A committed final reply that the provider cut short (its token limit, a content filter). */
  readonly incomplete: (providerFinishReason: string) => string
  /** A tool call of a committed reply, about to run. */
  readonly toolCall: (name: string, args: unknown) => string
  /**
   * The error that ended a turn (`outcome` is its classification), with its stack under `--debug`; when every route of
   * a plan failed, a line per route after it: `reprise:   route 1 (openai-chat gpt-4.1): <its last failure>`.
   */
  readonly error: (outcome: ExitCode.Outcome, error: unknown, debug: boolean) => string
  /**
   * What a turn's discarded attempts cost ({@link discardedOf}), after its answer or its error:
   * `reprise: 2 attempts discarded ~1,204 input and ~3,140 output tokens (estimated), cost ~0.0123`; the input tokens
   * only when there are some, the cost only with prices (4 decimals, in the prices' unit), `~` and `(estimated)` when
   * a count is estimated, `(exact)` otherwise.
   */
  readonly discardedCost: (discarded: Ledger.Totals) => string
}

const retryAfter = (source: Notification<"RetryScheduled">["delaySource"]) =>
  source === "retry-after" ? " (server Retry-After)" : ""

/**
 * The notices, with server text scrubbed by `sanitizer`.
 *
 * @internal
 */
export const make = (sanitizer: Sanitize.Sanitizer): Notices => {
  // Server text in a notice: no key, no control characters.
  const shown = (text: string) => Sanitize.escapeControls(sanitizer.scrub(text))
  return {
    shown,
    retrying: (discarded, maxAttempts, n) =>
      `reprise: attempt ${discarded.attempt}/${maxAttempts} failed (${
        shown(shortReason(discarded.error))
      }); discarded ${discarded.chars} chars; retrying in ${seconds(n.delay)}${retryAfter(n.delaySource)}\n`,
    resuming: (maxAttempts, n, resume) =>
      `reprise: attempt ${n.nextAttempt - 1}/${maxAttempts} failed (${shown(shortReason(resume.error))}); ` +
      `kept ${resume.keptChars} chars; resuming in ${seconds(n.delay)}${retryAfter(n.delaySource)}\n`,
    resumed: (n) => {
      const how = n.mode === "stream"
        ? `after event ${n.fromSequence}`
        : `after event ${n.fromSequence} by polling it until it finishes`
      return `reprise: attempt ${n.attempt}/${n.maxAttempts} resumed response ${shown(n.responseId)} ${how}\n`
    },
    cancelled: (n) =>
      n.error === undefined
        ? `reprise: cancelled background response ${shown(n.responseId)}\n`
        : `reprise: could not cancel background response ${shown(n.responseId)}: ${shown(shortReason(n.error))}\n`,
    routeSwitched: (n, discardedChars) => {
      const route = (ref: Notification<"RouteSwitched">["from"]) => `route ${ref.index} (${shown(ref.name)})`
      const left = n.reason === "CircuitOpen"
        ? `${route(n.from)} skipped: circuit open`
        : `${route(n.from)} failed (${shown(switchReason(n))})${
          discardedChars > 0 ? `; discarded ${discardedChars} chars` : ""
        }`
      return `reprise: ${left}; switching to ${route(n.to)}\n`
    },
    fleet: (n) => {
      switch (n._tag) {
        case "FleetPaused":
          return `reprise: waiting ${seconds(n.delay)}: the fleet is paused by ${
            n.status === undefined ? "server pushback" : `a ${n.status}`
          }\n`
        case "FleetUnavailable":
          return `reprise: the fleet is unavailable (${
            Sanitize.escapeControls(n.detail)
          }); going on with this process's own limits\n`
        case "FleetRestored":
          return `reprise: the fleet is back; the retry budget and pauses are shared again\n`
      }
    },
    countdown: (wholeSeconds) => `reprise: retrying in ${wholeSeconds}s…`,
    // the committed attempt may have continued the response of the one after the discard (a resume)
    notTheAnswer: (attempt, discarded) =>
      attempt === discarded.attempt + 1
        ? `reprise: attempt ${attempt} committed; text shown by earlier attempts is not part of the answer\n`
        : `reprise: attempt ${attempt} committed, continuing attempt ${discarded.attempt + 1}; text shown before ` +
          `attempt ${discarded.attempt + 1} is not part of the answer\n`,
    incomplete: (providerFinishReason) =>
      `reprise: the reply is incomplete (finish reason ${shown(providerFinishReason)})\n`,
    toolCall: (name, args) =>
      `reprise: tool ${shown(name)}(${Sanitize.escapeControls(JSON.stringify(sanitizer.scrubJson(args)))})\n`,
    // a stack holds the server's message too: escape each of its lines, keep the line breaks
    error: (outcome, error, debug) => {
      const stack = debug && error instanceof Error && error.stack !== undefined ? `\n${error.stack}` : ""
      const routes = routeFailuresOf(error).map((failure) =>
        `reprise:   route ${failure.route} (${shown(failure.name)}): ${shown(failure.message)}\n`
      )
      return `reprise: error [${outcome.class}]: ${shown(outcome.message)}${stack.split("\n").map(shown).join("\n")}\n${
        routes.join("")
      }`
    },
    // numbers only, but through the scrubber as every notice
    discardedCost: (discarded) => {
      const about = discarded.estimated ? "~" : ""
      const output = `${about}${grouped(discarded.tokens.output)} output tokens`
      const tokens = discarded.tokens.input === 0
        ? output
        : `${about}${grouped(discarded.tokens.input)} input and ${output}`
      const cost = discarded.cost === undefined ? "" : `, cost ${about}${discarded.cost.toFixed(4)}`
      const attempts = `${discarded.billed} attempt${discarded.billed === 1 ? "" : "s"}`
      return shown(
        `reprise: ${attempts} discarded ${tokens} (${discarded.estimated ? "estimated" : "exact"})${cost}`
      ) + "\n"
    }
  }
}
