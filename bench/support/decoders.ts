/**
 * The decoders figure 1 and figure 5 compare, each reading the same chunked bytes and producing the reply's text:
 *
 * - `reprise`: the real provider (`HttpProvider.make(protocol)`) over an in-memory `HttpClient` whose response body is
 *   the chunked bytes: the full pipeline (each read decoded → `eventsource-parser` → `JSON.parse` +
 *   the event's guard or `Schema.decodeUnknownEither(Event)` → the protocol's state machine with terminal enforcement) down to typed
 *   `GenerationEvent`s.
 * - `baseline`: `eventsource-parser` + `JSON.parse` + the protocol's terminal check, in a plain loop.
 * - `official`: the official SDK's stream decoder (`openai` `Stream.fromSSEResponse`, `@anthropic-ai/sdk`
 *   `Stream.fromSSEResponse`) over a `Response` built from the same chunks.
 * - `floor`: the baseline loop with the SSE parser DESIGN §3 mandates (`@effect/experimental/Sse`, fed line by line
 *   as reprise fed it before it moved to `eventsource-parser`) in place of `eventsource-parser`, and nothing else of reprise: no Schema, no state machine,
 *   no Effect. No decoder built on that parser can be faster, so `baseline / floor` is the best ratio reprise can reach
 *   against the baseline.
 * - `floorSchema`: `floor` plus the per-event validation STYLE.md prescribes (`Schema.decodeUnknownEither` of the
 *   protocol's event schema, the one reprise's decoder uses), still without a state machine or Effect.
 */
import { Stream as AnthropicStream } from "@anthropic-ai/sdk/streaming"
import * as Sse from "@effect/experimental/Sse"
import * as HttpClient from "@effect/platform/HttpClient"
import * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Budget from "@reprise/core/Budget"
import type * as Generation from "@reprise/core/Generation"
import * as Message from "@reprise/core/Message"
import * as AnthropicMessages from "@reprise/providers/AnthropicMessages"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import * as OpenAiResponses from "@reprise/providers/OpenAiResponses"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { createParser } from "eventsource-parser"
import { Stream as OpenAiStream } from "openai/streaming"
import { type Corpus, type Protocol, response } from "./corpus.js"
import { feedLines } from "./lineFeed.js"

export interface Decoded {
  readonly textLength: number
  readonly finished: boolean
}

export type Decoder = (corpus: Corpus) => Promise<Decoded>

const request = { model: "bench", messages: [Message.user("hi")] }
const apiKey = Redacted.make("sk-bench-not-a-key")

/** An `HttpClient` that answers every request with the chunks as a `text/event-stream` body. */
export const memoryClient = (corpus: Corpus): HttpClient.HttpClient =>
  HttpClient.make((req) => Effect.sync(() => HttpClientResponse.fromWeb(req, response(corpus))))

const bench = (corpus: Corpus) =>
  HttpProvider.make(corpus.protocol, {
    apiKey,
    baseUrl: "http://bench.invalid/v1",
    // figure 5 decodes up to 100 MB: past the default bound of a reply (64 MiB)
    maxReplyBytes: 1024 * 1024 * 1024
  })

/** Counts the text of a chunk of events and notes the finish. */
const counter = () => {
  const state = { textLength: 0, finished: false }
  const count = (events: Iterable<Generation.GenerationEvent>) => {
    for (const event of events) {
      if (event._tag === "TextDelta") state.textLength += event.text.length
      else if (event._tag === "Finish") state.finished = true
    }
  }
  return { state, count }
}

/**
 * reprise's provider over the in-memory client, read as `Recovery` reads a provider: its `open`'s pull, a chunk at a
 * time, in a scope. Every `Recovery.generate` reads its provider this way.
 */
export const reprise: Decoder = (corpus) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const provider = yield* bench(corpus)
      const open = provider.open(request)
      const { count, state } = counter()
      yield* Effect.scoped(Effect.gen(function*() {
        const pull = yield* open
        while (true) {
          const read = yield* Effect.either(pull)
          if (read._tag === "Right") count(read.right)
          else if (Option.isSome(read.left)) return yield* Effect.fail(read.left.value)
          else return
        }
      })).pipe(Budget.scoped)
      return state
    }).pipe(Effect.provideService(HttpClient.HttpClient, memoryClient(corpus)))
  )

/**
 * The same provider read as a user reading its stream directly would: `Stream.runForEachChunk`, a chunk at a time.
 * It measures Effect's stream consumer as well as the decoder.
 */
export const repriseStream: Decoder = (corpus) =>
  Effect.runPromise(
    Effect.gen(function*() {
      const provider = yield* bench(corpus)
      const { count, state } = counter()
      yield* provider.stream(request).pipe(
        Stream.runForEachChunk((events) => Effect.sync(() => count(events))),
        Budget.scoped
      )
      return state
    }).pipe(Effect.provideService(HttpClient.HttpClient, memoryClient(corpus)))
  )

type Json = Record<string, any>

/** The protocol's terminal check and text extraction, as a hand-written client would do it. */
const protocolOf = (protocol: Protocol) => {
  switch (protocol) {
    case "openai-chat":
      return {
        text: (p: Json): string | undefined => p.choices?.[0]?.delta?.content ?? undefined,
        terminal: (p: Json): boolean => p.choices?.[0]?.finish_reason != null
      }
    case "anthropic":
      return {
        text: (p: Json): string | undefined =>
          p.type === "content_block_delta" && p.delta?.type === "text_delta" ? p.delta.text : undefined,
        terminal: (p: Json): boolean => p.type === "message_stop"
      }
    case "openai-responses":
    case "subscription":
      return {
        text: (p: Json): string | undefined => p.type === "response.output_text.delta" ? p.delta : undefined,
        terminal: (p: Json): boolean =>
          p.type === "response.completed" || p.type === "response.done" || p.type === "response.incomplete"
      }
  }
}

export const baseline: Decoder = async (corpus) => {
  const protocol = corpus.protocol
  const { terminal, text } = protocolOf(protocol)
  let textLength = 0
  let finished = false
  const parser = createParser({
    onEvent(event) {
      if (finished || event.event === "ping") return
      if (event.data === "[DONE]") {
        if (protocol === "subscription") finished = true
        return
      }
      const payload = JSON.parse(event.data) as Json
      if (payload.error != null && typeof payload.error === "object") throw new Error("in-band error")
      const t = text(payload)
      if (typeof t === "string") textLength += t.length
      if (terminal(payload)) finished = true
    }
  })
  const reader = response(corpus).body!.getReader()
  const decoder = new TextDecoder()
  while (true) {
    const { done, value } = await reader.read()
    if (done) break
    parser.feed(decoder.decode(value, { stream: true }))
    if (finished && protocol !== "openai-chat") {
      await reader.cancel()
      break
    }
  }
  if (!finished) throw new Error("premature EOF")
  return { textLength, finished }
}

export const official: Decoder = async (corpus) => {
  const protocol = corpus.protocol
  const { terminal, text } = protocolOf(protocol)
  let textLength = 0
  let finished = false
  const controller = new AbortController()
  const stream = protocol === "anthropic"
    ? AnthropicStream.fromSSEResponse<Json>(response(corpus), controller)
    : OpenAiStream.fromSSEResponse<Json>(response(corpus), controller)
  for await (const payload of stream) {
    const t = text(payload)
    if (typeof t === "string") textLength += t.length
    if (terminal(payload)) {
      finished = true
      if (protocol !== "openai-chat") break
    }
  }
  if (!finished) throw new Error("premature EOF")
  return { textLength, finished }
}

/** The event schema reprise's decoder validates each event of `protocol` with. */
export const eventSchema = (protocol: Protocol): Schema.Schema<any, any> => {
  switch (protocol) {
    case "openai-chat":
      return OpenAiChat.ChatChunk
    case "anthropic":
      return AnthropicMessages.MessagesEvent
    case "openai-responses":
    case "subscription":
      return OpenAiResponses.ResponsesEvent
  }
}

/** `validate` on: each payload is also checked with the protocol's event schema (`Schema.decodeUnknownEither`). */
const floorDecoder = (validate: boolean): Decoder => async (corpus) => {
  const protocol = corpus.protocol
  const { terminal, text } = protocolOf(protocol)
  const check = validate ? Schema.decodeUnknownEither(eventSchema(protocol)) : undefined
  let textLength = 0
  let finished = false
  const parser = Sse.makeParser((event) => {
    if (event._tag !== "Event" || finished || event.event === "ping") return
    if (event.data === "[DONE]") {
      if (protocol === "subscription") finished = true
      return
    }
    const payload = JSON.parse(event.data) as Json
    if (check !== undefined && check(payload)._tag === "Left") throw new Error(`undecodable ${event.event} event`)
    if (payload.error != null && typeof payload.error === "object") throw new Error("in-band error")
    const t = text(payload)
    if (typeof t === "string") textLength += t.length
    if (terminal(payload)) finished = true
  }, { maxEventSize: 1024 * 1024 })
  const reader = response(corpus).body!.getReader()
  const decoder = new TextDecoder()
  while (true) {
    const { done, value } = await reader.read()
    if (done) break
    feedLines(parser, decoder, [value])
    if (finished && protocol !== "openai-chat") {
      await reader.cancel()
      break
    }
  }
  if (!finished) throw new Error("premature EOF")
  return { textLength, finished }
}

export const floor: Decoder = floorDecoder(false)
export const floorSchema: Decoder = floorDecoder(true)
