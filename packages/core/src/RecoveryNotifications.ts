/**
 * `RecoveryNotifications` is how a consumer that shows previews learns what a recovery scope is doing. For each
 * reply it receives, in order:
 *
 * 1. `AttemptStarted` for every physical send, or `AttemptResumed` for one that continues the response of the
 *    attempt before it (see `Resumption`),
 * 2. `Preview` for each event of that attempt (attempt-local, not committed), or, for a listener that takes them in
 *    batches ({@link Service.previews}), the same events a chunk at a time,
 * 3. on failure `AttemptDiscarded` (what the attempt had shown), then `RetryScheduled` when it will be replayed;
 *    or, when the next attempt continues the same response, `RetryScheduled` with `resume` and no discard: the
 *    preview is kept, and the continuation's previews extend it; or, with a plan of routes (`Routes`), `RouteSwitched`
 *    when the next attempt goes to another route (after `AttemptDiscarded` when the route had sent),
 * 4. finally `Committed`, or `Exhausted` when recovery gave up, or `Failed` when the failure was not replayable.
 *
 * With a fleet (`FleetLimits`), `FleetPaused` comes before a send that waits for a pause other processes' pushback
 * set, and `FleetUnavailable` / `FleetRestored` say, once each, that the fleet's store went away (the scope goes on
 * with its local Budget) or came back.
 *
 * A background response that recovery leaves behind (it replays instead, gives up, or is interrupted) is cancelled on
 * the server, and `ResponseCancelled` says how that went.
 *
 * A consumer resets its attempt-local buffers on `AttemptDiscarded`, never on `AttemptResumed`. By default
 * notifications go nowhere; bind them with {@link layerCallback}, {@link layerQueue} or {@link layerPubSub}.
 *
 * @since 0.1.0
 */
import * as Context from "effect/Context"
import * as Data from "effect/Data"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as PubSub from "effect/PubSub"
import type * as Queue from "effect/Queue"
import type * as Generation from "./Generation.js"
import type * as Ledger from "./Ledger.js"
import type * as Message from "./Message.js"
import type * as Policy from "./Policy.js"
import type * as Resumption from "./Resumption.js"
import type * as Routes from "./Routes.js"

/**
 * @since 0.1.0
 * @category models
 */
export type Notification = Data.TaggedEnum<{
  AttemptStarted: {
    readonly attempt: number
    readonly maxAttempts: number
    /** With a plan of routes (see `Routes`): the route the attempt is sent to. */
    readonly route?: Generation.RouteRef | undefined
  }
  /**
   * The send `attempt` continues response `responseId` after its event `fromSequence`: what was previewed stays,
   * and this attempt's previews come after it (`mode`: streaming the events again, or polling the response).
   */
  AttemptResumed: {
    readonly attempt: number
    readonly maxAttempts: number
    readonly responseId: string
    readonly fromSequence: number
    readonly mode: Resumption.Mode
  }
  Preview: { readonly attempt: number; readonly event: Generation.GenerationEvent }
  AttemptDiscarded: {
    readonly attempt: number
    /** The preview text the failed attempt had produced, now void. */
    readonly discardedText: string
    /** Tool calls the failed attempt had completed; none of them was run. */
    readonly discardedToolCalls: ReadonlyArray<Message.ToolCall>
    readonly error: unknown
    /** The attempt's ledger entry: how far it got and what it cost (see `Ledger`). */
    readonly entry?: Ledger.Entry | undefined
  }
  RetryScheduled: {
    readonly nextAttempt: number
    readonly delay: Duration.Duration
    readonly delaySource: Policy.DelaySource
    readonly remainingAttempts: number
    /** Time left until the deadline when the retry was scheduled. */
    readonly remainingTime: Duration.Duration
    /** Set when the next attempt continues the failed attempt's response instead of replaying it ({@link Resume}). */
    readonly resume?: Resume | undefined
  }
  /**
   * The next attempt goes to route `to` (see `Routes`): route `from` was left for `reason`, at once (no backoff: the
   * next route does not share the wait). `error` is the failure that left it; absent when `from` was skipped without
   * a send, its circuit open.
   */
  RouteSwitched: {
    readonly from: Generation.RouteRef
    readonly to: Generation.RouteRef
    readonly reason: Routes.SwitchReason
    readonly error?: unknown
    readonly nextAttempt: number
    readonly remainingAttempts: number
    /** Time left until the deadline when the switch was made. */
    readonly remainingTime: Duration.Duration
  }
  Committed: { readonly reply: Generation.Reply }
  /**
   * Recovery gave up: attempts or deadline exhausted, or a `Retry-After` past the deadline. `ledger`: what every
   * attempt cost (see `Ledger`).
   */
  Exhausted: { readonly error: unknown; readonly ledger?: Ledger.Ledger | undefined }
  /** A failure that is not replayed (permanent, blocked by external effects, replay disabled, a hook). */
  Failed: {
    readonly error: unknown
    /** Characters of preview the attempt that failed had shown (0 when it was not sent, or a hook failed first). */
    readonly partialOutputChars?: number | undefined
    /** What every attempt cost (see `Ledger`). */
    readonly ledger?: Ledger.Ledger | undefined
  }
  /** The fleet is paused by server pushback: attempt `attempt` waits `delay` before it is sent. */
  FleetPaused: {
    readonly attempt: number
    readonly delay: Duration.Duration
    /** The HTTP status whose `Retry-After` set the pause, when known. */
    readonly status: number | undefined
    /** Time left until the deadline when the wait began. */
    readonly remainingTime: Duration.Duration
  }
  /** The fleet's store cannot be reached: until it is back, this process uses its local Budget only. */
  FleetUnavailable: { readonly detail: string }
  /** The fleet's store is back: limits are shared again. */
  FleetRestored: {}
  /**
   * Background response `responseId` was left behind and cancelled on the server: `error` is set when the cancel
   * failed (recovery goes on either way).
   */
  ResponseCancelled: { readonly responseId: string; readonly error: unknown }
}>

/**
 * What `RetryScheduled` says of a continuation: the response and the event it continues after, how, and why the
 * attempt was cut. Nothing was discarded: `keptChars` of preview stay.
 *
 * @since 0.1.0
 * @category models
 */
export interface Resume {
  readonly responseId: string
  readonly fromSequence: number
  readonly mode: Resumption.Mode
  readonly keptChars: number
  readonly error: unknown
}

/**
 * @since 0.1.0
 * @category constructors
 */
export const Notification = Data.taggedEnum<Notification>()

/**
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly notify: (notification: Notification) => Effect.Effect<void>
  /**
   * Optional: the listener takes an attempt's previews in batches. When it is set, no `Preview` reaches `notify`:
   * each chunk the provider's stream yields (the events one network read decoded) comes as one call with the events
   * of that chunk that are surfaced, in order, at the place where their `Preview`s would have come (after the
   * attempt's `AttemptStarted`, before what ends it). A chunk that surfaces nothing makes no call. The events, their
   * order and their attempts are exactly those of the `Preview`s a listener without it receives.
   *
   * With a chunk hook (`Hooks.onChunk`), which runs after each event's preview, every surfaced event is a batch of
   * its own, so that what the listener saw still ends where a failing hook stopped the attempt.
   *
   * @since 0.1.0
   */
  readonly previews?:
    | ((attempt: number, events: ReadonlyArray<Generation.GenerationEvent>) => Effect.Effect<void>)
    | undefined
}

/**
 * @since 0.1.0
 * @category tags
 */
export class RecoveryNotifications extends Context.Reference<RecoveryNotifications>()(
  "@reprise/core/RecoveryNotifications",
  { defaultValue: (): Service => silent }
) {}

const silent: Service = { notify: () => Effect.void }

/**
 * Whether `service` is the default one, which drops every notification. `Recovery` then builds none: it takes each
 * chunk of a stream in one step instead of one effect and one `Preview` per event.
 *
 * @since 0.1.0
 * @category guards
 */
export const isSilent = (service: Service): boolean => service === silent

/**
 * Delivers every notification to a callback, in order, before the scope goes on.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerCallback = (f: (notification: Notification) => Effect.Effect<void>): Layer.Layer<never> =>
  Layer.succeed(RecoveryNotifications, { notify: f })

/**
 * Offers every notification to a queue (a bounded queue applies back-pressure to the scope).
 *
 * @since 0.1.0
 * @category layers
 */
export const layerQueue = (queue: Queue.Enqueue<Notification>): Layer.Layer<never> =>
  Layer.succeed(RecoveryNotifications, { notify: (n) => Effect.asVoid(queue.offer(n)) })

/**
 * Publishes every notification to a PubSub, for several consumers.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPubSub = (pubsub: PubSub.PubSub<Notification>): Layer.Layer<never> =>
  Layer.succeed(RecoveryNotifications, { notify: (n) => Effect.asVoid(pubsub.publish(n)) })

/**
 * Sends one notification to the bound consumer.
 *
 * @since 0.1.0
 * @category accessors
 */
export const notify = (notification: Notification): Effect.Effect<void> =>
  Effect.flatMap(RecoveryNotifications, (service) => service.notify(notification))
