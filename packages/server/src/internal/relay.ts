/**
 * The relay's engine: one request from its body to its response. Checks (key, body size, concurrency), the codec's
 * decode, the reply run with recovery in the request's scope, and the response in the preview mode (see
 * `preview.ts`). `Relay.ts` is its face.
 *
 * @internal
 */
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type * as Generation from "@reprise/core/Generation"
import * as Provider from "@reprise/core/Provider"
import * as Recovery from "@reprise/core/Recovery"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as Routes from "@reprise/core/Routes"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import * as Fiber from "effect/Fiber"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Redacted from "effect/Redacted"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as Crypto from "node:crypto"
import * as RelayProtocol from "../RelayProtocol.js"
import type { Codec, Context, Failure as WireFailure } from "./downstream.js"
import * as Failure from "./failure.js"
import * as Preview from "./preview.js"

/** The protocols a downstream client may speak. @internal */
export type Protocol = Codec["protocol"]

/** One access-log entry. @internal */
export interface AccessEntry {
  readonly method: string
  readonly path: string
  readonly status: number
  readonly attempts: number
  readonly route: string | undefined
  readonly durationMs: number
  readonly mode: RelayProtocol.PreviewMode | undefined
}

/** The settings the engine runs with, resolved. @internal */
export interface Settings {
  readonly keys: ReadonlyArray<Redacted.Redacted<string>>
  readonly preview: RelayProtocol.PreviewMode
  readonly maxBodyBytes: number
  readonly maxConcurrent: number
  readonly keepalive: Duration.Duration
  readonly model: string | undefined
  readonly accessLog: (entry: AccessEntry) => Effect.Effect<void>
}

const digest = (text: string): Buffer => Crypto.createHash("sha256").update(text, "utf8").digest()

/**
 * Whether a request carries one of `keys` (`Authorization: Bearer …` or `x-api-key`): each key compared in constant
 * time over equal-length digests, every key compared whatever the outcome. With no keys, every request is let in.
 *
 * @internal
 */
export const authorizer = (keys: ReadonlyArray<Redacted.Redacted<string>>) => {
  const digests = keys.map((key) => digest(Redacted.value(key)))
  return (headers: Readonly<Record<string, string | undefined>>): boolean => {
    if (digests.length === 0) return true
    const authorization = headers["authorization"]
    const presented = authorization !== undefined && /^bearer\s+/i.test(authorization)
      ? authorization.replace(/^bearer\s+/i, "").trim()
      : headers["x-api-key"]
    if (presented === undefined || presented.length === 0) return false
    const given = digest(presented)
    let ok = false
    for (const d of digests) ok = Crypto.timingSafeEqual(d, given) || ok
    return ok
  }
}

/** The error body of `protocol`, with or without its codec. @internal */
export const errorBody = (protocol: Protocol, codec: Codec | undefined, failure: WireFailure): unknown => {
  if (codec !== undefined) return codec.errorBody(failure)
  if (protocol === "anthropic") return { type: "error", error: { type: failure.type, message: failure.message } }
  return {
    error: { message: failure.message, type: failure.type, param: failure.param ?? null, code: failure.code ?? null }
  }
}

/** An error response in the protocol's shape. @internal */
export const errorResponse = (
  protocol: Protocol,
  codec: Codec | undefined,
  mapped: Failure.Mapped,
  headers: Readonly<Record<string, string>> = {}
): HttpServerResponse.HttpServerResponse =>
  HttpServerResponse.unsafeJson(errorBody(protocol, codec, mapped.failure), {
    status: mapped.failure.status,
    headers: mapped.retryAfter === undefined ? headers : { ...headers, "retry-after": String(mapped.retryAfter) }
  })

const invalid = (message: string, code?: string): Failure.Mapped => ({
  failure: { status: 400, type: "invalid_request_error", code, message }
})

class TooLarge {
  readonly _tag = "TooLarge"
}

/** What is still read of a body over the limit, so that its client reads the 413 rather than a reset socket. */
const drainBytes = 8 * 1024 * 1024

/**
 * The body as text, at most `max` bytes of it. A body that declares its length is refused at once when that is over
 * the limit, and otherwise read whole: the HTTP parser reads no more than it declares. A body without one (chunked) is
 * counted as it is read; over the limit, it is read on and dropped, up to `drainBytes` more (a client that sends its
 * whole body before it reads then gets the 413); past that, reading stops.
 */
const readBody = (request: HttpServerRequest.HttpServerRequest, max: number) => {
  const declared = Number(request.headers["content-length"])
  if (Number.isFinite(declared)) return declared > max ? Effect.fail(new TooLarge()) : request.text
  return request.stream.pipe(
    Stream.mapAccumEffect(0, (n, bytes: Uint8Array) => {
      const total = n + bytes.length
      if (total > max + drainBytes) return Effect.fail(new TooLarge())
      return Effect.succeed([total, total > max ? undefined : bytes] as const)
    }),
    Stream.runFold({ total: 0, chunks: [] as Array<Uint8Array> }, (acc, bytes) => {
      if (bytes === undefined) acc.total = max + 1
      else {
        acc.total += bytes.length
        acc.chunks.push(bytes)
      }
      return acc
    }),
    Effect.flatMap((acc) =>
      acc.total > max ? Effect.fail(new TooLarge()) : Effect.succeed(Buffer.concat(acc.chunks).toString("utf8"))
    )
  )
}

const idPrefix: Record<Protocol, string> = {
  "openai-chat": "chatcmpl-",
  "openai-responses": "resp_",
  anthropic: "msg_"
}

const sseHeaders = (mode: RelayProtocol.PreviewMode) => ({
  "cache-control": "no-cache",
  "x-accel-buffering": "no",
  "x-reprise-preview": mode
})

const encoder = new TextEncoder()

/** What the access log reads of a reply. */
interface Stats {
  attempts: number
  route: string | undefined
  status: number
  mode: RelayProtocol.PreviewMode | undefined
}

/**
 * The handler of one generation endpoint: the protocol's codec (undefined: 501), the settings, and the slots of the
 * concurrency limit, shared by every request of one app.
 *
 * @internal
 */
export const generation = (
  protocol: Protocol,
  codec: Codec | undefined,
  settings: Settings,
  slots: { active: number },
  authorized: (headers: Readonly<Record<string, string | undefined>>) => boolean
): Effect.Effect<
  HttpServerResponse.HttpServerResponse,
  never,
  HttpServerRequest.HttpServerRequest | Provider.Provider | Scope.Scope
> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const start = yield* Clock.currentTimeMillis
    const stats: Stats = { attempts: 0, route: undefined, status: 0, mode: undefined }
    // one line per request, once its response was written (or the client went away)
    yield* Effect.addFinalizer((exit) =>
      Effect.flatMap(Clock.currentTimeMillis, (end) =>
        settings.accessLog({
          method: request.method,
          path: request.url.split("?")[0]!,
          status: Exit.isInterrupted(exit) && stats.status === 0 ? 499 : stats.status,
          attempts: stats.attempts,
          route: stats.route,
          durationMs: end - start,
          mode: stats.mode
        }))
    )
    const respond = (response: HttpServerResponse.HttpServerResponse) => {
      stats.status = response.status
      return response
    }
    const refuse = (mapped: Failure.Mapped, headers?: Record<string, string>) =>
      respond(errorResponse(protocol, codec, mapped, headers))

    if (!authorized(request.headers)) {
      return refuse({
        failure: {
          status: 401,
          type: "authentication_error",
          code: "invalid_api_key",
          message: "a valid relay key is required"
        }
      }, protocol === "anthropic" ? {} : { "www-authenticate": "Bearer" })
    }
    if (codec === undefined) {
      return refuse({
        failure: {
          status: 501,
          type: "api_error",
          code: "not_implemented",
          message: `the relay does not serve the ${protocol} protocol yet`
        }
      })
    }
    const modeHeader = request.headers[RelayProtocol.previewHeader]
    const mode = modeHeader === undefined || modeHeader.trim() === ""
      ? settings.preview
      : modeHeader.trim().toLowerCase()
    if (mode !== "hold" && mode !== "live" && mode !== "reset") {
      return refuse(
        invalid(`${RelayProtocol.previewHeader} must be hold, live or reset, got ${JSON.stringify(modeHeader)}`)
      )
    }

    const text = yield* Effect.either(readBody(request, settings.maxBodyBytes))
    if (Either.isLeft(text)) {
      return text.left instanceof TooLarge
        ? refuse({
          failure: {
            status: 413,
            type: "invalid_request_error",
            code: "request_too_large",
            message: `the request body is over the relay's limit of ${settings.maxBodyBytes} bytes`
          }
        })
        : refuse(invalid("the request body could not be read"))
    }
    let json: unknown
    try {
      json = JSON.parse(text.right)
    } catch {
      return refuse(invalid("the request body is not JSON"))
    }
    const decoded = codec.decode(json)
    if (Either.isLeft(decoded)) {
      const { message, param } = decoded.left
      return refuse({ failure: { status: 400, type: "invalid_request_error", message, param } })
    }

    // the routes come from the configuration; the client's model (every codec requires one) goes to the primary
    // route, and the fallbacks ask for their own
    const configured = yield* Effect.serviceOption(Routes.Routes)
    const model = decoded.right.request.model
    const plan = Option.map(configured, ({ routes: [primary, ...fallbacks] }) =>
      Routes.make({ ...primary, model }, ...fallbacks))
    const generationRequest: Generation.GenerationRequest = { ...decoded.right.request, model }
    if (Option.isNone(plan)) {
      stats.route = `${(yield* Provider.Provider).protocol} ${model}`
    }

    // the concurrency limit: a slot for the life of the request's scope
    const admitted = yield* Effect.acquireRelease(
      Effect.sync(() =>
        slots.active < settings.maxConcurrent ? (slots.active++, true) : false
      ),
      (ok) => ok ? Effect.sync(() => void slots.active--) : Effect.void
    )
    if (!admitted) {
      return refuse({
        failure: {
          status: 429,
          type: "rate_limit_error",
          code: "relay_busy",
          message: `the relay is serving its limit of ${settings.maxConcurrent} replies; retry shortly`
        },
        retryAfter: 1
      })
    }

    const context: Context = {
      id: idPrefix[protocol] + Crypto.randomBytes(12).toString("hex"),
      created: Math.floor(start / 1000),
      model,
      ...(decoded.right.includeUsage === undefined ? {} : { includeUsage: decoded.right.includeUsage })
    }
    const queue = yield* Effect.acquireRelease(Queue.unbounded<Preview.Signal>(), Queue.shutdown)
    const streaming = decoded.right.stream
    if (streaming) stats.mode = mode
    // live: whether the current attempt showed content, as the machine decides it (the codec wrote a frame for it)
    let shown = false
    const notify = (note: RecoveryNotifications.Notification) => {
      if (note._tag === "AttemptStarted") {
        stats.attempts = Math.max(stats.attempts, note.attempt)
        if (note.route !== undefined) stats.route = note.route.name
        shown = false
      }
      if (!streaming) return Effect.void
      // once content went out, the first failure ends the reply: recovery waits here, before it schedules another
      // send, until the response is over and interrupts it
      if (mode === "live" && note._tag === "AttemptDiscarded" && shown) {
        return Effect.zipRight(Queue.offer(queue, { _tag: "Note", note }), Effect.never)
      }
      return Queue.offer(queue, { _tag: "Note", note })
    }
    // a chunk of the upstream stream (one read) is one signal: stepped and written at once, not an event at a time
    const previews = (_attempt: number, events: ReadonlyArray<Generation.GenerationEvent>) => {
      if (!streaming) return Effect.void
      if (mode === "live" && !shown) shown = events.some((event) => codec.delta(context, event).length > 0)
      return Queue.offer(queue, { _tag: "Previews", events })
    }
    // the reply runs in the request's scope: a client that goes away interrupts it, and with it the upstream request
    const generate = Recovery.generate(generationRequest)
    const fiber = yield* (Option.isSome(plan) ? Effect.provideService(generate, Routes.Routes, plan.value) : generate)
      .pipe(
        Effect.provideService(RecoveryNotifications.RecoveryNotifications, { notify, previews }),
        Effect.tap((reply) =>
          Effect.sync(() => {
            stats.attempts = reply.attempts
            if (reply.route !== undefined) stats.route = reply.route.name
          })
        ),
        Effect.onExit((exit) =>
          Exit.isFailure(exit) && !Cause.isInterruptedOnly(exit.cause)
            ? Queue.offer(queue, { _tag: "End", error: Failure.squash(exit.cause) })
            : Effect.void
        ),
        Effect.forkScoped
      )

    if (!streaming) {
      const exit = yield* Fiber.await(fiber)
      if (Exit.isSuccess(exit)) {
        const reply = exit.value
        const served = { ...context, model: reply.model ?? reply.route?.model ?? model }
        return respond(HttpServerResponse.unsafeJson(codec.body(served, reply)))
      }
      return refuse(Failure.fromError(Failure.squash(exit.cause)))
    }

    const machine = new Preview.Machine(codec, mode, context)
    // hold: a keepalive tick every `keepalive`, beside the reply's signals, until the reply is over
    const ticker = mode === "hold"
      ? Option.some(
        yield* Effect.forkScoped(
          Effect.forever(Effect.zipRight(Effect.sleep(settings.keepalive), Queue.offer(queue, { _tag: "Tick" })))
        )
      )
      : Option.none()
    // every signal waiting in the queue (at least one) is stepped at once, and their frames go out as one write: a
    // reply's events arrive in bursts (a chunk holds the events of a read of the upstream body), and a step or a write
    // per event costs more than the event's frame itself (docs/performance.md, figure 9)
    const step: Effect.Effect<string | Preview.Fail> = Effect.map(
      Queue.takeBetween(queue, 1, Number.POSITIVE_INFINITY),
      (signals) => {
        let frames = ""
        for (const signal of signals) {
          for (const out of machine.step(signal)) {
            // a failure is only ever stepped before any frame: it is all the machine wrote
            if (typeof out !== "string") return out
            frames += out
          }
          if (machine.done) break
        }
        return frames
      }
    )
    // nothing is written before the first hard frame, so a reply that fails first gets its own status (until then, a
    // client that goes away closes the request's scope, which interrupts the reply)
    let first = ""
    while (first.length === 0) {
      const frames = yield* step
      if (typeof frames !== "string") return refuse(frames.mapped)
      first = frames
    }
    // after the first frame, the machine writes a failure in band: a step gives frames, possibly none
    const encoded = (frames: string | Preview.Fail) =>
      typeof frames === "string" && frames.length > 0 ? Chunk.of(encoder.encode(frames)) : Chunk.empty<Uint8Array>()
    const next = Effect.suspend(() => machine.done ? Effect.fail(Option.none()) : Effect.map(step, encoded))
    const frames = Stream.concat(Stream.succeed(encoder.encode(first)), Stream.repeatEffectChunkOption(next)).pipe(
      // the reply is over for the client (committed, or failed in band): what still runs upstream is stopped
      Stream.ensuring(
        Effect.zipRight(
          Fiber.interruptFork(fiber),
          Option.isSome(ticker) ? Fiber.interruptFork(ticker.value) : Effect.void
        )
      )
    )
    return respond(HttpServerResponse.stream(frames, {
      contentType: "text/event-stream; charset=utf-8",
      headers: sseHeaders(mode)
    }))
  })
