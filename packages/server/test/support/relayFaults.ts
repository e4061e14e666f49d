/**
 * The fault matrix of the relay's protocol suites (`RelayChat`, `RelayResponses`, `RelayAnthropic`): one simulator
 * model per fault class, each failing its first request (or every request) and then answering; a runner that posts a
 * streamed request in a preview mode and returns what the client got and the upstream's sends; an SSE reader for
 * protocols with named events; and a client that disconnects part-way.
 */
import { assert } from "@effect/vitest"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Effect } from "effect"
import { type HarnessOptions, post, relay, UPSTREAM_KEY } from "../support.js"

export const TEXT = "One two three four five six."
export const reply = { text: TEXT }
export const ok: SimulatorScript.Step = { kind: "stream" }

/** The reply of the tool-call models: one call, no text. */
export const toolReply = { toolCalls: [{ name: "get_weather", arguments: { city: "Paris", unit: "celsius" } }] }

/** One model per fault, each failing its first request (or every request) and then answering. */
export const faults: Record<string, SimulatorScript.ModelScript> = {
  "cut-before": { reply, steps: [{ kind: "reset", afterTokens: 0 }], then: ok },
  "cut-after": { reply, steps: [{ kind: "reset", afterTokens: 2 }], then: ok },
  "rate-limited": { reply, steps: [{ kind: "status", status: 429, headers: { "retry-after": "1" } }], then: ok },
  "stall": { reply, steps: [{ kind: "stall", afterTokens: 2, durationMs: 10_000, then: "eof" }], then: ok },
  "malformed": { reply, steps: [{ kind: "malformed", afterEvents: 3 }], then: ok },
  "bad-request": {
    reply,
    then: { kind: "status", status: 400, error: { code: "context_length_exceeded", message: "too long" } }
  },
  "unauthorized": { reply, then: { kind: "status", status: 401 } },
  "healthy": { reply, then: ok },
  "tool-cut": { reply: toolReply, steps: [{ kind: "truncated-tool-call", afterChars: 6 }], then: ok },
  "slow": {
    reply: { text: Array.from({ length: 40 }, (_, i) => `w${i}`).join(" ") },
    then: { kind: "drip", everyMs: 50, events: 1 }
  }
}

export const script: SimulatorScript.Script = { models: faults }

/** The recoverable faults, with what the first attempt showed before it failed and the rollback's reason. */
export const recoverable = [
  ["cut-before", "", "connection reset"],
  ["cut-after", "One two", "connection reset"],
  ["rate-limited", "", "HTTP 429"],
  ["stall", "One two", "timeout"],
  ["malformed", "One two", "malformed chunk"]
] as const

/**
 * The first attempt's ledger entry of each recoverable fault (`reprise.rollback`'s `entry`): how far it got and its
 * billing verdict (docs/ledger.md). A 429 is an answer before inference; every cut after the stream opened is
 * estimated.
 */
export const firstEntry: Record<(typeof recoverable)[number][0], readonly [phase: string, verdict: string]> = {
  "cut-before": ["headers", "estimated"],
  "cut-after": ["content", "estimated"],
  "rate-limited": ["headers", "not-billed"],
  "stall": ["content", "estimated"],
  "malformed": ["content", "estimated"]
}

/**
 * The ledger of a reset-mode reply recovered from `model`'s fault: the rollback's entry is the first attempt's, as
 * {@link firstEntry} says, and the commit's ledger holds it and the committed attempt's, exact, whose output is the
 * commit's usage.
 */
export const assertLedger = (
  model: keyof typeof firstEntry,
  rollback: Record<string, any>,
  commit: Record<string, any>
): void => {
  assert.deepStrictEqual([rollback.entry.phase, rollback.entry.verdict], firstEntry[model])
  assert.deepStrictEqual(
    commit.ledger.entries.map((e: { outcome: string; verdict: string }) => [e.outcome, e.verdict]),
    [["discarded", firstEntry[model][1]], ["committed", "exact"]]
  )
  assert.deepStrictEqual(commit.ledger.entries[0], rollback.entry)
  assert.strictEqual(commit.ledger.committed.tokens.output, commit.usage.output_tokens)
}

/** Posts `body` to `path` in `mode` against a relay in front of `faults`; the response, the sends of `model`. */
export const run = (
  path: string,
  body: Record<string, unknown>,
  mode: string,
  options: HarnessOptions = {}
) =>
  Effect.gen(function*() {
    const h = yield* relay(script, { idleTimeoutMs: 300, ...options })
    const response = yield* post(`${h.url}${path}`, body, { "x-reprise-preview": mode })
    const upstream = yield* h.sim.requestsFor(body.model as string)
    if (response.text.includes(UPSTREAM_KEY)) throw new Error("the upstream key went downstream")
    return { ...response, sends: upstream.length, upstream, log: h.log, sim: h.sim }
  }).pipe(Effect.scoped)

export interface Frame {
  /** The `event:` name; undefined for a bare `data:` frame or a comment. */
  readonly event: string | undefined
  /** The `data:` payload parsed, when it is JSON. */
  readonly data: any
  readonly comment: boolean
  /** The frame as written, without its blank line. */
  readonly raw: string
}

/** The frames of an SSE text, in order. */
export const frames = (text: string): Array<Frame> =>
  text.split("\n\n").filter((block) => block.length > 0).map((block) => {
    const lines = block.split("\n")
    const event = lines.find((l) => l.startsWith("event: "))?.slice(7)
    const payload = lines.filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n")
    let data: unknown = undefined
    try {
      data = payload.length > 0 ? JSON.parse(payload) : undefined
    } catch {
      data = payload
    }
    return { event, data, comment: lines.every((l) => l.startsWith(":")), raw: block }
  })

/** The `reprise.*` events of an SSE text, each its name with its data. */
export const repriseEvents = (text: string) =>
  frames(text).filter((f) => f.event?.startsWith("reprise.")).map((f) => ({ event: f.event!, ...f.data }))

/** The protocol's own events: neither comments nor `reprise.*` events. */
export const protocolFrames = (text: string) =>
  frames(text).filter((f) => !f.comment && !(f.event?.startsWith("reprise.") ?? false))

/** Polls `effect` on the real clock until `ok` holds of its value. */
export const waitFor = <A>(effect: Effect.Effect<A>, ok: (a: A) => boolean) =>
  Effect.gen(function*() {
    for (let i = 0; i < 300; i++) {
      const a = yield* effect
      if (ok(a)) return a
      yield* Effect.sleep("10 millis")
    }
    return yield* Effect.die("timed out waiting")
  })

/** Starts a streamed request and reads until `until` holds of what came so far, then aborts it. */
export const readThenAbort = (
  url: string,
  body: unknown,
  mode: string,
  until: (text: string) => boolean
) =>
  Effect.promise(async () => {
    const controller = new AbortController()
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", "x-reprise-preview": mode },
      body: JSON.stringify(body),
      signal: controller.signal
    })
    const reader = response.body!.getReader()
    const decoder = new TextDecoder()
    let text = ""
    while (!until(text)) {
      const { done, value } = await reader.read()
      if (done) break
      text += decoder.decode(value, { stream: true })
    }
    controller.abort()
    return text
  })

/** The SDK suites' answer. */
export const SDK_TEXT = "The relay held this answer until it was whole."

/**
 * The SDK suites' models: every recoverable fault class once, each failing its first request and then answering; a
 * tool call cut mid-arguments, then whole; a permanent 400.
 */
export const sdkScript: SimulatorScript.Script = {
  models: {
    "unavailable-then-ok": { reply: { text: SDK_TEXT }, steps: [{ kind: "status", status: 503 }], then: ok },
    "reset-mid-stream": { reply: { text: SDK_TEXT }, steps: [{ kind: "reset", afterTokens: 3 }], then: ok },
    "cut-after-content": { reply: { text: SDK_TEXT }, steps: [{ kind: "eof", afterTokens: 4 }], then: ok },
    "rate-limited": {
      reply: { text: SDK_TEXT },
      steps: [{ kind: "status", status: 429, headers: { "retry-after": "1" } }],
      then: ok
    },
    "stalled": {
      reply: { text: SDK_TEXT },
      steps: [{ kind: "stall", afterTokens: 2, durationMs: 10_000, then: "eof" }],
      then: ok
    },
    "malformed": { reply: { text: SDK_TEXT }, steps: [{ kind: "malformed", afterEvents: 3 }], then: ok },
    "tool-cut": { reply: toolReply, steps: [{ kind: "truncated-tool-call", afterChars: 6 }], then: ok },
    "refused": {
      reply: { text: SDK_TEXT },
      then: { kind: "status", status: 400, error: { code: "context_length_exceeded", message: "too long" } }
    }
  }
}

/** The recoverable models of `sdkScript`, each answering at its second send. */
export const sdkFaults = [
  "unavailable-then-ok",
  "reset-mid-stream",
  "cut-after-content",
  "rate-limited",
  "stalled",
  "malformed"
] as const
