import { Duration, Effect, Ref, Stream } from "effect"
import * as Budget from "../../src/Budget.js"
import * as Generation from "../../src/Generation.js"
import type * as Message from "../../src/Message.js"
import type * as ProviderFailure from "../../src/ProviderFailure.js"
import * as TransportError from "../../src/TransportError.js"

/**
 * What one physical send of a scripted generation does: emit `text` (one delta per item) and `toolCalls`, then end
 * with the terminal (`"finish"`), end without it (`"eof"`), or fail. `takes` is how long the stream runs before it
 * ends (on the TestClock).
 */
export interface Send {
  readonly text?: ReadonlyArray<string>
  readonly toolCalls?: ReadonlyArray<Message.ToolCall>
  readonly end: "finish" | "eof" | ProviderFailure.ProviderFailure
  readonly finishReason?: Generation.FinishReason
  readonly takes?: Duration.DurationInput
}

/**
 * A generation in the shape of a provider: every run reserves from the Budget (like a real provider, before it
 * sends), counts the send and plays the next scripted send (the last one repeats).
 */
export const scripted = (sends: ReadonlyArray<Send>) =>
  Effect.map(Ref.make(0), (count) => {
    const generation = Stream.unwrap(Effect.gen(function*() {
      yield* Budget.reserve
      const n = yield* Ref.getAndUpdate(count, (k) => k + 1)
      const send = sends[Math.min(n, sends.length - 1)]
      const events: Array<Generation.GenerationEvent> = [
        ...(send.text ?? []).map((text) => Generation.TextDelta({ text })),
        ...(send.toolCalls ?? []).map((call) => Generation.ToolCallComplete({ call }))
      ]
      if (send.end === "finish") {
        const reason = send.finishReason ?? (send.toolCalls?.length ? "tool_calls" : "stop")
        events.push(Generation.Finish({ reason, providerReason: reason }))
      }
      const body = Stream.fromIterable(events)
      const delayed = send.takes === undefined
        ? body
        : Stream.concat(body, Stream.fromEffect(Effect.sleep(send.takes)).pipe(Stream.drain))
      return typeof send.end === "string" ? delayed : Stream.concat(delayed, Stream.fail(send.end))
    }))
    return { generation, sends: Ref.get(count) }
  })

export const reset = new TransportError.TransportError({ reason: "Reset" })

export const status = (status: number, retryAfter?: Duration.DurationInput) =>
  new TransportError.TransportError({
    reason: "HttpStatus",
    status,
    ...(retryAfter === undefined ? {} : { retryAfter: Duration.decode(retryAfter) })
  })
