/**
 * silent-cancel: a background response recovery leaves behind is cancelled (`POST {base}/responses/{id}/cancel`),
 * and a server that accepts the cancel and never answers holds a reply for at most the cancel's bound (2 s), wherever
 * the cancel is made: after a permanent error, at the deadline, before a replay, and when a library caller's
 * `Effect.timeout` interrupts the reply. The server is a raw `node:http` server on 127.0.0.1 that speaks just enough
 * of the Responses API's background mode; the clock is real (the bound is a real wait), and each test asserts the
 * cancel arrived, so the silent cancel was waited on.
 */
import { assert, describe, it } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import type * as Generation from "@reprise/core/Generation"
import * as Recovery from "@reprise/core/Recovery"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import { Cause, Duration, Effect, Exit, Layer, Option, Redacted } from "effect"
import * as http from "node:http"
import { failure, fastBackoff, KEY, type Notification, ofTag } from "./support/e2e.js"

/** What the cancel's bound allows, plus the test's own slack on a loaded machine. */
const bound = 4_000

/** What the server does with the nth send (`POST /v1/responses`, from 1). */
type Send =
  /** the response created and one delta, numbered, then the connection reset */
  | "cut"
  /** the same without `sequence_number`s: the response cannot be resumed, only replayed (and cancelled) */
  | "cut-unnumbered"
  /** the response created and one delta, then nothing, the connection kept open */
  | "stall"
  /** a whole reply, not in the background */
  | "complete"

interface Plan {
  readonly sends: ReadonlyArray<Send>
  /** The status a resume (`GET /v1/responses/{id}?stream=true`) answers. */
  readonly resumeStatus?: number | undefined
}

const frame = (data: Record<string, unknown>) => `event: ${data.type}\ndata: ${JSON.stringify(data)}\n\n`

const sse = { "content-type": "text/event-stream", "cache-control": "no-cache" }

/** The server: counts each kind of request; a cancel is read and never answered. */
const silentServer = (plan: Plan) =>
  Effect.acquireRelease(
    Effect.async<{ readonly base: string; readonly counts: Record<string, number>; readonly server: http.Server }>(
      (resume) => {
        const counts: Record<string, number> = { send: 0, resume: 0, poll: 0, cancel: 0 }
        const server = http.createServer((req, res) => {
          const url = new URL(req.url ?? "/", "http://127.0.0.1")
          req.resume()
          req.on("end", () => {
            if (req.method === "POST" && url.pathname === "/v1/responses") {
              const n = ++counts.send
              const kind = plan.sends[n - 1] ?? "complete"
              const id = `resp_silent_${n}`
              const numbered = kind !== "cut-unnumbered"
              const seq = (i: number) => (numbered ? { sequence_number: i } : {})
              res.writeHead(200, sse)
              if (kind === "complete") {
                res.end(
                  frame({ type: "response.created", ...seq(0), response: { id, status: "in_progress" } }) +
                    frame({
                      type: "response.output_text.delta",
                      ...seq(1),
                      item_id: "msg_1",
                      output_index: 0,
                      content_index: 0,
                      delta: "the replayed answer"
                    }) +
                    frame({ type: "response.completed", ...seq(2), response: { id, status: "completed" } })
                )
                return
              }
              res.write(
                frame({ type: "response.created", ...seq(0), response: { id, status: "queued", background: true } }) +
                  frame({
                    type: "response.output_text.delta",
                    ...seq(1),
                    item_id: "msg_1",
                    output_index: 0,
                    content_index: 0,
                    delta: "Half an "
                  }),
                () => {
                  if (kind !== "stall") setTimeout(() => req.socket.destroy(), 20)
                }
              )
              return
            }
            if (req.method === "POST" && url.pathname.endsWith("/cancel")) {
              counts.cancel++
              return // accepted, never answered
            }
            if (req.method === "GET" && url.searchParams.get("stream") === "true") {
              counts.resume++
              const status = plan.resumeStatus ?? 401
              res.writeHead(status, { "content-type": "application/json" }).end(
                JSON.stringify({ error: { message: "refused", type: "invalid_request_error", code: null } })
              )
              return
            }
            if (req.method === "GET") {
              counts.poll++
              const id = url.pathname.split("/").at(-1)
              res.writeHead(200, { "content-type": "application/json" }).end(
                JSON.stringify({ id, object: "response", status: "in_progress", background: true, output: [] })
              )
              return
            }
            res.writeHead(404).end()
          })
        })
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as { readonly port: number }
          resume(Effect.succeed({ base: `http://127.0.0.1:${port}/v1`, counts, server }))
        })
      }
    ),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )

const request: Generation.GenerationRequest = {
  model: "test-model",
  messages: [{ role: "user", text: "hello" }],
  background: true
}

/** One reply through the real provider and undici against `base`, its notifications recorded. */
const reply = (base: string, notes: Array<Notification>) =>
  Recovery.generate(request).pipe(
    Effect.provide(HttpProvider.layerUndici("openai-responses", { apiKey: Redacted.make(KEY), baseUrl: base })),
    Effect.provideService(RecoveryNotifications.RecoveryNotifications, {
      notify: (n) => Effect.sync(() => void notes.push(n))
    })
  )

/** `self` run to its exit, with the real time it took. */
const timed = <A, E, R>(self: Effect.Effect<A, E, R>) =>
  Effect.gen(function*() {
    const started = Date.now()
    const exit = yield* Effect.exit(self)
    return { exit, elapsed: Date.now() - started }
  })

/** The one cancel was made and not answered: told as failed by its bound. */
const cancelTimedOut = (notes: ReadonlyArray<Notification>, counts: Record<string, number>) => {
  assert.strictEqual(counts.cancel, 1)
  const cancelled = ofTag(notes, "ResponseCancelled")
  assert.strictEqual(cancelled.length, 1)
  assert.strictEqual((cancelled[0].error as any)?.reason, "Timeout")
}

describe("a cancel that is never answered holds a reply at most its bound", () => {
  it.live("after a permanent error (a resume refused with 401): the 401 surfaces", () =>
    Effect.gen(function*() {
      const { base, counts } = yield* silentServer({ sends: ["cut"], resumeStatus: 401 })
      const notes: Array<Notification> = []
      const { elapsed, exit } = yield* timed(reply(base, notes).pipe(Effect.provide(fastBackoff)))
      const error = failure({ exit, notes })
      assert.strictEqual(error._tag, "ProviderRejection")
      assert.strictEqual(error.status, 401)
      assert.deepStrictEqual([counts.send, counts.resume], [1, 1])
      cancelTimedOut(notes, counts)
      assert.isBelow(elapsed, bound)
    }).pipe(Effect.scoped), 10_000)

  it.live(
    "at the deadline (the polls of the last attempt would pass it): exhausted by the deadline",
    () =>
      Effect.gen(function*() {
        const { base, counts } = yield* silentServer({ sends: ["cut"] })
        const notes: Array<Notification> = []
        const { elapsed, exit } = yield* timed(
          reply(base, notes).pipe(
            Effect.provide(Layer.merge(fastBackoff, Budget.layer({ maxAttempts: 2, deadline: Duration.millis(300) })))
          )
        )
        const error = failure({ exit, notes })
        assert.strictEqual(error._tag, "RecoveryExhausted")
        assert.strictEqual(error.reason, "Deadline")
        assert.strictEqual(counts.poll, 1)
        cancelTimedOut(notes, counts)
        assert.isBelow(elapsed, bound)
      }).pipe(Effect.scoped),
    10_000
  )

  it.live("before a replay (a cut response that cannot be resumed): the replay commits", () =>
    Effect.gen(function*() {
      const { base, counts } = yield* silentServer({ sends: ["cut-unnumbered", "complete"] })
      const notes: Array<Notification> = []
      const { elapsed, exit } = yield* timed(reply(base, notes).pipe(Effect.provide(fastBackoff)))
      assert.isTrue(Exit.isSuccess(exit), Exit.isFailure(exit) ? Cause.pretty(exit.cause) : "")
      assert.strictEqual(Exit.isSuccess(exit) && exit.value.text, "the replayed answer")
      assert.deepStrictEqual([counts.send, counts.resume, counts.poll], [2, 0, 0])
      cancelTimedOut(notes, counts)
      assert.isBelow(elapsed, bound)
    }).pipe(Effect.scoped), 10_000)

  it.live(
    "under a library caller's Effect.timeout: the timeout's failure, within the bound after it",
    () =>
      Effect.gen(function*() {
        const { base, counts } = yield* silentServer({ sends: ["stall"] })
        const notes: Array<Notification> = []
        const { elapsed, exit } = yield* timed(
          reply(base, notes).pipe(Effect.provide(fastBackoff), Effect.timeout(Duration.millis(300)))
        )
        assert.isTrue(Exit.isFailure(exit))
        const error = Exit.isFailure(exit) ? Cause.failureOption(exit.cause) : Option.none()
        assert.isTrue(Option.isSome(error) && Cause.isTimeoutException(error.value))
        assert.strictEqual(counts.send, 1)
        cancelTimedOut(notes, counts)
        assert.isBelow(elapsed, bound)
      }).pipe(Effect.scoped),
    10_000
  )
})
