/**
 * A Chat Completions client for the simulator's tests: the real `fetch` (undici) over loopback, reporting what
 * arrived and when: the status, the time to the headers and to the first content token, every SSE event, and
 * how the body ended.
 */
import type * as Simulator from "@reprise/simulator/Simulator"
import { Effect } from "effect"
import { createParser } from "eventsource-parser"

export interface Event {
  readonly event: string | undefined
  readonly data: string
}

export interface Reply {
  /** Undefined when no response arrived (a reset, a hang-up, an abort before the headers). */
  readonly status: number | undefined
  readonly headers: Headers | undefined
  readonly body: string
  readonly events: ReadonlyArray<Event>
  /** `end`: the body ended cleanly; `error`: the request or the body failed; `aborted`: `abortAfterMs` passed. */
  readonly outcome: "end" | "error" | "aborted"
  readonly error: string | undefined
  /** Milliseconds from the send. */
  readonly headersAt: number | undefined
  readonly firstTokenAt: number | undefined
  /** The time of each event's arrival, in the order of `events`. */
  readonly eventsAt: ReadonlyArray<number>
}

export interface Options {
  readonly messages?: ReadonlyArray<{ readonly role: string; readonly content: string }> | undefined
  readonly includeUsage?: boolean | undefined
  /** Give up (abort) this many milliseconds after the send. */
  readonly abortAfterMs?: number | undefined
}

const tokenOf = (data: string): string | undefined => {
  try {
    const content = JSON.parse(data)?.choices?.[0]?.delta?.content
    return typeof content === "string" && content !== "" ? content : undefined
  } catch {
    return undefined
  }
}

/** One streamed Chat Completions request for `model`. */
export const chat = (sim: Simulator.Service, model: string, options: Options = {}): Effect.Effect<Reply> =>
  Effect.promise(async () => {
    const started = performance.now()
    const since = () => performance.now() - started
    const controller = new AbortController()
    let aborted = false
    const timer = options.abortAfterMs === undefined ? undefined : setTimeout(() => {
      aborted = true
      controller.abort()
    }, options.abortAfterMs)
    const events: Array<Event> = []
    const eventsAt: Array<number> = []
    let firstTokenAt: number | undefined
    const parser = createParser({
      onEvent: (e) => {
        events.push({ event: e.event, data: e.data })
        eventsAt.push(since())
        if (firstTokenAt === undefined && tokenOf(e.data) !== undefined) firstTokenAt = since()
      }
    })
    let status: number | undefined
    let headers: Headers | undefined
    let headersAt: number | undefined
    let body = ""
    try {
      const response = await fetch(`${sim.baseUrl("openai-chat")}/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: "Bearer sk-test-secret" },
        body: JSON.stringify({
          model,
          messages: options.messages ?? [{ role: "user", content: "Why trust a gateway?" }],
          stream: true,
          ...(options.includeUsage === true ? { stream_options: { include_usage: true } } : {})
        }),
        signal: controller.signal
      })
      status = response.status
      headers = response.headers
      headersAt = since()
      const decoder = new TextDecoder()
      for await (const chunk of response.body!) {
        const text = decoder.decode(chunk, { stream: true })
        body += text
        parser.feed(text)
      }
      return { status, headers, body, events, outcome: "end", error: undefined, headersAt, firstTokenAt, eventsAt }
    } catch (cause) {
      const error = String((cause as Error & { cause?: unknown }).cause ?? cause)
      return {
        status,
        headers,
        body,
        events,
        outcome: aborted ? "aborted" : "error",
        error,
        headersAt,
        firstTokenAt,
        eventsAt
      }
    } finally {
      clearTimeout(timer)
    }
  })

/** The content tokens of a reply, in order. */
export const tokens = (reply: Reply): ReadonlyArray<string> =>
  reply.events.flatMap((e) => {
    const token = tokenOf(e.data)
    return token === undefined ? [] : [token]
  })

/** The JSON payloads of a reply's events (the ones that parse). */
export const payloads = (reply: Reply): ReadonlyArray<any> =>
  reply.events.flatMap((e) => {
    try {
      return [JSON.parse(e.data)]
    } catch {
      return []
    }
  })

/** Whether a reply carries a chunk with a `finish_reason`. */
export const finished = (reply: Reply): boolean =>
  payloads(reply).some((p) => p.choices?.some((c: any) => typeof c.finish_reason === "string"))

export const hasDone = (reply: Reply): boolean => reply.events.some((e) => e.data === "[DONE]")
