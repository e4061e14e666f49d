/**
 * The body pipeline every protocol shares: `the body's pull (Body.pull) → the reply size bound (maxReplyBytes) →
 * UTF-8 decoding of each read (streaming) → the SSE parser of `eventsource-parser` (`createParser`, its
 * `maxBufferSize` set to `maxEventSize`) → JSON.parse → the event's schema (its guard first, `decodeFast`)`, the
 * idle timeout over events that make progress, and the runner of a protocol's state machine with terminal
 * enforcement. Parsing, decoding and stepping the events of one read are one synchronous pass, run in the consumer's
 * fiber, which pulls the body itself; the idle timeout is a deadline per pull in a queue timed by one fiber for all the
 * streams of a provider (`deadlines.ts`: no fiber or timer per stream), or, for a body whose wait cannot be abandoned,
 * a reader fiber and a watchdog per stream ({@link watched}).
 *
 * @internal
 */
import type * as Generation from "@reprise/core/Generation"
import * as Provider from "@reprise/core/Provider"
import * as ProviderFailure from "@reprise/core/ProviderFailure"
import * as ProviderRejection from "@reprise/core/ProviderRejection"
import * as TransportError from "@reprise/core/TransportError"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import type * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as ExecutionStrategy from "effect/ExecutionStrategy"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import { createParser } from "eventsource-parser"
import * as ProviderOptions from "../ProviderOptions.js"
import * as Body from "./body.js"
import * as Deadlines from "./deadlines.js"
import { parseErrorBody } from "./errorBody.js"
import { fromBodyError, inBandError } from "./failure.js"
import * as Json from "./json.js"
import { excerpt } from "./redaction.js"
import { decodeFast } from "./schema.js"
import { firstTokenFailure } from "./send.js"
import type { Settings } from "./settings.js"
import * as Utf8 from "./utf8.js"

const tooLarge = (settings: Settings) =>
  new ProviderRejection.ProviderRejection({
    reason: "MalformedStream",
    detail: `an SSE event exceeded the maximum size of ${settings.maxEventSize} characters`
  })

const replyTooLarge = (settings: Settings) =>
  new ProviderRejection.ProviderRejection({
    reason: "ReplyTooLarge",
    detail: `the response body passed the bound of ${settings.maxReplyBytes} bytes (maxReplyBytes) before its end`
  })

/** The first `allowed` bytes of the reads (fewer than they hold). */
const within = (reads: Iterable<Uint8Array>, allowed: number): Array<Uint8Array> => {
  const out: Array<Uint8Array> = []
  let left = allowed
  for (const bytes of reads) {
    if (left <= 0) break
    out.push(bytes.length <= left ? bytes : bytes.subarray(0, left))
    left -= bytes.length
  }
  return out
}

/**
 * An SSE event as the protocols read it: its `event` name (`undefined` when the stream names none, which the
 * specification reads as `message`), `id` and `data`. The parser's own message object, passed on as it is.
 *
 * @internal
 */
export interface Event {
  readonly event?: string | undefined
  readonly id?: string | undefined
  readonly data: string
}

/** The name of an event's type: its `event` field, or `message` when it has none. */
const eventName = (event: Event): string => event.event ?? "message"

/**
 * The SSE parser of one body: `eventsource-parser`'s, fed each read's text whole (it finds line ends with `indexOf`),
 * its buffered event bounded by `maxEventSize` characters. `feed` decodes the reads in order (`Utf8.makeDecoder`:
 * as a streaming `TextDecoder`, so a character cut between two reads is decoded whole; it strips a leading BOM and
 * replaces invalid bytes as `Stream.decodeText` does), passes each read's text to `onText`, and says whether the
 * buffered event overflowed the bound (then nothing more is fed: the parser stops at that point).
 *
 * Not `@effect/experimental/Sse`, which scans its input one character at a time and stays linear only when fed line
 * by line. Both follow the same specification for events, ids, comments, `retry:` and line endings (`\n`, `\r\n`,
 * `\r`); `Framing.test.ts` pins the cuts that could differ.
 *
 * @internal
 */
export const makeParser = (maxEventSize: number, onEvent: (event: Event) => void) => {
  let overflowed = false
  const parser = createParser({
    onEvent,
    onError: (error) => {
      if (error.type === "max-buffer-size-exceeded") overflowed = true
    },
    maxBufferSize: maxEventSize
  })
  const decode = Utf8.makeDecoder()
  // A read ending in "\r" ends its line now: the parser would wait for the next character (a "\n" of a CRLF), so
  // with CR-only line endings an event would wait for the next read. The line is ended here, and a "\n" that then
  // starts the next read is the rest of that CRLF, dropped.
  let endedWithCr = false
  return {
    feed: (reads: Iterable<Uint8Array>, onText?: (text: string) => void): boolean => {
      for (const bytes of reads) {
        if (overflowed) break
        let text = decode(bytes)
        onText?.(text)
        if (text.length === 0) continue
        if (endedWithCr && text.charCodeAt(0) === 10) text = text.slice(1)
        endedWithCr = text.charCodeAt(text.length - 1) === 13
        if (text.length > 0) parser.feed(endedWithCr ? `${text}\n` : text)
      }
      return overflowed
    }
  }
}

/**
 * A failure of an event's decoding, as {@link Decode} returns it: the decoded events themselves are returned bare, so
 * the hot path allocates nothing to say that an event decoded.
 *
 * @internal
 */
export class Failed {
  constructor(readonly failure: ProviderFailure.ProviderFailure) {}
}

/**
 * What {@link Decode} returns for a keepalive (an SSE comment is none: the parser drops it): not an event, and not
 * progress.
 *
 * @internal
 */
export const skip: unique symbol = Symbol.for("@reprise/providers/internal/sse/skip")

/**
 * A JSON event decoder: data that is not JSON is `TransportError{reason: "MalformedChunk"}` (corruption on the way,
 * retryable), a payload that does not match the (lenient) schema is `ProviderRejection{reason: "MalformedStream"}`,
 * each as a {@link Failed}. Synchronous: `JSON.parse`, then the schema's
 * validation, per event (`decodeFast`): a schema with a guard (`withGuard`, the hot events) is checked by its guard
 * first, and an event the guard leaves is decoded by the schema, which reports the issue. A decoded
 * event is returned as it is, not wrapped: a wrapper would be one more object per token.
 *
 * No step recurses into the event's nesting (`JSON.parse` does not, and the schemas read a bounded depth, leaving
 * unread fields alone) except the schema's formatter, which prints the offending value: a payload nested deeper than
 * `ProviderOptions.maxNestingDepth` that does not match is reported by its depth instead, without being formatted.
 *
 * @internal
 */
export const jsonDecoder = <A, I>(schema: Schema.Schema<A, I>, settings: Settings) => {
  const validate = decodeFast(schema)
  const detail = (event: Event, reason: string) =>
    settings.scrub(
      `undecodable ${eventName(event)} event ${JSON.stringify(excerpt(settings.scrub, event.data, 120))}: ${
        excerpt(settings.scrub, reason, 300)
      }`
    )
  const malformed = (event: Event, reason: string) =>
    new Failed(new ProviderRejection.ProviderRejection({ reason: "MalformedStream", detail: detail(event, reason) }))
  return (event: Event): A | Failed => {
    let json: unknown
    try {
      json = JSON.parse(event.data)
    } catch {
      // Not the parser's own message: it quotes the input, cut at a length of its choosing, so a key in the
      // input could survive in part. The data itself is shown, scrubbed, then cut.
      return new Failed(
        new TransportError.TransportError({ reason: "MalformedChunk", detail: detail(event, "not valid JSON") })
      )
    }
    const decoded = validate(json)
    if (!(decoded instanceof ParseResult.ParseError)) return decoded
    // Measured only on this failure path: the hot path pays nothing for it.
    const depth = Json.textDepth(event.data)
    return malformed(
      event,
      depth > ProviderOptions.maxNestingDepth
        ? `nested deeper than ${ProviderOptions.maxNestingDepth} levels (${depth}), not decoded further`
        : ParseResult.TreeFormatter.formatErrorSync(decoded)
    )
  }
}

/**
 * The pull of a stream read with an idle timeout (see {@link watched}): a chunk, or the stream's end (`None`) or
 * failure.
 *
 * @internal
 */
export type Pull<A, E> = Effect.Effect<Chunk.Chunk<A>, Option.Option<E>>

/**
 * `next`, handed to its consumer with an idle timeout: when a wait for `next` reaches `duration`, the read in progress
 * is interrupted and the wait gets `onTimeout()` (called at that moment) in place of what `next` would have given;
 * every later pull ends the stream. The time counted is the time the consumer waits: a slow consumer (a hook, a full
 * pipe) never times the stream out. `next` should make progress when it succeeds (it reads on until it has something
 * to show).
 *
 * Not a race per pull: `Effect.timeoutFail` forks two fibers and a timer for every read, about ten times the cost of
 * the read's hand-off. Instead one reader fiber runs `next` when the consumer asks (no read-ahead: a read starts only
 * once the consumer waits for it), hands the result over through a slot and one `Effect.async` resume (with a constant
 * effect, see `takeHanded`), and one watchdog fiber sleeps on the `Clock` until the consumer's wait would reach
 * `duration` and then ends it. Both run in the scope, so closing it (the stream's end or interruption) interrupts the
 * read in progress. A result read for a pull that was interrupted goes to the next pull, and a pull made while a read
 * is in progress waits for that read rather than asking for another (two interrupted pulls in a row cost one read, and
 * lose none). After a failure or the end, the reader stops and every later pull gets the same.
 *
 * The body pipeline uses it only for a body whose wait cannot be abandoned (`Body.abandonable`: a client's response
 * that is neither undici's nor a web one); the others need neither fiber: their idle timeout is a deadline in the
 * provider's queue ({@link reader}).
 *
 * @internal
 */
export const watched = <A, E, R>(
  next: Effect.Effect<Chunk.Chunk<A>, Option.Option<E>, R>,
  duration: Duration.Duration,
  onTimeout: () => Pull<A, E>
): Effect.Effect<Pull<A, E>, never, R | Scope.Scope> =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    const millis = Duration.toMillis(duration)
    // the consumer's wait, if it is waiting: its resume and when it began
    let taker: ((result: Pull<A, E>) => void) | undefined
    let waitingSince = 0
    // the reader's wait for the consumer to ask
    let demand: ((result: Effect.Effect<void>) => void) | undefined
    let asked = false
    // a read is in progress: its result goes to whichever pull waits when it is done, so no pull asks again
    let reading = false
    // the stream's end or failure, once known: every later pull gets it
    let ended: Pull<A, E> | undefined
    // what the reader delivered while nobody waited (the pull that asked for it was interrupted): the next pull's
    let ready: Pull<A, E> | undefined
    // what the reader handed to the waiting pull, until that pull takes it (the reader may deliver again first)
    let handed: Pull<A, E> | undefined
    // A waiting pull is resumed with this one effect, made once, which takes the result from `handed`: never with the
    // result itself. The fiber's resume message may be allocated in the old generation (V8 pretenures the message's
    // allocation site once messages outlive scavenges under load), and a dead old message keeps what it points to
    // alive through every scavenge until the next full collection: the read's events, promoted.
    const takeHanded: Pull<A, E> = Effect.suspend(() => {
      const result = handed!
      handed = undefined
      return result
    })
    const deliver = (result: Pull<A, E>) => {
      const resume = taker
      taker = undefined
      if (resume !== undefined) {
        handed = result
        resume(takeHanded)
      } else {
        ready = result
      }
    }
    const askedFor = Effect.async<void>((resume) => {
      if (asked) {
        asked = false
        reading = true
        resume(Effect.void)
      } else {
        demand = resume
      }
    })
    const reader: Effect.Effect<void, never, R> = Effect.zipRight(
      askedFor,
      Effect.matchCauseEffect(next, {
        onSuccess: (chunk) => {
          reading = false
          if (ended !== undefined) return Effect.void
          deliver(Effect.succeed(chunk))
          return reader
        },
        onFailure: (cause) => {
          reading = false
          if (ended !== undefined) return Effect.void
          ended = Effect.failCause(cause)
          deliver(ended)
          return Effect.void
        }
      })
    )
    const watchdog: Effect.Effect<void> = Effect.suspend(() => {
      if (ended !== undefined) return Effect.void
      const now = clock.unsafeCurrentTimeMillis()
      if (taker !== undefined && now - waitingSince >= millis) {
        ended = Effect.fail(Option.none())
        // called now, so that what it stops stops before anything else runs; the read in progress is interrupted
        // before the consumer runs what it gave
        const then = onTimeout()
        deliver(Effect.zipRight(Fiber.interrupt(readerFiber), then))
        return Effect.void
      }
      const wait = taker !== undefined ? waitingSince + millis - now : millis
      return Effect.zipRight(clock.sleep(Duration.millis(wait)), watchdog)
    })
    const readerFiber = yield* Effect.forkScoped(reader)
    yield* Effect.forkScoped(watchdog)
    return Effect.async((resume) => {
      // a result handed to a pull that was interrupted before it took it comes first
      if (handed !== undefined) return resume(takeHanded)
      if (ready !== undefined) {
        handed = ready
        ready = undefined
        return resume(takeHanded)
      }
      if (ended !== undefined) return resume(ended)
      taker = resume
      waitingSince = clock.unsafeCurrentTimeMillis()
      if (demand !== undefined) {
        const ask = demand
        demand = undefined
        reading = true
        ask(Effect.void)
      } else if (!reading) {
        // the reader is between a delivery and its next wait for an ask
        asked = true
      }
      return Effect.sync(() => {
        taker = undefined
      })
    })
  })

// Built from literals and strings this module computes, so not validated again by the Schema class
// (`disableValidation`): a validated construction costs about 0.1 ms, on the path from a fault to its replay.
const built = { disableValidation: true } as const

const idleFailure = (duration: Duration.Duration) =>
  new TransportError.TransportError({
    reason: "Timeout",
    detail: `no progress for ${Duration.format(duration)}`
  }, built)

/**
 * Fails with `TransportError{reason: "Timeout"}` when no element arrives within `duration` of being asked for
 * ({@link watched} over the stream's pull). Empty chunks do not reset the timer: only a non-empty chunk does.
 *
 * @internal
 */
export const idleTimeout = <A, E, R>(
  self: Stream.Stream<A, E, R>,
  duration: Duration.Duration
): Stream.Stream<A, E | TransportError.TransportError, R> =>
  Stream.unwrapScoped(Effect.gen(function*() {
    const pull = yield* Stream.toPull(self)
    const nonEmpty: Effect.Effect<Chunk.Chunk<A>, Option.Option<E>, R> = Effect.flatMap(
      pull,
      (chunk) => Chunk.isEmpty(chunk) ? nonEmpty : Effect.succeed(chunk)
    )
    const take = yield* watched<A, E | TransportError.TransportError, R>(
      nonEmpty,
      duration,
      () => Effect.fail(Option.some(idleFailure(duration)))
    )
    return Stream.repeatEffectChunkOption(take)
  }))

/**
 * A protocol's state machine over its decoded events. `step` is synchronous: it runs once per protocol event, and an
 * effect per event costs more than the step itself.
 *
 * @internal
 */
export interface Machine<Ev> {
  /**
   * Appends the events to emit for one protocol event to `out`, or returns the failure of an in-band error or a tool
   * call that cannot be completed (what it appended before failing is dropped: a failing event emits nothing).
   */
  readonly step: (event: Ev, out: Array<Generation.GenerationEvent>) => ProviderFailure.ProviderFailure | undefined
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
 * A protocol's event decoder: {@link skip} for a keepalive (which is not progress), the decoded event otherwise, or
 * the {@link Failed} of an undecodable event. Synchronous, like `Machine.step`. The event is returned bare, and a
 * step appends to the read's array, so no event is wrapped on its way in (an `Either` of an `Option` would be two
 * objects per event) nor its outputs on the way out (an array in an `Either`).
 *
 * @internal
 */
export type Decode<Ev> = (event: Event) => Ev | typeof skip | Failed

/**
 * The premature EOF of a protocol.
 *
 * @internal
 */
export const prematureEof = (protocol: string): TransportError.TransportError =>
  new TransportError.TransportError({
    reason: "PrematureEof",
    detail: `the ${protocol} stream ended without its terminal event`
  }, built)

/**
 * Decodes and steps the events of one read, in order, until the machine is done, appending their outputs to
 * `out`: true when an event made progress (a keepalive does not; an event may make progress with no output). A
 * failure (an oversized or undecodable event, an in-band error) ends the read after the outputs of the events before
 * it. A plain loop: `decode` and `step` are synchronous, so there is no effect per event.
 */
const stepAll = <Ev>(
  input: ReadonlyArray<Event>,
  settings: Settings,
  decode: Decode<Ev>,
  machine: Machine<Ev>,
  out: Array<Generation.GenerationEvent>
): { readonly progressed: boolean; readonly failure: ProviderFailure.ProviderFailure | undefined } => {
  let progressed = false
  for (let i = 0; i < input.length && !machine.done(); i++) {
    const event = input[i]
    if (event.data.length > settings.maxEventSize) return { progressed, failure: tooLarge(settings) }
    const decoded = decode(event)
    if (decoded === skip) continue
    if (decoded instanceof Failed) return { progressed, failure: decoded.failure }
    const before = out.length
    const failure = machine.step(decoded, out)
    if (failure !== undefined) {
      out.length = before
      return { progressed, failure }
    }
    progressed = true
  }
  return { progressed, failure: undefined }
}

/** Whether an event is content, which ends the wait for the first token (see `ProviderOptions.firstTokenTimeout`). */
const isContent = (event: Generation.GenerationEvent): boolean =>
  event._tag === "TextDelta" || event._tag === "ReasoningDelta" || event._tag === "ReasoningComplete" ||
  event._tag === "ToolCallDelta" || event._tag === "ToolCallComplete"

/** How much of a body without any SSE event is kept to recognise a JSON body sent in place of a stream. */
const maxJsonBody = 64 * 1024

/**
 * A successful response whose whole body is one JSON value, not an event stream (a gateway or an OpenAI-compatible
 * server answering `stream: true` with a plain JSON error or completion). An error object is classified like an
 * in-band error, by its code; any other JSON value is `ProviderRejection{reason: "MalformedStream"}`: asking again
 * would get the same answer. Anything else is not recognised here (`undefined`) and stays a premature EOF.
 */
const jsonInsteadOfStream = (
  text: string,
  settings: Settings,
  requestId: string | undefined
): ProviderFailure.ProviderFailure | undefined => {
  const trimmed = text.trim()
  if (!trimmed.startsWith("{") && !trimmed.startsWith("[")) return undefined
  let json: unknown
  try {
    json = JSON.parse(trimmed)
  } catch {
    return undefined
  }
  if (Predicate.isRecord(json) && (json.error !== undefined && json.error !== null)) {
    const error = parseErrorBody(trimmed, settings.scrub)
    return inBandError(settings, {
      code: error.code,
      type: error.type,
      detail: error.message ?? "an error object in place of an event stream",
      requestId
    })
  }
  return new ProviderRejection.ProviderRejection({
    reason: "MalformedStream",
    detail: settings.scrub(`expected an event stream, got a JSON body: ${excerpt(settings.scrub, trimmed, 200)}`)
  })
}

/**
 * Runs a response body through a protocol: SSE, `decode` (which may drop keepalives by returning `None`), the
 * state machine, and the idle timeout over events that make progress. Reading stops as soon as the machine is done.
 *
 * Each read is one synchronous pass: its bytes are decoded and fed to the parser, and the events it completes are
 * decoded and stepped in order, their outputs written to one array. Per-element stream stages, a channel hand-off per
 * event and a timer per event cost far more than the decoding itself. The body is read by one pull (`Body.pull`), not
 * through stream stages: its end, its failure and the machine's end are handled here. On an idle timeout (see the
 * module's description) reading stops at once, the body is closed, and `machine.end` gets the `Timeout`; so it does
 * when the attempt's first-token deadline (`Held.token`) passed before an event of content. A body that
 * fails mid-read is `TransportError{reason: "Reset"}` (or a `ProtocolViolation`, see `fromBodyError`); an event over
 * `maxEventSize` is `ProviderRejection{reason: "MalformedStream"}`, after the events before it. The body's bytes are
 * counted: past `maxReplyBytes`, the events within the bound are decoded and stepped, and unless the machine is then
 * done, the attempt fails with `ProviderRejection{reason: "ReplyTooLarge"}` and reading stops (the request is aborted).
 * The outcome does not depend on how the bytes are cut into reads. A body that ends without a single SSE event and is
 * one JSON value is read as such (`jsonInsteadOfStream`); every other end before the terminal is the machine's
 * premature EOF. A `retry:` field is ignored (no provider sends one). Interruption passes through untouched.
 *
 * @internal
 */
export const run = <Ev>(
  options: RunOptions<Ev>
): Stream.Stream<Generation.GenerationEvent, ProviderFailure.ProviderFailure> => Provider.toStream(pull(options))

/**
 * What {@link run} reads.
 *
 * @internal
 */
export interface RunOptions<Ev> {
  /** The pull of the response body, opened in the attempt's scope: `Body.pull(response)`. */
  readonly body: Effect.Effect<Body.Pull, never, Scope.Scope>
  readonly settings: Settings
  readonly decode: Decode<Ev>
  readonly machine: Machine<Ev>
  /** The response's request id, for an error sent as a JSON body in place of the stream. */
  readonly requestId?: string | undefined
  /**
   * The idle deadlines of the provider's streams (`Deadlines.make(settings.idleTimeout)`), timed by one fiber for all
   * of them, and held open by the caller (`Deadlines.use`) for at least as long as this stream is read; without it,
   * the stream's own, opened here.
   */
  readonly idle?: Deadlines.Deadlines | undefined
  /** The attempt's deadlines of the pull in progress and of the first token, when a provider's attempt reads it. */
  readonly held?: Held | undefined
}

/**
 * {@link run} as the pull of its chunks, in the scope (a provider's `open`): the body in a scope of its own, closed
 * as soon as an idle timeout stops the reading (the request is aborted then, not once the consumer has handled the
 * end), and read by {@link reader}, or by a reader fiber and a watchdog ({@link watched}) when its wait cannot be
 * abandoned.
 *
 * @internal
 */
export const pull = <Ev>(
  options: RunOptions<Ev>
): Effect.Effect<Provider.Pull<ProviderFailure.ProviderFailure>, never, Scope.Scope> =>
  Effect.gen(function*() {
    const clock = yield* Effect.clock
    const scope = yield* Effect.scope
    const bodyScope = yield* Scope.fork(scope, ExecutionStrategy.sequential)
    const body = yield* Scope.extend(options.body, bodyScope)
    // the body closed uninterruptibly: `Scope.close` marks the scope closed before it runs the release, so an
    // interruption between the two would leave the request unaborted; the release is synchronous or bounded (`body.ts`)
    const close = Effect.uninterruptible(Scope.close(bodyScope, Exit.void))
    // a pull's deadline, when the body can be abandoned; none is armed for one read by `watched`
    const held: Held = options.held ?? { reading: undefined }
    const read = steps(options, body, clock, close, held)
    if (!Body.abandonable(body)) return yield* watched(read.next, options.settings.idleTimeout, read.timedOut)
    const idle = options.idle ?? Deadlines.make(options.settings.idleTimeout)
    if (options.idle === undefined) yield* Deadlines.use(idle)
    // A pull interrupted while it waits skips its own disarming: its deadline is disarmed by the next pull, or when
    // the stream's scope closes, so that it neither expires later nor keeps the stream's state alive in the queue.
    yield* Scope.addFinalizer(
      scope,
      Effect.sync(() => {
        if (held.reading !== undefined) Deadlines.disarm(idle, held.reading)
      })
    )
    return timed(read, body, clock, idle, held)
  })

/**
 * Where {@link reader} keeps the idle deadline of the pull in progress, for whoever disarms it when the stream's scope
 * closes (a pull interrupted while it waits skips its own disarming).
 *
 * @internal
 */
export interface Held {
  reading: Deadlines.Deadline | undefined
  /** The first-token queue, when the provider has a first-token timeout. */
  readonly tokens?: Deadlines.Deadlines | undefined
  /** The first-token deadline armed by the send, until the first content event (or the machine's end) disarms it. */
  token?: Deadlines.Deadline | undefined
}

/**
 * What {@link reader} reads: a body whose wait can be abandoned (`Body.abandonable`), the stream's `Clock`, how to
 * close the body's scope (an idle timeout closes it: the request is aborted then, not once the consumer has handled
 * the end; run uninterruptibly or from a fiber that cannot be interrupted), and the idle deadlines, open for as long
 * as the stream is read.
 *
 * @internal
 */
export interface ReaderOptions<Ev> {
  readonly settings: Settings
  readonly decode: Decode<Ev>
  readonly machine: Machine<Ev>
  readonly requestId?: string | undefined
  readonly body: Body.Pull
  readonly clock: Clock.Clock
  readonly close: Effect.Effect<void>
  readonly idle: Deadlines.Deadlines
  readonly held: Held
}

/**
 * {@link run}'s pull over a body already opened, built in one step, with no effect: a provider's attempt has the body's
 * scope, the clock and the idle queue in hand (`attempt.ts`). The body's wait is abandoned when its idle deadline
 * passes.
 *
 * @internal
 */
export const reader = <Ev>(options: ReaderOptions<Ev>): Provider.Pull<ProviderFailure.ProviderFailure> =>
  timed(
    steps(options, options.body, options.clock, options.close, options.held),
    options.body,
    options.clock,
    options.idle,
    options.held
  )

type Result = Pull<Generation.GenerationEvent, ProviderFailure.ProviderFailure>

/** The reading of one body, without its idle timeout: each pull's `next`, and what an idle timeout ends it with. */
interface Steps {
  readonly next: Result
  /** What `next` runs, for a caller that runs it in a step of its own. */
  readonly pull: () => Result
  readonly timedOut: () => Result
}

const steps = <Ev>(
  options: {
    readonly settings: Settings
    readonly decode: Decode<Ev>
    readonly machine: Machine<Ev>
    readonly requestId?: string | undefined
  },
  body: Body.Pull,
  clock: Clock.Clock,
  close: Effect.Effect<void>,
  held: Held
): Steps => {
  const { decode, machine, settings } = options
  // the body's text until its first SSE event; undefined from that event on, or past `maxJsonBody`
  let head: string | undefined = ""
  const keepHead = (text: string) => {
    if (head === undefined) return
    head = head.length + text.length > maxJsonBody ? undefined : head + text
  }
  const pending: Array<Event> = []
  // body bytes read so far, against `maxReplyBytes`
  let received = 0
  const parser = makeParser(settings.maxEventSize, (event) => {
    head = undefined
    pending.push(event)
  })
  // a failure's cause made once: `Effect.fail` of an object takes an operation more each time it runs, to attach the
  // current span to it
  const finished: Result = Effect.failCause(Cause.fail(Option.none()))
  // Reading has stopped (the machine is done, or the end ran): every later read ends the stream.
  let stopped = false
  // The end, once: the machine's last events, or its failure (`PrematureEof`, or `failure` before the terminal),
  // observed `at` (`ProviderFailure.withObservedAt`: the read that held the failure, or the body's end or
  // failure). Called when it is decided: from then on nothing more is read or stepped.
  const end = (failure: Option.Option<ProviderFailure.ProviderFailure>, at: bigint): Result => {
    stopped = true
    return Effect.suspend(() => {
      const json = Option.isNone(failure) && head !== undefined
        ? jsonInsteadOfStream(head, settings, options.requestId)
        : undefined
      return Effect.matchEffect(json !== undefined ? Effect.fail(json) : machine.end(failure), {
        onFailure: (error) => Effect.fail(Option.some(ProviderFailure.withObservedAt(error, at))),
        onSuccess: (events) => Effect.succeed(Chunk.unsafeFromArray(events.slice()))
      })
    })
  }
  // what the last read left to do after its outputs: the end it failed with
  let after: Result | undefined
  // One read's outputs: the events of the reads up to one that makes progress, then what follows it.
  const onReads = (reads: Chunk.Chunk<Uint8Array>): Result => {
    if (stopped) return finished
    let size = 0
    for (const bytes of reads) size += bytes.length
    received += size
    const over = received > settings.maxReplyBytes
    // Past the bound, only the bytes within it are read: whatever the cut, the same events are decoded.
    const input = over ? within(reads, settings.maxReplyBytes - (received - size)) : reads
    const overflowed = parser.feed(input, head === undefined ? undefined : keepHead)
    const out: Array<Generation.GenerationEvent> = []
    // stepped where they are, then let go: nothing feeds the parser while they are stepped, so they need no copy
    const { failure, progressed } = stepAll(pending, settings, decode, machine, out)
    pending.length = 0
    // the first token came (or the reply ended without one): its deadline no longer applies, even if it passed as
    // this read came in (the wait it abandoned is then waited again)
    if (held.token !== undefined && (machine.done() || out.some(isContent))) {
      Deadlines.disarm(held.tokens!, held.token)
      held.token = undefined
    }
    const failed = failure ??
      (overflowed && !machine.done() ? tooLarge(settings) : undefined) ??
      (over && !machine.done() ? replyTooLarge(settings) : undefined)
    if (failed !== undefined) {
      stopped = true
      const at = clock.unsafeCurrentTimeNanos()
      if (!progressed) return end(Option.some(failed), at)
      after = end(Option.some(failed), at)
    } else if (machine.done()) {
      stopped = true
      after = finished
      // the rest of the body is read to its end on release, so that its connection is kept
      Body.finish(body)
    } else if (!progressed) {
      return next
    }
    return Effect.succeed(Chunk.unsafeFromArray(out))
  }
  // takes what the last read left to do, if anything
  const takeAfter = (): Result | undefined => {
    const then = after
    after = undefined
    return then
  }
  // the body closed first
  const closed = (failure: ProviderFailure.ProviderFailure): Result =>
    Effect.zipRight(close, end(Option.some(failure), clock.unsafeCurrentTimeNanos()))
  const pull = (): Result => {
    const then = takeAfter()
    if (then !== undefined) return then
    if (stopped) return finished
    if (held.reading !== undefined && held.reading.timedOut) return closed(idleFailure(settings.idleTimeout))
    if (held.token !== undefined && held.token.timedOut) return closed(firstTokenFailure(settings))
    return Effect.matchCauseEffect(body, {
      onSuccess: onReads,
      onFailure: (cause): Result => {
        if (stopped) return finished
        if (cause._tag !== "Fail") {
          // a defect or an interruption passes through, untouched but for the type of a failure beside it
          return Effect.failCause(Cause.map(cause, Option.map((error) => fromBodyError(error, settings.scrub))))
        }
        const at = Body.outcomeAt(body) ?? clock.unsafeCurrentTimeNanos()
        return Option.match(cause.error, {
          onNone: () => end(Option.none(), at),
          onSome: (error) => end(Option.some(fromBodyError(error, settings.scrub)), at)
        })
      }
    })
  }
  const next: Result = Effect.suspend(pull)
  return {
    next,
    pull,
    timedOut: () => {
      // a failure the last read ended with is still to be told: it goes first, as it would have
      const then = takeAfter()
      if (then !== undefined) return then
      if (stopped) return finished
      return closed(idleFailure(settings.idleTimeout))
    }
  }
}

/**
 * The pull of `read` with its idle timeout as a deadline per pull in `idle`, the provider's queue timed by one fiber
 * for all its streams, with no reader fiber, watchdog fiber or timer per stream. The body's wait can be ended from
 * outside (`Body.abandon`), so the consumer's fiber reads it itself. A deadline that passes abandons the body's wait;
 * the read then finds it passed and ends with the `Timeout`, the body closed first.
 *
 * A pull's deadline is disarmed by the next pull, as it arms its own, or by whoever disarms `held` when the stream's
 * scope closes: not as the pull returns, which would take a step and a handler per pull. Between two pulls it is the
 * consumer's time that passes, which an idle timeout does not count: a deadline that passes then finds no pull waiting,
 * and what it does is undone by the next pull, which arms a deadline of its own (an abandoned wait is returned empty,
 * and the pull waits again).
 */
const timed = (
  read: Steps,
  body: Body.Pull,
  clock: Clock.Clock,
  idle: Deadlines.Deadlines,
  held: Held
): Result => {
  const expire = Effect.sync(() => {
    if (held.reading !== undefined && held.reading.timedOut) Body.abandon(body)
  })
  return Effect.suspend(() => {
    if (held.reading !== undefined) Deadlines.disarm(idle, held.reading)
    held.reading = Deadlines.arm(idle, clock, expire)
    return read.pull()
  })
}
