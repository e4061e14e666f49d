/**
 * The provider's error object: reading an error body (bounded in size and time) and parsing it from any of the shapes
 * OpenAI, Anthropic and compatible servers use. A JSON body sent in place of an event stream is parsed the same way
 * (`sse.ts`).
 *
 * @internal
 */
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Chunk from "effect/Chunk"
import type * as Clock from "effect/Clock"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Body from "./body.js"
import * as Deadlines from "./deadlines.js"
import { excerpt } from "./redaction.js"

/**
 * The provider's error object, from any of the shapes OpenAI and Anthropic use.
 *
 * @internal
 */
export interface ErrorBody {
  readonly code?: string | undefined
  readonly type?: string | undefined
  readonly message?: string | undefined
  readonly param?: string | undefined
}

const str = (u: unknown): string | undefined => (typeof u === "string" && u.length > 0 ? u : undefined)

const pick = (o: Record<string, unknown>): ErrorBody => ({
  ...(str(o.code) !== undefined ? { code: str(o.code)! } : {}),
  ...(str(o.type) !== undefined ? { type: str(o.type)! } : {}),
  ...(str(o.message) !== undefined ? { message: str(o.message)! } : {}),
  ...(str(o.param) !== undefined ? { param: str(o.param)! } : {})
})

/**
 * OpenAI `{error: {message, type, code, param}}`, Anthropic `{type: "error", error: {type, message}}`, or a bare
 * `{message, code}`; anything else keeps at most 300 characters of the text, scrubbed of the key, as its message.
 *
 * @internal
 */
export const parseErrorBody = (text: string, scrub: (text: string) => string): ErrorBody => {
  const trimmed = text.trim()
  if (trimmed.length === 0) return {}
  try {
    const json: unknown = JSON.parse(trimmed)
    if (Predicate.isRecord(json)) {
      if (Predicate.isRecord(json.error)) return pick(json.error)
      if (typeof json.error === "string") return { message: json.error }
      const picked = pick(json)
      if (picked.message !== undefined || picked.code !== undefined) return picked
    }
  } catch {
    // not JSON: fall through to the raw text
  }
  return { message: excerpt(scrub, trimmed, 300) }
}

const maxErrorBody = 64 * 1024

/**
 * What times an error body's read without a race: a provider's idle queue (`deadlines.ts`), which the attempt reading
 * the body is a user of, and the attempt's `Clock`.
 *
 * @internal
 */
export interface Timer {
  readonly deadlines: Deadlines.Deadlines
  readonly clock: Clock.Clock
}

/**
 * Reads at most 64 KiB of an error body, within the idle timeout; an unreadable body is an empty one.
 *
 * Read by the body's pull (`body.ts`: undici's `Readable` itself for the undici client), in a scope of its own that
 * releases the body once read, and decoded as UTF-8 as it comes. Given a `timer` and a body whose wait can be
 * abandoned, the timeout is a deadline in the provider's idle queue that abandons the wait when it passes; otherwise a
 * race (`Effect.timeout`). Not the platform's `response.stream` through `Stream.decodeText` and a fold, and no race
 * within an attempt: this path runs once per refused send, so rarely that it stays unoptimised, and each of those
 * costs about 3 M instructions per 503.
 *
 * @internal
 */
export const readErrorBody = (
  response: HttpClientResponse.HttpClientResponse,
  idleTimeout: Duration.Duration,
  timer?: Timer
): Effect.Effect<string> => {
  const read = (pull: Body.Pull, timedOut: () => boolean): Effect.Effect<string, Option.Option<unknown>> => {
    const decoder = new TextDecoder()
    let text = ""
    const next: Effect.Effect<string, Option.Option<unknown>> = Effect.flatMap(pull, (chunk) => {
      // given up: what was read of it is not shown
      if (timedOut()) return Effect.succeed("")
      const reads = Chunk.toReadonlyArray(chunk)
      for (let i = 0; i < reads.length; i++) text += decoder.decode(reads[i], { stream: true })
      return text.length < maxErrorBody ? next : Effect.succeed(text)
    })
    // the end of the body (`None`) is its text; a failure is an unreadable body
    return Effect.catchAll(
      next,
      (end) => Option.isNone(end) ? Effect.succeed(text + decoder.decode()) : Effect.fail(end)
    )
  }
  const raced = (pull: Body.Pull) =>
    Effect.orElseSucceed(Effect.timeout(read(pull, () => false), idleTimeout), () => "")
  return Effect.scoped(Effect.flatMap(Body.pull(response), (pull) => {
    if (timer === undefined || !Body.abandonable(pull)) return raced(pull)
    return Effect.suspend(() => {
      const deadline = Deadlines.arm(timer.deadlines, timer.clock, Effect.sync(() => Body.abandon(pull)))
      return Effect.ensuring(
        Effect.orElseSucceed(read(pull, () => deadline.timedOut), () => ""),
        Effect.sync(() => Deadlines.disarm(timer.deadlines, deadline))
      )
    })
  }))
}
