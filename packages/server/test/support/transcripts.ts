/**
 * Relay responses in the `reset` mode over Chat Completions, written by hand after RelayProtocol and the Chat
 * Completions codec: each a list of SSE frames as the relay writes them (one event each, with its blank line).
 */

const id = "chatcmpl-rp7Yq2KzT0"
const created = 1796544000

const chunk = (model: string, delta: object, finish: string | null = null): string =>
  `data: {"id":"${id}","object":"chat.completion.chunk","created":${created},"model":"${model}","choices":[{"index":0,"delta":${
    JSON.stringify(delta)
  },"logprobs":null,"finish_reason":${JSON.stringify(finish)}}]}\n\n`

const primary = `{"index":0,"name":"primary","model":"gpt-4o-mini"}`
const fallback = `{"index":1,"name":"fallback","model":"gpt-4.1-mini"}`

/**
 * Three attempts: the first refused with a 503 before any text, the second cut mid-sentence on the primary, the third
 * on the fallback route streams the whole answer and commits.
 */
export const cutThenReplay = {
  frames: [
    ": reprise reset\n\n",
    `event: reprise.attempt\ndata: {"attempt":1,"maxAttempts":4,"route":${primary},"choices":[]}\n\n`,
    `event: reprise.rollback\ndata: {"attempt":1,"discardedChars":0,"discardedToolCalls":0,"reason":"HTTP 503","nextAttempt":2,"delayMs":1000,"choices":[]}\n\n`,
    `event: reprise.attempt\ndata: {"attempt":2,"maxAttempts":4,"route":${primary},"choices":[]}\n\n`,
    chunk("gpt-4o-mini", { role: "assistant", content: "" }),
    chunk("gpt-4o-mini", { content: "The capital" }),
    chunk("gpt-4o-mini", { content: " of Fr" }),
    // the cut: what attempt 2 showed is void
    `event: reprise.rollback\ndata: {"attempt":2,"discardedChars":17,"discardedToolCalls":0,"reason":"connection reset","nextAttempt":3,"delayMs":250,"route":${fallback},"choices":[]}\n\n`,
    `event: reprise.attempt\ndata: {"attempt":3,"maxAttempts":4,"route":${fallback},"choices":[]}\n\n`,
    ": reprise\n\n",
    chunk("gpt-4o-mini", { content: "The capital" }),
    chunk("gpt-4o-mini", { content: " of France is Paris" }),
    chunk("gpt-4o-mini", { content: " — la Ville Lumière." }),
    `event: reprise.commit\ndata: {"attempt":3,"attempts":3,"route":${fallback},"model":"gpt-4.1-mini-2025-04-14","usage":{"input_tokens":14,"output_tokens":12},"choices":[]}\n\n`,
    chunk("gpt-4o-mini", {}, "stop"),
    "data: [DONE]\n\n"
  ],
  /** The frame index after which attempt 2's text is on screen, before its rollback. */
  cutAt: 7,
  discarded: "The capital of Fr",
  answer: "The capital of France is Paris — la Ville Lumière.",
  notices: [
    "attempt 1 discarded: HTTP 503; retrying in 1.0 s",
    "attempt 2 discarded: connection reset; retrying in 0.3 s on fallback (gpt-4.1-mini)"
  ],
  meta: "served by fallback (gpt-4.1-mini) · model gpt-4.1-mini-2025-04-14 · 3 attempts"
} as const

/** One attempt that streams, then the relay's in-band error (the reply failed after its budget). */
export const failed = {
  frames: [
    `event: reprise.attempt\ndata: {"attempt":1,"maxAttempts":1,"route":${primary},"choices":[]}\n\n`,
    chunk("gpt-4o-mini", { role: "assistant", content: "" }),
    chunk("gpt-4o-mini", { content: "Partial" }),
    `event: reprise.rollback\ndata: {"attempt":1,"discardedChars":7,"discardedToolCalls":0,"reason":"HTTP 500","choices":[]}\n\n`,
    `data: {"error":{"message":"upstream: HTTP 500 internal error","type":"api_error","param":null,"code":"upstream_error"}}\n\n`
  ]
} as const

/** A stream that keeps going until the client leaves: the Stop scenario's. */
export const endless = {
  frames: [
    `event: reprise.attempt\ndata: {"attempt":1,"maxAttempts":3,"route":${primary},"choices":[]}\n\n`,
    chunk("gpt-4o-mini", { role: "assistant", content: "" }),
    chunk("gpt-4o-mini", { content: "Counting:" })
  ],
  shown: "Counting:"
} as const
