/**
 * Test support: an in-memory HttpClient serving fixed bytes, a loopback node:http server that records what it
 * received, a web response fed by hand, and helpers to run a provider stream inside a Budget scope.
 */
import { HttpClient, HttpClientRequest, HttpClientResponse } from "@effect/platform"
import * as Budget from "@reprise/core/Budget"
import type * as Generation from "@reprise/core/Generation"
import type * as Message from "@reprise/core/Message"
import type * as Provider from "@reprise/core/Provider"
import { Effect, Either, Stream } from "effect"
import * as Http from "node:http"
import type * as Net from "node:net"
import type * as Send from "../../src/internal/send.js"

export const KEY = "sk-reprise-SECRET-7f3a9c0e1d2b4a6f8e0c"

/**
 * An HttpClient that answers every request with `body`, delivered in chunks of `chunkSize` bytes. With `staysOpen`,
 * the body does not end after the last chunk: it sends nothing more and never closes.
 */
export const fakeClient = (
  body: string | Uint8Array,
  options: {
    readonly status?: number
    readonly headers?: Record<string, string>
    readonly chunkSize?: number
    readonly staysOpen?: boolean
  } = {}
): HttpClient.HttpClient =>
  HttpClient.make((request) =>
    Effect.sync(() => {
      const bytes = typeof body === "string" ? new TextEncoder().encode(body) : body
      const size = options.chunkSize ?? 97
      let offset = 0
      const stream = new ReadableStream<Uint8Array>({
        pull(controller) {
          if (offset >= bytes.length) {
            return options.staysOpen === true
              ? new Promise<void>(() => {})
              : controller.close()
          }
          controller.enqueue(bytes.slice(offset, offset + size))
          offset += size
        }
      })
      return HttpClientResponse.fromWeb(
        request,
        new Response(stream, {
          status: options.status ?? 200,
          headers: { "content-type": "text/event-stream", ...options.headers }
        })
      )
    })
  )

export const request = (extra: Partial<Generation.GenerationRequest> = {}): Generation.GenerationRequest => ({
  model: "test-model",
  messages: [{ role: "user", text: "hello" }],
  ...extra
})

export interface Outcome {
  readonly events: ReadonlyArray<Generation.GenerationEvent>
  readonly result: Either.Either<void, unknown>
}

/** Runs one generation in a fresh Budget scope, keeping the events emitted before any failure. */
export const run = (
  provider: Provider.Service,
  req: Generation.GenerationRequest = request()
): Effect.Effect<Outcome> =>
  Effect.gen(function*() {
    const events: Array<Generation.GenerationEvent> = []
    const result = yield* provider.stream(req).pipe(
      Stream.runForEach((event) => Effect.sync(() => events.push(event))),
      Budget.scoped,
      Effect.either
    )
    return { events, result }
  })

export interface Summary {
  readonly text: string
  readonly reasoning: string
  readonly toolCalls: ReadonlyArray<Message.ToolCall>
  readonly finish: { readonly reason: string; readonly providerReason: string } | undefined
  readonly usage: Generation.Usage | undefined
  /** The model the `Finish` names. */
  readonly model: string | undefined
}

export const summarize = (events: ReadonlyArray<Generation.GenerationEvent>): Summary => {
  let text = ""
  let reasoning = ""
  const toolCalls: Array<Message.ToolCall> = []
  let finish: Summary["finish"]
  let usage: Generation.Usage | undefined
  let model: string | undefined
  for (const e of events) {
    switch (e._tag) {
      case "TextDelta":
        text += e.text
        break
      case "ReasoningDelta":
        reasoning += e.text
        break
      case "ToolCallComplete":
        toolCalls.push(e.call)
        break
      case "Finish":
        finish = { reason: e.reason, providerReason: e.providerReason }
        model = e.model
        break
      case "Usage":
        usage = e.usage
        break
    }
  }
  return { text, reasoning, toolCalls, finish, usage, model }
}

export interface Received {
  readonly method: string
  readonly url: string
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
}

export type Handler = (req: Http.IncomingMessage, res: Http.ServerResponse, index: number) => void

export interface Server {
  readonly url: string
  readonly port: number
  readonly received: Array<Received>
  /** Requests whose connection closed before the response finished (aborted by the client). */
  readonly aborted: Array<number>
  /** Waits until request `index` was aborted by the client (no time passes if it already was). */
  readonly awaitAbort: (index: number) => Effect.Effect<void>
  handler: Handler
}

/** A node:http server on 127.0.0.1, port 0, released with the scope. */
export const server = (handler: Handler) =>
  Effect.acquireRelease(
    Effect.async<Server & { readonly http: Http.Server; readonly sockets: Set<Net.Socket> }>((resume) => {
      const sockets = new Set<Net.Socket>()
      const abortWaiters: Array<readonly [number, () => void]> = []
      const state = {
        url: "",
        port: 0,
        received: [] as Array<Received>,
        aborted: [] as Array<number>,
        awaitAbort: (index: number) =>
          Effect.async<void>((resume) => {
            if (state.aborted.includes(index)) return resume(Effect.void)
            abortWaiters.push([index, () => resume(Effect.void)])
          }),
        handler,
        http: undefined as unknown as Http.Server,
        sockets
      }
      const http = Http.createServer((req, res) => {
        const chunks: Array<Buffer> = []
        req.on("data", (c: Buffer) => chunks.push(c))
        req.on("end", () => {
          const index = state.received.length
          state.received.push({
            method: req.method ?? "",
            url: req.url ?? "",
            headers: req.headers,
            body: Buffer.concat(chunks).toString("utf8")
          })
          res.on("close", () => {
            if (res.writableFinished) return
            state.aborted.push(index)
            for (const [waiting, wake] of abortWaiters) if (waiting === index) wake()
          })
          state.handler(req, res, index)
        })
      })
      http.on("connection", (socket) => {
        sockets.add(socket)
        socket.on("close", () => sockets.delete(socket))
      })
      http.listen(0, "127.0.0.1", () => {
        const address = http.address() as Net.AddressInfo
        state.port = address.port
        state.url = `http://127.0.0.1:${address.port}`
        state.http = http
        resume(Effect.succeed(state))
      })
    }),
    (s) =>
      Effect.async<void>((resume) => {
        for (const socket of s.sockets) socket.destroy()
        s.http.close(() => resume(Effect.void))
      })
  )

/** SSE bytes for a list of JSON payload lines (the `chunks` fixture format). */
export const toSse = (lines: ReadonlyArray<string>): string => lines.map((line) => `data: ${line}\n\n`).join("")

/** A port nothing listens on. */
export const closedPort = Effect.async<number>((resume) => {
  const s = Http.createServer()
  s.listen(0, "127.0.0.1", () => {
    const port = (s.address() as Net.AddressInfo).port
    s.close(() => resume(Effect.succeed(port)))
  })
})

/** A web body the test feeds by hand: `feed` enqueues the text as one read. */
export const fedBody = () => {
  let controller!: ReadableStreamDefaultController<Uint8Array>
  const body = new ReadableStream<Uint8Array>({
    start(c) {
      controller = c
    }
  })
  return { body, feed: (text: string) => controller.enqueue(new TextEncoder().encode(text)) }
}

/** A web response (`HttpClientResponse.fromWeb`, as the fetch client makes) with a {@link fedBody}. */
export const fedResponse = () => {
  const { body, feed } = fedBody()
  return {
    response: HttpClientResponse.fromWeb(HttpClientRequest.get("http://127.0.0.1:9/"), new Response(body)),
    feed
  }
}

/**
 * Waits, with no time passing on the TestClock, until `done` holds: a turn of the event loop at a time (a web body's
 * reads settle on promises), at most 1,000 turns; a defect if it still does not hold then, so that a test fails here
 * rather than at a later, misleading assertion.
 */
export const waitFor = (done: () => boolean) =>
  Effect.repeat(Effect.promise(() => new Promise((resolve) => setImmediate(resolve))), {
    until: () => done(),
    times: 1000
  }).pipe(
    Effect.flatMap(() => done() ? Effect.void : Effect.dieMessage("waitFor: the condition did not hold in 1,000 turns"))
  )

/** `n` turns of the event loop, with no time passing on the TestClock: what is pending on I/O settles. */
export const turns = (n: number) =>
  Effect.promise(() => new Promise((resolve) => setImmediate(resolve))).pipe(Effect.repeatN(n - 1))

/** A streaming Chat Completions request's description, to an address nothing is sent to (the tests' own client). */
export const chatSpec: Send.RequestSpec = {
  url: "http://127.0.0.1:9/v1/chat/completions",
  headers: {},
  apiKeyHeader: "authorization",
  body: { model: "m" },
  fallbacks: {}
}
