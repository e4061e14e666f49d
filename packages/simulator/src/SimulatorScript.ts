/**
 * The script format of the loopback fault simulator ({@link Simulator}): a JSON document that says, per route and
 * in order, what each request gets — a full stream, a reset, a clean EOF before the terminal event, a stall, an
 * in-band error event, any HTTP status, a truncated tool call, a slow drip or first token, a malformed event, a
 * missing `[DONE]` — and where the replies come from (a fixture file in SSE wire format, or text and tool calls
 * generated for the route's protocol).
 *
 * On the `openai-responses` route the resumes of background responses have steps of their own (`resume`), and
 * `background` says how long those responses can be resumed and how many polls see them in progress.
 *
 * `models` script requests by the `model` of their body instead of by route ({@link ModelScript}): a model can be
 * in an outage for a span of time, reject assistant prefill, and fail its first N requests or every one.
 *
 * Scripts are described by the `effect/Schema` schemas of this module; `ScriptLoader` decodes them (from a value,
 * JSON text or a file) and reports a typo or a bad value field by field.
 *
 * ```json
 * {
 *   "routes": {
 *     "openai-chat": {
 *       "reply": { "text": "Hello there, how can I help?" },
 *       "steps": [
 *         { "kind": "status", "status": 429, "headers": { "retry-after": "1" } },
 *         { "kind": "reset", "afterBytes": 120 },
 *         { "kind": "stream" }
 *       ]
 *     }
 *   }
 * }
 * ```
 *
 * @since 0.1.0
 */
import * as Schema from "effect/Schema"
import * as Rules from "./internal/scriptRules.js"
import { Count, HttpStatus, Millis, MillisOrZero, oneOf, Positive } from "./internal/scriptValues.js"

// -----------------------------------------------------------------------------
// routes
// -----------------------------------------------------------------------------

/**
 * The four wire protocols the simulator speaks, one route each:
 *
 * | route | paths (POST) |
 * |---|---|
 * | `openai-chat` | `/v1/chat/completions`, `/chat/completions` |
 * | `openai-responses` | `/v1/responses`, `/responses` |
 * | `anthropic` | `/v1/messages` |
 * | `subscription` | `/subscription/responses`, `/subscription/v1/responses`, `/backend-api/codex/responses` |
 *
 * @since 0.1.0
 * @category routes
 */
export const Route = Schema.Literal("openai-chat", "openai-responses", "anthropic", "subscription")

/**
 * @since 0.1.0
 * @category routes
 */
export type Route = typeof Route.Type

/**
 * Every route, in a stable order.
 *
 * @since 0.1.0
 * @category routes
 */
export const routes: ReadonlyArray<Route> = Route.literals

// -----------------------------------------------------------------------------
// building blocks
// -----------------------------------------------------------------------------

/**
 * HTTP headers as a record of names to values. Names are case-insensitive and sent lower-cased.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Headers = Schema.Record({ key: Schema.String, value: Schema.String }).annotations({
  identifier: "Headers"
})

/**
 * An error object for in-band error events and for the default body of an HTTP error status. Each field has a
 * per-protocol default (see docs/simulator.md).
 *
 * @since 0.1.0
 * @category schemas
 */
export const ErrorObject = Schema.Struct({
  /** Anthropic `error.type` / OpenAI `error.type`, e.g. `overloaded_error`, `server_error`. */
  type: Schema.optional(Schema.String),
  /** OpenAI `error.code`, e.g. `rate_limit_exceeded`, `context_length_exceeded`. */
  code: Schema.optional(Schema.String),
  message: Schema.optional(Schema.String)
}).annotations({ identifier: "ErrorObject" })

/**
 * @since 0.1.0
 * @category schemas
 */
export interface ErrorObject extends Schema.Schema.Type<typeof ErrorObject> {}

// -----------------------------------------------------------------------------
// replies
// -----------------------------------------------------------------------------

/**
 * A tool call of a generated reply. `arguments` is either a JSON object (serialised compactly) or a string sent
 * verbatim as the argument text (it need not be valid JSON). The id defaults to a generated one.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ToolCall = Schema.Struct({
  id: Schema.optional(Schema.String),
  name: Schema.NonEmptyString,
  arguments: Schema.optional(Schema.Union(Schema.String, Schema.Record({ key: Schema.String, value: Schema.Unknown })))
}).annotations({ identifier: "ToolCall" })

/**
 * @since 0.1.0
 * @category schemas
 */
export interface ToolCall extends Schema.Schema.Type<typeof ToolCall> {}

/**
 * The usage of a generated reply. `inputTokens` counts every input token, the cached ones included;
 * `cacheReadTokens` (read from the prompt cache) and `cacheWriteTokens` (written to it) are parts of it, so together
 * they are at most `inputTokens`. Each protocol writes them in its own fields:
 *
 * | route | input | cache read | cache write | output |
 * |---|---|---|---|---|
 * | `openai-chat` | `prompt_tokens` | `prompt_tokens_details.cached_tokens` | `prompt_tokens_details.cache_write_tokens` | `completion_tokens` |
 * | `openai-responses`, `subscription` | `input_tokens` | `input_tokens_details.cached_tokens` | `input_tokens_details.cache_write_tokens` | `output_tokens` |
 * | `anthropic` | `input_tokens` (the uncached rest) | `cache_read_input_tokens` | `cache_creation_input_tokens` | `output_tokens` |
 *
 * @since 0.1.0
 * @category schemas
 */
export const Usage = Schema.Struct({
  inputTokens: Count,
  outputTokens: Count,
  cacheReadTokens: Schema.optional(Count),
  cacheWriteTokens: Schema.optional(Count)
}).pipe(Schema.filter(Rules.cacheWithinInput)).annotations({ identifier: "Usage" })

/**
 * @since 0.1.0
 * @category schemas
 */
export interface Usage extends Schema.Schema.Type<typeof Usage> {}

const generatedFields = {
  text: Schema.optional(Schema.String),
  toolCalls: Schema.optional(Schema.Array(ToolCall)),
  /** Defaults to `tool_calls` when there are tool calls, else `stop`. `length` is an incomplete finish. */
  finishReason: Schema.optional(oneOf("stop", "tool_calls", "length", "content_filter")),
  /** Defaults to the request's `model`. */
  model: Schema.optional(Schema.String),
  /**
   * The usage the reply reports, in the protocol's own fields. `inputTokens` counts every input token, the cached
   * ones included; `cacheReadTokens` and `cacheWriteTokens` are parts of it (see {@link Usage}).
   */
  usage: Schema.optional(Usage),
  /** Characters per text delta. By default each word (with its leading space) is one delta. */
  deltaSize: Schema.optional(Positive)
}

/**
 * A reply generated for the route's protocol: text split into several deltas, then the tool calls (their
 * arguments split into several deltas), then the finish reason, usage and the terminal event. Without `text` and
 * `toolCalls`, a short default text.
 *
 * @since 0.1.0
 * @category schemas
 */
export const GeneratedReply = Schema.Struct(generatedFields).annotations({ identifier: "GeneratedReply" })

/**
 * @since 0.1.0
 * @category schemas
 */
export interface GeneratedReply extends Schema.Schema.Type<typeof GeneratedReply> {}

/**
 * Where a reply comes from: a fixture file (`fixture`, optionally `format`) or generated text and tool calls
 * (`text`, `toolCalls`, `finishReason`, `model`, `usage`, `deltaSize`) — not both.
 *
 * A fixture is sent byte for byte when its `format` is `wire` (the default for `.sse` files); `chunks` (the
 * default otherwise) is one JSON payload per line, framed for the route's protocol (`event:` lines for Anthropic
 * and Responses, a trailing `data: [DONE]` for Chat Completions and subscription). A relative path is resolved
 * against the script's `fixturesDir`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Reply = Schema.Struct({
  fixture: Schema.optional(Schema.NonEmptyString),
  format: Schema.optional(oneOf("wire", "chunks")),
  ...generatedFields
}).pipe(Schema.filter(Rules.oneSource(Object.keys(generatedFields)))).annotations({ identifier: "Reply" })

/**
 * @since 0.1.0
 * @category schemas
 */
export type Reply = typeof Reply.Type

/**
 * A reply read from a fixture file.
 *
 * @since 0.1.0
 * @category schemas
 */
export interface FixtureReply {
  readonly fixture: string
  readonly format?: "wire" | "chunks" | undefined
}

/**
 * @since 0.1.0
 * @category guards
 */
export const isFixtureReply = (reply: Reply): reply is Reply & FixtureReply => reply.fixture !== undefined

// -----------------------------------------------------------------------------
// steps
// -----------------------------------------------------------------------------

/**
 * Pacing for any step that writes a body: `bytes` bytes, or `events` whole SSE events (default 1), every
 * `everyMs` milliseconds.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Pace = Schema.Struct({
  everyMs: Millis,
  bytes: Schema.optional(Positive),
  events: Schema.optional(Positive)
}).pipe(Schema.filter(Rules.bytesOrEvents)).annotations({ identifier: "Pace" })

/**
 * @since 0.1.0
 * @category schemas
 */
export type Pace = typeof Pace.Type

const common = {
  /** Where the body comes from; defaults to the route's `reply`. */
  reply: Schema.optional(Reply),
  /** Extra response headers (they override the simulator's own). */
  headers: Schema.optional(Headers),
  pace: Schema.optional(Pace),
  /**
   * Hold the step for a span of time: every request that arrives within `forMs` milliseconds of the step's first
   * request gets this step (an outage of 5 s is `{ "kind": "status", "status": 503, "forMs": 5000 }`); the first
   * request after the span goes on to the next step. Without it the step serves one request.
   */
  forMs: Schema.optional(Millis),
  /** Free text, ignored: JSON has no comments. */
  comment: Schema.optional(Schema.String)
}

const cut = {
  afterBytes: Schema.optional(Count),
  afterEvents: Schema.optional(Count),
  /**
   * After the event that carries the Nth content token (a text delta); `0` is just before the first one. A reply
   * with fewer tokens is cut after its last one.
   */
  afterTokens: Schema.optional(Count)
}

/**
 * The whole reply, terminal event included.
 *
 * @since 0.1.0
 * @category steps
 */
export const StreamStep = Schema.Struct({ kind: Schema.Literal("stream"), ...common }).annotations({
  identifier: "StreamStep"
})

/**
 * A connection reset (TCP RST). Without `afterBytes`/`afterEvents`/`afterTokens` the socket is reset before any
 * response byte (no status line); with one, the status and headers and that many body bytes (or whole events, or
 * the events through that many content tokens) are sent first.
 *
 * @since 0.1.0
 * @category steps
 */
export const ResetStep = Schema.Struct({ kind: Schema.Literal("reset"), ...common, ...cut }).pipe(
  Schema.filter(Rules.oneCut)
).annotations({ identifier: "ResetStep" })

/**
 * A clean end of the body (a proper final chunk) before the terminal event. By default the body ends just before
 * the protocol's terminal event; `afterBytes`, `afterEvents` or `afterTokens` end it elsewhere (`afterBytes` even
 * mid-event). A stream cut after 40 tokens of 60 is `{ "kind": "eof", "afterTokens": 40 }`.
 *
 * @since 0.1.0
 * @category steps
 */
export const EofStep = Schema.Struct({ kind: Schema.Literal("eof"), ...common, ...cut }).pipe(
  Schema.filter(Rules.oneCut)
).annotations({ identifier: "EofStep" })

/**
 * The server stops sending. Without `afterBytes`/`afterEvents`/`afterTokens` it stalls before the status line
 * (a request that is never answered: `{ "kind": "stall", "durationMs": 120000, "then": "eof" }`). With
 * `keepaliveMs` it writes `: keepalive` comments at that interval during the stall (the stall point then moves
 * back to the last event boundary, so comments never split an event). The stall lasts `durationMs` (default and
 * maximum 600000) and always ends when the client disconnects or the simulator closes; afterwards `then` says
 * what happens: `resume` the rest of the reply (default), `reset` or `eof`.
 *
 * @since 0.1.0
 * @category steps
 */
export const StallStep = Schema.Struct({
  kind: Schema.Literal("stall"),
  ...common,
  ...cut,
  keepaliveMs: Schema.optional(Millis),
  durationMs: Schema.optional(Millis),
  then: Schema.optional(oneOf("resume", "reset", "eof"))
}).pipe(Schema.filter(Rules.oneCut)).annotations({ identifier: "StallStep" })

/**
 * An in-band error event after `afterEvents` events of the reply (default: half the events before the terminal,
 * rounded down), then a clean end of the body. Chat Completions: a `data: {"error":{…}}` chunk; Anthropic:
 * `event: error`; Responses and subscription: an `error` event, or `response.failed` with `event`.
 *
 * @since 0.1.0
 * @category steps
 */
export const ErrorStep = Schema.Struct({
  kind: Schema.Literal("error"),
  ...common,
  afterEvents: Schema.optional(Count),
  error: Schema.optional(ErrorObject),
  /** Responses and subscription only: which event carries the error. Default `error`. */
  event: Schema.optional(oneOf("error", "response.failed"))
}).annotations({ identifier: "ErrorStep" })

/**
 * Any status with any headers and body, e.g. 429 with `retry-after`, 401, 400 with a `context_length_exceeded`
 * error, 307/308 with `location`. `body` is a string sent verbatim or a JSON value sent as `application/json`;
 * without it, an error status (≥ 400) gets the protocol's error body built from `error` and the status, and
 * other statuses an empty body.
 *
 * @since 0.1.0
 * @category steps
 */
export const StatusStep = Schema.Struct({
  kind: Schema.Literal("status"),
  status: HttpStatus,
  headers: Schema.optional(Headers),
  body: Schema.optional(Schema.Unknown),
  error: Schema.optional(ErrorObject),
  forMs: common.forMs,
  comment: Schema.optional(Schema.String)
}).pipe(Schema.filter(Rules.bodyOrError)).annotations({ identifier: "StatusStep" })

/**
 * The reply up to the middle of a tool call's arguments, then a clean end of the body: the arguments are never
 * complete JSON. `afterChars` characters of the first tool call's arguments are sent (default: half of them,
 * at least one, always fewer than all). The reply must contain a tool call.
 *
 * @since 0.1.0
 * @category steps
 */
export const TruncatedToolCallStep = Schema.Struct({
  kind: Schema.Literal("truncated-tool-call"),
  ...common,
  afterChars: Schema.optional(Positive)
}).annotations({ identifier: "TruncatedToolCallStep" })

/**
 * The whole reply at a slow rate: `bytes` bytes or `events` events (default 1) every `everyMs` milliseconds.
 * Shorthand for a `stream` step with `pace`.
 *
 * @since 0.1.0
 * @category steps
 */
export const DripStep = Schema.Struct({
  kind: Schema.Literal("drip"),
  reply: common.reply,
  headers: common.headers,
  forMs: common.forMs,
  comment: common.comment,
  everyMs: Millis,
  bytes: Schema.optional(Positive),
  events: Schema.optional(Positive)
}).pipe(Schema.filter(Rules.bytesOrEvents)).annotations({ identifier: "DripStep" })

/**
 * Status and headers at once, then the first content token only after `delayMs` milliseconds (with `keepaliveMs`,
 * `: keepalive` comments meanwhile), then the rest of the reply as usual. Shorthand for a `stall` step with
 * `afterTokens: 0` and `then: "resume"`.
 *
 * @since 0.1.0
 * @category steps
 */
export const SlowFirstTokenStep = Schema.Struct({
  kind: Schema.Literal("slow-first-token"),
  ...common,
  delayMs: Millis,
  keepaliveMs: Schema.optional(Millis)
}).annotations({ identifier: "SlowFirstTokenStep" })

/**
 * The whole reply with one extra SSE event whose `data:` is not JSON, inserted after `afterEvents` events of the
 * reply (default 9: it is the 10th event; never after the terminal event). `data` defaults to a chunk cut short,
 * `{"choices":[{"delta":`. The event carries the `event:` name of the event it precedes, if any.
 *
 * @since 0.1.0
 * @category steps
 */
export const MalformedStep = Schema.Struct({
  kind: Schema.Literal("malformed"),
  ...common,
  afterEvents: Schema.optional(Count),
  /** One line: a line break would end the `data:` field. */
  data: Schema.optional(Schema.String.pipe(Schema.filter(Rules.oneLine)))
}).annotations({ identifier: "MalformedStep" })

/**
 * The whole reply without its `data: [DONE]` sentinel (Chat Completions and subscription): the terminal chunk
 * and, on Chat Completions, the usage chunk (when the request asks for it) are sent and the body ends cleanly. On the
 * routes without a sentinel it is the whole reply.
 *
 * @since 0.1.0
 * @category steps
 */
export const NoDoneStep = Schema.Struct({ kind: Schema.Literal("no-done"), ...common }).annotations({
  identifier: "NoDoneStep"
})

/**
 * What one request gets.
 *
 * @since 0.1.0
 * @category steps
 */
export const Step = Schema.Union(
  StreamStep,
  ResetStep,
  EofStep,
  StallStep,
  ErrorStep,
  StatusStep,
  TruncatedToolCallStep,
  DripStep,
  SlowFirstTokenStep,
  MalformedStep,
  NoDoneStep
).annotations({ identifier: "Step" })

/**
 * @since 0.1.0
 * @category steps
 */
export type Step = typeof Step.Type

/**
 * @since 0.1.0
 * @category steps
 */
export type StepKind = Step["kind"]

// -----------------------------------------------------------------------------
// scripts
// -----------------------------------------------------------------------------

// -----------------------------------------------------------------------------
// background responses (openai-responses)
// -----------------------------------------------------------------------------

/**
 * The steps of the resume GETs of a route's background responses (`GET /v1/responses/{id}?stream=true`), in
 * order, counted apart from the sends (`POST`s) and from when the script was set: the Nth resume of the route,
 * whatever its response, gets `steps[N-1]`; after the last step `afterLast` decides (`reply`, the default: the
 * resumed events in full; `repeat-last`). A step applies to the events the resume serves (those after
 * `starting_after`): `{ "kind": "reset", "afterEvents": 3 }` cuts the resumed stream after 3 of them. A step names
 * no `reply`: a resume serves the stored response. A resume the server refuses (unknown id, a response too old to
 * stream, a bad `starting_after`) consumes no step.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ResumeScript = Schema.Struct({
  steps: Schema.optional(Schema.Array(Step)),
  afterLast: Schema.optional(oneOf("reply", "repeat-last")),
  comment: Schema.optional(Schema.String)
}).pipe(Schema.filter(Rules.resumeNamesNoReply)).annotations({ identifier: "ResumeScript" })

/**
 * @since 0.1.0
 * @category schemas
 */
export interface ResumeScript extends Schema.Schema.Type<typeof ResumeScript> {}

/**
 * How the route's background responses behave on the server side (the `openai-responses` route; a `POST` with
 * `"background": true`).
 *
 * - `inProgressPolls` (default 0): the response answers its first K polls (`GET /v1/responses/{id}`) with
 *   `status: "in_progress"`, then `completed` (or the status of its terminal event). While it is in progress a
 *   cancel succeeds (`status: "cancelled"`); once it is done a cancel is the real API's 400. With 0 the response is
 *   done at once: every event is known when it is created.
 * - `streamForMs` (default 300000, the real API's five minutes): a resume of a response at least this old (by the
 *   arrival times of its `POST` and of the resume) is the real API's 400 `This response can no longer be streamed
 *   because it is more than 5 minutes old.`; polls still work. `0`: every resume is refused so.
 *
 * @since 0.1.0
 * @category schemas
 */
export const BackgroundOptions = Schema.Struct({
  inProgressPolls: Schema.optional(Count),
  streamForMs: Schema.optional(MillisOrZero),
  comment: Schema.optional(Schema.String)
}).annotations({ identifier: "BackgroundOptions" })

/**
 * @since 0.1.0
 * @category schemas
 */
export interface BackgroundOptions extends Schema.Schema.Type<typeof BackgroundOptions> {}

/**
 * The script of one route. The Nth request to the route (counted from when the script was set) gets
 * `steps[N-1]` (a step with `forMs` serves every request of its span, then the next request gets the next step);
 * after the last step, `afterLast` decides: `reply` (default) serves the route's `reply` in full,
 * `repeat-last` repeats the last step. Without steps every request gets the full reply.
 *
 * On the `openai-responses` route `steps` are the sends (`POST`s); the resumes of background responses have their
 * own steps (`resume`), and `background` says how those responses behave. Polls and cancels are not scripted.
 *
 * @since 0.1.0
 * @category schemas
 */
export const RouteScript = Schema.Struct({
  /** The default reply of the route. Defaults to a short generated text. */
  reply: Schema.optional(Reply),
  steps: Schema.optional(Schema.Array(Step)),
  afterLast: Schema.optional(oneOf("reply", "repeat-last")),
  /** `openai-responses` only: the steps of resume GETs. */
  resume: Schema.optional(ResumeScript),
  /** `openai-responses` only: polls in progress, how long a response can be resumed. */
  background: Schema.optional(BackgroundOptions),
  comment: Schema.optional(Schema.String)
}).annotations({ identifier: "RouteScript" })

/**
 * @since 0.1.0
 * @category schemas
 */
export interface RouteScript extends Schema.Schema.Type<typeof RouteScript> {}

/**
 * An outage of a model: every request for the model that arrives within `forMs` milliseconds of when the script
 * was set (or of the simulator's start) gets `status` (with `headers`, and the protocol's error body built from
 * `error`); later requests are served by the model's steps. The span is measured with the `Clock` of the context
 * the simulator was made in, so under `TestClock` a test steps through it with `TestClock.adjust`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Outage = Schema.Struct({
  forMs: Millis,
  status: HttpStatus,
  headers: Schema.optional(Headers),
  error: Schema.optional(ErrorObject)
}).annotations({ identifier: "Outage" })

/**
 * @since 0.1.0
 * @category schemas
 */
export interface Outage extends Schema.Schema.Type<typeof Outage> {}

/**
 * The script of one model, on whichever route its requests arrive: a send whose JSON body has `"model": NAME` is
 * served from `models[NAME]` instead of its route's script. In order:
 *
 * 1. `outage`: a request within the outage gets its status (and takes no step);
 * 2. `rejectPrefill`: a request whose last message (`messages`, or `input` on the Responses routes) has role
 *    `assistant` gets a 400 `prefill_not_supported` (recorded with the action `400 prefill`; it takes no step);
 * 3. otherwise the Nth request for the model (counted from when the script was set, across routes) gets
 *    `steps[N-1]` (a step with `forMs` is held as on a route), and every request after the steps gets `then`
 *    (default: a `stream` step, the whole reply).
 *
 * `reply` is the model's default reply (default: the route's). "Every attempt fails" is
 * `{ "then": { "kind": "status", "status": 503 } }`.
 *
 * @since 0.1.0
 * @category schemas
 */
export const ModelScript = Schema.Struct({
  reply: Schema.optional(Reply),
  steps: Schema.optional(Schema.Array(Step)),
  then: Schema.optional(Step),
  rejectPrefill: Schema.optional(Schema.Boolean),
  outage: Schema.optional(Outage),
  comment: Schema.optional(Schema.String)
}).annotations({ identifier: "ModelScript" })

/**
 * @since 0.1.0
 * @category schemas
 */
export interface ModelScript extends Schema.Schema.Type<typeof ModelScript> {}

/**
 * A whole script. `fixturesDir` is where relative fixture paths are resolved: relative to the script file when
 * the script is {@link load}ed from a file, else to the simulator's `fixturesDir` option or the working directory.
 *
 * @since 0.1.0
 * @category schemas
 */
export const Script = Schema.Struct({
  fixturesDir: Schema.optional(Schema.String),
  routes: Schema.optional(
    Schema.Struct({
      "openai-chat": Schema.optional(RouteScript),
      "openai-responses": Schema.optional(RouteScript),
      anthropic: Schema.optional(RouteScript),
      subscription: Schema.optional(RouteScript)
    }).pipe(Schema.filter(Rules.backgroundOnlyOnResponses)).annotations({ identifier: "Routes" })
  ),
  /** Scripts by model name: see {@link ModelScript}. */
  models: Schema.optional(Schema.Record({ key: Schema.String, value: ModelScript })),
  comment: Schema.optional(Schema.String)
}).annotations({ identifier: "Script" })

/**
 * @since 0.1.0
 * @category schemas
 */
export interface Script extends Schema.Schema.Type<typeof Script> {}

/**
 * The empty script: every route serves its default generated reply in full.
 *
 * @since 0.1.0
 * @category constructors
 */
export const empty: Script = {}
