/**
 * The bill of a reply: one entry per physical send, what it reached and what it cost, beside what was committed.
 *
 * A recovered reply can cost several times what its answer shows: a stream cut at token 3,000 and replayed bills
 * both, a 529 before inference bills nothing. Every attempt of a reply gets an {@link Entry}: its route and model,
 * how far it got ({@link Phase}), its tokens and where each count came from ({@link Source}), and a billing
 * {@link Verdict} from the policy below. The {@link Ledger} adds them up as `committed` (the attempt that was
 * committed) and `discarded` (every other attempt the provider billed), with money when the user supplies
 * `Prices`.
 *
 * **The policy** (docs/ledger.md has it per protocol):
 * - `not-billed`: nothing came back (a refused or reset connection, no headers in time); an error status (4xx, 429,
 *   5xx) instead of a stream; a stream whose first event was the provider's own error, before any content. Its
 *   tokens are zero.
 * - `exact`: the attempt ended with its usage block (a terminal, and usage without `partial`).
 * - `estimated`: anything else that opened a stream: a cut, a stall, a timeout or an in-band error after content, or
 *   a terminal without usage. Input tokens are the provider's when it reported them at the start (Anthropic's
 *   `message_start`), otherwise estimated from the request; output tokens are estimated from the characters of text,
 *   reasoning and tool arguments the attempt produced.
 * - An attempt whose response the next attempt continued (see `Resumption`) is `continued`: it is billed once, on
 *   the attempt that ends the response, so its entry counts nothing.
 *
 * The estimator is {@link estimator}: `chars/4`, a quarter of the characters, rounded up (English prose under the
 * tokenizers of OpenAI and Anthropic runs 3.5 to 4.5 characters a token; docs/ledger.md gives the error measured on
 * the recorded captures).
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import type * as Generation from "./Generation.js"
import * as Prices from "./Prices.js"

/**
 * How far an attempt got: `none` (no response), `headers` (a response: an error status, or a stream with no content
 * yet), `content` (the first text, reasoning or tool call arrived), `terminal` (the protocol's terminal event).
 *
 * @since 0.1.0
 * @category models
 */
export const Phase = Schema.Literal("none", "headers", "content", "terminal")

/**
 * @since 0.1.0
 * @category models
 */
export type Phase = typeof Phase.Type

/**
 * @since 0.1.0
 * @category models
 */
export const Verdict = Schema.Literal("exact", "estimated", "not-billed")

/**
 * @since 0.1.0
 * @category models
 */
export type Verdict = typeof Verdict.Type

/**
 * Where a count came from: the provider's usage (`reported`), the {@link estimator} (`estimated`), or nowhere
 * (`none`: not billed, or nothing to estimate from).
 *
 * @since 0.1.0
 * @category models
 */
export const Source = Schema.Literal("reported", "estimated", "none")

/**
 * @since 0.1.0
 * @category models
 */
export type Source = typeof Source.Type

/**
 * What became of an attempt: `committed`, `discarded` (it failed and was replaced, or recovery ended), or
 * `continued` (the next attempt continued its response).
 *
 * @since 0.1.0
 * @category models
 */
export const Outcome = Schema.Literal("committed", "discarded", "continued")

/**
 * @since 0.1.0
 * @category models
 */
export type Outcome = typeof Outcome.Type

/**
 * Token counts. `input` counts every input token, the cache's included; `cacheRead` and `cacheWrite` are the parts of
 * it the provider reported as read from and written to its prompt cache.
 *
 * @since 0.1.0
 * @category models
 */
export const Tokens = Schema.Struct({
  input: Schema.Number,
  output: Schema.Number,
  cacheRead: Schema.Number,
  cacheWrite: Schema.Number
})

/**
 * @since 0.1.0
 * @category models
 */
export interface Tokens extends Schema.Schema.Type<typeof Tokens> {}

/**
 * One attempt's entry.
 *
 * @since 0.1.0
 * @category models
 */
export const Entry = Schema.Struct({
  /** The attempt's number in the budget scope. */
  attempt: Schema.Number,
  /** With a plan (see `Routes`): the route it was sent to. */
  route: Schema.optional(Schema.Struct({ index: Schema.Number, name: Schema.String, model: Schema.String })),
  /** The model asked for, when known. */
  model: Schema.optional(Schema.String),
  /** The model the provider named in its response, when it named one. */
  servedModel: Schema.optional(Schema.String),
  phase: Phase,
  outcome: Outcome,
  verdict: Verdict,
  tokens: Tokens,
  input: Source,
  output: Source,
  /** `tokens` at the user's prices ({@link Prices}), when the model has some and the attempt was billed. */
  cost: Schema.optional(Schema.Number)
})

/**
 * @since 0.1.0
 * @category models
 */
export interface Entry extends Schema.Schema.Type<typeof Entry> {}

/**
 * The sum of some entries: how many, how many were billed, their tokens, whether any count in them was estimated, and
 * their cost when there are prices and every billed one had a price.
 *
 * @since 0.1.0
 * @category models
 */
export const Totals = Schema.Struct({
  attempts: Schema.Number,
  /** The attempts among them the provider billed (`exact` or `estimated`). */
  billed: Schema.Number,
  tokens: Tokens,
  estimated: Schema.Boolean,
  cost: Schema.optional(Schema.Number)
})

/**
 * @since 0.1.0
 * @category models
 */
export interface Totals extends Schema.Schema.Type<typeof Totals> {}

/**
 * A reply's ledger: every attempt's entry in order, the committed attempt's totals (zero when nothing was committed)
 * and the other billed attempts' (`discarded`, continued attempts left out).
 *
 * @since 0.1.0
 * @category models
 */
export const Ledger = Schema.Struct({
  entries: Schema.Array(Entry),
  committed: Totals,
  discarded: Totals,
  estimator: Schema.Literal("chars/4")
})

/**
 * @since 0.1.0
 * @category models
 */
export interface Ledger extends Schema.Schema.Type<typeof Ledger> {}

/**
 * The estimator's name.
 *
 * @since 0.1.0
 * @category estimation
 */
export const estimator = "chars/4" as const

/**
 * Tokens for `chars` characters: a quarter, rounded up.
 *
 * @since 0.1.0
 * @category estimation
 */
export const estimateTokens = (chars: number): number => Math.ceil(chars / 4)

/**
 * The characters of a request a model reads: the system text, every message's text, tool calls' names and
 * arguments, tool results, and the tools' names, descriptions and parameter schemas (as JSON). Roles and the
 * protocol's own framing are not counted.
 *
 * @since 0.1.0
 * @category estimation
 */
export const requestChars = (request: Generation.GenerationRequest): number => {
  let chars = request.system?.length ?? 0
  for (const message of request.messages) {
    switch (message.role) {
      case "system":
      case "user":
        chars += message.text.length
        break
      case "assistant":
        chars += message.text.length
        for (const call of message.toolCalls) chars += call.name.length + jsonLength(call.arguments)
        break
      case "tool":
        chars += message.content.length
        break
    }
  }
  for (const tool of request.tools ?? []) {
    chars += tool.name.length + tool.description.length + jsonLength(tool.parameters)
  }
  return chars
}

const jsonLength = (value: unknown): number => {
  if (typeof value === "string") return value.length
  try {
    return JSON.stringify(value)?.length ?? 0
  } catch {
    return 0
  }
}

/**
 * What one attempt left behind, as the engine saw it.
 *
 * @since 0.1.0
 * @category models
 */
export interface Observed {
  readonly attempt: number
  readonly route?: Generation.RouteRef | undefined
  readonly model?: string | undefined
  readonly servedModel?: string | undefined
  readonly phase: Phase
  readonly outcome: Outcome
  /** Its failure was the provider's own refusal (an in-band error or rejection), not a cut of the transport. */
  readonly refused: boolean
  /** The usage it ended with (not `partial`). */
  readonly usage?: Generation.Usage | undefined
  /** The usage it reported at its start (`partial`). */
  readonly startUsage?: Generation.Usage | undefined
  /** Characters of the request (see {@link requestChars}), when the request is known. */
  readonly requestChars?: number | undefined
  /** Characters of text, reasoning and tool arguments the attempt produced. */
  readonly outputChars: number
}

const zero: Tokens = { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 }

/**
 * The verdict of an attempt by the policy (see the module's description).
 *
 * @since 0.1.0
 * @category policy
 */
export const verdictOf = (observed: Pick<Observed, "phase" | "outcome" | "refused" | "usage">): Verdict => {
  if (observed.outcome === "continued") return "not-billed"
  switch (observed.phase) {
    case "none":
      return "not-billed"
    case "headers":
      // an error status, or the provider's own error before any content
      return observed.refused ? "not-billed" : "estimated"
    case "content":
      return "estimated"
    case "terminal":
      return observed.usage !== undefined ? "exact" : "estimated"
  }
}

/**
 * An attempt's entry by the policy, priced with `prices`.
 *
 * @since 0.1.0
 * @category constructors
 */
export const entry = (observed: Observed, prices: Prices.PriceList = {}): Entry => {
  const verdict = verdictOf(observed)
  const head = {
    attempt: observed.attempt,
    ...(observed.route === undefined
      ? {}
      : { route: { index: observed.route.index, name: observed.route.name, model: observed.route.model } }),
    ...(observed.model === undefined ? {} : { model: observed.model }),
    ...(observed.servedModel === undefined ? {} : { servedModel: observed.servedModel }),
    phase: observed.phase,
    outcome: observed.outcome,
    verdict
  }
  if (verdict === "not-billed") return { ...head, tokens: zero, input: "none", output: "none" }
  const { outputChars, startUsage, usage } = observed
  const reportedInput = usage ?? startUsage
  const estimatedInput = observed.requestChars === undefined ? undefined : estimateTokens(observed.requestChars)
  const tokens: Tokens = {
    input: reportedInput?.inputTokens ?? estimatedInput ?? 0,
    output: usage !== undefined ? usage.outputTokens : estimateTokens(outputChars),
    cacheRead: reportedInput?.cacheReadTokens ?? 0,
    cacheWrite: reportedInput?.cacheWriteTokens ?? 0
  }
  const input: Source = reportedInput !== undefined ? "reported" : estimatedInput !== undefined ? "estimated" : "none"
  const output: Source = usage !== undefined ? "reported" : "estimated"
  const priced = Prices.lookup(prices, observed.servedModel, observed.model)
  return {
    ...head,
    tokens,
    input,
    output,
    ...(priced === undefined ? {} : { cost: cost(tokens, priced) })
  }
}

/**
 * The cost of `tokens` at `prices` (per million tokens): uncached input at `input`, cache reads at `cacheRead` and
 * writes at `cacheWrite` (each `input` when absent), output at `output`.
 *
 * @since 0.1.0
 * @category pricing
 */
export const cost = (tokens: Tokens, prices: Prices.ModelPrices): number => {
  const uncached = Math.max(0, tokens.input - tokens.cacheRead - tokens.cacheWrite)
  return (
    uncached * prices.input +
    tokens.cacheRead * (prices.cacheRead ?? prices.input) +
    tokens.cacheWrite * (prices.cacheWrite ?? prices.input) +
    tokens.output * prices.output
  ) / 1_000_000
}

/**
 * The totals of `entries`: counts summed, `estimated` when any count was, and, with `priced` (the user supplied
 * prices), the cost when every billed entry has one. Entries that were not billed count as attempts and add nothing
 * else.
 *
 * @since 0.1.0
 * @category combinators
 */
export const totals = (entries: ReadonlyArray<Entry>, priced = false): Totals => {
  let input = 0, output = 0, cacheRead = 0, cacheWrite = 0, money = 0, billed = 0
  let estimated = false
  for (const e of entries) {
    input += e.tokens.input
    output += e.tokens.output
    cacheRead += e.tokens.cacheRead
    cacheWrite += e.tokens.cacheWrite
    if (e.verdict === "not-billed") continue
    billed++
    if (e.input === "estimated" || e.output === "estimated") estimated = true
    if (e.cost === undefined) priced = false
    else money += e.cost
  }
  return {
    attempts: entries.length,
    billed,
    tokens: { input, output, cacheRead, cacheWrite },
    estimated,
    ...(priced ? { cost: money } : {})
  }
}

/**
 * The ledger of `entries`; `priced`: the user supplied prices, so the totals carry a cost.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (entries: ReadonlyArray<Entry>, priced = false): Ledger => ({
  entries,
  committed: totals(entries.filter((e) => e.outcome === "committed"), priced),
  discarded: totals(entries.filter((e) => e.outcome === "discarded"), priced),
  estimator
})

/**
 * Whether the discarded attempts cost anything: a billed one among them.
 *
 * @since 0.1.0
 * @category predicates
 */
export const hasDiscardedCost = (ledger: Ledger): boolean =>
  ledger.entries.some((e) => e.outcome === "discarded" && e.verdict !== "not-billed")
