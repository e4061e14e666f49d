/**
 * The fault matrix: every fault kind the loopback simulator can inject, with what reprise must do about it on every
 * protocol. test/fault-matrix.test.ts generates its cases from {@link matrix}, and docs/fault-matrix.md shows the same
 * table ({@link renderTable}); a test checks that the two agree.
 *
 * Each case runs one `Recovery.generate` against a route scripted "fault, then the full stream": a fault that is
 * replayed costs two sends and commits the second attempt; a fault that is not replayed costs one send and surfaces.
 */
import type * as Ledger from "@reprise/core/Ledger"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { overflowStep } from "./chat.js"

export type Protocol = SimulatorScript.Route

/** The four protocols; every row runs on each. */
export const protocols: ReadonlyArray<Protocol> = ["openai-chat", "openai-responses", "anthropic", "subscription"]

/** A value that may differ by protocol: one for all, or a `default` and the protocols that differ from it. */
export type PerProtocol<A extends string> = A | Readonly<Partial<Record<Protocol, A>>> & { readonly default: A }

/** The value of `per` on `protocol`. */
export const on = <A extends string>(per: PerProtocol<A>, protocol: Protocol): A =>
  typeof per === "string" ? per : per[protocol] ?? per.default

/** Provider timeouts for a case, in milliseconds; the defaults (60 s, 120 s) otherwise. */
export interface Timeouts {
  readonly firstByteTimeout?: number | undefined
  readonly idleTimeout?: number | undefined
}

export interface FaultCase {
  /** The fault, as a reader names it. Unique: it names the test. */
  readonly fault: string
  /** How the script asks for it (shown in the doc). */
  readonly script: string
  /** The first step of the route's script; the second is always `{ kind: "stream" }`. */
  readonly step: (protocol: Protocol) => SimulatorScript.Step
  readonly timeouts?: Timeouts | undefined
  /** Whether the failed first attempt is replayed. */
  readonly replayed: boolean
  /**
   * The class of the first attempt's failure (`TransportError.<reason>`, `ProviderRejection.<reason>`), or `none`
   * when the first attempt commits; per protocol where the protocols differ.
   */
  readonly failure: PerProtocol<string>
  /**
   * The first attempt's ledger entry (see `Ledger`): the phase it reached and its billing verdict. The committed
   * attempt of every case that commits is `terminal` and `exact`: the simulator's streams carry usage on every
   * protocol.
   */
  readonly entry: { readonly phase: PerProtocol<Ledger.Phase>; readonly verdict: Ledger.Verdict }
}

/** A status instead of a stream: the provider answered, and did not bill. */
const refused = { phase: "headers", verdict: "not-billed" } as const
/** Nothing came back. */
const unanswered = { phase: "none", verdict: "not-billed" } as const
/** A stream cut after its first content. */
const cutInContent = { phase: "content", verdict: "estimated" } as const
/** A stream cut before any content. */
const cutBeforeContent = { phase: "headers", verdict: "estimated" } as const
/**
 * A stream cut after 3 events: the third is content on Chat Completions (role, then two text deltas); on the others
 * the three are framing (message_start, ping, content_block_start; response.created, .in_progress,
 * .output_item.added).
 */
const cutAfterThreeEvents = { phase: { default: "headers", "openai-chat": "content" }, verdict: "estimated" } as const

/** Short timeouts for the cases that stall: long enough for loopback, short enough to keep the suite fast. */
const stallTimeouts: Timeouts = { firstByteTimeout: 1_000, idleTimeout: 1_000 }

/** The matrix. One row per fault; every row runs on every protocol. */
export const matrix: ReadonlyArray<FaultCase> = [
  {
    fault: "full stream",
    script: "`stream`",
    step: () => ({ kind: "stream" }),
    replayed: false,
    failure: "none",
    entry: { phase: "terminal", verdict: "exact" }
  },
  {
    fault: "reset before headers",
    script: "`reset`",
    step: () => ({ kind: "reset" }),
    replayed: true,
    failure: "TransportError.Reset",
    entry: unanswered
  },
  {
    fault: "reset after N bytes",
    script: "`reset`, `afterBytes: 150`",
    step: () => ({ kind: "reset", afterBytes: 150 }),
    replayed: true,
    failure: "TransportError.Reset",
    entry: cutBeforeContent
  },
  {
    fault: "reset after N events",
    script: "`reset`, `afterEvents: 3`",
    step: () => ({ kind: "reset", afterEvents: 3 }),
    replayed: true,
    failure: "TransportError.Reset",
    entry: cutAfterThreeEvents
  },
  {
    fault: "eof before terminal",
    script: "`eof`",
    step: () => ({ kind: "eof" }),
    replayed: true,
    failure: "TransportError.PrematureEof",
    entry: cutInContent
  },
  {
    fault: "eof mid-event",
    script: "`eof`, `afterBytes: 150`",
    step: () => ({ kind: "eof", afterBytes: 150 }),
    replayed: true,
    failure: "TransportError.PrematureEof",
    entry: cutBeforeContent
  },
  {
    fault: "stall before headers",
    script: "`stall`, `durationMs: 20000`; first-byte timeout 1 s",
    step: () => ({ kind: "stall", durationMs: 20_000 }),
    timeouts: stallTimeouts,
    replayed: true,
    failure: "TransportError.Timeout",
    entry: unanswered
  },
  {
    fault: "stall mid-stream",
    script: "`stall`, `afterEvents: 3`, `durationMs: 20000`; idle timeout 1 s",
    step: () => ({ kind: "stall", afterEvents: 3, durationMs: 20_000 }),
    timeouts: stallTimeouts,
    replayed: true,
    failure: "TransportError.Timeout",
    entry: cutAfterThreeEvents
  },
  {
    fault: "stall with keepalives",
    script: "`stall`, `afterEvents: 3`, `keepaliveMs: 50`, `durationMs: 20000`; idle timeout 1 s",
    step: () => ({ kind: "stall", afterEvents: 3, keepaliveMs: 50, durationMs: 20_000 }),
    timeouts: stallTimeouts,
    replayed: true,
    failure: "TransportError.Timeout",
    entry: cutAfterThreeEvents
  },
  {
    fault: "in-band transient error",
    script: "`error` (defaults: `server_error`; Anthropic `overloaded_error`)",
    step: () => ({ kind: "error" }),
    replayed: true,
    failure: "TransportError.ProviderError",
    entry: cutInContent
  },
  {
    fault: "in-band error before content",
    script: "`error`, `afterEvents: 0`",
    step: () => ({ kind: "error", afterEvents: 0 }),
    replayed: true,
    failure: "TransportError.ProviderError",
    entry: refused
  },
  {
    fault: "in-band permanent error",
    script: "`error`, `{ type: invalid_request_error, code: invalid_prompt }`",
    step: () => ({
      kind: "error",
      error: { type: "invalid_request_error", code: "invalid_prompt", message: "Invalid prompt" }
    }),
    replayed: false,
    // Responses error events carry only a code: `invalid_prompt` is not on the allowlist, so it is not replayed.
    failure: {
      default: "ProviderRejection.BadRequest",
      "openai-responses": "TransportError.ProviderError",
      subscription: "TransportError.ProviderError"
    },
    entry: cutInContent
  },
  {
    fault: "429 + Retry-After",
    script: "`status 429`, `retry-after-ms: 30`",
    step: () => ({ kind: "status", status: 429, headers: { "retry-after-ms": "30" } }),
    replayed: true,
    failure: "TransportError.HttpStatus",
    entry: refused
  },
  {
    fault: "429 insufficient_quota",
    script: "`status 429`, `{ type, code: insufficient_quota }`",
    step: () => ({
      kind: "status",
      status: 429,
      error: { type: "insufficient_quota", code: "insufficient_quota", message: "You exceeded your current quota" }
    }),
    replayed: false,
    failure: "ProviderRejection.Quota",
    entry: refused
  },
  {
    fault: "503",
    script: "`status 503`",
    step: () => ({ kind: "status", status: 503 }),
    replayed: true,
    failure: "TransportError.HttpStatus",
    entry: refused
  },
  {
    fault: "503 + x-should-retry: false",
    script: "`status 503`, `x-should-retry: false`",
    step: () => ({ kind: "status", status: 503, headers: { "x-should-retry": "false" } }),
    replayed: false,
    failure: "TransportError.HttpStatus",
    entry: refused
  },
  {
    fault: "529",
    script: "`status 529`",
    step: () => ({ kind: "status", status: 529 }),
    replayed: true,
    failure: "TransportError.HttpStatus",
    entry: refused
  },
  {
    fault: "401",
    script: "`status 401`",
    step: () => ({ kind: "status", status: 401 }),
    replayed: false,
    failure: "ProviderRejection.Authentication",
    entry: refused
  },
  {
    fault: "403",
    script: "`status 403`",
    step: () => ({ kind: "status", status: 403 }),
    replayed: false,
    failure: "ProviderRejection.Permission",
    entry: refused
  },
  {
    fault: "400",
    script: "`status 400`",
    step: () => ({ kind: "status", status: 400 }),
    replayed: false,
    failure: "ProviderRejection.BadRequest",
    entry: refused
  },
  {
    fault: "400 context_length_exceeded",
    script:
      "`status 400`, code `context_length_exceeded` (Anthropic: `invalid_request_error`, \"prompt is too long: …\")",
    step: overflowStep,
    replayed: false,
    failure: "ProviderRejection.ContextOverflow",
    entry: refused
  },
  {
    fault: "404",
    script: "`status 404`",
    step: () => ({ kind: "status", status: 404 }),
    replayed: false,
    failure: "ProviderRejection.NotFound",
    entry: refused
  },
  {
    fault: "307",
    script: "`status 307`, `location: http://127.0.0.1:9/elsewhere`",
    step: () => ({ kind: "status", status: 307, headers: { location: "http://127.0.0.1:9/elsewhere" } }),
    replayed: false,
    failure: "ProviderRejection.RedirectRefused",
    entry: refused
  },
  {
    fault: "308",
    script: "`status 308`, `location: http://127.0.0.1:9/elsewhere`",
    step: () => ({ kind: "status", status: 308, headers: { location: "http://127.0.0.1:9/elsewhere" } }),
    replayed: false,
    failure: "ProviderRejection.RedirectRefused",
    entry: refused
  },
  {
    // Cut inside the arguments, then a clean end: the terminal never came, so it is a premature EOF (DESIGN §3: the
    // EOF is reported before any tool reconciliation); the half-sent call is never surfaced as complete.
    fault: "truncated tool-call JSON",
    script: "`truncated-tool-call`",
    step: () => ({ kind: "truncated-tool-call" }),
    replayed: true,
    failure: "TransportError.PrematureEof",
    entry: cutInContent
  },
  {
    fault: "tool-call JSON incomplete at the terminal",
    script: "`stream` of a reply whose tool-call arguments are the text `{\"query\": \"cut sho`",
    step: () => ({
      kind: "stream",
      reply: {
        text: "Arguments cut, terminal sent.",
        toolCalls: [{ name: "lookup", arguments: "{\"query\": \"cut sho" }]
      }
    }),
    replayed: true,
    failure: "TransportError.TruncatedToolArguments",
    entry: cutInContent
  },
  {
    fault: "slow drip",
    script: "`drip`, one event every 75 ms; idle timeout 1 s",
    step: () => ({ kind: "drip", everyMs: 75, events: 1 }),
    timeouts: stallTimeouts,
    replayed: false,
    failure: "none",
    entry: { phase: "terminal", verdict: "exact" }
  }
]

/** The class of the first attempt's failure on `protocol` (`none` when it commits). */
export const failureOn = (row: FaultCase, protocol: Protocol): string => on(row.failure, protocol)

/** How many sends the case makes: two when the fault is replayed, else one. */
export const sendsOf = (row: FaultCase): 1 | 2 => (row.replayed ? 2 : 1)

/** What `Recovery.generate` ends with on `protocol`: `committed`, or the surfaced failure's class. */
export const resultOn = (row: FaultCase, protocol: Protocol): string => {
  const failure = failureOn(row, protocol)
  return failure === "none" || row.replayed ? "committed" : failure
}

/** The verdict of the committed attempt's entry on `protocol`, when the case commits. */
export const committedVerdictOn = (row: FaultCase, protocol: Protocol): Ledger.Verdict | undefined =>
  resultOn(row, protocol) === "committed" ? "exact" : undefined

const cell = (f: (protocol: Protocol) => string): string => {
  const byProtocol = protocols.map((protocol) => [protocol, f(protocol)] as const)
  const main = f(protocols[0])
  const others = byProtocol.filter(([, value]) => value !== main)
  if (others.length === 0) return `\`${main}\``
  const groups = new Map<string, Array<Protocol>>()
  for (const [protocol, value] of others) groups.set(value, [...(groups.get(value) ?? []), protocol])
  return `\`${main}\`; ${[...groups].map(([value, ps]) => `${ps.join(", ")}: \`${value}\``).join("; ")}`
}

const committedCell = (row: FaultCase): string =>
  protocols.every((p) => committedVerdictOn(row, p) === undefined)
    ? "—"
    : cell((p) => committedVerdictOn(row, p) ?? "none")

/**
 * The matrix as a Markdown table (the one in docs/fault-matrix.md).
 */
export const renderTable = (): string => {
  const lines = [
    "| fault | script step (then `stream`) | replayed | sends | first attempt fails with | result " +
    "| first attempt's phase | its verdict | committed verdict |",
    "|---|---|---|---|---|---|---|---|---|"
  ]
  for (const row of matrix) {
    lines.push(
      `| ${row.fault} | ${row.script} | ${
        failureOn(row, protocols[0]) === "none" ? "—" : row.replayed ? "yes" : "no"
      } | ${sendsOf(row)} | ${cell((p) => failureOn(row, p))} | ${cell((p) => resultOn(row, p))} | ${
        cell((p) => on(row.entry.phase, p))
      } | \`${row.entry.verdict}\` | ${committedCell(row)} |`
    )
  }
  return lines.join("\n")
}
