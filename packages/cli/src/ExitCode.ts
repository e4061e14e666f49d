/**
 * How the `reprise` binary ends: one exit code per kind of outcome, and a short class name for each error, used on
 * stderr and in `--json` `error` events.
 *
 * | code | meaning |
 * |---|---|
 * | 0 | committed (an incomplete finish such as `length` too, with a notice on stderr) |
 * | 1 | permanent provider error: bad request, quota, redirect refused, malformed stream, reply too large, protocol violation, unrecoverable overflow |
 * | 2 | usage or configuration error: bad flag, missing key, invalid number, corrupt session file |
 * | 75 | transient failure not recovered: attempts or deadline exhausted, rate limited, Retry-After past the deadline |
 * | 76 | authentication or permission (401/403) |
 * | 77 | model not found (404) |
 * | 130 | interrupted (SIGINT); nothing committed by the interrupted turn |
 *
 * @since 0.1.0
 */
import * as HelpDoc from "@effect/cli/HelpDoc"
import * as ValidationError from "@effect/cli/ValidationError"
import * as Classification from "@reprise/core/Classification"
import * as HookError from "@reprise/core/HookError"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as RecoveryExhausted from "@reprise/core/RecoveryExhausted"
import * as TransportError from "@reprise/core/TransportError"
import * as ConfigError from "effect/ConfigError"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import { stripColour } from "./Output.js"

/**
 * @since 0.1.0
 * @category codes
 */
export const ExitCode = {
  Committed: 0,
  Permanent: 1,
  Usage: 2,
  Transient: 75,
  Auth: 76,
  NotFound: 77,
  Interrupted: 130
} as const

/**
 * A usage or configuration problem found by the CLI itself (a value out of range, a missing key, a missing model).
 *
 * @since 0.1.0
 * @category errors
 */
export class UsageError extends Schema.TaggedError<UsageError>("@reprise/cli/UsageError")("UsageError", {
  detail: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return this.detail
  }
}

/**
 * The class and exit code of an error.
 *
 * @since 0.1.0
 * @category models
 */
export interface Outcome {
  /** e.g. `RecoveryExhausted.Attempts`, `ProviderRejection.Authentication`, `UsageError`. */
  readonly class: string
  readonly exitCode: number
  readonly message: string
}

// The failures of a recovery scope (the `RecoveryError` family) are told apart by their guards. The errors of the
// modules the CLI loads only for a command (the simulator's script loader, the builtin tools, the transcript, the
// conversation step) are told apart by their type ids too, read here by key: importing their guards would load those
// modules into the CLI's first chunk, which `--help` runs. `test/ExitCode.test.ts` checks each key against its
// module's `TypeId`.
/** @internal */
export const typeIds = {
  ScriptError: Symbol.for("@reprise/simulator/ScriptLoader/ScriptError"),
  ToolSelectionError: Symbol.for("@reprise/cli/BuiltinTools/ToolSelectionError"),
  TranscriptError: Symbol.for("@reprise/core/TranscriptError"),
  ChatError: Symbol.for("@reprise/core/ChatError")
} as const

const is = (u: unknown, name: keyof typeof typeIds) => Predicate.hasProperty(u, typeIds[name])

/**
 * Classifies any error the CLI can end with.
 *
 * @since 0.1.0
 * @category classification
 */
export const classify = (error: unknown): Outcome => {
  if (RecoveryExhausted.isRecoveryExhausted(error)) {
    return { class: `RecoveryExhausted.${error.reason}`, exitCode: ExitCode.Transient, message: error.message }
  }
  if (ProviderRejection.isProviderRejection(error)) {
    const exitCode = error.reason === "Authentication" || error.reason === "Permission"
      ? ExitCode.Auth
      : error.reason === "NotFound"
      ? ExitCode.NotFound
      : ExitCode.Permanent
    return { class: `ProviderRejection.${error.reason}`, exitCode, message: error.message }
  }
  if (TransportError.isTransportError(error)) {
    // A transient failure that was not replayed (recovery off, or blocked by external effects) may be resumed later;
    // one the allowlist refuses (x-should-retry: false, an unknown status or code) is permanent.
    const transient = Classification.isRetryable(error)
    return {
      class: `TransportError.${error.reason}`,
      exitCode: transient ? ExitCode.Transient : ExitCode.Permanent,
      message: error.message
    }
  }
  if (error instanceof UsageError || ValidationError.isValidationError(error) || ConfigError.isConfigError(error)) {
    return { class: "UsageError", exitCode: ExitCode.Usage, message: usageMessage(error) }
  }
  if (is(error, "ScriptError") || is(error, "ToolSelectionError")) {
    return { class: (error as { readonly _tag: string })._tag, exitCode: ExitCode.Usage, message: messageOf(error) }
  }
  if (is(error, "TranscriptError")) {
    return { class: "TranscriptError", exitCode: ExitCode.Usage, message: messageOf(error) }
  }
  if (HookError.isHookError(error)) return { class: "HookError", exitCode: ExitCode.Permanent, message: error.message }
  // The step's tool-loop limit (Chat.ChatError): the model kept asking for tools. Not a bug in reprise, and sending
  // the same turn again would loop the same way: permanent. (Told by its type id: Chat is not loaded for --help.)
  if (is(error, "ChatError")) {
    const reason = (error as { readonly reason?: string }).reason ?? "MaxSteps"
    return { class: `ChatError.${reason}`, exitCode: ExitCode.Permanent, message: messageOf(error) }
  }
  return { class: "InternalError", exitCode: ExitCode.Permanent, message: messageOf(error) }
}

const messageOf = (error: unknown): string =>
  error instanceof Error
    ? error.message
    : Predicate.hasProperty(error, "message")
    ? String(error.message)
    : String(error)

const usageMessage = (error: unknown): string => {
  if (ConfigError.isConfigError(error)) return String(error)
  if (ValidationError.isValidationError(error)) return commandLineMessage(error.error)
  return messageOf(error)
}

/** @effect/cli's complaint about a command line, on one line and without its colour. */
const commandLineMessage = (doc: HelpDoc.HelpDoc): string => {
  const text = stripColour(HelpDoc.toAnsiText(doc)).split("\n").map((line) => line.trim()).filter((line) => line !== "")
  return text.length === 0 ? "invalid command line (see reprise --help)" : text.join(" ")
}

/**
 * The command ended with a non-zero exit code after reporting its outcome itself.
 *
 * @since 0.1.0
 * @category errors
 */
export class Exit {
  readonly _tag = "Exit"
  constructor(readonly code: number) {}
}
