/**
 * The relay: an HTTP endpoint that speaks the OpenAI Chat Completions, OpenAI Responses and Anthropic Messages
 * protocols to its clients and runs each reply upstream with reprise's recovery (`Recovery.generate`): along the plan
 * of routes (`Routes`) in its context when there is one, else through the `Provider` in its context.
 *
 * | endpoint | answers |
 * |---|---|
 * | `POST /v1/chat/completions` | Chat Completions, streamed (`"stream": true`) or whole |
 * | `POST /v1/responses` | Responses (its codec; 501 until it is installed) |
 * | `POST /v1/messages` | Anthropic Messages (its codec; 501 until it is installed) |
 * | `GET /v1/models` | the plan's models (or {@link Options.model}) as OpenAI's model list |
 * | `GET /healthz` | `{"status":"ok"}` |
 * | `GET /` | the chat page |
 *
 * Each streamed reply is written in the request's preview mode (`X-Reprise-Preview: hold | live | reset`, default
 * {@link Options.preview}, itself `hold` by default): see `RelayProtocol` and docs/relay.md. A client that disconnects
 * interrupts its reply, and so the upstream request, at once; nothing is committed for it.
 *
 * The routes come from the relay's configuration, never from the request: the client's `model` goes to the primary
 * route (the provider, without a plan) and each fallback asks for its own. Upstream keys are the providers' and never
 * leave the process.
 *
 * Mount {@link router} (or {@link app}) in an app of your own, or run {@link layer} / {@link serve}: loopback by
 * default, and on any other address only with downstream keys ({@link Options.keys}, `REPRISE_SERVE_KEYS`).
 *
 * @since 0.1.0
 */
import * as NodeHttpServer from "@effect/platform-node/NodeHttpServer"
import * as HttpRouter from "@effect/platform/HttpRouter"
import * as HttpServer from "@effect/platform/HttpServer"
import type * as HttpServerError from "@effect/platform/HttpServerError"
import * as HttpServerRequest from "@effect/platform/HttpServerRequest"
import * as HttpServerResponse from "@effect/platform/HttpServerResponse"
import type * as Provider from "@reprise/core/Provider"
import * as Routes from "@reprise/core/Routes"
import * as Config from "effect/Config"
import type * as ConfigError from "effect/ConfigError"
import * as Console from "effect/Console"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Redacted from "effect/Redacted"
import * as Schema from "effect/Schema"
import * as Http from "node:http"
import * as AnthropicCodec from "./internal/codec/anthropic.js"
import * as ChatCodec from "./internal/codec/chat.js"
import * as ResponsesCodec from "./internal/codec/responses.js"
import type { Codec } from "./internal/downstream.js"
import * as Page from "./internal/page.js"
import * as Engine from "./internal/relay.js"
import type * as RelayProtocol from "./RelayProtocol.js"

/**
 * One line of the access log: a request, its status, the sends its reply made and the route that served it (or
 * was tried last), and its time. It never holds a key or a body.
 *
 * @since 0.1.0
 * @category models
 */
export interface AccessEntry extends Engine.AccessEntry {}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** The preview mode of a request without `X-Reprise-Preview`; default `hold`. */
  readonly preview?: RelayProtocol.PreviewMode | undefined
  /**
   * The bearer tokens a client must present (`Authorization: Bearer …` or `x-api-key`); none: no key is asked for.
   * {@link layer} reads `REPRISE_SERVE_KEYS` when this is absent.
   */
  readonly keys?: ReadonlyArray<string | Redacted.Redacted<string>> | undefined
  /** The largest request body, in bytes (413 above it); default {@link defaultMaxBodyBytes}. */
  readonly maxBodyBytes?: number | undefined
  /** Replies served at once (429 with `Retry-After: 1` beyond); default {@link defaultMaxConcurrent}. */
  readonly maxConcurrent?: number | undefined
  /** The interval of `hold` mode's keepalive comments; default {@link defaultKeepalive}. */
  readonly keepalive?: Duration.DurationInput | undefined
  /**
   * What `/v1/models` lists without a plan of routes. A request's own `model` goes to the primary route.
   */
  readonly model?: string | undefined
  /** Where the access log goes; default one line per request on stderr. */
  readonly accessLog?: ((entry: AccessEntry) => Effect.Effect<void>) | undefined
}

/**
 * {@link Options} and where to listen.
 *
 * @since 0.1.0
 * @category models
 */
export interface ServeOptions extends Options {
  /** Default `127.0.0.1`. Any other address requires keys. */
  readonly host?: string | undefined
  /** Default {@link defaultPort}; `0` picks a free port. */
  readonly port?: number | undefined
}

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultPort = 8787

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultMaxBodyBytes = 1024 * 1024

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultMaxConcurrent = 64

/**
 * @since 0.1.0
 * @category constants
 */
export const defaultKeepalive: Duration.Duration = Duration.seconds(5)

/**
 * The environment variable of the downstream keys: bearer tokens separated by commas or spaces.
 *
 * @since 0.1.0
 * @category config
 */
export const keysVariable = "REPRISE_SERVE_KEYS"

/**
 * `REPRISE_SERVE_KEYS`, as redacted tokens; unset or blank: none.
 *
 * @since 0.1.0
 * @category config
 */
export const keysConfig: Config.Config<ReadonlyArray<Redacted.Redacted<string>>> = Config.redacted(keysVariable).pipe(
  Config.map((value) =>
    Redacted.value(value).split(/[\s,]+/).filter((key) => key.length > 0).map((key) => Redacted.make(key))
  ),
  Config.withDefault([])
)

/**
 * @since 0.1.0
 * @category errors
 */
export class RelayError extends Schema.TaggedError<RelayError>("@reprise/server/Relay/RelayError")("RelayError", {
  reason: Schema.Literal("KeysRequired", "InvalidOption"),
  detail: Schema.String
}) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    return this.detail
  }
}

/**
 * @since 0.1.0
 * @category guards
 */
export const isRelayError = (u: unknown): u is RelayError => Predicate.isTagged(u, "RelayError")

const codecs: { readonly [P in Engine.Protocol]: Codec | undefined } = {
  "openai-chat": ChatCodec.codec,
  "openai-responses": ResponsesCodec.codec,
  anthropic: AnthropicCodec.codec
}

/**
 * One request's access-log line (without its newline): `reprise relay POST /v1/chat/completions 200 mode=hold
 * attempts=2 route="openai-chat fb-ok" duration_ms=41`. Nothing of a request's body or headers is in it.
 *
 * @since 0.1.0
 * @category observability
 */
export const formatAccessEntry = (entry: AccessEntry): string =>
  `reprise relay ${entry.method} ${entry.path} ${entry.status}` +
  (entry.mode === undefined ? "" : ` mode=${entry.mode}`) +
  ` attempts=${entry.attempts}` +
  (entry.route === undefined ? "" : ` route=${JSON.stringify(entry.route)}`) +
  ` duration_ms=${Math.round(entry.durationMs)}`

const defaultAccessLog = (entry: AccessEntry): Effect.Effect<void> => Console.error(formatAccessEntry(entry))

const whole = (name: string, value: number | undefined, fallback: number): number => {
  const n = value ?? fallback
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`Relay: ${name} must be a whole number >= 1, got ${n}`)
  return n
}

const settingsOf = (options: Options): Engine.Settings => ({
  keys: (options.keys ?? []).map((key) => Redacted.isRedacted(key) ? key : Redacted.make(key)),
  preview: options.preview ?? "hold",
  maxBodyBytes: whole("maxBodyBytes", options.maxBodyBytes, defaultMaxBodyBytes),
  maxConcurrent: whole("maxConcurrent", options.maxConcurrent, defaultMaxConcurrent),
  keepalive: Duration.decode(options.keepalive ?? defaultKeepalive),
  model: options.model,
  accessLog: options.accessLog ?? defaultAccessLog
})

const notFound = HttpServerResponse.unsafeJson(
  { error: { message: "no such endpoint", type: "invalid_request_error", param: null, code: "not_found" } },
  { status: 404 }
)

/**
 * The relay's routes. Its handlers need the `Provider` (and read the `Routes`, `Budget` and `Policy` settings,
 * circuits and fleet of their context, as `Recovery.generate` does). Throws a `RangeError` for a limit that is not a
 * whole number of at least 1.
 *
 * @since 0.1.0
 * @category routers
 */
export const router = (options: Options = {}): HttpRouter.HttpRouter<never, Provider.Provider> => {
  const settings = settingsOf(options)
  const authorized = Engine.authorizer(settings.keys)
  const slots = { active: 0 }
  const generation = (protocol: Engine.Protocol) =>
    Engine.generation(protocol, codecs[protocol], settings, slots, authorized)
  const models = Effect.gen(function*() {
    const plan = yield* Effect.serviceOption(Routes.Routes)
    const names = Option.isSome(plan)
      ? [...new Set(plan.value.routes.map((route) => route.model))]
      : settings.model === undefined
      ? []
      : [settings.model]
    return HttpServerResponse.unsafeJson({
      object: "list",
      data: names.map((id) => ({ id, object: "model", created: 0, owned_by: "reprise" }))
    })
  })
  return HttpRouter.empty.pipe(
    HttpRouter.post("/v1/chat/completions", generation("openai-chat")),
    HttpRouter.post("/v1/responses", generation("openai-responses")),
    HttpRouter.post("/v1/messages", generation("anthropic")),
    HttpRouter.get(
      "/v1/models",
      Effect.flatMap(HttpServerRequest.HttpServerRequest, (request) =>
        authorized(request.headers)
          ? models
          : Effect.succeed(Engine.errorResponse("openai-chat", ChatCodec.codec, {
            failure: {
              status: 401,
              type: "authentication_error",
              code: "invalid_api_key",
              message: "a valid relay key is required"
            }
          })))
    ),
    HttpRouter.get("/healthz", HttpServerResponse.unsafeJson({ status: "ok" })),
    HttpRouter.get(
      "/",
      Effect.map(Effect.serviceOption(Routes.Routes), (plan) =>
        HttpServerResponse.text(
          Page.render({
            model: Option.isSome(plan) ? plan.value.routes[0].model : settings.model,
            keyRequired: settings.keys.length > 0
          }),
          { headers: Page.headers }
        ))
    ),
    HttpRouter.catchAll((_: HttpServerError.RouteNotFound) => Effect.succeed(notFound))
  )
}

/**
 * The relay as an `HttpApp` ({@link router} itself: a router is an app).
 *
 * @since 0.1.0
 * @category apps
 */
export const app = (options: Options = {}) => router(options)

/**
 * Whether the relay may listen on `host` without downstream keys: `localhost`, `::1` or `127.x.y.z`.
 *
 * @since 0.1.0
 * @category security
 */
export const isLoopback = (host: string): boolean =>
  host === "localhost" || host === "::1" || /^127(\.\d{1,3}){3}$/.test(host)

/**
 * The relay on a Node HTTP server at `host:port`, while the layer lives: it provides the `HttpServer` (its `address`
 * names the port when `port` is 0). Fails with `RelayError{reason: "KeysRequired"}` for a host other than loopback
 * without keys (from {@link Options.keys}, else `REPRISE_SERVE_KEYS`), before anything listens.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (
  options: ServeOptions = {}
): Layer.Layer<
  HttpServer.HttpServer,
  RelayError | ConfigError.ConfigError | HttpServerError.ServeError,
  Provider.Provider
> =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const keys = options.keys ?? (yield* keysConfig)
    const host = options.host ?? "127.0.0.1"
    if (!isLoopback(host) && keys.length === 0) {
      return yield* new RelayError({
        reason: "KeysRequired",
        detail: `the relay listens on ${host}, which is not loopback: set downstream keys (${keysVariable}) first`
      })
    }
    const relay = yield* Effect.try({
      try: () => router({ ...options, keys }),
      catch: (e) => new RelayError({ reason: "InvalidOption", detail: e instanceof Error ? e.message : String(e) })
    })
    const server = NodeHttpServer.layer(() => Http.createServer(), { port: options.port ?? defaultPort, host })
    return HttpServer.serve(relay).pipe(
      Layer.provideMerge(Layer.project(server, HttpServer.HttpServer, HttpServer.HttpServer, (s) => s))
    )
  }))

/**
 * Runs the relay in the foreground until interrupted (see {@link layer}), logging the address it listens on.
 *
 * @since 0.1.0
 * @category running
 */
export const serve = (
  options: ServeOptions = {}
): Effect.Effect<never, RelayError | ConfigError.ConfigError | HttpServerError.ServeError, Provider.Provider> =>
  Layer.launch(Layer.provideMerge(Layer.effectDiscard(HttpServer.logAddress), layer(options)))
