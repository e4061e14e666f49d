/**
 * The body reader (`internal/body.ts`) over a real node:http server on 127.0.0.1 and the real undici client of
 * @effect/platform-node, the fetch client of @effect/platform, and node:http's client: it reads undici's own `Readable`
 * for the undici client's responses, the web `ReadableStream` for web responses, and `response.stream` for any other
 * client's. The first test of each client ("takes its path") pins the shape it relies on, so an upgrade of
 * @effect/platform or @effect/platform-node that changes it fails here instead of falling back without a word.
 */
import { FetchHttpClient, HttpClient, HttpClientRequest, HttpClientResponse } from "@effect/platform"
import { NodeHttpClient } from "@effect/platform-node"
import type * as HttpClientError from "@effect/platform/HttpClientError"
import { assert, describe, it } from "@effect/vitest"
import { Chunk, Deferred, Duration, Effect, Exit, Fiber, type Layer, Option, Scope, TestClock } from "effect"
import type * as Http from "node:http"
import * as Body from "../src/internal/body.js"
import * as Deadlines from "../src/internal/deadlines.js"
import { fedResponse, server, turns, waitFor } from "./support/harness.js"
import type { Handler } from "./support/harness.js"

type Served = Effect.Effect.Success<ReturnType<typeof server>>

/** A loopback server with `handler`, and `f` run against it with `client` as the `HttpClient`. */
const withClient = <A, E, R>(
  client: Layer.Layer<HttpClient.HttpClient>,
  handler: Handler,
  f: (s: Served) => Effect.Effect<A, E, R>
) => Effect.scoped(Effect.flatMap(server(handler), f)).pipe(Effect.provide(client))

const post = (url: string) => Effect.flatMap(HttpClient.HttpClient, (client) => client.post(url))

/** Pulls until the end or a failure: the bytes read, and how the body ended. `afterFirst` runs once a pull returns. */
const drain = (pull: Body.Pull, afterFirst: () => void = () => {}) =>
  Effect.gen(function*() {
    const bytes: Array<Uint8Array> = []
    let reads = 0
    while (true) {
      const next = yield* Effect.either(pull)
      if (next._tag === "Left") return { bytes: Buffer.concat(bytes).toString("utf8"), reads, end: next.left }
      if (reads++ === 0) afterFirst()
      for (const read of next.right) bytes.push(read)
    }
  })

const writeInParts = (res: Http.ServerResponse, parts: ReadonlyArray<string>, then: () => void) => {
  if (!res.headersSent) res.writeHead(200, { "content-type": "text/event-stream" })
  let index = 0
  const step = () => {
    if (index === parts.length) return then()
    res.write(parts[index++], step)
  }
  step()
}

const parts = Array.from({ length: 40 }, (_, i) => `data: {"part":${i},"pad":"${"x".repeat(i * 37)}"}\n\n`)

const clients = [
  {
    name: "the undici client",
    layer: NodeHttpClient.layerUndici,
    controller: (response: HttpClientResponse.HttpClientResponse) => Body.undiciBody(response)?.controller,
    // the shape body.ts reads, pinned: undici's own body and the request's controller
    shape: (response: HttpClientResponse.HttpClientResponse) => {
      const undici = Body.undiciBody(response)
      assert.isDefined(undici, "the platform's response no longer exposes undici's body where body.ts reads it")
      assert.isDefined(undici!.controller, "the platform's response no longer carries its AbortController")
      assert.isUndefined(Body.webBody(response))
    }
  },
  {
    name: "the fetch client (web responses)",
    layer: FetchHttpClient.layer,
    controller: (response: HttpClientResponse.HttpClientResponse) => Body.webBody(response)?.controller,
    shape: (response: HttpClientResponse.HttpClientResponse) => {
      assert.isUndefined(Body.undiciBody(response))
      const web = Body.webBody(response)
      assert.isDefined(web, "the platform's web response no longer exposes its Response")
      assert.isDefined(web!.controller, "the platform's response no longer carries its AbortController")
    }
  },
  {
    name: "node:http's client (read through response.stream)",
    layer: NodeHttpClient.layer,
    controller: (_: HttpClientResponse.HttpClientResponse): AbortController | undefined => undefined,
    shape: (response: HttpClientResponse.HttpClientResponse) => {
      assert.isUndefined(Body.undiciBody(response))
      assert.isUndefined(Body.webBody(response))
    }
  }
] as const

// The wait has no canceler (fix 35): an interrupted pull leaves its `resume` behind until the next pull, and a signal or
// an abandonment may go to it. Neither may be lost by that.
describe("the body reader over the undici client, after a wait interrupted before it was resumed", () => {
  /** A server that writes "first" and then nothing, the body left open; the pull, "first" read, and a pull interrupted. */
  const interruptedWait = <A, E>(f: (pull: Body.Pull) => Effect.Effect<A, E, Scope.Scope>) =>
    withClient(NodeHttpClient.layerUndici, (_req, res) => {
      res.writeHead(200, { "content-type": "text/event-stream" })
      res.write("first")
    }, (s) =>
      Effect.scoped(Effect.gen(function*() {
        const pull = yield* Body.pull(yield* post(s.url))
        let read = ""
        while (read !== "first") read += Buffer.concat([...(yield* pull)]).toString("utf8")
        const waiting = yield* Effect.fork(pull)
        yield* Effect.repeatN(Effect.yieldNow(), 20)
        yield* Fiber.interrupt(waiting)
        return yield* f(pull)
      })))

  it.effect("an abandonment before the next pull ends that pull's wait at once, as with no pull interrupted", () =>
    interruptedWait((pull) =>
      Effect.gen(function*() {
        assert.isTrue(Body.abandon(pull))
        // nothing more comes: only the abandonment can end this wait
        const next = yield* Effect.fork(pull)
        yield* waitFor(() => next.unsafePoll() !== null)
        const exit = next.unsafePoll()
        assert.isTrue(exit !== null && Exit.isSuccess(exit), "the abandonment went to the interrupted wait")
        assert.strictEqual(Chunk.size((exit as Exit.Success<Chunk.Chunk<Uint8Array>, unknown>).value), 0)
      })
    ))
})

describe("the body reader over the undici client, released before its end is read", () => {
  it.effect("a body whose every byte has arrived is destroyed with one error made once, not undici's abort error", () =>
    withClient(
      NodeHttpClient.layerUndici,
      (_req, res) => {
        // the headers and the whole body in one write: the client has all of it with the headers
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.end(parts[0])
      },
      (s) =>
        Effect.gen(function*() {
          const told: Array<unknown> = []
          const failedWith: Array<unknown> = []
          for (let i = 0; i < 2; i++) {
            const response = yield* post(s.url)
            const readable = Body.undiciBody(response)!.readable as unknown as NodeJS.ReadableStream & {
              readonly errored: unknown
            }
            readable.on("error", (error) => told.push(error))
            // listened for before the release, so that whatever the release makes the body tell is told by then
            const closed = yield* Deferred.make<void>()
            readable.once("close", () => Deferred.unsafeDone(closed, Exit.void))
            // one pull, then the scope closes before the body's end is read: as when the terminal event is in the
            // body's last read
            const read = yield* Effect.scoped(Effect.flatMap(Body.pull(response), (pull) => pull))
            assert.strictEqual(Buffer.concat(Chunk.toArray(read)).toString("utf8"), parts[0])
            yield* Deferred.await(closed)
            failedWith.push(readable.errored)
          }
          // before fix 28 of docs/performance.md undici's body made a `RequestAbortedError` (`UND_ERR_ABORTED`) for
          // every release, and Node's `destroy` formatted its stack
          for (const error of [...told, ...failedWith]) {
            assert.notStrictEqual((error as { readonly code?: unknown } | null)?.code, "UND_ERR_ABORTED")
          }
          assert.instanceOf(failedWith[0], Error)
          assert.strictEqual(failedWith[0], failedWith[1], "each release made an error of its own")
          assert.deepStrictEqual(told, failedWith)
          assert.strictEqual(s.received.length, 2)
          // the requests were over: neither was aborted
          assert.deepStrictEqual(s.aborted, [])
        })
    ))
})

describe("the body reader over the undici client, released after its end was read", () => {
  // the request is over: aborting it would change nothing (undici takes its listener off the signal once the body
  // closes), and cost a DOMException with its stack and an event per reply (fix 37 of docs/performance.md)
  const whole = (_req: Http.IncomingMessage, res: Http.ServerResponse) => {
    res.writeHead(200, { "content-type": "text/event-stream" })
    res.end(parts.slice(0, 3).join(""))
  }

  it.effect("read to its end by the pull: the request's controller is not aborted", () =>
    withClient(NodeHttpClient.layerUndici, whole, (s) =>
      Effect.gen(function*() {
        const response = yield* post(s.url)
        const controller = Body.undiciBody(response)!.controller!
        const result = yield* Effect.scoped(Effect.flatMap(Body.pull(response), drain))
        assert.strictEqual(result.bytes, parts.slice(0, 3).join(""))
        assert.isTrue(Option.isNone(result.end))
        assert.isFalse(controller.signal.aborted)
        assert.deepStrictEqual(s.aborted, [])
      })))

  it.effect("read to its end after finish, when released: the request's controller is not aborted", () =>
    withClient(NodeHttpClient.layerUndici, whole, (s) =>
      Effect.gen(function*() {
        const response = yield* post(s.url)
        const controller = Body.undiciBody(response)!.controller!
        const idle = Deadlines.make(Duration.seconds(30))
        const released = yield* Deferred.make<void>()
        yield* Effect.scoped(Effect.gen(function*() {
          yield* Deadlines.use(idle)
          const scope = yield* Effect.scope
          const pull = yield* Body.pullIn(response, scope, yield* Effect.clock, idle)!
          assert.isAbove(Chunk.size(yield* pull), 0)
          // the reader has all it needs: the rest is read to its end when the body is released
          Body.finish(pull)
          const readable = Body.undiciBody(response)!.readable as unknown as NodeJS.ReadableStream
          readable.once("close", () => Deferred.unsafeDone(released, Exit.void))
        }))
        yield* Deferred.await(released)
        // `dump` settles on the body's close; the release's last step runs a promise step after it
        yield* Effect.promise(() => new Promise((resolve) => setImmediate(resolve)))
        assert.isFalse(controller.signal.aborted)
        assert.deepStrictEqual(s.aborted, [])
      })))

  // released before its end, the request is aborted: "closing the scope before the end aborts the request" below
})

for (const client of clients) {
  describe(`the body reader over ${client.name}`, () => {
    it.effect("takes its path", () =>
      withClient(client.layer, (_req, res) => res.end("data: 1\n\n"), (s) => Effect.map(post(s.url), client.shape)))

    it.effect("reads every byte, in order, then ends", () => {
      // the second half is written once a pull has returned: more than one pull, however loaded the machine is
      let release = () => {}
      const released = new Promise<void>((resolve) => {
        release = resolve
      })
      const half = parts.length / 2
      return withClient(
        client.layer,
        (_req, res) =>
          writeInParts(
            res,
            parts.slice(0, half),
            () => released.then(() => writeInParts(res, parts.slice(half), () => res.end()))
          ),
        (s) =>
          Effect.gen(function*() {
            const response = yield* post(s.url)
            const result = yield* Effect.scoped(Effect.flatMap(Body.pull(response), (pull) => drain(pull, release)))
            assert.strictEqual(result.bytes, parts.join(""))
            assert.isTrue(Option.isNone(result.end))
            assert.isAbove(result.reads, 1)
          })
      )
    })

    it.effect("a body cut mid-way fails as a ResponseError of reason Decode, after the bytes before the cut", () =>
      withClient(
        client.layer,
        (_req, res) => writeInParts(res, parts.slice(0, 5), () => setImmediate(() => res.socket?.destroy())),
        (s) =>
          Effect.gen(function*() {
            const response = yield* post(s.url)
            const result = yield* Effect.scoped(Effect.flatMap(Body.pull(response), drain))
            assert.strictEqual(result.bytes, parts.slice(0, 5).join(""))
            const error = Option.getOrThrow(result.end) as HttpClientError.ResponseError
            assert.strictEqual(error._tag, "ResponseError")
            assert.strictEqual(error.reason, "Decode")
            assert.isDefined(error.cause)
          })
      ))

    it.effect("closing the scope before the end aborts the request: the server sees its connection close", () =>
      withClient(
        client.layer,
        (_req, res) => writeInParts(res, parts.slice(0, 3), () => {}),
        (s) =>
          Effect.gen(function*() {
            const response = yield* post(s.url)
            const controller = client.controller(response)
            const scope = yield* Scope.make()
            const pull = yield* Scope.extend(Body.pull(response), scope)
            assert.isAbove(Chunk.size(yield* pull), 0)
            assert.isFalse(controller?.signal.aborted ?? false)
            yield* Scope.close(scope, Exit.void)
            // the request's controller is aborted by the release, as the platform's `response.stream` aborts it
            if (controller !== undefined) assert.isTrue(controller.signal.aborted)
            yield* s.awaitAbort(0)
            assert.deepStrictEqual(s.aborted, [0])
          })
      ))

    /**
     * The server writes the first half, then the second once `release` is called: the tests run with the pull waiting
     * for the second half, which cannot come before they let it.
     */
    const inTwoHalves = () => {
      let release = () => {}
      const released = new Promise<void>((resolve) => {
        release = resolve
      })
      const half = parts.length / 2
      const handler: Handler = (_req, res) =>
        writeInParts(
          res,
          parts.slice(0, half),
          () => released.then(() => writeInParts(res, parts.slice(half), () => res.end()))
        )
      return { handler, release, first: parts.slice(0, half).join(""), second: parts.slice(half).join("") }
    }

    /**
     * The body of a server writing `inTwoHalves`, its first half read: `f` runs with its pull waiting for the second,
     * and the halves.
     */
    const afterFirstHalf = <A, E>(
      f: (pull: Body.Pull, halves: ReturnType<typeof inTwoHalves>) => Effect.Effect<A, E, Scope.Scope>
    ) => {
      const halves = inTwoHalves()
      return withClient(client.layer, halves.handler, (s) =>
        Effect.scoped(Effect.gen(function*() {
          const pull = yield* Body.pull(yield* post(s.url))
          assert.strictEqual(yield* readUntil(pull, halves.first), halves.first)
          return yield* f(pull, halves)
        })))
    }

    /** Pulls until `text` has been read (however the bytes were cut into reads). */
    const readUntil = (pull: Body.Pull, text: string) =>
      Effect.gen(function*() {
        let read = ""
        while (read.length < text.length) read += Buffer.concat([...(yield* pull)]).toString("utf8")
        return read
      })

    if (client.name.startsWith("node:http")) {
      it.effect("cannot be abandoned: only an interruption ends its wait", () =>
        withClient(client.layer, (_req, res) => res.end("data: 1\n\n"), (s) =>
          Effect.scoped(Effect.gen(function*() {
            const pull = yield* Body.pull(yield* post(s.url))
            assert.isFalse(Body.abandonable(pull))
            assert.isFalse(Body.abandon(pull))
          }))))
    } else {
      it.effect("abandoned, a waiting pull returns an empty chunk at once; what follows goes to the next pull", () =>
        afterFirstHalf((pull, halves) =>
          Effect.gen(function*() {
            assert.isTrue(Body.abandonable(pull))
            const waiting = yield* Effect.fork(pull)
            yield* Effect.repeatN(Effect.yieldNow(), 20)
            assert.isTrue(Body.abandon(pull))
            // the second half is not written until after the join: a wait that was not ended would never end
            assert.strictEqual(Chunk.size(yield* Fiber.join(waiting)), 0)
            halves.release()
            const rest = yield* drain(pull)
            assert.strictEqual(rest.bytes, halves.second)
            assert.isTrue(Option.isNone(rest.end))
          })
        ))

      it.effect("abandoned with no pull waiting, the next pull's wait returns an empty chunk at once", () =>
        afterFirstHalf((pull, halves) =>
          Effect.gen(function*() {
            Body.abandon(pull)
            assert.strictEqual(Chunk.size(yield* pull), 0)
            halves.release()
            assert.strictEqual((yield* drain(pull)).bytes, halves.second)
          })
        ))

      it.effect("a pull interrupted while it waits loses nothing: the next pull gets what arrives", () =>
        afterFirstHalf((pull, halves) =>
          Effect.gen(function*() {
            const waiting = yield* Effect.fork(pull)
            yield* Effect.repeatN(Effect.yieldNow(), 20)
            yield* Fiber.interrupt(waiting)
            halves.release()
            const rest = yield* drain(pull)
            assert.strictEqual(rest.bytes, halves.second)
            assert.isTrue(Option.isNone(rest.end))
          })
        ))
    }

    it.effect("an empty body ends at once", () =>
      withClient(client.layer, (_req, res) => {
        res.writeHead(200, { "content-type": "text/event-stream" })
        res.end()
      }, (s) =>
        Effect.gen(function*() {
          const response = yield* post(s.url)
          const result = yield* Effect.scoped(Effect.flatMap(Body.pull(response), drain))
          assert.strictEqual(result.bytes, "")
          assert.strictEqual(result.reads, 0)
          assert.isTrue(Option.isNone(result.end))
        })))
  })
}

describe("the body reader over a web body fed by hand", () => {
  // the event loop's next turn: the reader's `read()` has settled by then
  const nextTurn = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve)))
  const text = (chunk: Chunk.Chunk<Uint8Array>) => Buffer.concat([...chunk]).toString("utf8")

  // how the waiting pull stops waiting: interrupted, or abandoned (it then returns an empty chunk)
  const ends = [
    {
      how: "interrupted",
      end: (_: Body.Pull, waiting: Fiber.RuntimeFiber<unknown, unknown>) => Fiber.interrupt(waiting)
    },
    {
      how: "abandoned",
      end: (pull: Body.Pull, waiting: Fiber.RuntimeFiber<Chunk.Chunk<Uint8Array>, unknown>) =>
        Effect.gen(function*() {
          Body.abandon(pull)
          assert.strictEqual(Chunk.size(yield* Fiber.join(waiting)), 0)
        })
    }
  ] as const

  it.effect("two pulls interrupted in a row start one read: what arrives comes in order to the next pulls", () =>
    Effect.scoped(Effect.gen(function*() {
      const { feed, response } = fedResponse()
      const pull = yield* Body.pull(response)
      for (let i = 0; i < 2; i++) {
        const waiting = yield* Effect.fork(pull)
        yield* Effect.repeatN(Effect.yieldNow(), 20)
        yield* Fiber.interrupt(waiting)
      }
      feed("a")
      feed("b")
      yield* nextTurn
      assert.strictEqual(text(yield* pull), "a")
      assert.strictEqual(text(yield* pull), "b")
    })))

  for (const { end, how } of ends) {
    it.effect(`a read that settles after its pull was ${how} goes to the next pull`, () =>
      Effect.scoped(Effect.gen(function*() {
        const { feed, response } = fedResponse()
        const pull = yield* Body.pull(response)
        const waiting = yield* Effect.fork(pull)
        yield* Effect.repeatN(Effect.yieldNow(), 20)
        yield* end(pull, waiting)
        feed("data: 1\n\n")
        yield* nextTurn
        assert.strictEqual(text(yield* pull), "data: 1\n\n")
      })))
  }
})

describe("a web body's release", () => {
  it.effect("a stream whose cancel never settles is released after at most 1 s, not waited on for ever", () =>
    Effect.gen(function*() {
      let cancelled = 0
      const stream = new ReadableStream<Uint8Array>({
        cancel: () => {
          cancelled++
          return new Promise<void>(() => {})
        }
      })
      const response = HttpClientResponse.fromWeb(HttpClientRequest.get("http://127.0.0.1:9/"), new Response(stream))
      const scope = yield* Scope.make()
      yield* Scope.extend(Body.pull(response), scope)
      const closing = yield* Effect.fork(Scope.close(scope, Exit.void))
      yield* turns(10)
      assert.strictEqual(cancelled, 1)
      assert.isNull(closing.unsafePoll(), "the release waits for the cancel, within its bound")
      yield* TestClock.adjust("1 second")
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(closing)))
    }))
})
