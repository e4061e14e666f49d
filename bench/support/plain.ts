/**
 * What a hand-written client does without reprise: one `undici.request`, the body through `eventsource-parser`,
 * `JSON.parse` per event, the text appended and the terminal checked. Used as the baseline of figures 2 and 3.
 */
import * as Sse from "@effect/experimental/Sse"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import * as Schema from "effect/Schema"
import { createParser } from "eventsource-parser"
import { request } from "undici"
import { feedLines } from "./lineFeed.js"

type Json = Record<string, any>

/**
 * What the plain client does with each event of a Chat Completions reply (shared with the Effect floor of
 * `effectClient.ts`): `JSON.parse`, an in-band error thrown, the text kept, the terminal noted; with `check`, each
 * payload validated too.
 */
export const chatReply = (check?: (payload: unknown) => { readonly _tag: "Left" | "Right" }) => {
  const parts: Array<string> = []
  let finished = false
  const onEvent = (event: { readonly data: string }) => {
    if (event.data === "[DONE]") return
    const payload = JSON.parse(event.data) as Json
    if (check !== undefined && check(payload)._tag === "Left") throw new Error("undecodable event")
    if (payload.error != null && typeof payload.error === "object") throw new Error("in-band error")
    const choice = payload.choices?.[0]
    const text = choice?.delta?.content
    if (typeof text === "string") parts.push(text)
    if (choice?.finish_reason != null) finished = true
  }
  return { onEvent, finished: () => finished, text: () => parts.join("") }
}

/**
 * Streams one Chat Completions reply and returns its text; throws on a failed or premature stream. With
 * `parser: "effect"`, the body goes through the SSE parser DESIGN §3 mandates (`@effect/experimental/Sse`, fed line by
 * line as reprise feeds it) instead of `eventsource-parser`, and with `validate`, each payload is also checked with
 * the Chat Completions event schema reprise uses: the floors of figure 2.
 */
export const chat = async (
  baseUrl: string,
  body: unknown,
  options: { readonly parser?: "eventsource-parser" | "effect"; readonly validate?: boolean } = {}
): Promise<string> => {
  const check = options.validate === true ? Schema.decodeUnknownEither(OpenAiChat.ChatChunk) : undefined
  const response = await request(`${baseUrl}/chat/completions`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      accept: "text/event-stream",
      authorization: "Bearer sk-bench-not-a-key"
    },
    body: JSON.stringify(body)
  })
  if (response.statusCode !== 200) {
    await response.body.dump()
    throw new Error(`status ${response.statusCode}`)
  }
  const { finished, onEvent, text } = chatReply(check)
  const decoder = new TextDecoder()
  if (options.parser === "effect") {
    const parser = Sse.makeParser((event) => {
      if (event._tag === "Event") onEvent(event)
    }, { maxEventSize: 1024 * 1024 })
    for await (const chunk of response.body) feedLines(parser, decoder, [chunk as Uint8Array])
  } else {
    const parser = createParser({ onEvent })
    for await (const chunk of response.body) parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }))
  }
  if (!finished()) throw new Error("premature EOF")
  return text()
}

/** `chat` with a hand-written retry loop: up to `attempts` tries, `backoffMs` between them. */
export const chatWithRetry = async (
  baseUrl: string,
  body: unknown,
  options: { readonly attempts: number; readonly backoffMs: number }
): Promise<{ text: string; attempts: number }> => {
  for (let attempt = 1;; attempt++) {
    try {
      return { text: await chat(baseUrl, body), attempts: attempt }
    } catch (error) {
      if (attempt >= options.attempts) throw error
      await new Promise((resolve) => setTimeout(resolve, options.backoffMs))
    }
  }
}
