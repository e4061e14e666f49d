/**
 * What a hand-written client does without reprise: one `undici.request`, the body through `eventsource-parser`,
 * `JSON.parse` per event, the text appended and the terminal checked. Used as the baseline of figures 2 and 3.
 */
import { createParser } from "eventsource-parser"
import { request } from "undici"

type Json = Record<string, any>

/** Streams one Chat Completions reply and returns its text; throws on a failed or premature stream. */
export const chat = async (baseUrl: string, body: unknown): Promise<string> => {
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
  const parts: Array<string> = []
  let finished = false
  const parser = createParser({
    onEvent(event) {
      if (event.data === "[DONE]") return
      const payload = JSON.parse(event.data) as Json
      if (payload.error != null && typeof payload.error === "object") throw new Error("in-band error")
      const choice = payload.choices?.[0]
      const text = choice?.delta?.content
      if (typeof text === "string") parts.push(text)
      if (choice?.finish_reason != null) finished = true
    }
  })
  const decoder = new TextDecoder()
  for await (const chunk of response.body) parser.feed(decoder.decode(chunk as Uint8Array, { stream: true }))
  if (!finished) throw new Error("premature EOF")
  return parts.join("")
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
