/**
 * The fault scenarios of the public failoverbench benchmark as a simulator script, so a gateway can be run
 * through them offline: one model name per scenario (`fb-s01-429-retry-after` … `fb-s16-503-persistent`), each
 * failing the way its scenario says on whichever route it is asked for, and two healthy models to fail over to
 * (`fb-ok`, and `fb-ok-noprefill`, which refuses assistant prefill). Every healthy reply is
 * {@link canonicalAnswer}, one word per content delta.
 *
 * The long waits (the slow first token, the stall, the unanswered request, the outage) come in two
 * {@link Profile}s: `full`, the benchmark's timings, and `fast`, shorter ones for a quick run.
 *
 * ```ts
 * const simulator = yield* Simulator.make({ script: Failoverbench.script("fast") })
 * // POST {simulator.baseUrl("openai-chat")}/chat/completions with "model": "fb-s04-503-persistent" → 503
 * ```
 *
 * `reprise simulate --scenarios failoverbench [--profile fast]` serves this script.
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import type * as SimulatorScript from "./SimulatorScript.js"

/**
 * The reply text of every healthy model: sixty words.
 *
 * @since 0.1.0
 * @category replies
 */
export const canonicalAnswer =
  "A gateway earns trust on the bad days, not the good ones. When a provider stalls, resets a stream, or answers " +
  "every request with an error, the gateway notices quickly, keeps what the user already saw, and finishes the " +
  "reply somewhere else. Nobody should have to know that anything went wrong, except the operator reading a " +
  "short and honest log."

/**
 * The healthy model: the whole {@link canonicalAnswer}, every time.
 *
 * @since 0.1.0
 * @category models
 */
export const healthyModel = "fb-ok"

/**
 * A healthy model that answers a request ending with an assistant message (a prefill) with a 400
 * `prefill_not_supported`.
 *
 * @since 0.1.0
 * @category models
 */
export const noPrefillModel = "fb-ok-noprefill"

/**
 * How long the long faults last: `full` is the benchmark's timings, `fast` a quick run.
 *
 * @since 0.1.0
 * @category profiles
 */
export const Profile = Schema.Literal("full", "fast")

/**
 * @since 0.1.0
 * @category profiles
 */
export type Profile = typeof Profile.Type

/**
 * The waits of a profile, in milliseconds.
 *
 * @since 0.1.0
 * @category profiles
 */
export interface Timings {
  /** S07: from the headers to the first content token. */
  readonly firstTokenDelayMs: number
  /** S09: the silence after the 20th token, before the connection closes. */
  readonly stallMs: number
  /** S06: how long a request goes unanswered before the connection closes. */
  readonly silenceMs: number
  /** S15: the outage, from when the script was set. */
  readonly outageMs: number
  /** Between two events of every stream; 0: no pause. */
  readonly tokenIntervalMs: number
}

/**
 * The timings of each profile.
 *
 * | | `full` | `fast` |
 * |---|---|---|
 * | first token (S07) | 20 s | 3 s |
 * | stall (S09) | 30 s | 4 s |
 * | silence (S06) | 120 s | 20 s |
 * | outage (S15) | 60 s | 8 s |
 * | between tokens | 15 ms | none |
 *
 * @since 0.1.0
 * @category profiles
 */
export const timings: Readonly<Record<Profile, Timings>> = {
  full: { firstTokenDelayMs: 20_000, stallMs: 30_000, silenceMs: 120_000, outageMs: 60_000, tokenIntervalMs: 15 },
  fast: { firstTokenDelayMs: 3_000, stallMs: 4_000, silenceMs: 20_000, outageMs: 8_000, tokenIntervalMs: 0 }
}

/**
 * One scenario: its id (`S01`…`S16`), a title, the model that fails, the model a gateway should fail over to, the
 * fault in words, and the model's script for a profile's timings.
 *
 * @since 0.1.0
 * @category scenarios
 */
export interface Scenario {
  readonly id: string
  readonly title: string
  readonly model: string
  readonly fallback: string
  readonly fault: string
  readonly modelScript: (timings: Timings) => SimulatorScript.ModelScript
}

const pace = (t: Timings): { readonly pace?: SimulatorScript.Pace } =>
  t.tokenIntervalMs > 0 ? { pace: { everyMs: t.tokenIntervalMs } } : {}

const healthy = (t: Timings): SimulatorScript.Step => ({ kind: "stream", ...pace(t) })

const reply = { text: canonicalAnswer }

/** Fails the first request with `first`, then answers. */
const once = (first: SimulatorScript.Step) => (t: Timings): SimulatorScript.ModelScript => ({
  reply,
  steps: [first],
  then: healthy(t)
})

/** Every request gets `step`. */
const always = (step: (t: Timings) => SimulatorScript.Step) => (t: Timings): SimulatorScript.ModelScript => ({
  reply,
  then: step(t)
})

const status =
  (code: number, extra: Omit<typeof SimulatorScript.StatusStep.Type, "kind" | "status"> = {}) =>
  (): SimulatorScript.Step => ({ kind: "status", status: code, ...extra })

const invalid = (code: string, message: string) =>
  status(400, { error: { type: "invalid_request_error", code, message } })

const scenario = (
  id: string,
  model: string,
  title: string,
  fault: string,
  modelScript: (timings: Timings) => SimulatorScript.ModelScript,
  fallback = healthyModel
): Scenario => ({ id, title, model, fallback, fault, modelScript })

/**
 * The sixteen scenarios, in order.
 *
 * @since 0.1.0
 * @category scenarios
 */
export const scenarios: ReadonlyArray<Scenario> = [
  scenario(
    "S01",
    "fb-s01-429-retry-after",
    "rate limited once, with Retry-After",
    "the first request gets 429 with Retry-After: 2; later ones are answered",
    once({ kind: "status", status: 429, headers: { "retry-after": "2" } })
  ),
  scenario(
    "S02",
    "fb-s02-429-persistent",
    "rate limited for good",
    "every request gets 429, without Retry-After",
    always(status(429))
  ),
  scenario(
    "S03",
    "fb-s03-500-then-200",
    "one server error",
    "the first request gets 500; later ones are answered",
    once({ kind: "status", status: 500 })
  ),
  scenario(
    "S04",
    "fb-s04-503-persistent",
    "unavailable for good",
    "every request gets 503",
    always(status(503))
  ),
  scenario(
    "S05",
    "fb-s05-reset",
    "connection reset once",
    "the first request's connection is reset before any response byte; later ones are answered",
    once({ kind: "reset" })
  ),
  scenario(
    "S06",
    "fb-s06-no-response",
    "no response",
    "every request is accepted and never answered: no status line, until the profile's silence ends and the " +
      "connection closes",
    always((t) => ({ kind: "stall", durationMs: t.silenceMs, then: "eof" }))
  ),
  scenario(
    "S07",
    "fb-s07-slow-ttft",
    "slow first token",
    "every request gets its headers at once and its first token after the profile's delay; the rest as usual",
    always((t) => ({ kind: "slow-first-token", delayMs: t.firstTokenDelayMs, ...pace(t) }))
  ),
  scenario(
    "S08",
    "fb-s08-stream-cut",
    "stream cut",
    "every stream ends cleanly after 40 of its 60 tokens, without a finish reason, usage or [DONE]",
    always((t) => ({ kind: "eof", afterTokens: 40, ...pace(t) }))
  ),
  scenario(
    "S09",
    "fb-s09-stream-stall",
    "stream stall",
    "every stream goes silent after 20 tokens for the profile's stall, then the connection closes",
    always((t) => ({ kind: "stall", afterTokens: 20, durationMs: t.stallMs, then: "eof", ...pace(t) }))
  ),
  scenario(
    "S10",
    "fb-s10-malformed-chunk",
    "malformed chunk",
    "the 10th event of every stream is not JSON; the stream otherwise completes",
    always((t) => ({ kind: "malformed", ...pace(t) }))
  ),
  scenario(
    "S11",
    "fb-s11-no-done",
    "no [DONE]",
    "every stream is complete (finish reason and usage) but has no data: [DONE]",
    always((t) => ({ kind: "no-done", ...pace(t) }))
  ),
  scenario(
    "S12",
    "fb-s12-context-length",
    "context too long",
    "every request gets 400 context_length_exceeded",
    always(invalid(
      "context_length_exceeded",
      "This model's context window is smaller than your messages. Shorten the messages and try again."
    ))
  ),
  scenario(
    "S13",
    "fb-s13-content-filter",
    "content refused",
    "every request gets 400 content_policy_violation",
    always(invalid(
      "content_policy_violation",
      "Your request was rejected by the content policy of this model."
    ))
  ),
  scenario(
    "S14",
    "fb-s14-stream-cut",
    "stream cut, fallback without prefill",
    "as S08; the fallback model refuses a request that ends with an assistant message",
    always((t) => ({ kind: "eof", afterTokens: 40, ...pace(t) })),
    noPrefillModel
  ),
  scenario(
    "S15",
    "fb-s15-flap",
    "outage, then recovery",
    "every request within the profile's outage (from when the script was set) gets 503; later ones are answered",
    (t) => ({ reply, outage: { forMs: t.outageMs, status: 503 }, then: healthy(t) })
  ),
  scenario(
    "S16",
    "fb-s16-503-persistent",
    "unavailable for good, again",
    "every request gets 503",
    always(status(503))
  )
]

/**
 * The whole catalogue as a simulator script for a profile: a model script for each scenario's model and for the
 * two healthy models. Requests for any other model get the routes' default replies.
 *
 * @since 0.1.0
 * @category scripts
 */
export const script = (profile: Profile): SimulatorScript.Script => {
  const t = timings[profile]
  const models: Record<string, SimulatorScript.ModelScript> = {
    [healthyModel]: { reply, then: healthy(t) },
    [noPrefillModel]: { reply, then: healthy(t), rejectPrefill: true }
  }
  for (const s of scenarios) models[s.model] = s.modelScript(t)
  return { comment: `failoverbench scenarios, ${profile} profile`, models }
}
