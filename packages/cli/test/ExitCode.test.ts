import * as HelpDoc from "@effect/cli/HelpDoc"
import * as ValidationError from "@effect/cli/ValidationError"
import { assert, describe, it } from "@effect/vitest"
import * as Chat from "@reprise/core/Chat"
import * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import { RecoveryExhausted } from "@reprise/core/RecoveryExhausted"
import * as Transcript from "@reprise/core/Transcript"
import * as TransportError from "@reprise/core/TransportError"
import * as ScriptLoader from "@reprise/simulator/ScriptLoader"
import { ConfigError, Duration } from "effect"
import * as BuiltinTools from "../src/BuiltinTools.js"
import * as ExitCode from "../src/ExitCode.js"

const exhausted = (reason: RecoveryExhausted["reason"]) =>
  new RecoveryExhausted({ reason, attempts: 1, maxAttempts: 1, elapsed: Duration.zero, errors: [] })

describe("ExitCode", () => {
  const table: ReadonlyArray<readonly [string, unknown, number, string]> = [
    ["exhausted attempts", exhausted("Attempts"), 75, "RecoveryExhausted.Attempts"],
    ["deadline", exhausted("Deadline"), 75, "RecoveryExhausted.Deadline"],
    [
      "retry-after past deadline",
      exhausted("RetryAfterBeyondDeadline"),
      75,
      "RecoveryExhausted.RetryAfterBeyondDeadline"
    ],
    ["401", ProviderFailure.fromHttpStatus({ status: 401 }), 76, "ProviderRejection.Authentication"],
    ["403", ProviderFailure.fromHttpStatus({ status: 403 }), 76, "ProviderRejection.Permission"],
    ["404", ProviderFailure.fromHttpStatus({ status: 404 }), 77, "ProviderRejection.NotFound"],
    ["400", ProviderFailure.fromHttpStatus({ status: 400 }), 1, "ProviderRejection.BadRequest"],
    [
      "quota",
      ProviderFailure.fromHttpStatus({ status: 429, code: "insufficient_quota" }),
      1,
      "ProviderRejection.Quota"
    ],
    ["redirect", ProviderFailure.fromHttpStatus({ status: 308 }), 1, "ProviderRejection.RedirectRefused"],
    ["overflow", ProviderFailure.fromHttpStatus({ status: 413 }), 1, "ProviderRejection.ContextOverflow"],
    ["malformed", ProviderFailure.fromInBandError({ code: "x" }), 1, "TransportError.ProviderError"],
    [
      "reply too large",
      new ProviderRejection.ProviderRejection({ reason: "ReplyTooLarge", detail: "more than 2048 bytes" }),
      1,
      "ProviderRejection.ReplyTooLarge"
    ],
    [
      "protocol violation",
      new ProviderRejection.ProviderRejection({ reason: "ProtocolViolation", detail: "an unexpected 100 Continue" }),
      1,
      "ProviderRejection.ProtocolViolation"
    ],
    [
      "a reset surfaced without replay",
      new TransportError.TransportError({ reason: "Reset" }),
      75,
      "TransportError.Reset"
    ],
    [
      "x-should-retry: false",
      ProviderFailure.fromHttpStatus({ status: 503, shouldRetry: false }),
      1,
      "TransportError.HttpStatus"
    ],
    ["config", ConfigError.InvalidData(["REPRISE_DEADLINE"], "bad"), 2, "UsageError"],
    ["usage", new ExitCode.UsageError({ detail: "no model" }), 2, "UsageError"],
    ["command line", ValidationError.invalidValue(HelpDoc.p("bad")), 2, "UsageError"],
    ["anything else", new Error("boom"), 1, "InternalError"]
  ]
  for (const [name, error, code, klass] of table) {
    it(`${name} → ${code} (${klass})`, () => {
      const outcome = ExitCode.classify(error)
      assert.strictEqual(outcome.exitCode, code)
      assert.strictEqual(outcome.class, klass)
    })
  }

  it("the tool-loop limit is a permanent ChatError, not an internal error", () => {
    const outcome = ExitCode.classify(new Chat.ChatError({ reason: "MaxSteps", maxSteps: 16 }))
    assert.strictEqual(outcome.class, "ChatError.MaxSteps")
    assert.strictEqual(outcome.exitCode, 1)
    assert.include(outcome.message, "after 16 replies")
  })
})

describe("ExitCode: errors of the command modules, by type id", () => {
  it("each key is its module's TypeId, so a guard read by key cannot drift from the class", () => {
    assert.strictEqual(ExitCode.typeIds.ScriptError, ScriptLoader.TypeId)
    assert.strictEqual(ExitCode.typeIds.ToolSelectionError, BuiltinTools.ToolSelectionErrorTypeId)
    assert.strictEqual(ExitCode.typeIds.TranscriptError, Transcript.TranscriptErrorTypeId)
    assert.strictEqual(ExitCode.typeIds.ChatError, Chat.ChatErrorTypeId)
  })

  it("the errors themselves are classified; a lookalike with their tag is an internal error", () => {
    const cases: ReadonlyArray<readonly [unknown, number, string]> = [
      [new ScriptLoader.ScriptError({ reason: "Json", issues: ["not JSON"] }), 2, "ScriptError"],
      [new BuiltinTools.ToolSelectionError({ reason: "UnknownTool", tool: "x" }), 2, "ToolSelectionError"],
      [
        new Transcript.TranscriptError({ reason: "Corrupt", path: "s.jsonl", line: 2, detail: "bad" }),
        2,
        "TranscriptError"
      ],
      [new Chat.ChatError({ reason: "MaxSteps", maxSteps: 3 }), 1, "ChatError.MaxSteps"]
    ]
    for (const [error, code, klass] of cases) {
      const outcome = ExitCode.classify(error)
      assert.deepStrictEqual([outcome.exitCode, outcome.class], [code, klass])
    }
    for (const tag of ["ScriptError", "ToolSelectionError", "TranscriptError", "ChatError"]) {
      assert.strictEqual(ExitCode.classify({ _tag: tag, message: "fake" }).class, "InternalError", tag)
    }
  })
})
