/**
 * Recorded streams scaled up: the text-delta events of a recorded `chunks` file are repeated until the body reaches
 * the wanted size, between the recording's own opening events and its own terminal, so the scaled stream is still
 * a valid stream of its protocol with exactly one terminal, at the end. Framed as on the wire (`event:` lines for
 * Anthropic and Responses, `data: [DONE]` for Chat Completions and subscription).
 */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

export type Protocol = "openai-chat" | "openai-responses" | "anthropic" | "subscription"

export const protocols: ReadonlyArray<Protocol> = ["openai-chat", "openai-responses", "anthropic", "subscription"]

export const mb = (bytes: number): number => bytes / 1024 / 1024

export const repoRoot = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../..")

const recordedDir = (): string => {
  const candidates = [Path.resolve(repoRoot, "../shared/fixtures/recorded")]
  const found = candidates.find((dir) => Fs.existsSync(dir))
  if (found === undefined) throw new Error(`recorded fixtures not found in ${candidates.join(", ")}`)
  return found
}

/** The recording each protocol is scaled from. */
export const sources: Readonly<Record<Protocol, string>> = {
  "openai-chat": "openai-chat/openai-text.chunks.txt",
  "openai-responses": "openai-responses/openai-compaction.1.chunks.txt",
  anthropic: "anthropic/anthropic-text.chunks.txt",
  subscription: "openai-responses/openai-compaction.1.chunks.txt"
}

type Json = Record<string, any>

const isDelta = (protocol: Protocol, p: Json): boolean => {
  switch (protocol) {
    case "openai-chat": {
      const choice = p.choices?.[0]
      return typeof choice?.delta?.content === "string" && choice.delta.content.length > 0 &&
        choice.finish_reason == null && (choice.delta.tool_calls == null)
    }
    case "anthropic":
      return p.type === "content_block_delta" && p.delta?.type === "text_delta"
    case "openai-responses":
    case "subscription":
      return p.type === "response.output_text.delta"
  }
}

const isTerminal = (protocol: Protocol, p: Json): boolean => {
  switch (protocol) {
    case "openai-chat":
      return p.choices?.[0]?.finish_reason != null
    case "anthropic":
      return p.type === "message_stop"
    case "openai-responses":
    case "subscription":
      return p.type === "response.completed" || p.type === "response.done" || p.type === "response.incomplete"
  }
}

const deltaText = (protocol: Protocol, p: Json): string => {
  switch (protocol) {
    case "openai-chat":
      return p.choices[0].delta.content
    case "anthropic":
      return p.delta.text
    case "openai-responses":
    case "subscription":
      return p.delta
  }
}

const frame = (protocol: Protocol, line: string, p: Json): string =>
  protocol === "openai-chat" ? `data: ${line}\n\n` : `event: ${p.type}\ndata: ${line}\n\n`

/**
 * A scaled stream, held as its parts: the opening events, a block of whole delta rounds (at least 64 KiB, so chunks
 * cut from it look like socket reads), how many times the block repeats, and the closing events. Nothing of the
 * size of the stream is materialised, so a 100 MB stream costs one block of memory.
 */
export interface Corpus {
  readonly protocol: Protocol
  readonly source: string
  readonly head: Uint8Array
  readonly block: Uint8Array
  readonly blocks: number
  readonly tail: Uint8Array
  /** Total body bytes. */
  readonly size: number
  /** SSE events in the body. */
  readonly events: number
  /** Characters of reply text a correct decoder produces. */
  readonly textLength: number
  /** The reply text (built on demand; large for large streams). */
  readonly text: () => string
}

const utf8 = (s: string) => new Uint8Array(Buffer.from(s, "utf8"))

export const build = (protocol: Protocol, targetBytes: number): Corpus => {
  const raw = Fs.readFileSync(Path.join(recordedDir(), sources[protocol]), "utf8")
  const lines = raw.split("\n").filter((l) => l.trim().length > 0)
  const payloads = lines.map((l) => JSON.parse(l) as Json)
  const first = payloads.findIndex((p) => isDelta(protocol, p))
  const terminal = payloads.findIndex((p) => isTerminal(protocol, p))
  if (first < 0 || terminal < 0) throw new Error(`${sources[protocol]}: no text deltas or no terminal`)
  let lastDelta = first
  for (let i = first; i < terminal; i++) if (isDelta(protocol, payloads[i])) lastDelta = i
  // Opening events, then the deltas (only), then everything from the last delta through the terminal (for Chat
  // Completions also the usage chunk after it).
  const head: Array<string> = []
  for (let i = 0; i < first; i++) head.push(frame(protocol, lines[i], payloads[i]))
  const deltas: Array<string> = []
  const deltaTexts: Array<string> = []
  for (let i = first; i <= lastDelta; i++) {
    if (isDelta(protocol, payloads[i])) {
      deltas.push(frame(protocol, lines[i], payloads[i]))
      deltaTexts.push(deltaText(protocol, payloads[i]))
    }
  }
  const tailEnd = protocol === "openai-chat" ? Math.min(terminal + 1, payloads.length - 1) : terminal
  const tail: Array<string> = []
  for (let i = lastDelta + 1; i <= tailEnd; i++) tail.push(frame(protocol, lines[i], payloads[i]))
  if (protocol === "openai-chat" || protocol === "subscription") tail.push("data: [DONE]\n\n")

  const round = deltas.join("")
  const roundBytes = Buffer.byteLength(round)
  const roundsPerBlock = Math.max(1, Math.ceil(64 * 1024 / roundBytes))
  const block = utf8(round.repeat(roundsPerBlock))
  const headBytes = utf8(head.join(""))
  const tailBytes = utf8(tail.join(""))
  const blocks = Math.max(1, Math.round((targetBytes - headBytes.length - tailBytes.length) / block.length))
  const rounds = roundsPerBlock * blocks
  const roundText = deltaTexts.join("")
  return {
    protocol,
    source: sources[protocol],
    head: headBytes,
    block,
    blocks,
    tail: tailBytes,
    size: headBytes.length + block.length * blocks + tailBytes.length,
    events: head.length + deltas.length * rounds + tail.length,
    textLength: roundText.length * rounds,
    text: () => roundText.repeat(rounds)
  }
}

/** The default read size: what a socket read of a fast local stream looks like. */
export const defaultChunkSize = 16 * 1024

/** The body as chunks of at most `size` bytes (views into the parts, no copies), in order. */
export function* chunks(corpus: Corpus, size: number = defaultChunkSize): Generator<Uint8Array> {
  const cut = function*(bytes: Uint8Array) {
    for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, Math.min(bytes.length, i + size))
  }
  yield* cut(corpus.head)
  for (let b = 0; b < corpus.blocks; b++) yield* cut(corpus.block)
  yield* cut(corpus.tail)
}

/** The whole body in one buffer (for serving it from a file). */
export const materialize = (corpus: Corpus): Uint8Array => {
  const out = new Uint8Array(corpus.size)
  let offset = 0
  for (const chunk of chunks(corpus, 1 << 20)) {
    out.set(chunk, offset)
    offset += chunk.length
  }
  return out
}

/** A fresh `Response` whose body yields the corpus's chunks, one per pull (what the official SDKs read). */
export const response = (corpus: Corpus, chunkSize: number = defaultChunkSize): Response => {
  const source = chunks(corpus, chunkSize)
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      const next = source.next()
      if (next.done) controller.close()
      else controller.enqueue(next.value)
    }
  })
  return new Response(body, {
    status: 200,
    headers: { "content-type": "text/event-stream", "x-request-id": "req_bench" }
  })
}
