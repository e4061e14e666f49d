/**
 * What the simulator records of each request it receives, how each exchange ended, and what it keeps of each
 * background response (Responses API, `"background": true`). A module of its own so that the simulator and its
 * request store share these types without importing each other.
 *
 * @since 0.1.0
 */
import type * as SimulatorScript from "./SimulatorScript.js"

/**
 * How an exchange ended.
 *
 * - `by: "client"`: the client closed the connection before the response was complete (an abort, an
 *   interruption, a client-side timeout).
 * - `by: "server"`: the response ended, or the simulator itself reset, hung up or shut the connection down.
 *
 * @since 0.1.0
 * @category models
 */
export interface Closure {
  readonly by: "client" | "server"
  /** Milliseconds of the simulator's `Clock` (epoch on the real clock), with its sub-millisecond precision. */
  readonly at: number
  /** Response body bytes written before the end, keepalive comments included. */
  readonly bytesWritten: number
}

/**
 * What a request to a route asks for:
 *
 * - `send`: a `POST` of a request body (every request of the Chat, Anthropic and subscription routes);
 * - `resume`: `GET /v1/responses/{id}?stream=true[&starting_after=N]`, the events of a background response;
 * - `poll`: `GET /v1/responses/{id}`, the response object;
 * - `cancel`: `POST /v1/responses/{id}/cancel`.
 *
 * @since 0.1.0
 * @category models
 */
export type RequestKind = "send" | "resume" | "poll" | "cancel"

/**
 * One request as the simulator received it.
 *
 * @since 0.1.0
 * @category models
 */
export interface RecordedRequest {
  /** 1 for the first request the server received, across all routes and scripts. */
  readonly id: number
  /** The protocol route, or undefined for a path (or method) that matched none. */
  readonly route: SimulatorScript.Route | undefined
  /**
   * 1 for the first request to the route since the last `setScript` or `clear` (0 without a route), whatever its
   * kind: sends, resumes, polls and cancels of a route share the count.
   */
  readonly nth: number
  /** What the request asks for; undefined without a route. */
  readonly kind: RequestKind | undefined
  /**
   * The background response involved: the id a background send created (undefined for an ordinary send, or when
   * the send was refused with a status), or the id in the path of a resume, poll or cancel.
   */
  readonly responseId: string | undefined
  readonly method: string
  /** The request target, query included. */
  readonly path: string
  /** Lower-cased names; `authorization`, `x-api-key`, `api-key`, `cookie` and `proxy-authorization` redacted. */
  readonly headers: Readonly<Record<string, string>>
  /** The parsed JSON body; the raw text when it is not JSON; undefined when empty. */
  readonly body: unknown
  /** Milliseconds of the simulator's `Clock` (epoch on the real clock), with its sub-millisecond precision. */
  readonly receivedAt: number
  /**
   * The kind of step served (`stream` for a default reply); undefined without a route, for polls and cancels (they
   * are not scripted) and for a resume the server refused (unknown id, too old, bad `starting_after`).
   */
  readonly step: SimulatorScript.StepKind | undefined
  /**
   * The step's index in the route's `steps` (a resume: in its `resume.steps`; a request for a scripted model: in
   * the model's `steps`), undefined for a default reply, a model's `then`, an outage or a refused prefill.
   */
  readonly stepIndex: number | undefined
  /** The body's `model`, when it is a string. */
  readonly model: string | undefined
  /**
   * What the request got, when it was served from a script step (undefined exactly when `step` is): `"200"` for
   * a whole reply (`stream`, `drip`); the status of a `status` step or a model's outage (`"429"`, `"503"`), followed
   * by the error code the step names (`"400 context_length_exceeded"`); `"400 prefill"` for a prefill a model
   * refused; else the step's kind (`"reset"`, `"eof"`, `"stall"`, `"error"`, `"slow-first-token"`, `"malformed"`,
   * `"no-done"`, `"truncated-tool-call"`).
   */
  readonly action: string | undefined
  /** Set once the exchange ended. */
  readonly closed: Closure | undefined
}

/**
 * The status of a background response, as the Responses API spells it.
 *
 * @since 0.1.0
 * @category models
 */
export type ResponseStatus = "queued" | "in_progress" | "completed" | "failed" | "incomplete" | "cancelled"

/**
 * A background response as the simulator keeps it: created by a send with `"background": true` on the
 * `openai-responses` route, complete from the start (the server runs it whatever happens to the connection), and
 * kept until the script is replaced.
 *
 * @since 0.1.0
 * @category models
 */
export interface BackgroundResponse {
  /** `resp_sim_N`, N the `id` of the send that created it. */
  readonly id: string
  readonly route: SimulatorScript.Route
  /** The `id` of the recorded send that created it. */
  readonly requestId: number
  /** Epoch milliseconds: the arrival of that send. */
  readonly createdAt: number
  /** What the next poll would see. */
  readonly status: ResponseStatus
  /** How many events it holds, `response.created` to the terminal event. */
  readonly events: number
  /** Polls answered (`GET /v1/responses/{id}`). */
  readonly polls: number
  /** Resumes served (`GET /v1/responses/{id}?stream=true`); a refused resume (too old) is not counted. */
  readonly resumes: number
  /** Cancels received (`POST /v1/responses/{id}/cancel`), the refused ones (already finished) included. */
  readonly cancels: number
  /** Too old to stream: a resume is refused with the API's 400 (`streamForMs` passed, or `Service.expire`). */
  readonly expired: boolean
}
