import type * as Response from "@effect/ai/Response"
import type * as Generation from "@reprise/core/Generation"
import * as ResponseMapping from "../ResponseMapping.js"

/**
 * The stream parts of one attempt, and which of them may be shown yet.
 *
 * Parts are held until the attempt has produced more than `hold` characters of text and reasoning; from then on
 * every part is released as it comes (the held ones first). Some parts are never released before the commit,
 * whatever `hold` is:
 * - `tool-call`: `@effect/ai`'s `streamText` runs a tool's handler as soon as it sees the part, and a tool runs only
 *   from a committed reply;
 * - `text-end`, `reasoning-end`, `tool-params-end`: `Chat` keeps a streamed text or reasoning part in its history
 *   only once its end arrives, so a discarded attempt's output never enters the history;
 * - `finish`: it carries the committed reply's reason, usage and attempts.
 *
 * Ids are attempt-local (`text-2` is attempt 2's text), so a consumer can tell attempts apart.
 *
 * @internal
 */
export class AttemptParts {
  /** Characters of text and reasoning seen so far. */
  chars = 0
  /** Whether any part was released (shown) before the commit. */
  shown = false
  private released = false
  private held: Array<Response.StreamPartEncoded> = []
  private readonly ends: Array<Response.StreamPartEncoded> = []
  private textId: string | undefined = undefined
  private reasoningId: string | undefined = undefined
  private readonly toolIds = new Map<number, string>()

  constructor(readonly attempt: number, readonly hold: number) {}

  /** Records one preview event and returns the parts to show now. */
  add(event: Generation.GenerationEvent): ReadonlyArray<Response.StreamPartEncoded> {
    const parts: Array<Response.StreamPartEncoded> = []
    switch (event._tag) {
      case "TextDelta": {
        if (event.text.length === 0) break
        if (this.textId === undefined) {
          this.textId = `text-${this.attempt}`
          parts.push({ type: "text-start", id: this.textId })
          this.ends.push({ type: "text-end", id: this.textId })
        }
        parts.push({ type: "text-delta", id: this.textId, delta: event.text })
        this.chars += event.text.length
        break
      }
      case "ReasoningDelta": {
        if (event.text.length === 0) break
        if (this.reasoningId === undefined) {
          this.reasoningId = `reasoning-${this.attempt}`
          parts.push({ type: "reasoning-start", id: this.reasoningId })
          this.ends.push({ type: "reasoning-end", id: this.reasoningId })
        }
        parts.push({ type: "reasoning-delta", id: this.reasoningId, delta: event.text })
        this.chars += event.text.length
        break
      }
      case "ToolCallDelta": {
        let id = this.toolIds.get(event.index)
        if (id === undefined) {
          id = event.id ?? `tool-${this.attempt}-${event.index}`
          this.toolIds.set(event.index, id)
          parts.push({ type: "tool-params-start", id, name: event.name ?? "", providerExecuted: false })
          this.ends.push({ type: "tool-params-end", id })
        }
        if (event.argumentsDelta.length > 0) parts.push({ type: "tool-params-delta", id, delta: event.argumentsDelta })
        break
      }
      // complete tool calls, usage and the finish are taken from the committed reply
      case "ToolCallComplete":
      case "Usage":
      case "Finish":
        break
    }
    if (parts.length === 0) return parts
    if (!this.released && this.chars > this.hold) {
      this.released = true
      parts.unshift(...this.held)
      this.held = []
    }
    if (!this.released) {
      this.held.push(...parts)
      return []
    }
    this.shown = true
    return parts
  }

  /** The parts still to show once `reply` (this attempt's) is committed: its response metadata, then the finish. */
  commit(reply: Generation.Reply, protocol: string): ReadonlyArray<Response.StreamPartEncoded> {
    const parts = [
      ...this.held,
      ...this.ends,
      ...ResponseMapping.toolCallParts(reply),
      ...ResponseMapping.metadataParts(reply)
    ]
    parts.push(ResponseMapping.finishPart(reply, protocol))
    this.held = []
    return parts
  }
}
