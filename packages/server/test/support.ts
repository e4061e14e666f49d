/**
 * The relay on a loopback port in front of the loopback simulator, over the real undici provider, for the server's
 * suites: `relay(script, options)` starts both in the test's scope and returns the relay's base URL, the simulator
 * and the access log's entries.
 */
import * as HttpServer from "@effect/platform/HttpServer"
import * as Budget from "@reprise/core/Budget"
import * as Policy from "@reprise/core/Policy"
import * as Routes from "@reprise/core/Routes"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as Relay from "@reprise/server/Relay"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Context, Duration, Effect, Layer, Redacted } from "effect"

export const UPSTREAM_KEY = "sk-upstream-secret-never-downstream"

export interface Harness {
  readonly url: string
  readonly sim: Simulator.Service
  readonly log: Array<Relay.AccessEntry>
}

export interface HarnessOptions extends Relay.Options {
  readonly idleTimeoutMs?: number | undefined
  readonly firstByteTimeoutMs?: number | undefined
  /** Models of a plan of routes on the simulator's Chat Completions route; absent: one provider, no plan. */
  readonly plan?: ReadonlyArray<string> | undefined
  readonly maxAttempts?: number | undefined
  readonly deadlineMs?: number | undefined
  readonly host?: string | undefined
}

/** The simulator with `script`, and the relay in front of it on a free loopback port, in the current scope. */
export const relay = (script: SimulatorScript.Script, options: HarnessOptions = {}) =>
  Effect.gen(function*() {
    const simContext = yield* Layer.build(Simulator.layer({ script }))
    const sim = Context.get(simContext, Simulator.Simulator)
    const log: Array<Relay.AccessEntry> = []
    const providerOptions = {
      apiKey: Redacted.make(UPSTREAM_KEY),
      baseUrl: sim.baseUrl("openai-chat"),
      idleTimeout: Duration.millis(options.idleTimeoutMs ?? 2_000),
      firstByteTimeout: Duration.millis(options.firstByteTimeoutMs ?? 2_000)
    }
    const upstream = options.plan === undefined
      ? HttpProvider.layerUndici("openai-chat", providerOptions)
      : HttpProvider.layerRoutes(
        options.plan.map((model) => ({ protocol: "openai-chat" as const, model, ...providerOptions })) as [
          HttpProvider.RouteSpec,
          ...Array<HttpProvider.RouteSpec>
        ]
      )
    const settings = Layer.mergeAll(
      Policy.layer({ backoffBase: Duration.millis(5), backoffMax: Duration.millis(20) }),
      Budget.layer({
        maxAttempts: options.maxAttempts ?? 5,
        deadline: Duration.millis(options.deadlineMs ?? 30_000)
      })
    )
    const served = Relay.layer({
      port: 0,
      accessLog: (entry) => Effect.sync(() => void log.push(entry)),
      ...options
    }).pipe(Layer.provide(Layer.merge(upstream, settings)))
    const context = yield* Layer.build(served)
    const server = Context.get(context, HttpServer.HttpServer)
    const address = server.address
    if (address._tag !== "TcpAddress") throw new Error("not a TCP address")
    return { url: `http://127.0.0.1:${address.port}`, sim, log } satisfies Harness
  })

export const routesOf = Routes

/** POSTs JSON to the relay with undici's `fetch` and reads the whole answer. */
export const post = (
  url: string,
  body: unknown,
  headers: Record<string, string> = {}
) =>
  Effect.promise(async () => {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : JSON.stringify(body)
    })
    const text = await response.text()
    return { status: response.status, headers: response.headers, text }
  })

/** The `data:` payloads of an SSE text, with their event names. */
export const events = (text: string) =>
  text.split("\n\n").filter((block) => block.length > 0).map((block) => {
    const lines = block.split("\n")
    const event = lines.find((l) => l.startsWith("event: "))?.slice(7)
    const data = lines.filter((l) => l.startsWith("data: ")).map((l) => l.slice(6)).join("\n")
    const comment = lines.every((l) => l.startsWith(":"))
    return { event, data, comment, raw: block }
  })

/** The text content of the Chat Completions chunks of an SSE text. */
export const content = (text: string) =>
  events(text).filter((e) => e.event === undefined && e.data.startsWith("{")).map((e) => JSON.parse(e.data)).map((
    chunk
  ) => chunk.choices?.[0]?.delta?.content ?? "").join("")

export const chat = (model: string, extra: Record<string, unknown> = {}) => ({
  model,
  messages: [{ role: "user", content: "Say hello." }],
  ...extra
})
