/**
 * The loopback fault simulator: a real HTTP server on 127.0.0.1 that speaks the four wire protocols (Chat
 * Completions, Responses, Anthropic Messages and the subscription variant of Responses) from fixture files or
 * generated replies, and injects the faults a {@link SimulatorScript.Script} asks for, request by request: resets
 * before headers or after N bytes, clean EOF before the terminal event, stalls with or without keepalive comments,
 * in-band error events, any status with any headers, truncated tool-call JSON and slow drips.
 *
 * On the Responses route it also keeps background responses (a send with `"background": true`): each one by id
 * (`resp_sim_N`) with its complete event list, whatever a fault did to the connection that created it, and it
 * serves what the real API serves from them — resume GETs (`GET /v1/responses/{id}?stream=true&starting_after=N`:
 * the events after N, no `response.created`, with the route's `resume` steps applied as faults), polls
 * (`GET /v1/responses/{id}`), idempotent cancels (`POST /v1/responses/{id}/cancel`), the 404 of an unknown id and
 * the 400 of a response too old to stream (`streamForMs`, five minutes by default; {@link Service.expire}).
 *
 * A script can also be keyed by model (`models`): a send whose body names a scripted model is served from that
 * model's steps, on any route, so one server can play a healthy model and a failing one side by side (the
 * failoverbench catalogue, `Failoverbench`, is such a script).
 *
 * It records every request (route, kind, method, path, headers with credentials redacted, JSON body, model, the
 * action taken, arrival time, and who closed the exchange and when) and counts requests per route, for assertions.
 * Use it as a scoped {@link layer} in tests, or run it in the foreground with {@link serve} (`reprise simulate`).
 * Its timers (stalls, drips, keepalives, slow first tokens) run on the real clock even under `TestClock`, because
 * they pace real sockets; every one of them ends when the client disconnects or the simulator's scope closes,
 * which also destroys open sockets. What the simulator records and measures is on the `Clock` of the context it was
 * made in: a request's arrival and its exchange's end (`receivedAt`, `closed.at`) and a model's `outage`, a span from
 * when the script was set. A test under `TestClock` reads its records on that clock and steps through a long outage
 * with `TestClock.adjust` (`reprise simulate` runs on the real clock).
 *
 * @since 0.1.0
 */
import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import * as FileSystem from "@effect/platform/FileSystem"
import * as Path from "@effect/platform/Path"
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import * as Deferred from "effect/Deferred"
import * as Effect from "effect/Effect"
import * as Exit from "effect/Exit"
import * as FiberId from "effect/FiberId"
import * as FiberSet from "effect/FiberSet"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import type * as Scope from "effect/Scope"
import * as Stream from "effect/Stream"
import * as SubscriptionRef from "effect/SubscriptionRef"
import * as Http from "node:http"
import type * as Net from "node:net"
import * as Load from "./internal/load.js"
import * as Respond from "./internal/respond.js"
import * as Store from "./internal/store.js"
import * as Target from "./internal/target.js"
import * as Wire from "./internal/wire.js"
import type * as Records from "./RecordedRequest.js"
import * as ScriptLoader from "./ScriptLoader.js"
import * as SimulatorScript from "./SimulatorScript.js"

/**
 * How an exchange ended (see `RecordedRequest.Closure`).
 *
 * @since 0.1.0
 * @category models
 */
export type Closure = Records.Closure

/**
 * One request as the simulator received it (see `RecordedRequest.RecordedRequest`).
 *
 * @since 0.1.0
 * @category models
 */
export type RecordedRequest = Records.RecordedRequest

/**
 * A background response as the simulator keeps it (see `RecordedRequest.BackgroundResponse`).
 *
 * @since 0.1.0
 * @category models
 */
export type BackgroundResponse = Records.BackgroundResponse

/**
 * What a request to a route asks for: `send`, `resume`, `poll` or `cancel` (see `RecordedRequest.RequestKind`).
 *
 * @since 0.1.0
 * @category models
 */
export type RequestKind = Records.RequestKind

/**
 * A running simulator.
 *
 * @since 0.1.0
 * @category models
 */
export interface Service {
  readonly port: number
  /** `http://127.0.0.1:PORT`, without a trailing slash. */
  readonly url: string
  /**
   * The base URL a client of the route is configured with: `{url}/v1` for the OpenAI routes (the SDK appends
   * `/chat/completions` or `/responses`), `{url}` for Anthropic (the SDK appends `/v1/messages`), and
   * `{url}/subscription` for the subscription route (requests go to `{base}/responses`).
   */
  readonly baseUrl: (route: SimulatorScript.Route) => string
  /**
   * Replaces the whole script, restarts every route and every model at its first step (and model outages at now)
   * and clears the records and counts: one server can serve many test cases. Fixture files are read now; a missing
   * one fails with a `ScriptError`.
   */
  readonly setScript: (script: SimulatorScript.Script) => Effect.Effect<void, ScriptLoader.ScriptError>
  /** Replaces one route's script and restarts that route at its first step; records and counts are kept. */
  readonly setRoute: (
    route: SimulatorScript.Route,
    script: SimulatorScript.RouteScript
  ) => Effect.Effect<void, ScriptLoader.ScriptError>
  /** Forgets the recorded requests and counts (the step positions are kept). */
  readonly clear: Effect.Effect<void>
  /** Every recorded request, oldest first. */
  readonly requests: Effect.Effect<ReadonlyArray<RecordedRequest>>
  readonly requestsTo: (route: SimulatorScript.Route) => Effect.Effect<ReadonlyArray<RecordedRequest>>
  /**
   * The recorded requests whose body names `model`, oldest first, on any route: a scripted model's attempts, each
   * with its `action` and `receivedAt`.
   */
  readonly requestsFor: (model: string) => Effect.Effect<ReadonlyArray<RecordedRequest>>
  /**
   * Requests to a route (or to all routes) since the last `setScript` or `clear`; with `kind`, only those of that
   * kind (`count("openai-responses", "send")` leaves out the resumes, polls and cancels).
   */
  readonly count: (
    route?: SimulatorScript.Route | undefined,
    kind?: RequestKind | undefined
  ) => Effect.Effect<number>
  /** Waits for the `nth` request (1-based) to a route and returns it as recorded on arrival. */
  readonly awaitRequest: (route: SimulatorScript.Route, nth: number) => Effect.Effect<RecordedRequest>
  /**
   * Waits until the exchange of a request (by `id`) ended and says who ended it. Dies if the request was
   * forgotten by `clear`/`setScript` before it ended.
   */
  readonly awaitClose: (id: number) => Effect.Effect<Closure>
  /** A background response by id (`resp_sim_N`), with its status and counters; undefined if unknown. */
  readonly backgroundResponse: (id: string) => Effect.Effect<BackgroundResponse | undefined>
  /** Every background response kept (oldest first): they live until the next `setScript`. */
  readonly backgroundResponses: Effect.Effect<ReadonlyArray<BackgroundResponse>>
  /**
   * Makes a background response (every one, without an id) too old to stream, as if its route's `streamForMs`
   * had passed: its resumes get the API's 400, its polls still work. False if the id is unknown.
   */
  readonly expire: (id?: string | undefined) => Effect.Effect<boolean>
}

/**
 * @since 0.1.0
 * @category tags
 */
export class Simulator extends Context.Tag("@reprise/simulator/Simulator")<Simulator, Service>() {}

/**
 * @since 0.1.0
 * @category models
 */
export interface Options {
  /** Default 0: the system picks a free port. */
  readonly port?: number | undefined
  /** Default `127.0.0.1`. */
  readonly host?: string | undefined
  /** Default: every route serves its generated default reply in full. */
  readonly script?: SimulatorScript.Script | undefined
  /** Where relative fixture paths start from when the script has no absolute `fixturesDir`. Default: cwd. */
  readonly fixturesDir?: string | undefined
  /** How many requests to remember (oldest forgotten first). Default 10000. */
  readonly maxRecords?: number | undefined
  /** Log one line per request and per closed exchange with `Effect.logInfo`. Default false. */
  readonly log?: boolean | undefined
}

/**
 * The server could not start.
 *
 * @since 0.1.0
 * @category errors
 */
export class SimulatorError extends Schema.TaggedError<SimulatorError>("@reprise/simulator/Simulator/SimulatorError")(
  "SimulatorError",
  {
    reason: Schema.Literal("Listen"),
    host: Schema.String,
    port: Schema.Number,
    cause: Schema.optional(Schema.Defect)
  }
) {
  /**
   * @since 0.1.0
   */
  override get message(): string {
    const detail = Predicate.hasProperty(this.cause, "message") ? `: ${String(this.cause.message)}` : ""
    return `simulator cannot listen on ${this.host}:${this.port}${detail}`
  }
}

/**
 * The route of a request path, if any (a trailing slash is ignored). The paths of background responses
 * (`/v1/responses/{id}`, `/v1/responses/{id}/cancel`) belong to `openai-responses` but are not route paths: they
 * take no request body.
 *
 * @since 0.1.0
 * @category routes
 */
export const routeOf = (pathname: string): SimulatorScript.Route | undefined => Target.routeOfPath(pathname)

const listen = (server: Http.Server, host: string, port: number) =>
  Effect.async<number, SimulatorError>((resume) => {
    const onError = (cause: Error) => resume(Effect.fail(new SimulatorError({ reason: "Listen", host, port, cause })))
    server.once("error", onError)
    server.listen(port, host, () => {
      server.off("error", onError)
      const address = server.address()
      resume(Effect.succeed(typeof address === "object" && address !== null ? address.port : port))
    })
  })

const acquireServer = (host: string, port: number) =>
  Effect.acquireRelease(
    Effect.suspend(() => {
      const server = Http.createServer({ noDelay: true })
      const sockets = new Set<Net.Socket>()
      server.on("connection", (socket) => {
        sockets.add(socket)
        socket.once("close", () => sockets.delete(socket))
      })
      return Effect.map(listen(server, host, port), (bound) => ({ server, sockets, port: bound }))
    }),
    ({ server, sockets }) =>
      Effect.async<void>((resume) => {
        for (const socket of sockets) socket.destroy()
        server.close(() => resume(Effect.void))
      })
  )

/** Epoch milliseconds from the clock's nanoseconds: records keep sub-millisecond precision for latency measurements. */
const preciseMillis = (clock: Clock.Clock) => Effect.map(clock.currentTimeNanos, (nanos) => Number(nanos) / 1_000_000)

const parseBody = (text: string): unknown => {
  if (text.length === 0) return undefined
  try {
    return JSON.parse(text)
  } catch {
    return text
  }
}

const readBody = (req: Http.IncomingMessage) =>
  Effect.async<string>((resume) => {
    const chunks: Array<Buffer> = []
    req.on("data", (chunk: Buffer) => chunks.push(chunk))
    req.once("end", () => resume(Effect.succeed(Buffer.concat(chunks).toString("utf8"))))
    req.once("error", () => resume(Effect.succeed(Buffer.concat(chunks).toString("utf8"))))
  })

const gone: unique symbol = Symbol.for("@reprise/simulator/Simulator/gone")

/**
 * Starts a simulator in the current scope; closing the scope interrupts every exchange, destroys open sockets and
 * stops the server.
 *
 * @since 0.1.0
 * @category constructors
 */
export const make = (options: Options = {}): Effect.Effect<
  Service,
  SimulatorError | ScriptLoader.ScriptError,
  Scope.Scope | FileSystem.FileSystem | Path.Path
> =>
  Effect.gen(function*() {
    const env: Load.Env = {
      fs: yield* FileSystem.FileSystem,
      path: yield* Path.Path,
      baseDir: options.fixturesDir ?? process.cwd()
    }
    const host = options.host ?? "127.0.0.1"
    // Model outages are measured with the clock of this context (a `TestClock` in tests), not the sockets' clock.
    const clock = yield* Effect.clock
    const script = options.script ?? {}
    const store = new Store.Store(
      yield* Load.load(env, script),
      options.maxRecords ?? 10_000,
      yield* Load.loadModels(env, script),
      yield* clock.currentTimeMillis
    )
    const version = yield* SubscriptionRef.make(0)
    const bump = SubscriptionRef.update(version, (n) => n + 1)
    const liveClock = Clock.make()
    const log = options.log === true ? Effect.logInfo : () => Effect.void

    const { port, server } = yield* acquireServer(host, options.port ?? 0)
    // Acquired after the server, so released before it: exchanges are interrupted, then the sockets destroyed.
    const run = yield* FiberSet.makeRuntime<never, void, never>()
    const url = `http://${host.includes(":") ? `[${host}]` : host}:${port}`

    const baseUrl = (route: SimulatorScript.Route) =>
      route === "anthropic" ? url : route === "subscription" ? `${url}/subscription` : `${url}/v1`

    const waitFor = <A>(f: () => A | undefined | typeof gone): Effect.Effect<A> =>
      version.changes.pipe(
        Stream.map(f),
        Stream.filter(Predicate.isNotUndefined),
        Stream.runHead,
        Effect.flatMap((found) =>
          Option.isNone(found)
            ? Effect.dieMessage("simulator stopped")
            : found.value === gone
            ? Effect.dieMessage("simulator: the request was forgotten (clear, setScript) before it closed")
            : Effect.succeed(found.value as A)
        )
      )

    const health = (ex: Wire.Exchange) =>
      Effect.sync(() => {
        const baseUrls = Object.fromEntries(SimulatorScript.routes.map((route) => [route, baseUrl(route)]))
        ex.serverDone = true
        ex.res.writeHead(200, { "content-type": "application/json" })
        ex.res.end(JSON.stringify({ simulator: "reprise", url, baseUrls, counts: store.counts }))
      })

    const handle = (
      req: Http.IncomingMessage,
      ex: Wire.Exchange,
      closed: Deferred.Deferred<Omit<Closure, "at">>
    ) =>
      Effect.gen(function*() {
        const receivedAt = yield* preciseMillis(clock)
        const method = req.method ?? "GET"
        const path = req.url ?? "/"
        const requestUrl = new URL(path, "http://127.0.0.1")
        if (method === "GET" && (requestUrl.pathname === "/" || requestUrl.pathname === "/health")) {
          yield* health(ex)
          return yield* Effect.asVoid(Deferred.await(closed))
        }
        const text = yield* Effect.raceFirst(readBody(req), Effect.as(Deferred.await(closed), ""))
        const body = parseBody(text)
        const asked = Target.classify(method, requestUrl, body)
        // A resume the server refuses (unknown id, too old, a bad cursor) takes no step of the script.
        const refusal = asked._tag === "Resume"
          ? store.background.refuseResume(asked.id, asked.startingAfter, receivedAt)
          : undefined
        const now = yield* clock.currentTimeMillis
        const arrival = store.arrive({
          now,
          route: Target.routeOf(asked),
          kind: Target.kindOf(asked),
          lane: refusal === undefined ? undefined : "none",
          responseId: asked._tag === "Resume" || asked._tag === "Poll" || asked._tag === "Cancel"
            ? asked.id
            : undefined,
          background: asked._tag === "Send" && asked.background,
          method,
          path,
          headers: Store.redact(req.headers),
          body,
          receivedAt
        })
        const background = Respond.createBackground(store, arrival)
        yield* bump
        const { record } = arrival
        yield* log(
          record.route === undefined
            ? `${method} ${path} -> no route`
            : `${method} ${path} -> ${record.route} #${record.nth}${
              record.model === undefined ? "" : ` (${record.model})`
            }: ${record.kind === "send" ? "" : `${record.kind} `}${record.action ?? "(not scripted)"}`
        )
        // A client that left while its body was read gets nothing written.
        if (!(yield* Deferred.isDone(closed))) {
          yield* Effect.raceFirst(
            Wire.execute(ex, Respond.plan(store, { arrival, target: asked, background, refusal })),
            Deferred.await(closed)
          )
        }
        const end = yield* Deferred.await(closed)
        const closure: Closure = { ...end, at: yield* preciseMillis(clock) }
        store.close(record.id, closure)
        yield* bump
        yield* log(`request ${record.id} closed by ${closure.by} after ${closure.bytesWritten} body bytes`)
      })

    server.on("request", (req: Http.IncomingMessage, res: Http.ServerResponse) => {
      const ex: Wire.Exchange = { res, serverDone: false, bytesWritten: 0 }
      const closed = Deferred.unsafeMake<Omit<Closure, "at">>(FiberId.none)
      res.once("close", () => {
        const by = ex.serverDone || res.writableFinished ? "server" : "client"
        Deferred.unsafeDone(closed, Exit.succeed({ by, bytesWritten: ex.bytesWritten }))
      })
      run(
        handle(req, ex, closed).pipe(
          Effect.catchAllCause((cause) => Effect.logError("simulator: request failed", cause)),
          Effect.ensuring(Effect.sync(() => {
            if (!res.writableFinished) {
              ex.serverDone = true
              res.socket?.destroy()
            }
          })),
          // Stalls, drips and keepalives pace real sockets: they run on the real clock even under TestClock.
          Effect.withClock(liveClock)
        )
      )
    })

    const service: Service = {
      port,
      url,
      baseUrl,
      setScript: (script) =>
        Effect.flatMap(
          Effect.all([Load.load(env, script), Load.loadModels(env, script), clock.currentTimeMillis]),
          ([loaded, models, now]) => Effect.zipRight(Effect.sync(() => store.setScript(loaded, models, now)), bump)
        ),
      setRoute: (route, script) =>
        Effect.flatMap(
          Load.loadRoute(env, Load.fixturesDir(env, {}), route, script),
          (loaded) => Effect.sync(() => store.setRoute(route, loaded))
        ),
      clear: Effect.zipRight(Effect.sync(() => store.clear()), bump),
      requests: Effect.sync(() => store.snapshot()),
      requestsTo: (route) => Effect.sync(() => store.snapshot().filter((r) => r.route === route)),
      requestsFor: (model) => Effect.sync(() => store.ofModel(model)),
      count: (route, kind) => Effect.sync(() => store.count(route, kind)),
      awaitRequest: (route, nth) => waitFor(() => store.find(route, nth)),
      awaitClose: (id) =>
        waitFor(() => {
          const record = store.lookup(id)
          return record !== undefined ? record.closed : id < store.nextId ? gone : undefined
        }),
      backgroundResponse: (id) => Effect.sync(() => store.background.info(id)),
      backgroundResponses: Effect.sync(() => store.background.all()),
      expire: (id) => Effect.sync(() => store.background.expire(id))
    }
    return service
  })

/**
 * The simulator as a scoped layer: it listens while the layer is alive and stops, destroying open sockets, when
 * the layer's scope closes.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: Options = {}): Layer.Layer<
  Simulator,
  SimulatorError | ScriptLoader.ScriptError
> =>
  Layer.scoped(Simulator, make(options)).pipe(
    Layer.provide(Layer.merge(NodeFileSystem.layer, NodePath.layer))
  )

/**
 * @since 0.1.0
 * @category models
 */
export interface ServeOptions extends Options {
  /** A script file (JSON); its fixture paths are relative to the file. Wins over `script`. */
  readonly scriptFile?: string | undefined
  /** Runs once the server listens; by default logs the URL and the base URL of each route. */
  readonly onListening?: ((simulator: Service) => Effect.Effect<void>) | undefined
}

const announce = (simulator: Service): Effect.Effect<void> =>
  Effect.logInfo(
    [
      `reprise simulator listening on ${simulator.url}`,
      ...SimulatorScript.routes.map((route) => `  ${route.padEnd(17)} base URL ${simulator.baseUrl(route)}`)
    ].join("\n")
  )

/**
 * Runs the simulator in the foreground until interrupted (SIGINT with `NodeRuntime.runMain`), logging each
 * request. This is what `reprise simulate [--port N] [--script FILE]` runs (with `--scenarios failoverbench`,
 * `script` is `Failoverbench.script(profile)`).
 *
 * @since 0.1.0
 * @category running
 */
export const serve = (options: ServeOptions = {}): Effect.Effect<
  never,
  SimulatorError | ScriptLoader.ScriptError
> =>
  Effect.scoped(Effect.gen(function*() {
    const script = options.scriptFile === undefined ? options.script : yield* ScriptLoader.load(options.scriptFile)
    const simulator = yield* make({ ...options, script, log: options.log ?? true })
    yield* (options.onListening ?? announce)(simulator)
    return yield* Effect.never
  })).pipe(Effect.provide(Layer.merge(NodeFileSystem.layer, NodePath.layer)))
