import { Clock, Effect, Stream } from "effect"
import * as Budget from "../../src/Budget.js"
import * as Generation from "../../src/Generation.js"
import * as Message from "../../src/Message.js"
import * as Provider from "../../src/Provider.js"
import type * as ProviderFailure from "../../src/ProviderFailure.js"
import * as Routes from "../../src/Routes.js"

/**
 * What one send on a scripted route does: emit `text` (one delta per item) and `toolCalls`, then end with the terminal
 * (`"finish"`, naming the served model as `${model}@served`), end without it (`"eof"`), or fail. `takes` is how long
 * it runs before it ends (on the TestClock); `never`, it never ends.
 */
export interface Send {
  readonly text?: ReadonlyArray<string>
  readonly toolCalls?: ReadonlyArray<Message.ToolCall>
  readonly end: "finish" | "eof" | "never" | ProviderFailure.ProviderFailure
  readonly takes?: number
}

/** A route whose provider plays `sends` in turn (the last repeats), recording each send's model and time. */
export const route = (
  endpoint: string,
  model: string,
  sends: ReadonlyArray<Send>,
  options: { readonly attempts?: number; readonly contextWindow?: number } = {}
) => {
  const sent: Array<{ readonly model: string; readonly at: number }> = []
  const provider = Provider.makeFromStream({
    protocol: "test",
    endpoint,
    stream: (request) =>
      Stream.unwrap(Effect.gen(function*() {
        yield* Budget.reserve
        const send = sends[Math.min(sent.length, sends.length - 1)]!
        sent.push({ model: request.model, at: yield* Clock.currentTimeMillis })
        const events: Array<Generation.GenerationEvent> = [
          ...(send.text ?? []).map((text) => Generation.TextDelta({ text })),
          ...(send.toolCalls ?? []).map((call) => Generation.ToolCallComplete({ call }))
        ]
        if (send.end === "finish") {
          const reason = send.toolCalls?.length ? "tool_calls" : "stop"
          events.push(Generation.Finish({ reason, providerReason: reason, model: `${request.model}@served` }))
        }
        const body = Stream.fromIterable(events)
        const delayed = send.end === "never"
          ? Stream.concat(body, Stream.fromEffect(Effect.never))
          : send.takes === undefined
          ? body
          : Stream.concat(body, Stream.fromEffect(Effect.sleep(send.takes)).pipe(Stream.drain))
        return typeof send.end === "string" ? delayed : Stream.concat(delayed, Stream.fail(send.end))
      }))
  })
  const value: Routes.Route = { provider, model, ...options }
  return { route: value, sent, sends: () => sent.length }
}

export const request: Generation.GenerationRequest = {
  model: "ignored",
  messages: [Message.user("hi")]
}
