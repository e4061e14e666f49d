/**
 * The pull of a streamed response body, a read at a time.
 *
 * Over the undici client of @effect/platform-node (the client DESIGN §3 builds every provider on), the body is read
 * from undici's own `Readable`, the one the platform's `response.stream` reads: the same reads (`read()` until it has
 * nothing buffered), the same end, the same failure (a `ResponseError` of reason `"Decode"` with the stream's error as
 * its cause), and the same release (the body destroyed if it is still open, then the request aborted), except that a
 * body whose reader has all it needs ({@link finish}) is read to its end first, within bounds, so that its connection
 * is kept, and that a body whose end was read is not aborted: its request is over. A web response
 * (`HttpClientResponse.fromWeb`: the fetch client's) is read from its `ReadableStream` the same way, a `read()` per
 * pull. What both leave out is the platform's stream around those reads: a channel, its executor, and the state of
 * `Stream.toPull`, paid on every read. Any other client's response is read through
 * `response.stream`.
 *
 * Both note when the body ended or failed (`outcomeAt`, on the `Clock`), so that the failure it ends an attempt with
 * carries that moment (`ProviderFailure.withObservedAt`) and the backoff counts from it.
 *
 * Both rest on the shape of the platform's responses (`source`, and `original` and `controller` under `HttpClient`'s
 * wrapper), which no type exports; `Body.test.ts` pins it for the versions in the lockfile, and a response of another
 * shape is read through `response.stream`.
 *
 * @internal
 */
import * as HttpClientError from "@effect/platform/HttpClientError"
import type * as HttpClientResponse from "@effect/platform/HttpClientResponse"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import type * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Deadlines from "./deadlines.js"
import * as ScopedAbort from "./scopedAbort.js"

/**
 * A pull of the body: the reads buffered at the time (one or more), or its end (`None`) or failure.
 *
 * @internal
 */
export type Pull = Effect.Effect<Chunk.Chunk<Uint8Array>, Option.Option<HttpClientError.ResponseError>>

/** What reads a pull's body, for {@link outcomeAt}, {@link abandon} and {@link finish}. */
interface Handle {
  /** When the body ended or failed, on the `Clock`; undefined while it is open. */
  readonly at: () => bigint | undefined
  /** Ends the wait in progress, or the next one. */
  readonly abandon: () => void
  /** Marks the body as read as far as its reader needs: its release reads the rest first. */
  readonly finish: () => void
}

// The handle of each pull made here. The pull stays a plain `Effect`, so that `sse.ts` reads every body through one
// type, and the handle is found by it: an idle timeout then ends a wait with no watchdog fiber per stream, and a
// finished body is read to its end so that its connection is kept.
const handles = new WeakMap<Pull, Handle>()

/**
 * When the body read by `pull` ended or failed, on the `Clock` (nanoseconds): the moment the client learnt of its
 * end or its failure, which may be before a pull reads it (the reads before it are decoded and consumed first).
 * Undefined while the body is open, and for a body read through `response.stream`.
 *
 * @internal
 */
export const outcomeAt = (pull: Pull): bigint | undefined => handles.get(pull)?.at()

/**
 * Ends the wait of a pull of `pull` in progress: it returns an empty chunk at once, and what the body then gives is
 * kept for the next pull. With no pull waiting, the next one to wait returns an empty chunk instead (the fiber that
 * abandons may run while the reader's is between a read and its wait). For an idle timeout, which stops waiting for a
 * body without a fiber of its own to interrupt (`sse.ts`). False when `pull` cannot be abandoned (a body read
 * through `response.stream`): only an interruption ends its wait.
 *
 * @internal
 */
export const abandon = (pull: Pull): boolean => {
  const handle = handles.get(pull)
  if (handle === undefined) return false
  handle.abandon()
  return true
}

/**
 * Whether a wait of `pull` can be ended by {@link abandon}.
 *
 * @internal
 */
export const abandonable = (pull: Pull): boolean => handles.has(pull)

/**
 * The reader of `pull` has read all it needs of the body (its protocol's terminal event): what is left of it (`data:
 * [DONE]`, the chunked encoding's end) is read and dropped when the body is released, rather than the request aborted,
 * so that its connection is kept for the next request. Bounded: at most {@link trailerBytes} more, within the idle
 * timeout; past either, the body is destroyed and the request aborted, as a release before the end is. Only for undici's
 * body and a web body read by {@link pullIn} with the idle deadlines; any other body is released as the platform
 * releases it.
 *
 * @internal
 */
export const finish = (pull: Pull): void => handles.get(pull)?.finish()

/**
 * How much of a body may follow the part its reader needed ({@link finish}) and still be read rather than cut: what
 * follows a terminal event is a few bytes (`data: [DONE]`, a usage event, the chunked encoding's end).
 *
 * @internal
 */
export const trailerBytes = 64 * 1024

const observed = (pull: Pull, handle: Handle): Pull => {
  handles.set(pull, handle)
  return pull
}

/** What an abandoned wait returns. */
const nothing: Pull = Effect.succeed(Chunk.empty())

/** What is read of undici's body: a Node `Readable` in paused mode. */
interface NodeReadable {
  readonly readable: boolean
  readonly closed?: boolean
  /** Node's: true once the body's end was read (`'end'` emitted). */
  readonly readableEnded?: boolean
  read(): Uint8Array | null
  on(event: string, listener: (...args: Array<any>) => void): unknown
  off(event: string, listener: (...args: Array<any>) => void): unknown
  destroy(error?: Error): unknown
  /**
   * undici's: reads the body to its end and drops it, destroying it once more than `limit` bytes of it were received
   * in all; settles when the body has closed.
   */
  dump?(options: { readonly limit: number }): Promise<unknown>
}

const isNodeReadable = (value: unknown): value is NodeReadable =>
  typeof value === "object" && value !== null &&
  typeof (value as NodeReadable).read === "function" &&
  typeof (value as NodeReadable).on === "function" &&
  typeof (value as NodeReadable).off === "function" &&
  typeof (value as NodeReadable).destroy === "function" &&
  typeof (value as NodeReadable).readable === "boolean"

/**
 * The client's own response under @effect/platform's `HttpClient` wrapper (`InterruptibleResponse`: `original`, and
 * the `controller` that aborts the request, which the wrapper's `stream` calls once the body is done), or the response
 * itself when it is not wrapped (a client scoped with `HttpClient.withScope`).
 */
const unwrap = (
  response: HttpClientResponse.HttpClientResponse
): { readonly original: unknown; readonly controller: AbortController | undefined } => {
  const wrapper = response as { readonly original?: unknown; readonly controller?: unknown }
  return typeof wrapper.original === "object" && wrapper.original !== null &&
      wrapper.controller instanceof AbortController
    ? { original: wrapper.original, controller: wrapper.controller }
    : { original: response, controller: undefined }
}

const sourceOf = (original: unknown): unknown =>
  typeof original === "object" && original !== null ? (original as { readonly source?: unknown }).source : undefined

/**
 * undici's body of a response of @effect/platform-node's undici client (`source.body`, the `Dispatcher.ResponseData`
 * it wraps) and the request's controller, or `undefined` for a response of any other client.
 *
 * @internal
 */
export const undiciBody = (
  response: HttpClientResponse.HttpClientResponse
): { readonly readable: NodeReadable; readonly controller: AbortController | undefined } | undefined => {
  const { controller, original } = unwrap(response)
  const source = sourceOf(original)
  if (typeof source !== "object" || source === null) return undefined
  const body: unknown = (source as { readonly body?: unknown }).body
  return isNodeReadable(body) ? { readable: body, controller } : undefined
}

/**
 * The web `ReadableStream` of a response built by `HttpClientResponse.fromWeb` (the fetch client's, and any client
 * made of web responses) and the request's controller, or `undefined` for any other response, or one without a body
 * (which `response.stream` fails as `EmptyBody`).
 *
 * @internal
 */
export const webBody = (
  response: HttpClientResponse.HttpClientResponse
): { readonly body: ReadableStream<Uint8Array>; readonly controller: AbortController | undefined } | undefined => {
  const { controller, original } = unwrap(response)
  const source = sourceOf(original)
  if (typeof Response === "undefined" || !(source instanceof Response) || source.body === null) return undefined
  return { body: source.body, controller }
}

/**
 * The body's pull, in the scope: read from undici's `Readable` when the response is the undici client's
 * ({@link undiciBody}), from the web `ReadableStream` when it is a web response ({@link webBody}), otherwise
 * `Stream.toPull(response.stream)`.
 *
 * @internal
 */
export const pull = (response: HttpClientResponse.HttpClientResponse): Effect.Effect<Pull, never, Scope.Scope> =>
  Effect.flatMap(
    Effect.scope,
    (scope) => Effect.clockWith((clock) => pullIn(response, scope, clock) ?? Stream.toPull(response.stream))
  )

/**
 * The body's pull, its release added to `scope`, its end and failure timed on `clock`, when the response is the undici
 * client's or a web one (its wait can be abandoned); `undefined` for any other response. What {@link pull} does for
 * those, without looking the scope and the clock up (a provider's attempt has them in hand: `attempt.ts`).
 *
 * The abort of a send scoped to `scope` (`scopedAbort.ts`) is taken over: the body's release aborts the request. With
 * `idle`, the provider's idle deadlines (open while the body is released), the body is read to its end when it is
 * released after {@link finish}.
 *
 * @internal
 */
export const pullIn = (
  response: HttpClientResponse.HttpClientResponse,
  scope: Scope.Scope,
  clock: Clock.Clock,
  idle?: Deadlines.Deadlines
): Effect.Effect<Pull> | undefined => {
  // taken as the release is added to the scope, in the same uninterruptible step: taken any earlier, an interruption
  // between the two would leave the request with no abort at all
  const undici = undiciBody(response)
  if (undici !== undefined) {
    const controller = () => undici.controller ?? ScopedAbort.take(scope)
    return fromReadable(response, undici.readable, controller, clock, scope, idle)
  }
  const web = webBody(response)
  if (web !== undefined) {
    const controller = () => web.controller ?? ScopedAbort.take(scope)
    return fromWeb(response, web.body, controller, clock, scope, idle)
  }
  return undefined
}

const noop = () => {}

/** The longest a released web body's `cancel()` is waited for before its request is aborted regardless. */
const webCancelBound = Duration.seconds(1)

/**
 * `acquire`, run uninterruptibly, with `release` of what it made added to `scope` as it is: `Effect.acquireRelease`
 * without what that does for a release that reads the acquiring fiber's state. `acquireRelease` takes the fiber's refs
 * at the acquisition and patches them in around the release, two diffs of every fiber ref per body; a body's release
 * reads none of them and runs in the fiber that closes the scope.
 * `Scope.close` does not make a finalizer uninterruptible: a release that waits must be so itself. `acquire` is
 * synchronous; a release that waits bounds its wait (a web body's `cancel`, `webCancelBound`).
 */
const acquireReleased = <A>(
  scope: Scope.Scope,
  acquire: () => A,
  release: (acquired: A) => Effect.Effect<void>
): Effect.Effect<A> =>
  Effect.uninterruptible(Effect.suspend(() => {
    const acquired = acquire()
    return Effect.as(Scope.addFinalizer(scope, release(acquired)), acquired)
  }))

/**
 * A web body's pull: one `read()` of its reader per pull, its result kept for the next pull when it settles with no
 * pull waiting (the one that started it was interrupted or abandoned), and a pull made while a read is in progress
 * waits for that read rather than starting another. A result handed to a pull that is interrupted before it runs is
 * lost with it: in the body pipeline an interrupted pull ends the stream. Released with the reader's `cancel`, then
 * the request's abort, as the platform's `response.stream` releases it.
 */
const fromWeb = (
  response: HttpClientResponse.HttpClientResponse,
  body: ReadableStream<Uint8Array>,
  controllerOf: () => AbortController | undefined,
  clock: Clock.Clock,
  scope: Scope.Scope,
  idle: Deadlines.Deadlines | undefined
): Effect.Effect<Pull> =>
  Effect.map(
    acquireReleased(
      scope,
      // whether the reader has all it needs (`finish`), and whether the body has ended or failed
      () => ({ reader: body.getReader(), controller: controllerOf(), state: { finished: false, settled: false } }),
      // decided when the body is released
      ({ controller, reader, state }) =>
        Effect.suspend(() => {
          if (
            state.finished && !state.settled && idle !== undefined && drainWeb(reader, controller, idle, clock)
          ) return Effect.void
          // A failed body's `cancel` rejects with its failure, which the pull has already told. The cancel is the
          // stream's own code (a custom client's body may wait on anything): waited for at most `webCancelBound`,
          // interruptibly, and the request aborted however the wait ends.
          return Effect.promise(() => reader.cancel().then(noop, noop)).pipe(
            Effect.timeoutTo({ duration: webCancelBound, onSuccess: noop, onTimeout: noop }),
            Effect.interruptible,
            Effect.ensuring(Effect.sync(() => controller?.abort())),
            Effect.uninterruptible
          )
        })
    ),
    ({ reader, state }): Pull => {
      const end: Pull = Effect.failCause(Cause.fail(Option.none()))
      let endedAt: bigint | undefined
      // the pull waiting for the read in progress, if one is, and the result of a read no pull waited for (the pull
      // that started it was interrupted, or abandoned): the next pull's, so that nothing read is lost
      let waiting: ((result: Pull) => void) | undefined
      let reading = false
      let unclaimed: Pull | undefined
      // abandoned while no pull waited: the next wait returns at once
      let abandoned = false
      const deliver = (result: Pull) => {
        reading = false
        const resume = waiting
        waiting = undefined
        if (resume !== undefined) resume(result)
        else unclaimed = result
      }
      const read: Pull = Effect.async((resume) => {
        if (unclaimed !== undefined) {
          const result = unclaimed
          unclaimed = undefined
          return resume(result)
        }
        if (abandoned) {
          abandoned = false
          return resume(nothing)
        }
        waiting = resume
        if (!reading) {
          reading = true
          reader.read().then(
            (result) => {
              if (result.done) {
                endedAt ??= clock.unsafeCurrentTimeNanos()
                state.settled = true
              }
              deliver(result.done ? end : Effect.succeed(Chunk.of(result.value)))
            },
            (cause) => {
              endedAt ??= clock.unsafeCurrentTimeNanos()
              state.settled = true
              deliver(Effect.fail(Option.some(
                new HttpClientError.ResponseError({ request: response.request, response, reason: "Decode", cause })
              )))
            }
          )
        }
        return Effect.sync(() => {
          waiting = undefined
        })
      })
      const abandon = () => {
        const resume = waiting
        waiting = undefined
        if (resume !== undefined) resume(nothing)
        else abandoned = true
      }
      const finish = () => {
        state.finished = true
      }
      return observed(read, { at: () => endedAt, abandon, finish })
    }
  )

/**
 * What a body released before its end was read is destroyed with. Reading usually stops at the protocol's terminal
 * event, before the body's end is read, so most bodies are released open (and read to their end then: {@link drain}
 * destroys one with this too when its time is up, and undici's `dump` with its own error past its bytes). Destroyed
 * with no error, undici's body would make a `RequestAbortedError` for each of them, and Node's `destroy` reads its
 * stack (to avoid a V8 leak): a stack formatted once per reply, source maps and all where they are on. One error made
 * once is formatted once. Nobody sees it: the pull's listeners are off
 * and the release listens with a no-op. What undici does to the request is unchanged: a request whose every byte has
 * arrived is over and stays so (its connection kept for the next request), and one still arriving is aborted with
 * undici's own error.
 */
const released: Error = new Error("the response body was released before its end was read")

/** undici's body, which can read itself to its end (`dump`). */
type Dumpable = NodeReadable & Required<Pick<NodeReadable, "dump">>

/** Whether `readable` is undici's own body, with its `dump`. */
const dumpable = (readable: NodeReadable): readable is Dumpable => typeof readable.dump === "function"

/**
 * Runs `read`, what reads the rest of a released body ({@link finish}), as a user of the idle deadlines `idle` for as
 * long as it lasts, under a deadline the idle timeout from now that runs `cut`; then `after`. `read` starts in a
 * promise's step, so that one that throws settles too. False when the queue's timer is not running (the attempt has
 * left it), and nothing is done.
 */
const draining = (
  idle: Deadlines.Deadlines,
  clock: Clock.Clock,
  read: () => Promise<unknown>,
  cut: () => void,
  after: () => void
): boolean => {
  if (!Deadlines.enterRunning(idle)) return false
  const deadline = Deadlines.arm(idle, clock, Effect.sync(cut))
  const settle = () => {
    Deadlines.disarm(idle, deadline)
    Deadlines.leave(idle)
    after()
  }
  Promise.resolve().then(read).then(settle, settle)
  return true
}

/**
 * Destroys `readable` before its end, with {@link released} (made once) told as its 'error' and heard by a no-op here,
 * whatever else listens: the platform's undici client adds its own no-op, and undici's `dump` its own, but a body of the
 * same shape from elsewhere may not.
 */
const destroyReleased = (readable: NodeReadable): void => {
  readable.on("error", noop)
  readable.destroy(released)
}

/**
 * Whether every byte of `readable` arrived: its end was read. Then the request is over, and its abort would change
 * nothing: undici takes its listener off the signal once the body closes. Aborting would make a `DOMException`, with
 * its stack, and an event for each reply; only a body that did not end is aborted.
 */
const ended = (readable: NodeReadable): boolean => readable.readableEnded === true

/**
 * Reads what is left of undici's released body to its end and drops it, by its own `dump` ({@link draining}): at most
 * `limit` bytes received in all, and the idle timeout from now, past which the body is destroyed (undici then aborts
 * the request). Once the body has closed, the request is aborted unless the body ended ({@link ended}): a request
 * whose every byte has arrived is over, and undici keeps its connection.
 */
const drain = (
  readable: Dumpable,
  controller: AbortController | undefined,
  limit: number,
  idle: Deadlines.Deadlines,
  clock: Clock.Clock
): boolean =>
  draining(
    idle,
    clock,
    () => readable.dump({ limit }),
    () => destroyReleased(readable),
    () => {
      if (!ended(readable)) controller?.abort()
    }
  )

/**
 * {@link drain} for a web body: its reader's reads until its end, at most {@link trailerBytes} of them and within the
 * idle timeout from now, then its `cancel` (a no-op for a body that has ended) and the request's abort.
 */
const drainWeb = (
  reader: ReadableStreamDefaultReader<Uint8Array>,
  controller: AbortController | undefined,
  idle: Deadlines.Deadlines,
  clock: Clock.Clock
): boolean => {
  let left = trailerBytes
  let cut = false
  const next = (): Promise<unknown> =>
    reader.read().then((result) => {
      if (result.done || cut) return
      left -= result.value.length
      return left < 0 ? reader.cancel() : next()
    })
  return draining(
    idle,
    clock,
    next,
    () => {
      cut = true
      reader.cancel().then(noop, noop)
    },
    () => {
      reader.cancel().then(noop, noop).finally(() => {
        controller?.abort()
      })
    }
  )
}

/**
 * undici's body's pull: every read buffered at the time of the pull, or a wait for the body's `readable`, `end` or
 * `error`. Released by destroying the body unless it has closed, then the request's abort, as the platform's
 * `response.stream` releases it; after {@link finish}, with `idle`, by reading it to its end first ({@link drain}).
 */
const fromReadable = (
  response: HttpClientResponse.HttpClientResponse,
  readable: NodeReadable,
  controllerOf: () => AbortController | undefined,
  clock: Clock.Clock,
  scope: Scope.Scope,
  idle: Deadlines.Deadlines | undefined
): Effect.Effect<Pull> =>
  Effect.map(
    acquireReleased(
      scope,
      () => {
        const controller = controllerOf()
        // the body's end (`None`) or failure, once it is known, and when it became known
        let outcome: Option.Option<HttpClientError.ResponseError> | undefined = readable.readable
          ? undefined
          : Option.none()
        let outcomeAt = outcome === undefined ? undefined : clock.unsafeCurrentTimeNanos()
        // the pull waiting for the body to have something, if one is: resumed with `read` (made once) to read again
        let waiting: ((next: Pull) => void) | undefined
        // the body signalled since the last `read()` while no pull waited (the fiber may yield between a `read()`
        // that found nothing and its wait): the wait then passes at once, as the platform's latch would
        let signalled = false
        // abandoned since the last wait began: the next wait returns at once
        let abandoned = false
        // the bytes read, and whether the reader has all it needs of them (`finish`)
        let total = 0
        let finished = false
        // The wait has no canceler: `Effect.async` with one wraps each wait in `Effect.onInterrupt`, about nine
        // operations more per wait. A wait interrupted before it was resumed leaves its `resume` here until
        // the next pull, and the runtime ignores it once the fiber has moved on. Nothing is lost by it: a pull reads
        // what the body has before it waits, the end or failure is kept in `outcome`, and the signal and an
        // abandonment are kept as well (`signalled`, `abandoned`), so the next wait passes at once.
        const wake = () => {
          signalled = true
          const resume = waiting
          waiting = undefined
          if (resume !== undefined) resume(read)
        }
        const onReadable = wake
        const onError = (cause: unknown) => {
          outcome = Option.some(
            new HttpClientError.ResponseError({ request: response.request, response, reason: "Decode", cause })
          )
          outcomeAt ??= clock.unsafeCurrentTimeNanos()
          wake()
        }
        const onEnd = () => {
          outcome ??= Option.none()
          outcomeAt ??= clock.unsafeCurrentTimeNanos()
          wake()
        }
        readable.on("readable", onReadable)
        readable.on("error", onError)
        readable.on("end", onEnd)
        const wait: Pull = Effect.async((resume) => {
          if (signalled) return resume(read)
          if (abandoned) {
            abandoned = false
            return resume(nothing)
          }
          waiting = resume
        })
        const read: Pull = Effect.suspend(() => {
          // a wait that was interrupted is over: its `resume` is not kept
          waiting = undefined
          signalled = false
          let bytes = readable.read()
          if (bytes === null) {
            // its cause, not `Effect.fail` of the object, which takes an operation more to attach the current span
            if (outcome !== undefined) return Effect.failCause(Cause.fail(outcome))
            return wait
          }
          const reads = [bytes]
          total += bytes.length
          while ((bytes = readable.read()) !== null) {
            reads.push(bytes)
            total += bytes.length
          }
          return Effect.succeed(Chunk.unsafeFromArray(reads))
        })
        const release = () => {
          readable.off("readable", onReadable)
          readable.off("error", onError)
          readable.off("end", onEnd)
          if (readable.closed === false) {
            if (
              finished && idle !== undefined && dumpable(readable) &&
              drain(readable, controller, total + trailerBytes, idle, clock)
            ) return
            destroyReleased(readable)
          }
          if (!ended(readable)) controller?.abort()
        }
        // Nothing is lost: what the body has stays buffered in it for the next `read()`. Kept for the next wait even when
        // a wait is resumed, which may be one interrupted (its `resume` ignored): a wait that was resumed makes the
        // next one return an empty chunk too, which its reader passes over.
        const abandon = () => {
          abandoned = true
          const resume = waiting
          waiting = undefined
          if (resume !== undefined) resume(nothing)
        }
        const finish = () => {
          finished = true
        }
        return { read: observed(read, { at: () => outcomeAt, abandon, finish }), release }
      },
      ({ release }) => Effect.sync(release)
    ),
    ({ read }) => read
  )
