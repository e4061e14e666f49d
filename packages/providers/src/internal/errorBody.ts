/**
 * The provider's error object: reading an error body (bounded in size and time) and parsing it from any of the shapes
 * OpenAI, Anthropic and compatible servers use. A JSON body sent in place of an event stream is parsed the same way
 * (`sse.ts`).
 *
 * Moved out of `internal/http.ts` when it was split by concept.
 *
 * @internal
 */
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Predicate from "effect/Predicate"
import * as Stream from "effect/Stream"
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
 * Reads at most 64 KiB of an error body, within the idle timeout; an unreadable body is an empty one.
 *
 * @internal
 */
export const readErrorBody = (
  response: HttpClientResponse.HttpClientResponse,
  idleTimeout: Duration.Duration
): Effect.Effect<string> =>
  response.stream.pipe(
    Stream.decodeText(),
    Stream.runFoldWhile("", (acc) => acc.length < maxErrorBody, (acc, chunk) => acc + chunk),
    Effect.timeout(idleTimeout),
    Effect.orElseSucceed(() => "")
  )
