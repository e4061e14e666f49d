/**
 * `RecoveryTelemetry` is what a recovery scope tells the tracer and the metric registry, through Effect's own
 * `Effect.withSpan` and `effect/Metric` (so any tracer works: `@effect/opentelemetry`'s, or none).
 *
 * **Spans.** One `reprise.reply` span per reply ({@link Recovery.run}), and under it one `reprise.attempt` span per
 * physical send. An attempt span ends when its outcome is decided (committed, or failed with what follows decided:
 * the retry's delay, or the end of recovery); the backoff sleep and the fleet's pauses belong to the reply span. A
 * failed attempt's span fails with the attempt's own error; the reply span fails with what the scope surfaced
 * (`RecoveryExhausted`, a permanent failure, a hook's failure) and is interrupted when the reply is cancelled.
 *
 * Attributes follow the OpenTelemetry GenAI conventions where they exist (`gen_ai.*`, set by
 * {@link Recovery.generate}, which knows the protocol and the model) and the HTTP ones for a status
 * (`http.response.status_code`); `error.type` is the error's class; `reprise.*` are ours ({@link Attribute}).
 * Nothing in an attribute comes from the request's messages or headers, and provider failures are scrubbed of the
 * key where they are made, so no key reaches a span.
 *
 * **Metrics** ({@link attempts}, {@link discards}, {@link exhaustions}, {@link retryDelay}, {@link committed},
 * {@link retryAfterWaits}, {@link surfaced}, {@link tokens}) are global `effect/Metric`s; {@link Recovery.generate} updates them
 * tagged with `gen_ai.system` (the tag is part of the key, see `meters`); export them with `@effect/opentelemetry`'s
 * `Metrics`/`OtlpMetrics` layers.
 *
 * @since 0.1.0
 */
import * as Duration from "effect/Duration"
import * as Metric from "effect/Metric"
import * as MetricBoundaries from "effect/MetricBoundaries"
import * as MetricKey from "effect/MetricKey"
import * as MetricLabel from "effect/MetricLabel"
import type * as Budget from "./Budget.js"
import type * as HookError from "./HookError.js"
import type * as ProviderFailure from "./ProviderFailure.js"
import type * as RecoveryExhausted from "./RecoveryExhausted.js"

/**
 * The span names.
 *
 * @since 0.1.0
 * @category constants
 */
export const SpanName = {
  reply: "reprise.reply",
  attempt: "reprise.attempt"
} as const

/**
 * The attribute keys reprise sets.
 *
 * @since 0.1.0
 * @category constants
 */
export const Attribute = {
  // OpenTelemetry GenAI semantic conventions
  system: "gen_ai.system",
  operation: "gen_ai.operation.name",
  requestModel: "gen_ai.request.model",
  requestMaxTokens: "gen_ai.request.max_tokens",
  inputTokens: "gen_ai.usage.input_tokens",
  outputTokens: "gen_ai.usage.output_tokens",
  /** On an attempt: input tokens the provider read from its prompt cache (part of `gen_ai.usage.input_tokens`). */
  cacheReadTokens: "gen_ai.usage.cache_read.input_tokens",
  /** On an attempt: input tokens the provider wrote to its prompt cache (part of `gen_ai.usage.input_tokens`). */
  cacheWriteTokens: "gen_ai.usage.cache_creation.input_tokens",
  finishReasons: "gen_ai.response.finish_reasons",
  /** On a committed reply and attempt: the model the provider named in its response. */
  responseModel: "gen_ai.response.model",
  // OpenTelemetry general and HTTP conventions
  errorType: "error.type",
  httpStatus: "http.response.status_code",
  // reprise
  protocol: "reprise.protocol",
  /** The attempt's number within the budget scope (1-based, shared by nested scopes). */
  attempt: "reprise.attempt",
  maxAttempts: "reprise.max_attempts",
  /** On the reply span: the physical sends this reply made. */
  attempts: "reprise.attempts",
  /**
   * `committed`, `retried`, `switched` (the next attempt goes to another route of the plan), `resumed` (the next attempt continues this attempt's response), `surfaced` (the
   * attempt's failure ended recovery), or `unsent` (nothing was sent: no attempt was left, or the request was refused
   * before its send).
   */
  outcome: "reprise.outcome",
  /** The error's class and reason, e.g. `TransportError.Reset`, `ProviderRejection.Authentication`. */
  errorClass: "reprise.error.class",
  providerCode: "reprise.provider.code",
  requestId: "reprise.provider.request_id",
  /** Whether the classification allowed a replay of this failure. */
  retryable: "reprise.retryable",
  /** Characters of preview the failed attempt had shown, now discarded. */
  discardedChars: "reprise.discarded_chars",
  /** Why a retryable failure was surfaced: `ExternalEffects`, or `Disabled` (inside `Recovery.disabled`). */
  replayBlocked: "reprise.replay_blocked",
  retryDelayMs: "reprise.retry.delay_ms",
  /** `backoff` or `retry-after`. */
  retryDelaySource: "reprise.retry.delay_source",
  retryAfterMs: "reprise.retry_after_ms",
  committedChars: "reprise.committed_chars",
  toolCalls: "reprise.tool_calls",
  /** On the reply span: why recovery ended (`Attempts`, `Deadline`, `RetryAfterBeyondDeadline`, `FleetBudget`). */
  exhaustedReason: "reprise.exhausted.reason",
  /** On an attempt that continues a response (see `Resumption`): the response's id. */
  responseId: "reprise.resume.response_id",
  /** On an attempt that continues a response: the sequence number it continues after. */
  resumeFrom: "reprise.resume.from_sequence",
  /** On an attempt that continues a response: `stream` or `poll`. */
  resumeMode: "reprise.resume.mode",
  /** With a plan (see `Routes`), on an attempt and a committed reply: the route's place in the plan, from 1. */
  routeIndex: "reprise.route.index",
  /** With a plan, on an attempt and a committed reply: the route's display name. */
  route: "reprise.route",
  /** On an attempt whose failure left its route: why (`Transient`, `Timeout`, `Rejected`, …). */
  routeSwitch: "reprise.route.switch_reason",
  /**
   * On an attempt: its billing verdict by the ledger's policy (`exact`, `estimated`, `not-billed`; see `Ledger`). Its
   * `gen_ai.usage.*` are its ledger entry's counts: reported or estimated as the two attributes below say.
   */
  usageVerdict: "reprise.usage.verdict",
  /** On an attempt: how far it got (`none`, `headers`, `content`, `terminal`). */
  usagePhase: "reprise.usage.phase",
  /** On an attempt: where its input count came from (`reported`, `estimated`, `none`). */
  usageInputSource: "reprise.usage.input_source",
  /** On an attempt: where its output count came from (`reported`, `estimated`, `none`). */
  usageOutputSource: "reprise.usage.output_source",
  /** On an attempt: its tokens at the user's prices (see `Prices`), when its model has some. */
  usageCost: "reprise.usage.cost",
  /** On the reply span: input tokens of the attempts it discarded, billed ones only. */
  discardedInputTokens: "reprise.discarded.input_tokens",
  /** On the reply span: output tokens of the attempts it discarded, billed ones only. */
  discardedOutputTokens: "reprise.discarded.output_tokens",
  /** On the reply span, with prices: the committed attempt's cost. */
  committedCost: "reprise.committed.cost",
  /** On the reply span, with prices: the discarded attempts' cost. */
  discardedCost: "reprise.discarded.cost"
} as const

const counterKey = (name: string, description: string) => MetricKey.counter(name, { description, incremental: true })

/** The metrics' keys: the metrics below are these keys, and {@link meters} tags them. */
const keys = {
  attempts: counterKey(
    "reprise.attempts",
    "Physical sends started by recovery scopes, first attempts and replays"
  ),
  discards: counterKey(
    "reprise.discards",
    "Failed attempts whose preview was discarded"
  ),
  resumes: counterKey(
    "reprise.resumes",
    "Attempts that continued a cut response instead of replaying it, by mode"
  ),
  cancels: counterKey(
    "reprise.response_cancels",
    "Background responses cancelled on the server by recovery, by outcome"
  ),
  exhaustions: counterKey(
    "reprise.exhaustions",
    "Replies whose recovery was exhausted, by reason"
  ),
  surfaced: counterKey(
    "reprise.surfaced",
    "Failures surfaced without replay, by error class"
  ),
  switches: counterKey(
    "reprise.route.switches",
    "Replies that left a route of their plan for the next one, by reason"
  ),
  committed: counterKey(
    "reprise.replies.committed",
    "Replies committed by recovery scopes"
  ),
  retryAfterWaits: counterKey(
    "reprise.retry_after.waits",
    "Replays held back by the server's Retry-After (sends the backoff alone would have made early)"
  ),
  tokens: counterKey(
    "reprise.tokens",
    "Tokens of recovered replies by outcome (committed, discarded) and kind (input, output), from the ledger"
  ),
  retryDelay: MetricKey.histogram(
    "reprise.retry.delay",
    MetricBoundaries.exponential({ start: 10, factor: 2, count: 14 }),
    "The wait before each replay, in milliseconds"
  )
}

/**
 * Physical sends started (first attempts and replays).
 *
 * @since 0.1.0
 * @category metrics
 */
export const attempts: Metric.Metric.Counter<number> = Metric.fromMetricKey(keys.attempts)

/**
 * Failed attempts whose preview was discarded.
 *
 * @since 0.1.0
 * @category metrics
 */
export const discards: Metric.Metric.Counter<number> = Metric.fromMetricKey(keys.discards)

/**
 * Attempts that continued the response of the attempt before them (see `Resumption`), tagged `mode`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const resumes: Metric.Metric.Counter<number> = Metric.fromMetricKey(keys.resumes)

/**
 * Background responses recovery left behind and cancelled on the server, tagged `outcome` (`cancelled`, `failed`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const cancels: Metric.Metric.Counter<number> = Metric.fromMetricKey(keys.cancels)

/**
 * Replies that ended in `RecoveryExhausted`, tagged `reason`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const exhaustions: Metric.Metric.Counter<number> = Metric.fromMetricKey(keys.exhaustions)

/**
 * Failures surfaced without replay (permanent, blocked, a hook's failure), tagged `error.type`.
 *
 * @since 0.1.0
 * @category metrics
 */
export const surfaced: Metric.Metric.Counter<number> = Metric.fromMetricKey(keys.surfaced)

/**
 * Committed replies.
 *
 * @since 0.1.0
 * @category metrics
 */
export const committed: Metric.Metric.Counter<number> = Metric.fromMetricKey(keys.committed)

/**
 * Replays whose wait the server's `Retry-After` decided (lengthening the backoff): each is a send that the backoff
 * alone would have made early, into another refusal.
 *
 * @since 0.1.0
 * @category metrics
 */
export const retryAfterWaits: Metric.Metric.Counter<number> = Metric.fromMetricKey(keys.retryAfterWaits)

/**
 * The wait before each replay, in milliseconds, tagged `source` (`backoff` or `retry-after`). Buckets from 10 ms
 * doubling to about 82 s.
 *
 * @since 0.1.0
 * @category metrics
 */
export const retryDelay: Metric.Metric.Histogram<number> = Metric.fromMetricKey(keys.retryDelay)

/**
 * Tokens of replies from their ledgers (see `Ledger`), tagged `outcome` (`committed`: the committed attempt's;
 * `discarded`: the other billed attempts', reported or estimated) and `kind` (`input`, `output`).
 *
 * @since 0.1.0
 * @category metrics
 */
export const tokens: Metric.Metric.Counter<number> = Metric.fromMetricKey(keys.tokens)

/**
 * The class of an error as `Tag.reason` (`TransportError.Reset`, `RecoveryExhausted.Deadline`, `HookError.onChunk`).
 *
 * @since 0.1.0
 * @category attributes
 */
export const errorClass = (
  error:
    | ProviderFailure.ProviderFailure
    | HookError.HookError
    | Budget.BudgetExhausted
    | RecoveryExhausted.RecoveryExhausted
): string => {
  switch (error._tag) {
    case "TransportError":
    case "ProviderRejection":
    case "BudgetExhausted":
    case "RecoveryExhausted":
      return `${error._tag}.${error.reason}`
    case "HookError":
      return `${error._tag}.${error.hook}`
  }
}

/**
 * The attributes of a failed attempt's error: its class, HTTP status, provider code and request id.
 *
 * @since 0.1.0
 * @category attributes
 */
export const failureAttributes = (
  error: ProviderFailure.ProviderFailure | HookError.HookError | Budget.BudgetExhausted
): Record<string, unknown> => {
  const attributes: Record<string, unknown> = {
    [Attribute.errorType]: error._tag,
    [Attribute.errorClass]: errorClass(error)
  }
  if (error._tag === "TransportError" || error._tag === "ProviderRejection") {
    if (error.status !== undefined) attributes[Attribute.httpStatus] = error.status
    if (error.providerCode !== undefined) attributes[Attribute.providerCode] = error.providerCode
    if (error.requestId !== undefined) attributes[Attribute.requestId] = error.requestId
  }
  if (error._tag === "TransportError" && error.retryAfter !== undefined) {
    attributes[Attribute.retryAfterMs] = Duration.toMillis(error.retryAfter)
  }
  return attributes
}

/**
 * The GenAI system name of a reprise protocol (`openai` for the OpenAI-style ones, `anthropic`).
 *
 * @since 0.1.0
 * @category attributes
 */
export const systemOf = (protocol: string): string => protocol === "anthropic" ? "anthropic" : "openai"

/**
 * The metrics of one `gen_ai.system` (none: untagged), each update's labels part of its key. Built once per system and
 * label value, so an update costs a counter's update: tagging per update (`Effect.tagMetrics`, `Metric.tagged`) builds
 * and hashes a new key every time, which costs 0.1–0.4 ms per update under load. The keys are the ones `Metric.tagged`
 * would make: a label value first, then `gen_ai.system`.
 *
 * @internal
 */
export interface Meters {
  readonly attempts: Metric.Metric.Counter<number>
  readonly discards: Metric.Metric.Counter<number>
  readonly committed: Metric.Metric.Counter<number>
  readonly retryAfterWaits: Metric.Metric.Counter<number>
  readonly resumes: (mode: string) => Metric.Metric.Counter<number>
  readonly cancels: (outcome: string) => Metric.Metric.Counter<number>
  readonly exhaustions: (reason: string) => Metric.Metric.Counter<number>
  readonly surfaced: (errorType: string) => Metric.Metric.Counter<number>
  readonly switches: (reason: string) => Metric.Metric.Counter<number>
  readonly retryDelay: (source: string) => Metric.Metric.Histogram<number>
  readonly tokens: (outcome: "committed" | "discarded", kind: "input" | "output") => Metric.Metric.Counter<number>
}

const metersBySystem = new Map<string | undefined, Meters>()

/**
 * The {@link Meters} of `system`.
 *
 * @internal
 */
export const meters = (system: string | undefined): Meters => {
  const known = metersBySystem.get(system)
  if (known !== undefined) return known
  const systemLabels = system === undefined ? [] : [MetricLabel.make(Attribute.system, system)]
  const tagged = <M>(make: (labels: ReadonlyArray<MetricLabel.MetricLabel>) => M, label: string) => {
    const cache = new Map<string, M>()
    return (value: string): M => {
      let metric = cache.get(value)
      if (metric === undefined) {
        metric = make([MetricLabel.make(label, value), ...systemLabels])
        cache.set(value, metric)
      }
      return metric
    }
  }
  const counter = (key: MetricKey.MetricKey.Counter<number>) => (labels: ReadonlyArray<MetricLabel.MetricLabel>) =>
    Metric.fromMetricKey(MetricKey.taggedWithLabels(key, labels))
  const histogram = (key: MetricKey.MetricKey.Histogram) => (labels: ReadonlyArray<MetricLabel.MetricLabel>) =>
    Metric.fromMetricKey(MetricKey.taggedWithLabels(key, labels))
  const made: Meters = {
    attempts: counter(keys.attempts)(systemLabels),
    discards: counter(keys.discards)(systemLabels),
    committed: counter(keys.committed)(systemLabels),
    retryAfterWaits: counter(keys.retryAfterWaits)(systemLabels),
    resumes: tagged(counter(keys.resumes), "mode"),
    cancels: tagged(counter(keys.cancels), "outcome"),
    exhaustions: tagged(counter(keys.exhaustions), "reason"),
    surfaced: tagged(counter(keys.surfaced), Attribute.errorType),
    switches: tagged(counter(keys.switches), "reason"),
    retryDelay: tagged(histogram(keys.retryDelay), "source"),
    tokens: (() => {
      const byOutcome = {
        committed: tagged(
          (labels) => counter(keys.tokens)([MetricLabel.make("outcome", "committed"), ...labels]),
          "kind"
        ),
        discarded: tagged(
          (labels) => counter(keys.tokens)([MetricLabel.make("outcome", "discarded"), ...labels]),
          "kind"
        )
      }
      return (outcome: "committed" | "discarded", kind: "input" | "output") => byOutcome[outcome](kind)
    })()
  }
  metersBySystem.set(system, made)
  return made
}
