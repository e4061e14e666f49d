/**
 * `@effect/ai`'s `LanguageModel.LanguageModel`, built with `LanguageModel.make` over reprise's `Provider` and
 * `Recovery`: an app that used `OpenAiLanguageModel.layer(...)` swaps that one Layer for {@link layer} (over any
 * reprise provider, e.g. `HttpProvider.layerUndici`) or {@link layerConfig} and keeps its code.
 *
 * - `generateText` / `generateObject`: one committed reply per call, with the whole recovery contract (the
 *   {@link Budget.Budget} of the scope, its deadline, `Retry-After`, permanent errors, overflow, cancellation).
 *   `@effect/ai` runs the `Toolkit`'s handlers on the returned parts, so a tool runs only from a committed reply, once.
 * - `streamText`: the {@link Previews} mode decides what is shown before the commit (see {@link Previews}).
 * - A `Chat` turn of several calls shares one budget when wrapped in {@link turn}.
 *
 * Settings are read per call: `BudgetSettings`, `PolicySettings`, `RecoveryNotifications`, `OverflowStrategy` and
 * {@link CurrentPreviews} provided where the call runs win over those the layer was built with, which win over the
 * defaults. The provider is always the layer's, and so is the plan of routes.
 *
 * A plan of routes (`Routes` of `@reprise/core`: providers and models tried in order, a route left only before
 * commit) is followed when the model is built with one: {@link layerPlan} from a `Routes.Plan`, {@link layerRoutes}
 * from the routes' HTTP options, or {@link layer} built where a `Routes` layer is provided. The response metadata
 * names the model that served (`modelId`), and the finish part's `metadata.reprise.route` the route.
 *
 * What a reply cost is in its finish part's `metadata.reprise.ledger`: one entry per attempt, discarded ones included
 * (see `ResponseMapping`); a failed reply's is in `RecoveryAiError.facts(error).ledger`.
 *
 * @since 0.1.0
 */
import type * as AiError from "@effect/ai/AiError"
import * as LanguageModel from "@effect/ai/LanguageModel"
import type * as Response from "@effect/ai/Response"
import type * as HttpClient from "@effect/platform/HttpClient"
import * as Budget from "@reprise/core/Budget"
import * as Classification from "@reprise/core/Classification"
import type * as Generation from "@reprise/core/Generation"
import type * as Ledger from "@reprise/core/Ledger"
import type * as Message from "@reprise/core/Message"
import * as Overflow from "@reprise/core/Overflow"
import * as Policy from "@reprise/core/Policy"
import * as Prices from "@reprise/core/Prices"
import * as Provider from "@reprise/core/Provider"
import * as Recovery from "@reprise/core/Recovery"
import * as RecoveryError from "@reprise/core/RecoveryError"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as Routes from "@reprise/core/Routes"
import * as TransportError from "@reprise/core/TransportError"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as ProviderOptions from "@reprise/providers/ProviderOptions"
import * as Cause from "effect/Cause"
import * as Chunk from "effect/Chunk"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as FiberRef from "effect/FiberRef"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Queue from "effect/Queue"
import * as Stream from "effect/Stream"
import * as Take from "effect/Take"
import { AttemptParts } from "./internal/attemptParts.js"
import * as PromptMapping from "./PromptMapping.js"
import * as RecoveryAiError from "./RecoveryAiError.js"
import * as ResponseMapping from "./ResponseMapping.js"

/** How many committed replies' reasoning parts a model remembers for `Chat` histories (see `PromptMapping.Recall`). */
const maxRemembered = 256

/**
 * What `streamText` shows before an attempt commits. `@effect/ai` has no part that retracts output, so:
 *
 * - `"committed"` (default): an attempt's parts are held until its terminal event; a replay is invisible and the
 *   stream shows exactly the committed reply, at the price of showing nothing until then.
 * - `"live"`: parts flow as they arrive. A failed attempt that showed parts is replayed only when the app bound
 *   `RecoveryNotifications` (its `AttemptDiscarded` tells the app to drop that attempt's parts, delivered in order
 *   with the stream); without it, that failure fails the stream (`replayBlocked: "ExternalEffects"`).
 * - `{ holdChars: N }`: the first N characters (text and reasoning) of each attempt are held; a failure inside that
 *   window replays invisibly, a later one behaves as in `"live"`.
 *
 * In every mode `tool-call` parts (which `@effect/ai` runs at once), the `*-end` parts and `finish` come only with
 * the commit.
 *
 * @since 0.1.0
 * @category models
 */
export type Previews = "committed" | "live" | { readonly holdChars: number }

/**
 * The characters of each attempt that `previews` holds back (`Infinity` for `"committed"`). Throws a `RangeError`
 * for a `holdChars` that is not a whole number >= 0.
 *
 * @since 0.1.0
 * @category models
 */
export const holdChars = (previews: Previews): number => {
  if (previews === "committed") return Number.POSITIVE_INFINITY
  if (previews === "live") return 0
  if (!Number.isInteger(previews.holdChars) || previews.holdChars < 0) {
    throw new RangeError(`holdChars must be an integer >= 0, got ${previews.holdChars}`)
  }
  return previews.holdChars
}

/**
 * The {@link Previews} mode of `streamText` calls. Set it for one stream with {@link withPreviews}, for the layer
 * with the `previews` option.
 *
 * @since 0.1.0
 * @category settings
 */
export class CurrentPreviews extends Context.Reference<CurrentPreviews>()(
  "@reprise/ai/RecoveringLanguageModel/CurrentPreviews",
  { defaultValue: (): Previews => "committed" }
) {}

/**
 * Runs `self` (a `streamText` stream, or an effect consuming one) with the given {@link Previews} mode.
 *
 * @since 0.1.0
 * @category settings
 */
export const withPreviews = (previews: Previews) => {
  holdChars(previews)
  return <A, E, R>(self: Stream.Stream<A, E, R>): Stream.Stream<A, E, R> =>
    Stream.provideService(self, CurrentPreviews, previews)
}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The model every request names. */
  readonly model: string
  /** The token limit of every request (Anthropic needs one: the provider's `defaultMaxTokens` otherwise). */
  readonly maxTokens?: number | undefined
  /** The default {@link Previews} mode of `streamText`. Default `"committed"`. */
  readonly previews?: Previews | undefined
  /**
   * Every request in the provider's background mode, where its protocol has one (`openai-responses`): a cut
   * stream is continued as the same response, its parts are not discarded (see `Generation.GenerationRequest`).
   */
  readonly background?: boolean | undefined
}

interface Endpoint {
  readonly url: string
  readonly urlParams: ReadonlyArray<readonly [string, string]>
}

const LayerBudgetSettings: unique symbol = Symbol.for("@reprise/ai/RecoveringLanguageModel/LayerBudgetSettings")

/** A `LanguageModel` of this module: with the budget settings of the context it was built in, for {@link turn}. */
interface Built extends LanguageModel.Service {
  readonly [LayerBudgetSettings]: Budget.Settings
}

const isBuilt = (service: LanguageModel.Service): service is Built => LayerBudgetSettings in service

const unbound = Context.get(Context.empty(), RecoveryNotifications.RecoveryNotifications)

type Item =
  | { readonly _tag: "Part"; readonly part: Response.StreamPartEncoded }
  | { readonly _tag: "Notify"; readonly notification: RecoveryNotifications.Notification }

const build = (
  provider: Provider.Service,
  built: Context.Context<never>,
  options: Options,
  endpoint: Endpoint,
  plan: Option.Option<Routes.Plan>
): Effect.Effect<LanguageModel.Service> => {
  if (options.previews !== undefined) holdChars(options.previews)
  const layerContext = options.previews === undefined
    ? built
    : Context.add(built, CurrentPreviews, options.previews)
  // what the caller provides wins over what the layer was built with; the provider and the plan are always the
  // layer's (a caller's plan is not followed by a model built without one)
  const withPlan: (context: Context.Context<never>) => Context.Context<never> = Option.match(plan, {
    onNone: () => (context) => Context.omit(Routes.Routes)(context) as Context.Context<never>,
    onSome: (plan) => (context) => Context.add(context, Routes.Routes, plan) as Context.Context<never>
  })
  const contextFor = (caller: Context.Context<never>): Context.Context<never> =>
    withPlan(Context.add(Context.merge(layerContext, caller), Provider.Provider, provider) as Context.Context<never>)
  const provide = <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E> =>
    Effect.mapInputContext(effect, contextFor as (caller: Context.Context<never>) => Context.Context<R>)
  const provideStream = <A, E, R>(stream: Stream.Stream<A, E, R>): Stream.Stream<A, E> =>
    Stream.mapInputContext(stream, contextFor as (caller: Context.Context<never>) => Context.Context<R>)
  const settings: PromptMapping.RequestSettings = {
    model: options.model,
    maxTokens: options.maxTokens,
    background: options.background
  }
  // The reasoning parts of the replies committed here, by their reasoning text, for a `Chat` whose history kept the
  // text but not the parts (see `PromptMapping.Recall`). Bounded: the oldest entries go first.
  const remembered = new Map<string, ReadonlyArray<Message.ReasoningPart>>()
  const remember = (reply: Generation.Reply): void => {
    const parts = reply.reasoningParts
    if (parts === undefined || parts.length === 0 || reply.reasoning.length === 0) return
    remembered.delete(reply.reasoning)
    remembered.set(reply.reasoning, parts)
    if (remembered.size > maxRemembered) remembered.delete(remembered.keys().next().value!)
  }
  const recall: PromptMapping.Recall = (text) => remembered.get(text)
  const origin = (method: string, attempts: number, ledger?: Ledger.Ledger): RecoveryAiError.Origin => ({
    ...endpoint,
    method,
    attempts,
    ledger
  })

  const generateText = (
    providerOptions: LanguageModel.ProviderOptions
  ): Effect.Effect<Array<Response.PartEncoded>, AiError.AiError> =>
    provide(Effect.gen(function*() {
      const method = providerOptions.responseFormat.type === "json" ? "generateObject" : "generateText"
      const request = yield* PromptMapping.toRequest(providerOptions, settings, method, recall)
      const app = yield* RecoveryNotifications.RecoveryNotifications
      let attempts = 0
      // what the reply's attempts cost, told when recovery ends in a failure
      let ledger: Ledger.Ledger | undefined
      const counting: RecoveryNotifications.Service = {
        notify: (n) => {
          if (n._tag === "AttemptStarted" || n._tag === "AttemptResumed") attempts++
          else if (n._tag === "Exhausted" || n._tag === "Failed") ledger = n.ledger
          return app.notify(n)
        }
      }
      const reply = yield* Overflow.generate(request).pipe(
        Effect.provideService(RecoveryNotifications.RecoveryNotifications, counting),
        Effect.mapError((error) => RecoveryAiError.fromRecoveryError(error, origin(method, attempts, ledger)))
      )
      remember(reply)
      return ResponseMapping.fromReply(reply, provider.protocol)
    }))

  const streamText = (
    providerOptions: LanguageModel.ProviderOptions
  ): Stream.Stream<Response.StreamPartEncoded, AiError.AiError> =>
    provideStream(Stream.unwrapScoped(Effect.gen(function*() {
      const request = yield* PromptMapping.toRequest(providerOptions, settings, "streamText", recall)
      const hold = holdChars(yield* CurrentPreviews)
      const app = yield* RecoveryNotifications.RecoveryNotifications
      const bound = app !== unbound
      const replay = yield* FiberRef.get(Recovery.currentReplay)
      const queue = yield* Effect.acquireRelease(
        Queue.unbounded<Take.Take<Item, AiError.AiError>>(),
        Queue.shutdown
      )
      let attempts = 0
      let ledger: Ledger.Ledger | undefined
      let current: AttemptParts | undefined
      const offer = (items: ReadonlyArray<Item>): Effect.Effect<void> =>
        items.length === 0 ? Effect.void : Queue.offer(queue, Take.chunk(Chunk.fromIterable(items)))
      const parts = (ps: ReadonlyArray<Response.StreamPartEncoded>): Array<Item> =>
        ps.map((part) => ({ _tag: "Part", part }))
      // the app's notifications travel in the stream, so that it hears of a discard after the parts it concerns
      const told = (notification: RecoveryNotifications.Notification): Array<Item> =>
        bound ? [{ _tag: "Notify", notification }] : []

      const notify = (n: RecoveryNotifications.Notification): Effect.Effect<void> => {
        switch (n._tag) {
          case "AttemptStarted": {
            attempts++
            current = new AttemptParts(n.attempt, hold)
            return offer(told(n))
          }
          case "AttemptResumed":
            // the same response goes on: its parts continue those of the attempt it resumes
            attempts++
            return offer(told(n))
          case "Preview":
            return offer([...told(n), ...parts(current?.add(n.event) ?? [])])
          case "AttemptDiscarded": {
            const shown = current?.shown === true
            current = undefined
            if (shown && !bound && replay && TransportError.isTransportError(n.error)) {
              const error = n.error
              if (Classification.isRetryable(error)) {
                // Nobody can take back what this attempt showed: the stream fails, and the recovery fiber waits
                // here, never sending again, until the stream's scope interrupts it.
                const failure = RecoveryAiError.fromRecoveryError(
                  RecoveryError.withAttemptFacts(error, {
                    partialOutputChars: n.discardedText.length,
                    replayBlocked: "ExternalEffects"
                  }),
                  origin("streamText", attempts)
                )
                return Effect.zipRight(Queue.offer(queue, Take.fail(failure)), Effect.never)
              }
            }
            return offer(told(n))
          }
          case "Committed":
            remember(n.reply)
            return offer([...parts(current?.commit(n.reply, provider.protocol) ?? []), ...told(n)])
          case "Exhausted":
          case "Failed":
            ledger = n.ledger
            return offer(told(n))
          default:
            return offer(told(n))
        }
      }

      yield* Overflow.generate(request).pipe(
        Effect.provideService(RecoveryNotifications.RecoveryNotifications, { notify }),
        Effect.matchCauseEffect({
          onSuccess: () => Queue.offer(queue, Take.end),
          onFailure: (cause) =>
            Queue.offer(
              queue,
              Take.failCause(
                Cause.map(
                  cause,
                  (error) => RecoveryAiError.fromRecoveryError(error, origin("streamText", attempts, ledger))
                )
              )
            )
        }),
        Effect.forkScoped
      )

      // one item at a time: a notification reaches the app once the consumer has pulled every part before it
      return Stream.flattenTake(Stream.fromQueue(queue)).pipe(
        Stream.mapEffect((item): Effect.Effect<Option.Option<Response.StreamPartEncoded>> =>
          item._tag === "Part"
            ? Effect.succeed(Option.some(item.part))
            : Effect.as(app.notify(item.notification), Option.none())
        ),
        Stream.filterMap((part) => part)
      )
    })))

  return Effect.map(
    LanguageModel.make({ generateText, streamText }),
    (service): Built => ({ ...service, [LayerBudgetSettings]: Context.get(layerContext, Budget.BudgetSettings) })
  )
}

/**
 * The `LanguageModel` over the `Provider` in context, following the plan of routes in context when there is one
 * (`Routes.layer` provides both). The context it is built in (a `Budget.layer`, a `Policy.layer`, notifications…) is
 * its default for every call.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options): Effect.Effect<LanguageModel.Service, never, Provider.Provider> =>
  Effect.gen(function*() {
    const provider = yield* Provider.Provider
    const plan = yield* Effect.serviceOption(Routes.Routes)
    const built = yield* Effect.context<never>()
    return yield* build(provider, built, options, { url: `reprise:${provider.protocol}`, urlParams: [] }, plan)
  })

/**
 * `LanguageModel.LanguageModel` over the `Provider` in context, e.g.
 * `layer({ model }).pipe(Layer.provide(HttpProvider.layerUndici("anthropic", { apiKey })))`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options): Layer.Layer<LanguageModel.LanguageModel, never, Provider.Provider> =>
  Layer.effect(LanguageModel.LanguageModel, make(options))

/**
 * The options of a model that follows a plan: those of {@link Options}, the model defaulting to the primary route's
 * (each route asks for its own model).
 *
 * @since 0.1.0
 * @category models
 */
export interface PlanOptions extends Omit<Options, "model"> {
  /** The model the request names before a route replaces it; default the primary route's. */
  readonly model?: string | undefined
}

/**
 * `LanguageModel.LanguageModel` following `plan`: every call generates through `Recovery.generate` with the plan
 * (`Routes.layer`), its primary's provider as the `Provider`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerPlan = (
  plan: Routes.Plan,
  options: PlanOptions = {}
): Layer.Layer<LanguageModel.LanguageModel> =>
  layer({ ...options, model: options.model ?? plan.routes[0].model }).pipe(Layer.provide(Routes.layer(plan)))

/**
 * `LanguageModel.LanguageModel` following a plan of HTTP routes, in order, over one undici client
 * (`HttpProvider.layerRoutes`), e.g.
 * `layerRoutes([{ protocol: "openai-chat", model: "gpt-4.1", apiKey }, { protocol: "anthropic", model, apiKey }])`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerRoutes = (
  routes: readonly [HttpProvider.RouteSpec, ...Array<HttpProvider.RouteSpec>],
  options: PlanOptions = {}
): Layer.Layer<LanguageModel.LanguageModel> =>
  layer({ ...options, model: options.model ?? routes[0].model }).pipe(Layer.provide(HttpProvider.layerRoutes(routes)))

/**
 * @since 0.1.0
 * @category models
 */
export interface ConfigOptions {
  /** The protocol; default `REPRISE_PROVIDER`, else `openai-chat`. */
  readonly protocol?: ProviderOptions.Protocol | undefined
  /** The model; default `REPRISE_MODEL` (required then). */
  readonly model?: string | undefined
  readonly maxTokens?: number | undefined
  readonly previews?: Previews | undefined
  readonly background?: boolean | undefined
  /** Read the key from this variable instead of the protocol's (`OPENAI_API_KEY` / `ANTHROPIC_API_KEY`). */
  readonly apiKeyEnv?: string | undefined
}

const endpointOf = (protocol: ProviderOptions.Protocol, baseUrl: string): Endpoint => {
  const url = new URL(baseUrl)
  const path = protocol === "anthropic"
    ? "/v1/messages"
    : protocol === "openai-chat"
    ? "/chat/completions"
    : "/responses"
  const urlParams = [...url.searchParams.entries()]
  url.search = ""
  url.pathname = url.pathname.replace(/\/+$/, "") + path
  return { url: url.toString(), urlParams }
}

/**
 * `LanguageModel.LanguageModel` configured from the environment as the CLI is: the provider of `protocol` (key,
 * base URL, timeouts: see `ProviderOptions.config`), the model (`REPRISE_MODEL`), and the budget and waits
 * (`REPRISE_MAX_ATTEMPTS`, `REPRISE_DEADLINE`, `REPRISE_BACKOFF_BASE`, `REPRISE_BACKOFF_MAX`). A missing key or model,
 * or a bad value, is a `ConfigError` naming the variable.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig = (
  options: ConfigOptions = {}
): Layer.Layer<LanguageModel.LanguageModel, ConfigError.ConfigError, HttpClient.HttpClient> =>
  Layer.effect(
    LanguageModel.LanguageModel,
    Effect.gen(function*() {
      const protocol = options.protocol ??
        (yield* Config.literal(...ProviderOptions.protocols)("REPRISE_PROVIDER").pipe(
          Config.withDefault("openai-chat" as const)
        ))
      const model = options.model ?? (yield* Config.string("REPRISE_MODEL"))
      const resolved = yield* ProviderOptions.config(protocol, { apiKeyEnv: options.apiKeyEnv })
      const provider = yield* HttpProvider.make(protocol, resolved)
      const budget = yield* Budget.config
      const policy = yield* Policy.config
      const prices = yield* Prices.config
      const built = Context.add(
        Context.add(
          Context.add(yield* Effect.context<never>(), Budget.BudgetSettings, Budget.validateSettings(budget)),
          Policy.PolicySettings,
          policy
        ),
        Prices.Prices,
        prices
      )
      return yield* build(
        provider,
        built,
        { model, maxTokens: options.maxTokens, previews: options.previews, background: options.background },
        endpointOf(protocol, resolved.baseUrl ?? ProviderOptions.defaultBaseUrl(protocol)),
        Option.none()
      )
    })
  )

/**
 * Runs `self` (a user turn: several `generateText` calls of a `Chat`, with the tool calls between them) in one
 * recovery scope: every reply of the turn draws on one `Budget` (attempts and deadline), opened with the settings the
 * turn's calls would use. Inside an enclosing scope, that scope is reused.
 *
 * @since 0.1.0
 * @category scopes
 */
export const turn = <A, E, R>(self: Effect.Effect<A, E, R>): Effect.Effect<A, E, Exclude<R, Budget.Budget>> => {
  const scoped: Effect.Effect<A, E, Exclude<R, Budget.Budget>> = Budget.scoped(self)
  return Effect.contextWithEffect((caller: Context.Context<never>) => {
    const model = Context.getOption(caller, LanguageModel.LanguageModel)
    // the caller's settings win over those the model was built with, which win over the defaults
    const built = Option.isSome(model) && isBuilt(model.value)
      ? Context.make(Budget.BudgetSettings, model.value[LayerBudgetSettings])
      : Context.empty()
    const settings: Budget.Settings = Context.get(Context.merge(built, caller), Budget.BudgetSettings)
    return Effect.provideService(scoped, Budget.BudgetSettings, settings)
  })
}
