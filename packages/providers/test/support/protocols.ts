/**
 * The four protocols as test subjects: how to build each provider, where it sends, how its server formats a success,
 * an error body and in-band errors.
 */
import type { HttpClient } from "@effect/platform"
import type * as Provider from "@reprise/core/Provider"
import * as AnthropicMessages from "@reprise/providers/AnthropicMessages"
import * as OpenAiChat from "@reprise/providers/OpenAiChat"
import * as OpenAiResponses from "@reprise/providers/OpenAiResponses"
import type * as ProviderOptions from "@reprise/providers/ProviderOptions"
import * as Subscription from "@reprise/providers/Subscription"
import type { Effect } from "effect"

export interface Subject {
  readonly name: ProviderOptions.Protocol
  readonly make: (options: ProviderOptions.Options) => Effect.Effect<Provider.Service, never, HttpClient.HttpClient>
  /** The base URL for a server at `url`. */
  readonly base: (url: string) => string
  readonly path: string
  /** What the protocol appends to the base URL's path. */
  readonly endpoint: string
  /** A complete stream whose text is "Hello". */
  readonly success: string
  /** One event of text "Hel", then nothing. */
  readonly partial: string
  /** An SSE keepalive that is not progress. */
  readonly keepalive: string
  readonly errorBody: (type: string, message: string, code?: string) => string
  readonly inBandTransient: string
  readonly inBandPermanent: string
  /** One more text delta, to follow `partial`. */
  readonly delta: (text: string) => string
  /** A complete stream whose only output is one tool call with these raw (JSON text) arguments. */
  readonly toolCall: (name: string, rawArguments: string) => string
}

const data = (o: unknown) => `data: ${JSON.stringify(o)}\n\n`
const event = (name: string, o: unknown) => `event: ${name}\ndata: ${JSON.stringify(o)}\n\n`

const openAiError = (type: string, message: string, code?: string) =>
  JSON.stringify({ error: { message, type, param: null, code: code ?? null } })

const responsesText = (text: string) => ({
  type: "response.output_text.delta",
  item_id: "msg_1",
  output_index: 0,
  delta: text
})

export const chat: Subject = {
  name: "openai-chat",
  make: OpenAiChat.make,
  base: (url) => `${url}/v1`,
  path: "/v1/chat/completions",
  endpoint: "/chat/completions",
  success: data({ choices: [{ index: 0, delta: { content: "Hel" }, finish_reason: null }] }) +
    data({ choices: [{ index: 0, delta: { content: "lo" }, finish_reason: "stop" }] }) +
    data({ choices: [], usage: { prompt_tokens: 3, completion_tokens: 2 } }) + "data: [DONE]\n\n",
  partial: data({ choices: [{ index: 0, delta: { content: "Hel" }, finish_reason: null }] }),
  keepalive: ": OPENROUTER PROCESSING\n\n",
  errorBody: openAiError,
  inBandTransient: data({ error: { message: "The server had an error", type: "server_error", code: null } }),
  inBandPermanent: data({
    error: { message: "Invalid prompt", type: "invalid_request_error", code: "invalid_prompt" }
  }),
  delta: (text) => data({ choices: [{ index: 0, delta: { content: text }, finish_reason: null }] }),
  toolCall: (name, rawArguments) =>
    data({
      choices: [{
        index: 0,
        delta: { tool_calls: [{ index: 0, id: "call_1", function: { name, arguments: rawArguments } }] },
        finish_reason: null
      }]
    }) + data({ choices: [{ index: 0, delta: {}, finish_reason: "tool_calls" }] }) + "data: [DONE]\n\n"
}

export const responses: Subject = {
  name: "openai-responses",
  make: OpenAiResponses.make,
  base: (url) => `${url}/v1`,
  path: "/v1/responses",
  endpoint: "/responses",
  success: data(responsesText("Hel")) + data(responsesText("lo")) +
    data({
      type: "response.completed",
      response: { status: "completed", output: [], usage: { input_tokens: 3, output_tokens: 2 } }
    }),
  partial: data(responsesText("Hel")),
  // OpenAI's keepalive event during long server-side work, and an SSE comment: neither is progress.
  keepalive: data({ type: "keepalive", sequence_number: 7 }) + ": keepalive\n\n",
  errorBody: openAiError,
  inBandTransient: data({
    type: "response.failed",
    response: { status: "failed", error: { code: "server_error", message: "The server had an error" } }
  }),
  inBandPermanent: data({ type: "error", code: "invalid_prompt", message: "Invalid prompt", param: null }),
  delta: (text) => data(responsesText(text)),
  toolCall: (name, rawArguments) =>
    data({
      type: "response.output_item.added",
      output_index: 0,
      item: { type: "function_call", id: "fc_1", call_id: "call_1", name, arguments: "" }
    }) +
    data({ type: "response.function_call_arguments.delta", item_id: "fc_1", output_index: 0, delta: rawArguments }) +
    data({ type: "response.completed", response: { status: "completed", output: [] } })
}

export const subscription: Subject = {
  ...responses,
  name: "subscription",
  make: Subscription.make,
  success: data(responsesText("Hel")) + data(responsesText("lo")) + "data: [DONE]\n\n",
  inBandTransient: data({ type: "error", code: "rate_limit_exceeded", message: "Slow down" })
}

export const anthropic: Subject = {
  name: "anthropic",
  make: AnthropicMessages.make,
  base: (url) => url,
  path: "/v1/messages",
  endpoint: "/v1/messages",
  success: event("message_start", {
    type: "message_start",
    message: { content: [], stop_reason: null, usage: { input_tokens: 3, output_tokens: 1 } }
  }) +
    event("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }) +
    event("ping", { type: "ping" }) +
    event("content_block_delta", {
      type: "content_block_delta",
      index: 0,
      delta: { type: "text_delta", text: "Hel" }
    }) +
    event("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "lo" } }) +
    event("content_block_stop", { type: "content_block_stop", index: 0 }) +
    event("message_delta", { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 2 } }) +
    event("message_stop", { type: "message_stop" }),
  partial: event("message_start", { type: "message_start", message: { content: [], stop_reason: null } }) +
    event("content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }) +
    event("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "Hel" } }),
  keepalive: event("ping", { type: "ping" }) + ": keepalive\n\n",
  errorBody: (type, message) => JSON.stringify({ type: "error", error: { type, message } }),
  inBandTransient: event("error", { type: "error", error: { type: "overloaded_error", message: "Overloaded" } }),
  inBandPermanent: event("error", { type: "error", error: { type: "invalid_request_error", message: "Bad input" } }),
  delta: (text) =>
    event("content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text } }),
  toolCall: (name, rawArguments) =>
    event("message_start", { type: "message_start", message: { content: [], stop_reason: null } }) +
    event("content_block_start", {
      type: "content_block_start",
      index: 0,
      content_block: { type: "tool_use", id: "toolu_1", name, input: {} }
    }) +
    event("content_block_delta", {
      type: "content_block_delta",
      index: 0,
      delta: { type: "input_json_delta", partial_json: rawArguments }
    }) +
    event("content_block_stop", { type: "content_block_stop", index: 0 }) +
    event("message_delta", { type: "message_delta", delta: { stop_reason: "tool_use" } }) +
    event("message_stop", { type: "message_stop" })
}

export const subjects: ReadonlyArray<Subject> = [chat, responses, anthropic, subscription]
