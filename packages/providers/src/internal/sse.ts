/**
 * The body pipeline every protocol shares: `response.stream → Stream.decodeText → Sse.makeChannel({ maxEventSize })
 * → Schema.parseJson(Event)`, the idle timeout over events that make progress, and the runner of a protocol's state
 * machine with terminal enforcement.
 *
 * @internal
 */
import * as Sse from "@effect/experimental/Sse"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import type * as Generation from "@reprise/core/Generation"
import type * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as TransportError from "@reprise/core/TransportError"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Stream from "effect/Stream"
import { fromBodyError, type Settings } from "./http.js"

const isSseError = (u: unknown): u is Sse.SseError => Predicate.isTagged(u, "SseError")

/**
 * Raw SSE events of a response body. A body that fails mid-read is `TransportError{reason: "Reset"}`; an event over
 * `maxEventSize` is `ProviderRejection{reason: "MalformedStream"}`, whether `Sse.makeChannel` caught it while pending
 * (which it raises as a defect) or it arrived complete in one chunk.
 * Interruption passes through untouched.
 *
 * @internal
 */
export const events = (
  body: Stream.Stream<Uint8Array, HttpClientError.ResponseError>,
  settings: Settings
): Stream.Stream<Sse.Event, ProviderFailure.ProviderFailure> => {
  const tooLarge = () =>
    new ProviderRejection.ProviderRejection({
      reason: "MalformedStream",
      detail: `an SSE event exceeded the maximum size of ${settings.maxEventSize} characters`
    })
  return body.pipe(
    Stream.mapError((error) => fromBodyError(error, settings.scrub)),
    Stream.decodeText(),
    Stream.pipeThroughChannel(
      Sse.makeChannel<ProviderFailure.ProviderFailure, unknown>({ maxEventSize: settings.maxEventSize })
    ),
    Stream.catchAllCause((cause): Stream.Stream<never, ProviderFailure.ProviderFailure> => {
      const sseError = Cause.find(
        cause,
        (c) => Cause.isDieType(c) && isSseError(c.defect) ? Option.some(c) : Option.none()
      )
      return Option.isSome(sseError) ? Stream.fail(tooLarge()) : Stream.failCause(cause)
    }),
    // The parser bounds only a pending event; one completed within a single chunk is checked here.
    Stream.mapEffect((event) =>
      event.data.length > settings.maxEventSize ? Effect.fail(tooLarge()) : Effect.succeed(event)
    )
  )
}

const clip = (text: string, max: number) => (text.length > max ? `${text.slice(0, max)}…` : text)

/**
 * A JSON event decoder: undecodable JSON or a payload that does not match the (lenient) schema is
 * `ProviderRejection{reason: "MalformedStream"}`.
 *
 * @internal
 */
export const jsonDecoder = <A, I>(schema: Schema.Schema<A, I>, settings: Settings) => {
  const decode = Schema.decodeUnknownEither(Schema.parseJson(schema))
  return (event: Sse.Event): Effect.Effect<A, ProviderRejection.ProviderRejection> => {
    const result = decode(event.data)
    return result._tag === "Right"
      ? Effect.succeed(result.right)
      : Effect.fail(
        new ProviderRejection.ProviderRejection({
          reason: "MalformedStream",
          detail: settings.scrub(
            `undecodable ${event.event} event ${JSON.stringify(clip(event.data, 120))}: ${
              clip(ParseResult.TreeFormatter.formatErrorSync(result.left), 300)
            }`
          )
        })
      )
  }
}

/**
 * Fails with `TransportError{reason: "Timeout"}` when no element arrives within `duration`. Empty chunks (events
 * filtered out as keepalives) do not reset the timer: only a non-empty chunk does.
 *
 * @internal
 */
export const idleTimeout = <A, E, R>(
  self: Stream.Stream<A, E, R>,
  duration: Duration.Duration
): Stream.Stream<A, E | TransportError.TransportError, R> =>
  Stream.unwrapScoped(Effect.map(Stream.toPull(self), (pull) => {
    const nonEmpty: Effect.Effect<Chunk.Chunk<A>, Option.Option<E | TransportError.TransportError>, R> = Effect.flatMap(
      pull,
      (chunk) => Chunk.isEmpty(chunk) ? nonEmpty : Effect.succeed(chunk)
    )
    return Stream.repeatEffectChunkOption(
      Effect.timeoutFail(nonEmpty, {
        duration,
        onTimeout: () =>
          Option.some(
            new TransportError.TransportError({
              reason: "Timeout",
              detail: `no progress for ${Duration.format(duration)}`
            })
          )
      })
    )
  }))

/**
 * A protocol's state machine over its decoded events.
 *
 * @internal
 */
export interface Machine<Ev> {
  /** Events to emit for one protocol event; fails on an in-band error or a tool call that cannot be completed. */
  readonly step: (
    event: Ev
  ) => Effect.Effect<ReadonlyArray<Generation.GenerationEvent>, ProviderFailure.ProviderFailure>
  /** True once nothing more is to be read (the terminal arrived, or `[DONE]`). */
  readonly done: () => boolean
  /**
   * The body ended (naturally, or with `failure` after the terminal event). Returns the last events, or fails with
   * `PrematureEof` when the terminal never arrived.
   */
  readonly end: (
    failure: Option.Option<ProviderFailure.ProviderFailure>
  ) => Effect.Effect<ReadonlyArray<Generation.GenerationEvent>, ProviderFailure.ProviderFailure>
}

/**
 * The premature EOF of a protocol.
 *
 * @internal
 */
export const prematureEof = (protocol: string): TransportError.TransportError =>
  new TransportError.TransportError({
    reason: "PrematureEof",
    detail: `the ${protocol} stream ended without its terminal event`
  })

/**
 * Runs a response body through a protocol: SSE, `decode` (which may drop keepalives by returning `None`), the idle
 * timeout, and the state machine. Reading stops as soon as the machine is done.
 *
 * @internal
 */
export const run = <Ev>(options: {
  readonly body: Stream.Stream<Uint8Array, HttpClientError.ResponseError>
  readonly settings: Settings
  readonly decode: (event: Sse.Event) => Effect.Effect<Option.Option<Ev>, ProviderFailure.ProviderFailure>
  readonly machine: Machine<Ev>
}): Stream.Stream<Generation.GenerationEvent, ProviderFailure.ProviderFailure> => {
  const { machine } = options
  const decoded = events(options.body, options.settings).pipe(
    Stream.mapEffect(options.decode),
    Stream.filterMap((o) => o)
  )
  const outputs = idleTimeout(decoded, options.settings.idleTimeout).pipe(
    Stream.mapEffect(machine.step),
    Stream.takeUntil(() => machine.done())
  )
  return Stream.suspend(() => {
    let ended = false
    const end = (failure: Option.Option<ProviderFailure.ProviderFailure>) =>
      Stream.fromEffect(Effect.suspend(() => {
        ended = true
        return machine.end(failure)
      }))
    return outputs.pipe(
      Stream.catchAll((failure) => end(Option.some(failure))),
      Stream.concat(Stream.suspend(() => ended || machine.done() ? Stream.empty : end(Option.none()))),
      Stream.flattenIterables
    )
  })
}
