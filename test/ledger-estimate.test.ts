/**
 * The ledger's output estimate (`chars/4`) on real provider streams: every recorded capture with a usage block
 * (../shared/fixtures/recorded: openai-chat, openai-compatible, anthropic, openai-responses) is served by the
 * loopback simulator and read by the real provider (undici) under `Recovery.generate` with one attempt, cut after
 * every SSE event of its first response (every k-th on the long ones: {@link cutsOf}), then whole. The hand-written
 * capture is left out.
 *
 * - Uncut, the committed entry is `exact` with exactly the capture's usage.
 * - At every cut, the entry's output is `ceil(c / 4)` for the `c` characters of text, reasoning and tool calls (the
 *   arguments, and each call's name once) that a reading of the capture independent of the decoders finds in the
 *   events sent; its input is estimated from the request (or, where the provider reported it at the start, that
 *   figure).
 * - The error: the uncut estimate against the reported output tokens, and each cut's estimate against the pro-rata
 *   reference (reported output × characters so far / characters of the whole reply), bounded by {@link bound}.
 *
 * A capture is `plain` when everything it bills as output is in its text, reasoning and tool-call events: no hosted
 * or server-side tool (its inputs are output the stream does not show as tool calls), no reasoning reported hidden,
 * no reasoning summaries (written by a summarizer, not billed as output). The bound holds both ways on plain
 * captures; on the others the estimate falls short of the bill by what the stream does not show, and only its
 * excess is bounded. docs/ledger-estimate.md has the figures.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import * as Ledger from "@reprise/core/Ledger"
import * as Recovery from "@reprise/core/Recovery"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Effect, Layer } from "effect"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import { provider, recorder } from "./support/chat.js"

const recordedDir = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../shared/fixtures/recorded")

/**
 * The stated bound: an estimate is within 50 % or 40 tokens of its reference, whichever is larger (at a cut, one
 * more token for the rounding up of a part). Measured on the plain captures: at most +44 % (openai-text, prose) and
 * 31 tokens (anthropic-clear-thinking) off.
 */
const bound = { relative: 0.5, tokens: 40 } as const
const allowed = (reference: number) => Math.max(bound.relative * reference, bound.tokens)

type Json = any
type Route = Extract<SimulatorScript.Route, "openai-chat" | "anthropic" | "openai-responses">

interface Usage {
  readonly input: number
  readonly output: number
  readonly cacheRead: number
  readonly cacheWrite: number
}

/** A capture as read for the ledger: its first response only (a provider stops reading at the first terminal). */
interface Capture {
  readonly name: string
  readonly route: Route
  readonly file: string
  /** Events of the first response, its terminal (and Chat Completions' usage chunk after it) included. */
  readonly events: number
  /** `chars[n]`: characters of text, reasoning and tool calls in the first `n` events. */
  readonly chars: ReadonlyArray<number>
  /** The index of the first event that brings content (text, reasoning, a tool call); `events` when none does. */
  readonly content: number
  /** The index of the terminal event: a cut after it commits. */
  readonly terminal: number
  /** The usage the provider reports at the terminal. */
  readonly usage: Usage
  /** Anthropic: the input `message_start` reports (event 0). */
  readonly startInput?: number | undefined
  readonly plain: boolean
}

const payloadsOf = (file: string): Array<Json> =>
  Fs.readFileSync(file, "utf8").split("\n").filter((l) => l.trim().length > 0).map((l) => JSON.parse(l))

const cumulative = (perEvent: ReadonlyArray<number>): Array<number> => {
  const out = [0]
  for (const n of perEvent) out.push(out[out.length - 1] + n)
  return out
}

/** The first event with characters, or that `completes` reasoning without any (an encrypted reasoning item). */
const firstContent = (perEvent: ReadonlyArray<number>, completes: (i: number) => boolean = () => false): number => {
  const at = perEvent.findIndex((n, i) => n > 0 || completes(i))
  return at < 0 ? perEvent.length : at
}

const chatCapture = (name: string, file: string): Capture => {
  const payloads = payloadsOf(file)
  const named = new Set<number>()
  const perEvent = payloads.map((p) => {
    let chars = 0
    for (const choice of p.choices ?? []) {
      const delta = choice.delta ?? {}
      chars += (delta.content ?? "").length + (delta.reasoning_content ?? delta.reasoning ?? "").length
      for (const call of delta.tool_calls ?? []) {
        const index = call.index ?? 0
        if (call.function?.name && !named.has(index)) {
          named.add(index)
          chars += call.function.name.length
        }
        chars += (call.function?.arguments ?? "").length
      }
    }
    return chars
  })
  const usage = [...payloads].reverse().find((p) => p.usage != null).usage
  return {
    name,
    route: "openai-chat",
    file,
    events: payloads.length,
    chars: cumulative(perEvent),
    content: firstContent(perEvent),
    terminal: payloads.findIndex((p) => p.choices?.some((c: Json) => c.finish_reason)),
    usage: {
      input: usage.prompt_tokens,
      output: usage.completion_tokens,
      cacheRead: usage.prompt_tokens_details?.cached_tokens ?? 0,
      cacheWrite: 0
    },
    plain: (usage.completion_tokens_details?.reasoning_tokens ?? 0) === 0
  }
}

const anthropicCapture = (name: string, file: string): Capture => {
  const all = payloadsOf(file)
  const payloads = all.slice(0, all.findIndex((p) => p.type === "message_stop") + 1)
  const tools = new Set<number>()
  let plain = true
  let input: number | undefined, output = 0, cacheRead = 0, cacheWrite = 0, startInput: number | undefined
  const perEvent = payloads.map((p) => {
    // the last report of each count is the message's (message_delta's usage is cumulative)
    const usage = p.type === "message_start" ? p.message.usage : p.type === "message_delta" ? p.usage : undefined
    if (usage != null) {
      if (typeof usage.input_tokens === "number") {
        cacheRead = usage.cache_read_input_tokens ?? 0
        cacheWrite = usage.cache_creation_input_tokens ?? 0
        input = usage.input_tokens + cacheRead + cacheWrite
        if (p.type === "message_start") startInput = input
      }
      if (typeof usage.output_tokens === "number") output = usage.output_tokens
    }
    if (p.type === "content_block_start") {
      const block = p.content_block
      if (!["text", "thinking", "redacted_thinking", "tool_use"].includes(block.type)) plain = false
      if (block.type === "text") return (block.text ?? "").length
      if (block.type === "thinking") return (block.thinking ?? "").length
      if (block.type === "tool_use") {
        tools.add(p.index)
        return block.name.length
      }
    }
    if (p.type === "content_block_delta") {
      const delta = p.delta
      if (delta.type === "text_delta") return delta.text.length
      if (delta.type === "thinking_delta") return delta.thinking.length
      if (delta.type === "input_json_delta" && tools.has(p.index)) return delta.partial_json.length
    }
    return 0
  })
  return {
    name,
    route: "anthropic",
    file,
    events: payloads.length,
    chars: cumulative(perEvent),
    content: firstContent(perEvent),
    terminal: payloads.length - 1,
    usage: { input: input!, output, cacheRead, cacheWrite },
    startInput,
    plain
  }
}

const responsesCapture = (name: string, file: string): Capture => {
  const all = payloadsOf(file)
  const payloads = all.slice(0, all.findIndex((p) => p.type === "response.completed") + 1)
  let plain = true
  const perEvent = payloads.map((p) => {
    switch (p.type) {
      case "response.output_text.delta":
        return p.delta.length
      case "response.reasoning_summary_text.delta":
      case "response.reasoning_text.delta":
        plain = false
        return p.delta.length
      case "response.function_call_arguments.delta":
        return p.delta.length
      case "response.output_item.added":
        if (!["message", "function_call", "reasoning"].includes(p.item.type)) plain = false
        return p.item.type === "function_call" ? p.item.name.length : 0
      default:
        return 0
    }
  })
  const usage = payloads[payloads.length - 1].response.usage
  if ((usage.output_tokens_details?.reasoning_tokens ?? 0) > 0) plain = false
  return {
    name,
    route: "openai-responses",
    file,
    events: payloads.length,
    chars: cumulative(perEvent),
    // a reasoning item, done, is reasoning the model produced, even with no text to show
    content: firstContent(perEvent, (i) => {
      const p = payloads[i]
      return p.type === "response.output_item.done" && p.item.type === "reasoning" && p.item.id != null
    }),
    terminal: payloads.length - 1,
    usage: {
      input: usage.input_tokens,
      output: usage.output_tokens,
      cacheRead: usage.input_tokens_details?.cached_tokens ?? 0,
      cacheWrite: 0
    },
    plain
  }
}

const readers: ReadonlyArray<readonly [string, (name: string, file: string) => Capture]> = [
  ["openai-chat", chatCapture],
  ["openai-compatible", chatCapture],
  ["anthropic", anthropicCapture],
  ["openai-responses", responsesCapture]
]

/** Hand-written, not a recording (SOURCES.md): its usage is a placeholder. */
const handWritten = new Set(["anthropic/anthropic-advisor-stop-reasons.chunks.txt"])

const captures: ReadonlyArray<Capture> = readers.flatMap(([dir, read]) =>
  Fs.readdirSync(Path.join(recordedDir, dir)).filter((f) => f.endsWith(".chunks.txt")).sort()
    .map((f) => `${dir}/${f}`)
    .filter((name) => !handWritten.has(name))
    .map((name) => read(name, Path.join(recordedDir, name)))
)

const request = {
  model: "ledger-model",
  system: "You answer from the recorded capture.",
  messages: [{ role: "user" as const, text: "Replay the capture, please." }]
}
const requestInput = Ledger.estimateTokens(Ledger.requestChars(request))

/** One measured estimate: the ledger's, its reference, and the capture's class. */
interface Measure {
  readonly capture: Capture
  readonly estimate: number
  readonly reference: number
}

const measured: Array<{ readonly uncut: Measure; readonly cuts: ReadonlyArray<Measure> }> = []

/**
 * The cuts of a capture: after every event (0 to `events - 1`, the last one before the terminal, or on Chat
 * Completions before the usage chunk); on a capture longer than {@link maxCuts} events, after every k-th event (k the
 * least that gives at most that many) and after the last one before the end, to keep the suite near 10 s (every cut
 * of every capture, 5,688 sends, takes 20 to 30 s: `LEDGER_ESTIMATE_ALL_CUTS=1`).
 */
const maxCuts = process.env.LEDGER_ESTIMATE_ALL_CUTS === "1" ? Infinity : 120
const cutsOf = (capture: Capture): ReadonlyArray<number> => {
  const k = Math.max(1, Math.ceil(capture.events / maxCuts))
  const cuts = Array.from({ length: Math.ceil(capture.events / k) }, (_, i) => i * k)
  return cuts.at(-1) === capture.events - 1 ? cuts : [...cuts, capture.events - 1]
}

describe.concurrent("the ledger's estimate at every cut of a recorded capture", () => {
  it("finds the captures", () => {
    assert.deepStrictEqual(
      readers.map(([dir]) => captures.filter((c) => c.name.startsWith(`${dir}/`)).length),
      [1, 1, 17, 18]
    )
  })

  for (const capture of captures) {
    it.live(capture.name, () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        const { chars, events, route, usage } = capture
        const whole = chars[events]
        const at = cutsOf(capture)
        yield* sim.setScript({
          routes: {
            [route]: {
              reply: { fixture: capture.file },
              steps: [...at.map((n): SimulatorScript.Step => ({ kind: "eof", afterEvents: n })), { kind: "stream" }]
            }
          }
        })
        // one provider (and its connection pool) for every cut, one attempt each
        const context = yield* Layer.build(Layer.merge(provider(sim, route), Budget.layer({ maxAttempts: 1 })))
        const cuts: Array<Measure> = []
        for (const n of at) {
          const label = `${capture.name}, cut after ${n} of ${events} events`
          const notes = recorder()
          const result = yield* Recovery.generate(request).pipe(
            Effect.either,
            Effect.provide(notes.layer),
            Effect.provide(context)
          )
          const entry = result._tag === "Right"
            ? result.right.ledger?.entries[0]
            : notes.of("AttemptDiscarded")[0]?.entry
          assert.isDefined(entry, label)
          const committed = n > capture.terminal
          assert.strictEqual(result._tag, committed ? "Right" : "Left", label)
          assert.deepStrictEqual(
            [entry!.phase, entry!.verdict, entry!.output],
            [committed ? "terminal" : n > capture.content ? "content" : "headers", "estimated", "estimated"],
            label
          )
          assert.strictEqual(entry!.tokens.output, Ledger.estimateTokens(chars[n]), label)
          if (entry!.input === "reported") {
            // a provider that reports the input at the start (Anthropic's message_start)
            assert.isTrue(route === "anthropic" && n >= 1, label)
            assert.strictEqual(entry!.tokens.input, capture.startInput, label)
          } else {
            assert.deepStrictEqual([entry!.input, entry!.tokens.input], ["estimated", requestInput], label)
          }
          cuts.push({
            capture,
            estimate: entry!.tokens.output,
            reference: whole === 0 ? 0 : usage.output * chars[n] / whole
          })
        }
        // uncut: exact, with the capture's usage
        const reply = yield* Recovery.generate(request).pipe(Effect.provide(context))
        const entry = reply.ledger!.entries[0]
        assert.deepStrictEqual(
          [reply.ledger!.entries.length, entry.phase, entry.verdict, entry.input, entry.output],
          [1, "terminal", "exact", "reported", "reported"]
        )
        assert.deepStrictEqual([entry.tokens.input, entry.tokens.output], [usage.input, usage.output])
        // The cache's parts of the input: what the capture reports, or none where the provider does not read them.
        assert.include([0, usage.cacheRead], entry.tokens.cacheRead)
        assert.include([0, usage.cacheWrite], entry.tokens.cacheWrite)
        assert.strictEqual(yield* sim.count(route), at.length + 1)

        const uncut = { capture, estimate: Ledger.estimateTokens(whole), reference: usage.output }
        for (const m of [uncut, ...cuts]) {
          const slack = m === uncut ? 0 : 1
          const label = `${capture.name}: ${m.estimate} tokens estimated against ${m.reference.toFixed(1)}`
          assert.isAtMost(m.estimate - m.reference, allowed(m.reference) + slack, label)
          if (capture.plain) assert.isAtMost(m.reference - m.estimate, allowed(m.reference) + slack, label)
        }
        measured.push({ uncut, cuts })
      }).pipe(Effect.scoped, Effect.provide(Simulator.layer())), 60_000)
  }
})

/** Relative error, where the reference is not zero. */
const relative = (m: Measure) => (m.estimate - m.reference) / m.reference

const median = (xs: ReadonlyArray<number>): number => {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length === 0 ? NaN : sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2
}

const pct = (x: number) => `${x >= 0 ? "+" : ""}${(x * 100).toFixed(0)} %`

/** The figures of some captures, as a row of docs/ledger-estimate.md's table. */
const summary = (label: string, of: ReadonlyArray<(typeof measured)[number]>): string => {
  const finals = of.map((m) => relative(m.uncut))
  const cuts = of.flatMap((m) => m.cuts)
  // a cut's relative error where the bound is relative (its reference at least `bound.tokens` / `bound.relative`)
  const large = cuts.filter((m) => m.reference >= bound.tokens / bound.relative).map((m) => Math.abs(relative(m)))
  const tokens = (ms: ReadonlyArray<Measure>) => Math.max(...ms.map((m) => Math.abs(m.estimate - m.reference)))
  return `| ${label} | ${of.length} | ${cuts.length} | ${pct(median(finals))} | ${
    (median(finals.map(Math.abs)) * 100).toFixed(0)
  } % | ${pct(Math.min(...finals))} … ${pct(Math.max(...finals))} | ${tokens(of.map((m) => m.uncut)).toFixed(0)} | ${
    large.length === 0 ? "—" : `${(median(large) * 100).toFixed(0)} % / ${(Math.max(...large) * 100).toFixed(0)} %`
  } | ${tokens(cuts).toFixed(1)} |`
}

describe("the measured error", () => {
  it("every capture was measured (the figures: LEDGER_ESTIMATE_REPORT=1)", () => {
    assert.deepStrictEqual(measured.map((m) => m.uncut.capture.name).sort(), captures.map((c) => c.name).sort())
    if (process.env.LEDGER_ESTIMATE_REPORT !== "1") return
    const rows: Array<string> = []
    for (const route of [...new Set(captures.map((c) => c.route))]) {
      const of = measured.filter((m) => m.uncut.capture.route === route)
      const plain = of.filter((m) => m.uncut.capture.plain)
      if (plain.length > 0) rows.push(summary(`${route}, plain`, plain))
      if (plain.length < of.length) rows.push(summary(`${route}, other`, of.filter((m) => !m.uncut.capture.plain)))
    }
    rows.push(summary("all, plain", measured.filter((m) => m.uncut.capture.plain)))
    rows.push(summary("all", measured))
    rows.push("")
    for (const m of [...measured].sort((a, b) => a.uncut.capture.name.localeCompare(b.uncut.capture.name))) {
      const c = m.uncut.capture
      rows.push(
        `| ${c.name} | ${c.plain ? "plain" : "other"} | ${c.events} | ${m.cuts.length} | ${
          c.chars[c.events]
        } | ${m.uncut.estimate} | ${m.uncut.reference} | ${pct(relative(m.uncut))} |`
      )
    }
    console.log(rows.join("\n"))
  })
})
