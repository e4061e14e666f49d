/**
 * The preview modes, once for every codec: a state machine that turns what a recovery scope reports (its
 * notifications, a keepalive tick, its end) into the frames a client is sent, in the request's mode.
 *
 * A frame is *hard* when writing it commits the response to a `200` stream (content, a keepalive, a rollback of shown
 * content, the terminal) and *soft* otherwise (a `reprise.attempt` event, a rollback of an attempt that showed
 * nothing): soft frames wait for the next hard frame, so that a reply that fails before anything was shown is answered
 * with the failure's own status and error body instead of an in-band error.
 *
 * @internal
 */
import * as Generation from "@reprise/core/Generation"
import type * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as Duration from "effect/Duration"
import * as RelayProtocol from "../RelayProtocol.js"
import type { Codec, Context, StreamEncoder } from "./downstream.js"
import * as Failure from "./failure.js"

/**
 * What the machine reads: a notification, a chunk's previews of the current attempt (`RecoveryNotifications.Service`'s
 * `previews`), a keepalive tick, the reply's end.
 *
 * @internal
 */
export type Signal =
  | { readonly _tag: "Note"; readonly note: RecoveryNotifications.Notification }
  | { readonly _tag: "Previews"; readonly events: ReadonlyArray<Generation.GenerationEvent> }
  | { readonly _tag: "Tick" }
  | { readonly _tag: "End"; readonly error: unknown }

/** The failure that ends a reply before any hard frame: the response is an error with its own status. @internal */
export interface Fail {
  readonly _tag: "Fail"
  readonly mapped: Failure.Mapped
}

/** What the machine writes: a frame, or the failure that ends a reply before any hard frame. @internal */
export type Out = string | Fail

/** The comment line of a keepalive in `hold` mode. @internal */
export const keepalive = ": reprise hold\n\n"

const routeOf = (route: Generation.RouteRef | undefined) =>
  route === undefined ? {} : { route: { index: route.index, name: route.name, model: route.model } }

/** @internal */
export class Machine {
  /** A hard frame went out: the response is a `200` stream. */
  started = false
  /** The reply ended (committed or failed): nothing more is written. */
  done = false
  private opened = false
  /** Content of the current attempt went out (`live`, `reset`). */
  private shown = false
  /** `hold`: the current attempt's previews, written after its commit. */
  private buffer: Array<Generation.GenerationEvent> = []
  /** `reset`: the rollback of the last discarded attempt, waiting for when and where the next one goes. */
  private pending: RelayProtocol.RollbackEvent | undefined
  private pendingShown = false
  /** The id and name of each tool call (by index) that the client was given, in the attempt being shown. */
  private announced = new Map<number, { id: string | undefined; name: string | undefined }>()
  /** The tool calls the current attempt started (the indices of its `ToolCallDelta`s), shown or held. */
  private startedCalls = new Set<number>()
  /** The number of the attempt being shown (the one a commit commits). */
  private attempt = 0
  private soft: Array<string> = []
  private out: Array<Out> = []
  private context: Context
  private readonly extra: Readonly<Record<string, unknown>>

  /** What writes this reply's frames: the codec's encoder for this reply, or the codec itself. */
  private readonly frames: Pick<StreamEncoder, "open" | "delta" | "terminal" | "failure"> & {
    readonly rollback?: StreamEncoder["rollback"] | undefined
  }

  constructor(
    readonly codec: Codec,
    readonly mode: RelayProtocol.PreviewMode,
    context: Context
  ) {
    this.context = context
    // a protocol whose frames depend on the ones before them encodes each reply with an encoder of its own
    this.frames = codec.encoder?.() ?? codec
    // a reset event on Chat Completions has the shape of a usage chunk (RelayProtocol)
    this.extra = codec.protocol === "openai-chat" ? { choices: [] } : {}
  }

  /** The frames (or the failure) that `signal` makes. */
  step(signal: Signal): ReadonlyArray<Out> {
    this.out = []
    if (!this.done) {
      switch (signal._tag) {
        case "Tick":
          this.hard(keepalive)
          break
        case "End":
          this.fail(signal.error)
          break
        case "Note":
          this.note(signal.note)
          break
        case "Previews":
          for (const event of signal.events) this.preview(event)
          break
      }
    }
    return this.out
  }

  private hard(text: string): void {
    if (text.length === 0) return
    for (const frame of this.soft) this.out.push(frame)
    this.soft = []
    this.out.push(text)
    this.started = true
  }

  private event(name: string, data: object): string {
    return `event: ${name}\ndata: ${JSON.stringify({ ...data, ...this.extra })}\n\n`
  }

  private open(context: Context): void {
    if (this.opened) return
    this.opened = true
    this.hard(this.frames.open(context))
  }

  /**
   * A provider repeats a tool call's id and name on every delta of it; a codec is given each once, on the first delta
   * that carries it (`undefined` after), as the wire protocols announce them.
   */
  private fresh(event: Generation.GenerationEvent): Generation.GenerationEvent {
    if (event._tag !== "ToolCallDelta") return event
    const known = this.announced.get(event.index) ?? { id: undefined, name: undefined }
    const id = known.id === undefined ? event.id : undefined
    const name = known.name === undefined ? event.name : undefined
    this.announced.set(event.index, { id: known.id ?? event.id, name: known.name ?? event.name })
    return id === event.id && name === event.name
      ? event
      : Generation.ToolCallDelta({ index: event.index, id, name, argumentsDelta: event.argumentsDelta })
  }

  private show(event: Generation.GenerationEvent): void {
    const frames = this.frames.delta(this.context, this.fresh(event))
    if (frames.length === 0) return
    this.open(this.context)
    this.hard(frames)
    this.shown = true
  }

  private preview(event: Generation.GenerationEvent): void {
    if (event._tag === "ToolCallDelta") this.startedCalls.add(event.index)
    if (this.mode === "hold") this.buffer.push(event)
    else this.show(event)
  }

  private flush(): void {
    if (this.pending === undefined) return
    const frame = this.event(RelayProtocol.EventName.rollback, this.pending)
    if (this.pendingShown) this.hard(frame)
    else this.soft.push(frame)
    this.pending = undefined
  }

  private fail(error: unknown): void {
    this.flush()
    const mapped = Failure.fromError(error)
    if (this.started) this.hard(this.frames.failure(this.context, mapped.failure))
    else this.out.push({ _tag: "Fail", mapped })
    this.done = true
  }

  private note(note: RecoveryNotifications.Notification): void {
    switch (note._tag) {
      case "AttemptStarted": {
        this.flush()
        this.buffer = []
        this.shown = false
        this.announced.clear()
        this.startedCalls.clear()
        this.attempt = note.attempt
        if (note.route !== undefined) this.context = { ...this.context, model: note.route.model }
        if (this.mode === "reset") {
          const data: RelayProtocol.AttemptEvent = {
            attempt: note.attempt,
            maxAttempts: note.maxAttempts,
            ...routeOf(note.route)
          }
          this.soft.push(this.event(RelayProtocol.EventName.attempt, data))
        }
        return
      }
      case "AttemptResumed":
        // the attempt continues the preview of the one before it: nothing is discarded
        this.attempt = note.attempt
        return
      case "Preview":
        this.preview(note.event)
        return
      case "AttemptDiscarded":
        this.buffer = []
        if (this.mode === "live") {
          // never a splice: once content went out, the first failure ends the reply
          if (this.shown) this.fail(note.error)
        } else if (this.mode === "reset") {
          this.flush()
          // the discarded attempt's items or blocks are closed; the next attempt's are new ones
          this.hard(this.frames.rollback?.(this.context) ?? "")
          this.pending = {
            attempt: note.attempt,
            discardedChars: note.discardedText.length,
            // the calls it started, complete or not: a call cut mid-arguments was shown all the same
            discardedToolCalls: Math.max(note.discardedToolCalls.length, this.startedCalls.size),
            reason: Failure.reason(note.error),
            ...(note.entry === undefined ? {} : { entry: note.entry })
          }
          this.pendingShown = this.shown
          this.shown = false
        }
        return
      case "RetryScheduled":
        if (this.pending !== undefined && note.resume === undefined) {
          this.pending = {
            ...this.pending,
            nextAttempt: note.nextAttempt,
            delayMs: Math.round(Duration.toMillis(note.delay))
          }
        }
        this.flush()
        return
      case "RouteSwitched":
        if (this.pending !== undefined) {
          this.pending = { ...this.pending, nextAttempt: note.nextAttempt, ...routeOf(note.to) }
        }
        this.flush()
        return
      case "Committed":
        this.commit(note.reply)
        return
      default:
        return
    }
  }

  private commit(reply: Generation.Reply): void {
    this.flush()
    const served: Context = { ...this.context, model: reply.model ?? reply.route?.model ?? this.context.model }
    if (this.mode === "reset") {
      const data: RelayProtocol.CommitEvent = {
        attempt: this.attempt > 0 ? this.attempt : reply.attempts,
        attempts: reply.attempts,
        ...routeOf(reply.route),
        ...(reply.model !== undefined ? { model: reply.model } : {}),
        ...(reply.usage._tag === "Some"
          ? { usage: { input_tokens: reply.usage.value.inputTokens, output_tokens: reply.usage.value.outputTokens } }
          : {}),
        ...(reply.ledger === undefined ? {} : { ledger: reply.ledger })
      }
      this.hard(this.event(RelayProtocol.EventName.commit, data))
    }
    if (this.mode === "hold") {
      this.context = served
      this.open(served)
      this.announced.clear()
      for (const event of this.buffer) {
        const frames = this.frames.delta(served, this.fresh(event))
        if (frames.length > 0) this.hard(frames)
      }
      this.buffer = []
    } else {
      this.open(this.context)
    }
    this.hard(this.frames.terminal(served, reply))
    this.done = true
  }
}
