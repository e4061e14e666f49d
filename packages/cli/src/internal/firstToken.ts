/**
 * The first-token timeout (`--first-token-timeout`, `REPRISE_FIRST_TOKEN_TIMEOUT`): time allowed from the send to the
 * first event of content (a text, reasoning or tool-call delta, a completed tool call or reasoning block). When it
 * passes, the request is aborted and the attempt fails with a transient `TransportError{reason: "Timeout"}`, which
 * leaves the route when a plan of routes runs. A reply that ends before any content is not timed out.
 *
 * This is the CLI's stand-in for `ProviderOptions.firstTokenTimeout` and `ProviderOptions.firstTokenTimeoutConfig`
 * of `@reprise/providers`, with the same variable, range and meaning: a wrapper around a provider's `open`. Once the
 * providers enforce the option themselves, the CLI passes it to them and this module goes.
 *
 * @internal
 */
import type * as Generation from "@reprise/core/Generation"
import * as Provider from "@reprise/core/Provider"
import * as Range from "@reprise/core/Range"
import * as TransportError from "@reprise/core/TransportError"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Config from "effect/Config"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"

/**
 * @internal
 */
export const variable = "REPRISE_FIRST_TOKEN_TIMEOUT"

/**
 * `REPRISE_FIRST_TOKEN_TIMEOUT`: whole milliseconds, more than 0 ("must be > 0 ms"); unset by default (no first-token
 * timeout).
 *
 * @internal
 */
export const config: Config.Config<Option.Option<Duration.Duration>> = Range.integer().pipe(
  Config.map(Duration.millis),
  Config.validate(Range.positiveTimeout),
  Config.nested(variable),
  Config.option
)

const isContent = (event: Generation.GenerationEvent): boolean => {
  switch (event._tag) {
    case "TextDelta":
    case "ReasoningDelta":
      return event.text.length > 0
    case "ToolCallDelta":
    case "ToolCallComplete":
    case "ReasoningComplete":
      return true
    case "Usage":
    case "Finish":
      return false
  }
}

/**
 * `provider`, with each `open` failing once `timeout` has passed since the send without an event of content.
 *
 * @internal
 */
export const withTimeout = (provider: Provider.Service, timeout: Duration.Duration): Provider.Service => {
  const millis = Duration.toMillis(timeout)
  const timedOut = () =>
    new TransportError.TransportError({
      reason: "Timeout",
      detail: `no content within the first-token timeout (${millis} ms)`
    })
  return Provider.make({
    protocol: provider.protocol,
    endpoint: provider.endpoint,
    open: (request) =>
      Effect.gen(function*() {
        const end = (yield* Clock.currentTimeMillis) + millis
        const left = Effect.map(Clock.currentTimeMillis, (now) => Duration.millis(Math.max(0, end - now)))
        // the send and the wait for headers count too: closing the attempt's scope aborts the request
        const pull = yield* Effect.timeoutFail(provider.open(request), {
          duration: yield* left,
          onTimeout: timedOut
        })
        let started = false
        return Effect.suspend(() =>
          started ? pull : Effect.flatMap(left, (duration) =>
            pull.pipe(
              Effect.timeoutFail({ duration, onTimeout: () => Option.some(timedOut()) }),
              Effect.tap((chunk) => {
                if (Chunk.some(chunk, isContent)) started = true
              })
            ))
        )
      })
  })
}
