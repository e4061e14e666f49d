/**
 * One turn of the CLI: `Chat.turn` under recovery, with its commits rendered and kept in the session file. Shared
 * by `chat` (one turn) and `repl` (one turn per line).
 *
 * What a turn commits, and when, is `Chat.turn`'s rule (the user's message and the answers to interrupted tool calls
 * with the first committed reply); this module only writes each commit to the session, scrubbed of the key, and
 * renders it. A commit is rendered after it is written: text on stdout in plain mode is text the session holds.
 *
 * @since 0.1.0
 */
import type * as FileSystem from "@effect/platform/FileSystem"
import * as Budget from "@reprise/core/Budget"
import * as Chat from "@reprise/core/Chat"
import * as Circuit from "@reprise/core/Circuit"
import type * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import * as Policy from "@reprise/core/Policy"
import * as Prices from "@reprise/core/Prices"
import type * as Provider from "@reprise/core/Provider"
import * as Recovery from "@reprise/core/Recovery"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import type * as Routes from "@reprise/core/Routes"
import type * as Tool from "@reprise/core/Tool"
import * as Transcript from "@reprise/core/Transcript"
import type * as FleetOptions from "@reprise/fleet/FleetOptions"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as Cause from "effect/Cause"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Exit from "effect/Exit"
import { identity } from "effect/Function"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Output from "./Output.js"
import * as Render from "./Render.js"
import * as Sanitize from "./Sanitize.js"
import type * as Settings from "./Settings.js"

// Built in `Cli.main`'s uninterruptible region: the import is a local module, and RedisFleet's waits on Redis are
// interruptible and bounded (`connectTimeout`), so building never blocks and Ctrl-C ends it.
const fleetLayer = (fleet: FleetOptions.Options | undefined) =>
  fleet === undefined ? Layer.empty : Layer.unwrapEffect(
    Effect.map(Effect.promise(() => import("@reprise/fleet/RedisFleet")), (RedisFleet) => RedisFleet.layer(fleet))
  )

/**
 * The provider layer for the settings' protocol over the undici client, with the budget and wait settings, and the
 * fleet's shared limits when `--fleet` names one (its module, and the Redis client, load only then), and the user's
 * prices (`--prices`, `REPRISE_PRICES`) for the ledger's costs. With fallback routes (`--fallback`), a plan of routes
 * instead ({@link routesLayer}) and the routes' circuits.
 *
 * This is the README's composition ("Composing the layers") with the values already read: `Settings.resolve` read
 * the attempts, the deadline, the backoff, the timeouts and the reply bound with the very Configs that
 * `Budget.layerConfig`, `Policy.layerConfig` and `HttpProvider.layerConfig` read (`Budget.config`, `Policy.config`,
 * `ProviderOptions.idleTimeoutConfig`, …), and the fleet's with `FleetOptions`' Configs, over the flags in front of
 * the environment, and failed with a usage error before anything was opened. Here they are provided as values
 * (`Budget.layer`, `Policy.layer`, `RedisFleet.layer`), which is also how `reprise demo` gives its own; no variable,
 * default or range is declared in the CLI.
 *
 * The circuits of a plan are the process's own, in memory (`Circuit.layerMemory` with `--circuit-threshold` and
 * `--circuit-cooldown`), unless `--fleet` names a fleet: the fleet's layer is built over them and its `Circuit`,
 * shared over Redis with the same settings (`FleetOptions.circuit`), takes their place.
 *
 * @since 0.1.0
 * @category layers
 */
export const providerLayer = (settings: Settings.Settings) =>
  Layer.mergeAll(
    settings.fallbacks.length === 0 ? singleLayer(settings) : routesLayer(settings),
    Budget.layer({ maxAttempts: settings.maxAttempts, deadline: settings.deadline }),
    Policy.layer({ backoffBase: settings.backoffBase, backoffMax: settings.backoffMax }),
    Prices.layer(settings.prices),
    settings.fallbacks.length === 0
      ? fleetLayer(settings.fleet)
      : Layer.provideMerge(fleetLayer(settings.fleet), Circuit.layerMemory(settings.circuit))
  )

const optionsOf = (settings: Settings.Settings): Omit<HttpProvider.Options, "apiKey"> => ({
  firstByteTimeout: settings.firstByteTimeout,
  idleTimeout: settings.idleTimeout,
  firstTokenTimeout: Option.getOrUndefined(settings.firstTokenTimeout),
  maxReplyBytes: settings.maxReplyBytes,
  streamUsage: settings.streamUsage
})

/** No plan: the one provider of the settings, as without routes. */
const singleLayer = (settings: Settings.Settings): Layer.Layer<Provider.Provider> =>
  HttpProvider.layerUndici(settings.protocol, {
    apiKey: settings.apiKey,
    baseUrl: settings.baseUrl,
    ...optionsOf(settings)
  })

/**
 * The plan of routes of the settings (`HttpProvider.layerRoutes`): the primary (`--provider`, `--model`,
 * `--base-url`, the key, `--route-attempts`, `--context-window`), then each fallback in order; one HTTP provider per
 * route, over one undici client, each with the same timeouts and reply bound. Provides `Routes` and the primary's
 * provider as `Provider`.
 *
 * @since 0.1.0
 * @category layers
 */
export const routesLayer = (settings: Settings.Settings): Layer.Layer<Routes.Routes | Provider.Provider> =>
  HttpProvider.layerRoutes([
    {
      protocol: settings.protocol,
      model: settings.model,
      apiKey: settings.apiKey,
      baseUrl: settings.baseUrl,
      attempts: Option.getOrUndefined(settings.routeAttempts),
      contextWindow: Option.getOrUndefined(settings.contextWindow),
      ...optionsOf(settings)
    },
    ...settings.fallbacks.map((fallback): HttpProvider.RouteSpec => ({
      protocol: fallback.protocol,
      model: fallback.model,
      apiKey: fallback.apiKey,
      baseUrl: fallback.baseUrl,
      attempts: fallback.attempts,
      contextWindow: fallback.contextWindow,
      ...optionsOf(settings)
    }))
  ])

/**
 * What {@link run} returns.
 *
 * @since 0.1.0
 * @category models
 */
export interface Result {
  /**
   * The messages the turn committed, in order, as they were appended to the session: empty when it committed nothing,
   * else the turn's opening first (the error results of tool calls an earlier turn left unanswered, the user's
   * prompt). Kept whatever the outcome: a turn that fails after a commit has still committed it.
   */
  readonly committed: ReadonlyArray<Message.Message>
  /** The turn's final reply (`Chat.TurnResult.reply`), or the failure that ended it. */
  readonly result: Either.Either<Generation.Reply, unknown>
  /** The turn's renderer, for its error. */
  readonly render: Render.Render
}

/**
 * Runs one turn over the committed `history`.
 *
 * A commit (its append to the session and its rendering) is never cut short by an interruption (`Chat.step`
 * runs it uninterruptibly). Run the turn in an uninterruptible region and pass that region's `restore` as
 * `interruptible`: the step is interruptible, the rest is not, and an interruption that comes after the final reply
 * was committed (while the step was returning) is not a failure: the turn committed, and `result` says so.
 *
 * @since 0.1.0
 * @category turns
 */
export const run = (
  settings: Settings.Settings,
  history: ReadonlyArray<Message.Message>,
  prompt: string,
  interruptible: <A, E, R>(self: Effect.Effect<A, E, R>) => Effect.Effect<A, E, R> = identity
) =>
  Effect.gen(function*() {
    const output = yield* Output.Output
    // every route's key: a fallback's key is as secret as the primary's
    const sanitizer = Sanitize.make([settings.apiKey, ...settings.fallbacks.map((fallback) => fallback.apiKey)])
    const render = yield* Render.make(Render.mode(settings.json, output.isTTY), sanitizer, settings.model)
    // What the session holds of this turn: Chat.turn returns it only when the turn ends well
    const committed: Array<Message.Message> = []
    // The final reply once it is committed, for a turn interrupted after it (Chat.turn then returns nothing)
    let final: Generation.Reply | undefined
    const persist = (messages: ReadonlyArray<Message.Message>) =>
      Option.match(settings.session, {
        onNone: () => Effect.void,
        // the session file is written by reprise: no part of the key in it, whatever the model sent back
        onSome: (path) => Transcript.append(path, messages.map(sanitizer.message))
      }).pipe(Effect.tap(() => Effect.sync(() => void committed.push(...messages))))
    const onCommit = (commit: Chat.Commit) =>
      Effect.tap(render.commit(commit), () => {
        if (commit._tag === "Reply" && commit.reply.toolCalls.length === 0) final = commit.reply
      })
    const step = Chat.turn(history, prompt, {
      model: settings.model,
      system: Option.getOrUndefined(settings.system),
      maxTokens: Option.getOrUndefined(settings.maxTokens),
      // --background: every reply of the turn in the provider's background mode (ignored where there is none)
      background: settings.background,
      persist,
      onCommit
    }).pipe(Effect.provideService(RecoveryNotifications.RecoveryNotifications, render.notifications))
    // the countdown of a backoff is cleared however the step ends (committed, failed or interrupted)
    const exit = yield* Effect.exit(
      interruptible((settings.recovery ? step : Recovery.disabled(step)).pipe(Effect.ensuring(render.stop)))
    )
    const result = (result: Either.Either<Generation.Reply, unknown>): Result => ({ committed, result, render })
    if (Exit.isSuccess(exit)) return result(Either.right(exit.value.reply))
    // interrupted once the final reply was committed: the turn is done, and nothing of it was lost
    if (final !== undefined && Cause.isInterruptedOnly(exit.cause)) return result(Either.right(final))
    const failure = Cause.failureOption(exit.cause)
    if (Option.isSome(failure) && !Cause.isInterrupted(exit.cause)) return result(Either.left(failure.value))
    return yield* Effect.failCause(Cause.stripFailures(exit.cause))
  })

/**
 * @since 0.1.0
 * @category models
 */
export type Requirements = Output.Output | Tool.Toolkit | FileSystem.FileSystem
