import type * as Generation from "../Generation.js"
import type * as Message from "../Message.js"

/**
 * What one attempt has produced so far. Attempt-local and mutable: it lives only while its attempt runs and is
 * either committed whole or discarded whole.
 *
 * @internal
 */
export class Accumulator {
  text = ""
  reasoning = ""
  readonly reasoningParts: Array<Message.ReasoningPart> = []
  readonly toolCalls: Array<Message.ToolCall> = []
  /** The attempt's usage: the last report without `partial`. */
  usage: Generation.Usage | undefined = undefined
  /** A usage reported before the terminal (`partial`): its input counts are the provider's. */
  startUsage: Generation.Usage | undefined = undefined
  finish:
    | { readonly reason: Generation.FinishReason; readonly providerReason: string; readonly model?: string | undefined }
    | undefined = undefined
  /** Characters of text, reasoning and tool arguments received, surfaced or not (the ledger's output estimate). */
  outputChars = 0
  /** Whether any content (text, reasoning, a tool call) arrived. */
  content = false
  /** Whether a tool call's arguments arrived in fragments (then a complete call adds no characters of its own). */
  toolDeltas = false
  /** The tool calls (by index) whose name was counted: every fragment repeats it, the model wrote it once. */
  named: Set<number> | undefined = undefined
  /** Set the moment a chunk hook first runs: from then on the attempt cannot be replayed. */
  effectful = false
  /** False after the early break: output is no longer surfaced, only drained. */
  surfacing = true

  constructor(readonly earlyBreakOnToolCall: boolean) {}

  /**
   * Records one event and says whether it is surfaced as a preview.
   */
  add(event: Generation.GenerationEvent): boolean {
    switch (event._tag) {
      case "Usage":
        if (event.partial === true) this.startUsage = event.usage
        else this.usage = event.usage
        return true
      case "Finish":
        if (this.finish === undefined) this.finish = event
        return true
      case "TextDelta":
        this.produced(event.text.length)
        if (!this.surfacing) return false
        this.text += event.text
        return true
      case "ReasoningDelta":
        this.produced(event.text.length)
        if (!this.surfacing) return false
        this.reasoning += event.text
        return true
      case "ReasoningComplete":
        this.content = true
        if (!this.surfacing) return false
        this.reasoningParts.push(event.part)
        return true
      case "ToolCallDelta":
        this.toolDeltas = true
        this.produced(this.nameChars(event) + event.argumentsDelta.length)
        return this.surfacing
      case "ToolCallComplete":
        if (!this.toolDeltas) this.produced(event.call.name.length + argumentsLength(event.call.arguments))
        this.content = true
        if (!this.surfacing) return false
        this.toolCalls.push(event.call)
        if (this.earlyBreakOnToolCall) this.surfacing = false
        return true
    }
  }

  /** The characters of a fragment's name, the first time its call names itself. */
  nameChars(event: { readonly index: number; readonly name: string | undefined }): number {
    if (event.name === undefined || event.name.length === 0) return 0
    const named = this.named ??= new Set()
    if (named.has(event.index)) return 0
    named.add(event.index)
    return event.name.length
  }

  produced(chars: number): void {
    if (chars === 0) return
    this.outputChars += chars
    this.content = true
  }
}

const argumentsLength = (value: unknown): number => {
  try {
    return JSON.stringify(value)?.length ?? 0
  } catch {
    return 0
  }
}
