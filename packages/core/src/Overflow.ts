/**
 * `Overflow` is the context-overflow policy. A provider's context-length error (OpenAI
 * `context_length_exceeded`, Anthropic "prompt is too long", HTTP 413) is not transient and is never replayed as
 * is; instead the generation is retried with successively smaller views of the conversation, chosen by an
 * {@link OverflowStrategy}, for as long as
 *
 * - the provider-bound input really shrinks (each view is strictly smaller than the last), and
 * - the failed attempt emitted no visible output.
 *
 * Every retry runs inside the same {@link Budget.Budget} scope as the first try: overflow retries spend the same
 * attempts and the same deadline. Inside `Recovery.disabled` there are none: the overflow surfaces unchanged.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Budget from "./Budget.js"
import type * as Generation from "./Generation.js"
import * as Message from "./Message.js"
import type * as Provider from "./Provider.js"
import * as ProviderRejection from "./ProviderRejection.js"
import * as Recovery from "./Recovery.js"

/**
 * A way to make a smaller view of a conversation. `None` means nothing more can be removed.
 *
 * @since 0.1.0
 * @category models
 */
export interface Strategy {
  readonly shrink: (messages: ReadonlyArray<Message.Message>) => Option.Option<ReadonlyArray<Message.Message>>
}

/**
 * The provider-bound size of a view, in characters.
 *
 * @since 0.1.0
 * @category utils
 */
export const size = (messages: ReadonlyArray<Message.Message>): number =>
  messages.reduce((n, message) => n + Message.size(message), 0)

/**
 * Shortens every tool result longer than `maxChars` to at most `maxChars` characters: its beginning followed by a
 * marker saying how much was omitted.
 *
 * @since 0.1.0
 * @category strategies
 */
export const shortenToolResults = (maxChars: number): Strategy => ({
  shrink: (messages) => {
    let changed = false
    const next = messages.map((message) => {
      if (message.role !== "tool" || message.content.length <= maxChars) return message
      changed = true
      const marker = (omitted: number) => `\n[${omitted} characters omitted]`
      const keep = Math.max(0, maxChars - marker(message.content.length).length)
      return { ...message, content: message.content.slice(0, keep) + marker(message.content.length - keep) }
    })
    return changed ? Option.some(next) : Option.none()
  }
})

/**
 * Drops the oldest turn (a user message and the assistant and tool messages that follow it). System messages and
 * the last turn are always kept.
 *
 * @since 0.1.0
 * @category strategies
 */
export const dropOldestTurn: Strategy = {
  shrink: (messages) => {
    const start = messages.findIndex((m) => m.role !== "system")
    if (start < 0) return Option.none()
    const nextUser = messages.findIndex((m, i) => i > start && m.role === "user")
    if (nextUser < 0) return Option.none()
    return Option.some([...messages.slice(0, start), ...messages.slice(nextUser)])
  }
}

/**
 * Tries each strategy in order and uses the first that can shrink the view.
 *
 * @since 0.1.0
 * @category strategies
 */
export const firstOf = (...strategies: ReadonlyArray<Strategy>): Strategy => ({
  shrink: (messages) => {
    for (const strategy of strategies) {
      const next = strategy.shrink(messages)
      if (Option.isSome(next)) return next
    }
    return Option.none()
  }
})

/**
 * Shorten tool results over 2,000 characters first, then drop the oldest turns.
 *
 * @since 0.1.0
 * @category strategies
 */
export const defaultStrategy: Strategy = firstOf(shortenToolResults(2_000), dropOldestTurn)

/**
 * The strategy overflow recovery uses. Defaults to {@link defaultStrategy}.
 *
 * @since 0.1.0
 * @category tags
 */
export class OverflowStrategy extends Context.Reference<OverflowStrategy>()("@reprise/core/OverflowStrategy", {
  defaultValue: (): Strategy => defaultStrategy
}) {}

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (strategy: Strategy): Layer.Layer<never> => Layer.succeed(OverflowStrategy, strategy)

const isRecoverableOverflow = (error: unknown): error is ProviderRejection.ProviderRejection =>
  ProviderRejection.isProviderRejection(error) && error.reason === "ContextOverflow" &&
  (error.partialOutputChars ?? 0) === 0

/**
 * Runs `f` on the full conversation and, while it fails with a context overflow that emitted no output, again on
 * smaller views. All runs share one budget scope. When no smaller view exists, the last overflow error surfaces.
 *
 * @since 0.1.0
 * @category overflow
 */
export const run = <A, E, R>(
  messages: ReadonlyArray<Message.Message>,
  f: (view: ReadonlyArray<Message.Message>) => Effect.Effect<A, E, R>
): Effect.Effect<A, E, Exclude<R, Budget.Budget>> =>
  Budget.scoped(
    Effect.flatMap(Effect.zip(OverflowStrategy, FiberRef.get(Recovery.currentReplay)), ([strategy, replay]) => {
      const loop = (view: ReadonlyArray<Message.Message>): Effect.Effect<A, E, R> =>
        Effect.catchIf(f(view), (error: E) => replay && isRecoverableOverflow(error), (error) => {
          const next = strategy.shrink(view)
          if (Option.isNone(next) || size(next.value) >= size(view)) return Effect.fail(error)
          return loop(next.value)
        })
      return loop(messages)
    })
  )

/**
 * {@link Recovery.generate} with overflow recovery over the request's messages.
 *
 * @since 0.1.0
 * @category overflow
 */
export const generate = <RH = never>(
  request: Generation.GenerationRequest,
  options: Recovery.Options<RH> = {}
): Effect.Effect<Generation.Reply, Recovery.RecoveryError, Provider.Provider | RH> =>
  run(request.messages, (messages) => Recovery.generate({ ...request, messages }, options))
