/**
 * Test support for the codecs: a reply built from its parts, the frames of a whole stream, a `fetch` that answers
 * every request with fixed bytes (what the official SDKs are given), and reprise's own upstream decoders reading
 * frames back into events.
 */
import { HttpClient, HttpClientResponse } from "@effect/platform"
import * as Budget from "@reprise/core/Budget"
import * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import type * as Provider from "@reprise/core/Provider"
import { Effect, Either, Option, Stream } from "effect"
import type * as Downstream from "../../src/internal/downstream.js"

export const reply = (parts: {
  readonly text?: string
  readonly reasoning?: string
  readonly reasoningParts?: ReadonlyArray<Message.ReasoningPart>
  readonly toolCalls?: ReadonlyArray<Message.ToolCall>
  readonly finishReason?: Generation.FinishReason
  readonly providerFinishReason?: string
  readonly usage?: Generation.Usage
  readonly model?: string
}): Generation.Reply =>
  new Generation.Reply({
    text: parts.text ?? "",
    reasoning: parts.reasoning ?? "",
    ...(parts.reasoningParts !== undefined ? { reasoningParts: parts.reasoningParts } : {}),
    toolCalls: parts.toolCalls ?? [],
    finishReason: parts.finishReason ?? ((parts.toolCalls ?? []).length > 0 ? "tool_calls" : "stop"),
    providerFinishReason: parts.providerFinishReason ?? "stop",
    usage: parts.usage === undefined ? Option.none() : Option.some(parts.usage),
    attempts: 1,
    ...(parts.model !== undefined ? { model: parts.model } : {})
  })

/** A whole stream as the relay writes it with the codec's encoder: open, every event, then the terminal. */
export const streamed = (
  codec: Downstream.Codec,
  context: Downstream.Context,
  events: ReadonlyArray<Generation.GenerationEvent>,
  end: Generation.Reply | Downstream.Failure
): string => {
  const encoder = codec.encoder!()
  let out = encoder.open(context)
  for (const event of events) out += encoder.delta(context, event)
  return out + (end instanceof Generation.Reply ? encoder.terminal(context, end) : encoder.failure(context, end))
}

/** A `fetch` answering every request with `body` (an SSE stream, or JSON), and the requests it was given. */
export const fetchOf = (body: string, init: { readonly status?: number; readonly json?: boolean } = {}) => {
  const requests: Array<unknown> = []
  const fetch = async (_url: unknown, request?: { body?: unknown }) => {
    requests.push(typeof request?.body === "string" ? JSON.parse(request.body) : undefined)
    return new Response(body, {
      status: init.status ?? 200,
      headers: { "content-type": init.json === true ? "application/json" : "text/event-stream" }
    })
  }
  return { fetch, requests }
}

/** An HttpClient answering every request with `body`, for reprise's upstream providers. */
export const clientOf = (body: string): HttpClient.HttpClient =>
  HttpClient.make((request) =>
    Effect.sync(() =>
      HttpClientResponse.fromWeb(request, new Response(body, { headers: { "content-type": "text/event-stream" } }))
    )
  )

/** The events a provider decodes from one reply, or its failure. */
export const decodeWith = (
  provider: Provider.Service,
  request: Generation.GenerationRequest
): Effect.Effect<{ events: Array<Generation.GenerationEvent>; result: Either.Either<void, unknown> }> =>
  Effect.gen(function*() {
    const events: Array<Generation.GenerationEvent> = []
    const result = yield* provider.stream(request).pipe(
      Stream.runForEach((event) => Effect.sync(() => events.push(event))),
      Budget.scoped,
      Effect.either
    )
    return { events, result }
  })

/** The reply a list of events commits, as the recovery scope builds it. */
export const replyOf = (events: ReadonlyArray<Generation.GenerationEvent>): Generation.Reply => {
  let text = ""
  let reasoning = ""
  const reasoningParts: Array<Message.ReasoningPart> = []
  const toolCalls: Array<Message.ToolCall> = []
  let finish: Extract<Generation.GenerationEvent, { _tag: "Finish" }> | undefined
  let usage: Generation.Usage | undefined
  for (const e of events) {
    if (e._tag === "TextDelta") text += e.text
    else if (e._tag === "ReasoningDelta") reasoning += e.text
    else if (e._tag === "ReasoningComplete") reasoningParts.push(e.part)
    else if (e._tag === "ToolCallComplete") toolCalls.push(e.call)
    else if (e._tag === "Usage") usage = e.usage
    else if (e._tag === "Finish") finish = e
  }
  return reply({
    text,
    reasoning,
    reasoningParts,
    toolCalls,
    ...(finish !== undefined ? { finishReason: finish.reason, providerFinishReason: finish.providerReason } : {}),
    ...(finish?.model !== undefined ? { model: finish.model } : {}),
    ...(usage !== undefined ? { usage } : {})
  })
}
