import * as NodeFileSystem from "@effect/platform-node/NodeFileSystem"
import * as NodePath from "@effect/platform-node/NodePath"
import { assert, describe, it } from "@effect/vitest"
import * as ScriptLoader from "@reprise/simulator/ScriptLoader"
import * as Simulator from "@reprise/simulator/Simulator"
import * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Clock, Deferred, Effect, Fiber, Layer } from "effect"
import { createParser } from "eventsource-parser"
import * as Fs from "node:fs"
import * as Http from "node:http"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const NodeContextLayer = Layer.merge(NodeFileSystem.layer, NodePath.layer)

const fixturesDir = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../../fixtures")
// The recorded captures live beside the repository, in ../shared (as on CI).
const recordedDir = Path.resolve(fixturesDir, "../../shared/fixtures/recorded")

// -----------------------------------------------------------------------------
// a raw HTTP client that reports exactly what arrived on the wire
// -----------------------------------------------------------------------------

interface Received {
  readonly status: number | undefined
  readonly headers: Http.IncomingHttpHeaders
  readonly body: string
  readonly bytes: number
  /** `end`: the body ended cleanly; `error`: the connection failed; `aborted`: we stopped reading. */
  readonly outcome: "end" | "error" | "aborted"
  readonly error: string | undefined
  /** Arrival time (ms since the request was sent) and size of every body chunk. */
  readonly chunks: ReadonlyArray<{ readonly at: number; readonly bytes: number }>
  readonly headersAt: number | undefined
}

const paths: Record<SimulatorScript.Route, string> = {
  "openai-chat": "/v1/chat/completions",
  "openai-responses": "/v1/responses",
  anthropic: "/v1/messages",
  subscription: "/subscription/responses"
}

const send = (
  url: string,
  path: string,
  options: {
    readonly body?: unknown
    readonly method?: string
    readonly headers?: Record<string, string>
    /** Stop reading (destroy the connection) once this holds. */
    readonly stopWhen?: (body: string) => boolean
  } = {}
): Effect.Effect<Received> =>
  Effect.async<Received>((resume) => {
    const started = performance.now()
    const chunks: Array<Buffer> = []
    const times: Array<{ at: number; bytes: number }> = []
    let status: number | undefined
    let headers: Http.IncomingHttpHeaders = {}
    let headersAt: number | undefined
    let finished = false
    const finish = (outcome: Received["outcome"], error?: string) => {
      if (finished) return
      finished = true
      const body = Buffer.concat(chunks)
      resume(Effect.succeed({
        status,
        headers,
        body: body.toString("utf8"),
        bytes: body.length,
        outcome,
        error,
        chunks: times,
        headersAt
      }))
    }
    const req = Http.request(url + path, {
      method: options.method ?? "POST",
      agent: false,
      headers: { "content-type": "application/json", ...options.headers }
    })
    req.on("response", (res) => {
      status = res.statusCode
      headers = res.headers
      headersAt = performance.now() - started
      res.on("data", (chunk: Buffer) => {
        chunks.push(chunk)
        times.push({ at: performance.now() - started, bytes: chunk.length })
        if (options.stopWhen?.(Buffer.concat(chunks).toString("utf8"))) {
          finish("aborted")
          req.destroy()
        }
      })
      res.on("error", (e) => finish("error", e.message))
      res.on("close", () => finish(res.complete ? "end" : "error", res.complete ? undefined : "incomplete body"))
    })
    req.on("error", (e) => finish("error", `${(e as NodeJS.ErrnoException).code ?? ""} ${e.message}`))
    req.end(options.body === undefined ? undefined : JSON.stringify(options.body))
    return Effect.sync(() => req.destroy())
  })

const request = { model: "sim-test", messages: [{ role: "user", content: "hi" }], stream: true }

const post = (simulator: Simulator.Service, route: SimulatorScript.Route, options: Parameters<typeof send>[2] = {}) =>
  send(simulator.url, paths[route], { body: request, ...options })

interface Event {
  readonly event: string | undefined
  readonly data: string
}

const parseSse = (body: string): { events: ReadonlyArray<Event>; comments: ReadonlyArray<string> } => {
  const events: Array<Event> = []
  const comments: Array<string> = []
  const parser = createParser({
    onEvent: (e) => events.push({ event: e.event, data: e.data }),
    onComment: (c) => comments.push(c)
  })
  parser.feed(body)
  return { events, comments }
}

const payloads = (body: string): ReadonlyArray<any> =>
  parseSse(body).events.filter((e) => e.data !== "[DONE]").map((e) => JSON.parse(e.data))

/** The text a client would decode from a body, per protocol. */
const textOf = (route: SimulatorScript.Route, body: string): string =>
  payloads(body).map((p) => {
    if (route === "openai-chat") return p.choices?.[0]?.delta?.content ?? ""
    if (route === "anthropic") return p.type === "content_block_delta" ? p.delta.text ?? "" : ""
    return p.type === "response.output_text.delta" ? p.delta : ""
  }).join("")

/** Whether the body carries the protocol's terminal event (DESIGN §3). */
const hasTerminal = (route: SimulatorScript.Route, body: string): boolean => {
  const { events } = parseSse(body)
  switch (route) {
    case "openai-chat":
      return payloads(body).some((p) => p.choices?.some((c: any) => typeof c.finish_reason === "string"))
    case "anthropic":
      return events.some((e) => e.event === "message_stop")
    case "openai-responses":
      return events.some((e) => e.event === "response.completed" || e.event === "response.incomplete")
    case "subscription":
      return events.some((e) => e.event === "response.completed" || e.data === "[DONE]")
  }
}

/** Tool-call arguments as a client accumulates them, per protocol. */
const argumentsOf = (route: SimulatorScript.Route, body: string): ReadonlyArray<string> => {
  const calls = new Map<string, string>()
  for (const p of payloads(body)) {
    if (route === "openai-chat") {
      for (const call of p.choices?.[0]?.delta?.tool_calls ?? []) {
        calls.set(String(call.index), (calls.get(String(call.index)) ?? "") + (call.function?.arguments ?? ""))
      }
    } else if (route === "anthropic") {
      if (p.type === "content_block_start" && p.content_block.type === "tool_use") calls.set(String(p.index), "")
      if (p.type === "content_block_delta" && p.delta.type === "input_json_delta") {
        calls.set(String(p.index), (calls.get(String(p.index)) ?? "") + p.delta.partial_json)
      }
    } else if (p.type === "response.function_call_arguments.delta") {
      calls.set(p.item_id, (calls.get(p.item_id) ?? "") + p.delta)
    }
  }
  return [...calls.values()]
}

const isJson = (text: string) => {
  try {
    JSON.parse(text)
    return true
  } catch {
    return false
  }
}

/** Generated ids and timestamps differ per request. */
const normalise = (body: string) => body.replace(/sim[-_]\d+/g, "sim").replace(/"created(_at)?":\d+/g, "")

const script = (route: SimulatorScript.Route, routeScript: SimulatorScript.RouteScript): SimulatorScript.Script => ({
  routes: { [route]: routeScript }
})

const text = "The quick brown fox jumps over the lazy dog, twice over."

// -----------------------------------------------------------------------------

// Each test gets its own server (listening on port 0 costs about a millisecond). Not `layer(...)` from
// @effect/vitest: with `excludeTestServices` it replaces `it.effect` for the whole file, TestClock included.
describe("Simulator", () => {
  const test = (name: string, body: () => Effect.Effect<void, unknown, Simulator.Simulator>) =>
    it.live(name, () => Effect.provide(body(), Simulator.layer({ fixturesDir })))

  for (const route of SimulatorScript.routes) {
    test(`${route}: a full stream ends with the terminal event and its text arrives in several deltas`, () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* sim.setScript(script(route, { reply: { text } }))
        const r = yield* post(sim, route)
        assert.strictEqual(r.status, 200)
        assert.strictEqual(r.outcome, "end")
        assert.match(String(r.headers["content-type"]), /^text\/event-stream/)
        assert.strictEqual(textOf(route, r.body), text)
        const deltas = payloads(r.body).filter((p) =>
          p.choices?.[0]?.delta?.content || p.delta?.type === "text_delta" || p.type === "response.output_text.delta"
        )
        assert.isAbove(deltas.length, 5)
        assert.isTrue(hasTerminal(route, r.body))
        const { events } = parseSse(r.body)
        if (route === "openai-chat" || route === "subscription") assert.strictEqual(events.at(-1)?.data, "[DONE]")
        if (route === "anthropic") assert.deepStrictEqual(events.at(-1)?.event, "message_stop")
        if (route === "openai-responses") assert.deepStrictEqual(events.at(-1)?.event, "response.completed")
      }))

    test(`${route}: eof ends the body cleanly just before the terminal event`, () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* sim.setScript(script(route, { reply: { text }, steps: [{ kind: "eof" }] }))
        const r = yield* post(sim, route)
        const full = yield* post(sim, route)
        assert.strictEqual(r.status, 200)
        assert.strictEqual(r.outcome, "end")
        assert.isFalse(hasTerminal(route, r.body))
        assert.isFalse(r.body.includes("[DONE]"))
        assert.strictEqual(textOf(route, r.body), text)
        // Everything up to the terminal event is there (ids and timestamps differ per request).
        assert.isTrue(normalise(full.body).startsWith(normalise(r.body)))
        assert.isTrue(hasTerminal(route, full.body))
      }))

    test(`${route}: an in-band error event replaces the rest of the stream`, () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* sim.setScript(script(route, { reply: { text }, steps: [{ kind: "error", afterEvents: 3 }] }))
        const r = yield* post(sim, route)
        assert.strictEqual(r.status, 200)
        assert.strictEqual(r.outcome, "end")
        const { events } = parseSse(r.body)
        assert.strictEqual(events.length, 4)
        assert.isFalse(hasTerminal(route, r.body))
        const last = JSON.parse(events[3]!.data)
        switch (route) {
          case "openai-chat":
            assert.strictEqual(events[3]!.event, undefined)
            assert.deepStrictEqual(last.error.type, "server_error")
            break
          case "anthropic":
            assert.strictEqual(events[3]!.event, "error")
            assert.deepStrictEqual(last, { type: "error", error: { type: "overloaded_error", message: "Overloaded" } })
            break
          default:
            assert.strictEqual(events[3]!.event, "error")
            assert.strictEqual(last.type, "error")
            assert.strictEqual(last.code, "server_error")
            assert.strictEqual(last.sequence_number, 3)
        }
      }))

    test(`${route}: a truncated tool call ends the body with incomplete JSON arguments`, () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        const reply = {
          text: "Appending.",
          toolCalls: [{ name: "append_file", arguments: { path: "notes.txt", line: "hello world" } }]
        }
        yield* sim.setScript(script(route, { reply, steps: [{ kind: "truncated-tool-call", afterChars: 13 }] }))
        const r = yield* post(sim, route)
        const full = yield* post(sim, route)
        assert.strictEqual(r.outcome, "end")
        assert.isFalse(hasTerminal(route, r.body))
        assert.deepStrictEqual(argumentsOf(route, r.body), [`{"path":"note`])
        assert.isFalse(isJson(argumentsOf(route, r.body)[0]!))
        assert.deepStrictEqual(argumentsOf(route, full.body), [`{"path":"notes.txt","line":"hello world"}`])
      }))
  }

  test("reset before headers: the connection is reset and no status arrives", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(script("openai-chat", { steps: [{ kind: "reset" }] }))
      const r = yield* post(sim, "openai-chat")
      assert.strictEqual(r.status, undefined)
      assert.strictEqual(r.outcome, "error")
      assert.match(r.error!, /ECONNRESET/)
      const [record] = yield* sim.requests
      assert.strictEqual(record!.step, "reset")
      const closed = yield* sim.awaitClose(record!.id)
      assert.deepStrictEqual([closed.by, closed.bytesWritten], ["server", 0])
    }))

  for (const afterBytes of [0, 1, 137, 700]) {
    test(`reset after ${afterBytes} body bytes: exactly that many bytes arrive, then the connection fails`, () =>
      Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* sim.setScript(
          script("anthropic", { reply: { fixture: "anthropic/text.sse" }, steps: [{ kind: "reset", afterBytes }] })
        )
        const r = yield* post(sim, "anthropic")
        const full = yield* post(sim, "anthropic")
        assert.strictEqual(r.status, 200)
        assert.strictEqual(r.outcome, "error")
        assert.strictEqual(r.bytes, afterBytes)
        assert.strictEqual(r.body, full.body.slice(0, afterBytes))
      }))
  }

  test("reset after N events cuts at an event boundary", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(script("openai-chat", { reply: { text }, steps: [{ kind: "reset", afterEvents: 2 }] }))
      const r = yield* post(sim, "openai-chat")
      assert.strictEqual(r.outcome, "error")
      assert.strictEqual(parseSse(r.body).events.length, 2)
      assert.isTrue(r.body.endsWith("\n\n"))
    }))

  test("eof after N bytes may end mid-event, still cleanly", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(script("openai-responses", { reply: { text }, steps: [{ kind: "eof", afterBytes: 50 }] }))
      const r = yield* post(sim, "openai-responses")
      assert.strictEqual(r.outcome, "end")
      assert.strictEqual(r.bytes, 50)
      assert.isFalse(r.body.endsWith("\n\n"))
    }))

  test("stall after N bytes: the bytes arrive, then nothing, until the client gives up", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(script("openai-chat", { reply: { text }, steps: [{ kind: "stall", afterBytes: 300 }] }))
      const fiber = yield* Effect.fork(post(sim, "openai-chat"))
      const record = yield* sim.awaitRequest("openai-chat", 1)
      yield* Effect.sleep("400 millis")
      assert.isNull(fiber.unsafePoll())
      yield* Fiber.interrupt(fiber)
      const closed = yield* sim.awaitClose(record.id)
      assert.strictEqual(closed.by, "client")
      assert.strictEqual(closed.bytesWritten, 300)
      const [after] = yield* sim.requests
      assert.deepStrictEqual(after!.closed, closed)
    }))

  test("stall with keepalives: comments at event boundaries every K ms during the stall", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(
        script("openai-chat", { reply: { text }, steps: [{ kind: "stall", afterBytes: 300, keepaliveMs: 50 }] })
      )
      const r = yield* post(sim, "openai-chat", {
        stopWhen: (body) => body.split(": keepalive\n\n").length > 4
      })
      const keepalive = r.body.indexOf(": keepalive\n\n")
      const before = r.body.slice(0, keepalive)
      // The stall point moved back to the last event boundary at or before byte 300.
      assert.isAtMost(Buffer.byteLength(before), 300)
      assert.isTrue(before.endsWith("\n\n"))
      assert.strictEqual(parseSse(r.body).comments.length, 4)
      assert.strictEqual(r.body.slice(keepalive), ": keepalive\n\n".repeat(4))
      const keepaliveChunks = r.chunks.slice(-4)
      const gaps = keepaliveChunks.slice(1).map((c, i) => c.at - keepaliveChunks[i]!.at)
      for (const gap of gaps) assert.isAtLeast(gap, 30)
      const [record] = yield* sim.requests
      assert.strictEqual((yield* sim.awaitClose(record!.id)).by, "client")
    }))

  test("stall for a duration, then resume: the whole reply arrives after the pause", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(
        script("anthropic", { reply: { text }, steps: [{ kind: "stall", afterEvents: 2, durationMs: 250 }] })
      )
      const r = yield* post(sim, "anthropic")
      assert.strictEqual(r.outcome, "end")
      assert.isTrue(hasTerminal("anthropic", r.body))
      assert.strictEqual(textOf("anthropic", r.body), text)
      assert.isAtLeast(r.chunks.at(-1)!.at - r.chunks[0]!.at, 200)
    }))

  test("stall before headers, then reset: no status line for the duration, then a reset", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(script("subscription", { steps: [{ kind: "stall", durationMs: 200, then: "reset" }] }))
      const started = yield* Clock.currentTimeMillis
      const r = yield* post(sim, "subscription")
      const elapsed = (yield* Clock.currentTimeMillis) - started
      assert.strictEqual(r.status, undefined)
      assert.strictEqual(r.outcome, "error")
      assert.isAtLeast(elapsed, 180)
    }))

  test("drip: one event per interval", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(
        script("openai-chat", { reply: { text: "one two three four" }, steps: [{ kind: "drip", everyMs: 40 }] })
      )
      const r = yield* post(sim, "openai-chat")
      const events = parseSse(r.body).events.length
      assert.strictEqual(r.outcome, "end")
      assert.isTrue(hasTerminal("openai-chat", r.body))
      // One chunk per event, about 40 ms apart.
      assert.strictEqual(r.chunks.length, events)
      const span = r.chunks.at(-1)!.at - r.chunks[0]!.at
      assert.isAtLeast(span, (events - 1) * 40 * 0.9)
      assert.isBelow(span, (events - 1) * 40 * 4)
    }))

  test("pace by bytes: fixed-size pieces", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(script("anthropic", { steps: [{ kind: "drip", everyMs: 10, bytes: 100 }] }))
      const r = yield* post(sim, "anthropic")
      assert.isTrue(hasTerminal("anthropic", r.body))
      assert.strictEqual(r.chunks.length, Math.ceil(r.bytes / 100))
      for (const chunk of r.chunks.slice(0, -1)) assert.strictEqual(chunk.bytes, 100)
    }))

  test("status: 429 with Retry-After and retry-after-ms, and the protocol's error body", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      const step: SimulatorScript.Step = {
        kind: "status",
        status: 429,
        headers: { "Retry-After": "3", "retry-after-ms": "2500" }
      }
      yield* sim.setScript({ routes: { "openai-chat": { steps: [step] }, anthropic: { steps: [step] } } })
      const openai = yield* post(sim, "openai-chat")
      assert.strictEqual(openai.status, 429)
      assert.strictEqual(openai.headers["retry-after"], "3")
      assert.strictEqual(openai.headers["retry-after-ms"], "2500")
      assert.strictEqual(JSON.parse(openai.body).error.code, "rate_limit_exceeded")
      const anthropic = yield* post(sim, "anthropic")
      assert.strictEqual(anthropic.status, 429)
      assert.deepStrictEqual(JSON.parse(anthropic.body).error.type, "rate_limit_error")
    }))

  test("status: 400 context_length_exceeded, 401, 503, 308 with Location, a verbatim body", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(script("openai-chat", {
        steps: [
          { kind: "status", status: 400, error: { code: "context_length_exceeded", message: "too long" } },
          { kind: "status", status: 401 },
          { kind: "status", status: 503, headers: { "x-should-retry": "false" } },
          { kind: "status", status: 308, headers: { location: "https://elsewhere.example/v1/chat/completions" } },
          { kind: "status", status: 502, body: "<html>bad gateway</html>", headers: { "content-type": "text/html" } }
        ]
      }))
      const overflow = yield* post(sim, "openai-chat")
      assert.strictEqual(overflow.status, 400)
      assert.deepStrictEqual(JSON.parse(overflow.body), {
        error: { message: "too long", type: "invalid_request_error", param: null, code: "context_length_exceeded" }
      })
      const auth = yield* post(sim, "openai-chat")
      assert.strictEqual(auth.status, 401)
      assert.strictEqual(JSON.parse(auth.body).error.code, "invalid_api_key")
      const unavailable = yield* post(sim, "openai-chat")
      assert.strictEqual(unavailable.status, 503)
      assert.strictEqual(unavailable.headers["x-should-retry"], "false")
      const redirect = yield* post(sim, "openai-chat")
      assert.strictEqual(redirect.status, 308)
      assert.strictEqual(redirect.headers.location, "https://elsewhere.example/v1/chat/completions")
      assert.strictEqual(redirect.body, "")
      const html = yield* post(sim, "openai-chat")
      assert.strictEqual(html.status, 502)
      assert.strictEqual(html.headers["content-type"], "text/html")
      assert.strictEqual(html.body, "<html>bad gateway</html>")
    }))

  test("responses: an in-band response.failed event", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(script("openai-responses", {
        steps: [{
          kind: "error",
          event: "response.failed",
          error: { code: "rate_limit_exceeded", message: "slow down" }
        }]
      }))
      const r = yield* post(sim, "openai-responses")
      const last = parseSse(r.body).events.at(-1)!
      assert.strictEqual(last.event, "response.failed")
      const payload = JSON.parse(last.data)
      assert.strictEqual(payload.response.status, "failed")
      assert.deepStrictEqual(payload.response.error, { code: "rate_limit_exceeded", message: "slow down" })
      assert.isFalse(hasTerminal("openai-responses", r.body))
    }))

  test("fixtures are served byte for byte, and cut around their terminal event", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript({
        routes: {
          anthropic: { reply: { fixture: "anthropic/fallback.sse" }, steps: [{ kind: "stream" }, { kind: "eof" }] },
          "openai-chat": {
            reply: { fixture: Path.join(recordedDir, "openai-compatible/issue-15789-step-1.chunks.txt") },
            steps: [{ kind: "stream" }, { kind: "truncated-tool-call" }]
          }
        }
      })
      const wire = Fs.readFileSync(Path.join(fixturesDir, "anthropic/fallback.sse"), "utf8")
      const full = yield* post(sim, "anthropic")
      assert.strictEqual(full.body, wire)
      const eof = yield* post(sim, "anthropic")
      assert.strictEqual(eof.body, wire.slice(0, wire.indexOf("event: message_stop")))
      // A chunks file is framed for its route: `data:` lines and a final [DONE].
      const chunks = yield* post(sim, "openai-chat")
      assert.strictEqual(parseSse(chunks.body).events.at(-1)!.data, "[DONE]")
      assert.deepStrictEqual(argumentsOf("openai-chat", chunks.body), ["{}"])
      const truncated = yield* post(sim, "openai-chat")
      assert.deepStrictEqual(argumentsOf("openai-chat", truncated.body), ["{"])
    }))

  test("records every request with credentials redacted, counts per route, and the step served", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript({
        routes: {
          "openai-chat": { steps: [{ kind: "status", status: 500 }, { kind: "eof" }] },
          anthropic: { steps: [{ kind: "status", status: 529 }], afterLast: "repeat-last" }
        }
      })
      const secret = "sk-live-abcdef0123456789"
      yield* post(sim, "openai-chat", { headers: { authorization: `Bearer ${secret}` } })
      yield* post(sim, "openai-chat")
      const third = yield* send(sim.url, "/chat/completions", { body: request })
      const a1 = yield* post(sim, "anthropic", { headers: { "x-api-key": secret, "anthropic-version": "2023-06-01" } })
      const a2 = yield* post(sim, "anthropic")
      const missing = yield* send(sim.url, "/v1/nowhere", { body: request })
      const wrongMethod = yield* send(sim.url, "/v1/messages", { method: "GET" })
      assert.strictEqual(third.outcome, "end")
      assert.isTrue(hasTerminal("openai-chat", third.body), "after the last step, the default reply in full")
      assert.deepStrictEqual([a1.status, a2.status], [529, 529], "repeat-last")
      assert.deepStrictEqual([missing.status, wrongMethod.status], [404, 405])

      assert.strictEqual(yield* sim.count("openai-chat"), 3)
      assert.strictEqual(yield* sim.count("anthropic"), 2)
      assert.strictEqual(yield* sim.count("subscription"), 0)
      assert.strictEqual(yield* sim.count(), 5)
      const records = yield* sim.requests
      assert.strictEqual(records.length, 7)
      assert.isFalse(JSON.stringify(records).includes(secret))
      const [c1, c2, c3, r1] = records
      assert.strictEqual(c1!.headers.authorization, "Bearer <redacted>")
      assert.strictEqual(r1!.headers["x-api-key"], "<redacted>")
      assert.strictEqual(r1!.headers["anthropic-version"], "2023-06-01")
      assert.deepStrictEqual(c1!.body, request)
      assert.deepStrictEqual(records.map((r) => [r.route, r.nth, r.step, r.stepIndex]), [
        ["openai-chat", 1, "status", 0],
        ["openai-chat", 2, "eof", 1],
        ["openai-chat", 3, "stream", undefined],
        ["anthropic", 1, "status", 0],
        ["anthropic", 2, "status", 0],
        [undefined, 0, undefined, undefined],
        [undefined, 0, undefined, undefined]
      ])
      assert.deepStrictEqual([c3!.path, records[5]!.path, records[6]!.method], [
        "/chat/completions",
        "/v1/nowhere",
        "GET"
      ])
      assert.isTrue(c1!.receivedAt <= c2!.receivedAt && c2!.receivedAt <= c3!.receivedAt)
      assert.deepStrictEqual(yield* sim.requestsTo("anthropic"), records.slice(3, 5))

      // GET / describes the server and is not recorded.
      const health = yield* send(sim.url, "/", { method: "GET" })
      assert.deepStrictEqual(JSON.parse(health.body).baseUrls.anthropic, sim.url)
      assert.deepStrictEqual(JSON.parse(health.body).counts["openai-chat"], 3)
      assert.strictEqual((yield* sim.requests).length, 7)

      yield* sim.clear
      assert.strictEqual(yield* sim.count(), 0)
      assert.deepStrictEqual(yield* sim.requests, [])
    }))

  test("setRoute replaces one route's steps and restarts it; setScript restarts everything", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(script("openai-chat", { steps: [{ kind: "status", status: 500 }] }))
      assert.strictEqual((yield* post(sim, "openai-chat")).status, 500)
      assert.strictEqual((yield* post(sim, "openai-chat")).status, 200)
      yield* sim.setRoute("openai-chat", { steps: [{ kind: "status", status: 418 }] })
      assert.strictEqual((yield* post(sim, "openai-chat")).status, 418)
      assert.strictEqual(yield* sim.count("openai-chat"), 3)
      yield* sim.setScript(script("openai-chat", { steps: [{ kind: "status", status: 502 }] }))
      assert.strictEqual(yield* sim.count("openai-chat"), 0)
      assert.strictEqual((yield* post(sim, "openai-chat")).status, 502)
    }))

  test("awaitRequest waits for a request to arrive", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(script("anthropic", { steps: [{ kind: "stall" }] }))
      const waiter = yield* Effect.fork(sim.awaitRequest("anthropic", 1))
      yield* Effect.sleep("50 millis")
      assert.isNull(waiter.unsafePoll())
      const client = yield* Effect.fork(post(sim, "anthropic"))
      const record = yield* Fiber.join(waiter)
      assert.strictEqual(record.route, "anthropic")
      assert.isUndefined(record.closed)
      yield* Fiber.interrupt(client)
      assert.strictEqual((yield* sim.awaitClose(record.id)).by, "client")
    }))

  test("a truncated-tool-call step on a reply without tool calls is a 500 from the simulator", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(script("openai-chat", { steps: [{ kind: "truncated-tool-call" }] }))
      const r = yield* post(sim, "openai-chat")
      assert.strictEqual(r.status, 500)
      assert.strictEqual(JSON.parse(r.body).error.type, "simulator_error")
    }))

  test("a missing fixture fails setScript with a Fixture ScriptError", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      const error = yield* Effect.flip(sim.setScript(script("anthropic", { reply: { fixture: "anthropic/nope.sse" } })))
      assert.strictEqual(error.reason, "Fixture")
      assert.match(error.message, /cannot read fixture .*anthropic\/nope\.sse/)
    }))
})

// -----------------------------------------------------------------------------

describe("Simulator lifecycle", () => {
  it.live("closing the scope destroys open sockets: a stalled client fails promptly", () =>
    Effect.gen(function*() {
      const result = yield* Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* sim.setScript(script("openai-chat", { steps: [{ kind: "stall", afterBytes: 10 }] }))
        const client = yield* Effect.fork(post(sim, "openai-chat"))
        yield* sim.awaitRequest("openai-chat", 1)
        yield* Effect.sleep("100 millis")
        return { client, url: sim.url }
      }).pipe(Effect.provide(Simulator.layer()), Effect.scoped)
      const started = yield* Clock.currentTimeMillis
      const r = yield* Fiber.join(result.client)
      assert.strictEqual(r.outcome, "error")
      assert.strictEqual(r.bytes, 10)
      assert.isBelow((yield* Clock.currentTimeMillis) - started, 1000)
      const refused = yield* send(result.url, "/v1/chat/completions", { body: request })
      assert.match(refused.error!, /ECONNREFUSED/)
    }))

  it.effect("timers pace real sockets: a stall ends on the real clock even under TestClock", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript(script("openai-chat", { steps: [{ kind: "stall", afterBytes: 10, durationMs: 100 }] }))
      // No TestClock.adjust: the simulator's stall still ends after 100 real milliseconds.
      const r = yield* post(sim, "openai-chat")
      assert.strictEqual(r.outcome, "end")
      assert.isTrue(hasTerminal("openai-chat", r.body))
      assert.strictEqual(yield* Clock.currentTimeMillis, 0)
    }).pipe(Effect.provide(Simulator.layer())))

  it.effect("listens on the port it is given", () =>
    Effect.gen(function*() {
      const probe = yield* Simulator.Simulator.pipe(Effect.provide(Simulator.layer()))
      const port = probe.port
      const sim = yield* Simulator.Simulator.pipe(Effect.provide(Simulator.layer({ port })))
      assert.strictEqual(sim.port, port)
      assert.strictEqual(sim.url, `http://127.0.0.1:${port}`)
      assert.strictEqual(sim.baseUrl("openai-chat"), `http://127.0.0.1:${port}/v1`)
      assert.strictEqual(sim.baseUrl("anthropic"), `http://127.0.0.1:${port}`)
      assert.strictEqual(sim.baseUrl("subscription"), `http://127.0.0.1:${port}/subscription`)
      const [busy, taken] = yield* Effect.scoped(Effect.gen(function*() {
        const a = yield* Simulator.make().pipe(Effect.provide(NodeContextLayer))
        return [
          a.port,
          yield* Effect.flip(Simulator.make({ port: a.port }).pipe(Effect.provide(NodeContextLayer)))
        ] as const
      }))
      assert.strictEqual(taken._tag, "SimulatorError")
      assert.match(taken.message, new RegExp(`^simulator cannot listen on 127\\.0\\.0\\.1:${busy}: .*EADDRINUSE`))
    }))

  it.live("serve runs a script file until interrupted", () =>
    Effect.gen(function*() {
      const listening = yield* Deferred.make<string>()
      const fiber = yield* Effect.fork(Simulator.serve({
        scriptFile: Path.join(fixturesDir, "scripts/truncated-tool-call.json"),
        log: false,
        onListening: (sim) => Deferred.succeed(listening, sim.url)
      }))
      const url = yield* Deferred.await(listening)
      const first = yield* send(url, "/v1/messages", { body: request })
      assert.isFalse(isJson(argumentsOf("anthropic", first.body)[0]!))
      const second = yield* send(url, "/v1/messages", { body: request })
      assert.deepStrictEqual(argumentsOf("anthropic", second.body).map((a) => JSON.parse(a)), [
        { path: "notes.txt", line: "hello from the fixture" }
      ])
      yield* Fiber.interrupt(fiber)
      const refused = yield* send(url, "/v1/messages", { body: request })
      assert.match(refused.error!, /ECONNREFUSED/)
    }))
})

// -----------------------------------------------------------------------------

describe("SimulatorScript", () => {
  const decodeError = (input: unknown) => Effect.flip(ScriptLoader.decode(input))

  it.effect("an unknown step kind names the step and the kinds there are", () =>
    Effect.gen(function*() {
      const error = yield* decodeError({ routes: { "openai-chat": { steps: [{ kind: "stream" }, { kind: "rest" }] } } })
      assert.strictEqual(error.reason, "Schema")
      assert.strictEqual(error.issues.length, 1)
      assert.match(error.issues[0]!, /^routes\["openai-chat"\]\.steps\[1\]\.kind: Expected "stream" \| "reset"/)
      assert.include(error.issues[0]!, `actual "rest"`)
      assert.match(error.message, /^invalid simulator script:\n {2}- routes\["openai-chat"\]\.steps\[1\]\.kind/)
    }))

  it.effect("a bad value points at its field", () =>
    Effect.gen(function*() {
      const error = yield* decodeError({ routes: { anthropic: { steps: [{ kind: "reset", afterBytes: -3 }] } } })
      assert.deepStrictEqual(error.issues, [
        "routes.anthropic.steps[0].afterBytes: Expected a non-negative integer, actual -3"
      ])
      const status = yield* decodeError({ routes: { anthropic: { steps: [{ kind: "status", status: 101 }] } } })
      assert.deepStrictEqual(status.issues, [
        "routes.anthropic.steps[0].status: Expected an HTTP status: an integer between 200 and 599, actual 101"
      ])
      const millis = yield* decodeError({ routes: { anthropic: { steps: [{ kind: "drip", everyMs: 0 }] } } })
      assert.match(
        millis.issues[0]!,
        /^routes\.anthropic\.steps\[0\]\.everyMs: Expected a whole number of milliseconds/
      )
    }))

  it.effect("a misspelt field or route is reported, not ignored", () =>
    Effect.gen(function*() {
      const field = yield* decodeError({ routes: { anthropic: { steps: [{ kind: "reset", afterbytes: 3 }] } } })
      assert.deepStrictEqual(field.issues, [
        `routes.anthropic.steps[0].afterbytes: is unexpected, expected: "kind" | "reply" | "headers" | "pace" | "forMs" | "comment" | "afterBytes" | "afterEvents" | "afterTokens"`
      ])
      const route = yield* decodeError({ routes: { openai: {} } })
      assert.match(route.issues[0]!, /^routes\.openai: is unexpected/)
    }))

  it.effect("contradictory fields are rejected", () =>
    Effect.gen(function*() {
      const error = yield* decodeError({
        routes: { "openai-chat": { steps: [{ kind: "eof", afterBytes: 1, afterEvents: 1 }] } }
      })
      assert.deepStrictEqual(error.issues, [
        "routes[\"openai-chat\"].steps[0]: give either afterBytes or afterEvents, not both"
      ])
    }))

  it.effect("a reply is a fixture or generated, and enumerations list their values", () =>
    Effect.gen(function*() {
      const both = yield* decodeError({ routes: { anthropic: { reply: { fixture: "a.sse", text: "x" } } } })
      assert.deepStrictEqual(both.issues, [
        "routes.anthropic.reply: a reply comes from a fixture or is generated, not both: remove text or fixture"
      ])
      const then = yield* decodeError({ routes: { anthropic: { steps: [{ kind: "stall", then: "restart" }] } } })
      assert.deepStrictEqual(then.issues, [
        `routes.anthropic.steps[0].then: Expected "resume" | "reset" | "eof", actual "restart"`
      ])
      const steps = yield* decodeError({ routes: { anthropic: { steps: "nope" } } })
      assert.deepStrictEqual(steps.issues, [`routes.anthropic.steps: Expected ReadonlyArray<Step>, actual "nope"`])
      const root = yield* decodeError([])
      assert.deepStrictEqual(root.issues, ["(script): Expected Script, actual []"])
      const step = yield* Effect.flip(ScriptLoader.decodeStep({ kind: "drip", everyMs: 10, bytes: 1, events: 2 }))
      assert.deepStrictEqual(step.issues, ["(step): give either bytes or events, not both"])
    }))

  it.effect("a usage's cache figures are parts of its input: together at most inputTokens", () =>
    Effect.gen(function*() {
      const usage = { inputTokens: 100, outputTokens: 5, cacheReadTokens: 60, cacheWriteTokens: 41 }
      const error = yield* decodeError({ routes: { anthropic: { reply: { usage } } } })
      assert.deepStrictEqual(error.issues, [
        "routes.anthropic.reply.usage: cacheReadTokens and cacheWriteTokens are parts of inputTokens: together at most inputTokens"
      ])
      const negative = yield* decodeError({
        routes: { anthropic: { reply: { usage: { ...usage, cacheReadTokens: -1 } } } }
      })
      assert.deepStrictEqual(negative.issues, [
        "routes.anthropic.reply.usage.cacheReadTokens: Expected a non-negative integer, actual -1"
      ])
      const script = yield* ScriptLoader.decode({
        routes: { anthropic: { reply: { usage: { ...usage, cacheWriteTokens: 40 } } } }
      })
      assert.deepStrictEqual(script.routes?.anthropic?.reply?.usage, { ...usage, cacheWriteTokens: 40 })
    }))

  it.effect("invalid JSON is a Json error", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(ScriptLoader.parse("{ routes: }", { file: "bad.json" }))
      assert.strictEqual(error.reason, "Json")
      assert.match(error.message, /^simulator script is not valid JSON \(bad\.json\): /)
    }))

  it.effect("every example script decodes and loads its fixtures", () =>
    Effect.gen(function*() {
      const dir = Path.join(fixturesDir, "scripts")
      const files = Fs.readdirSync(dir).filter((f) => f.endsWith(".json"))
      assert.isAtLeast(files.length, 5)
      for (const file of files) {
        const loaded = yield* ScriptLoader.load(Path.join(dir, file)).pipe(Effect.provide(NodeContextLayer))
        // Loading into a simulator reads every fixture the script names.
        yield* Effect.scoped(
          Effect.gen(function*() {
            const sim = yield* Simulator.Simulator
            yield* sim.setScript(loaded)
          }).pipe(Effect.provide(Simulator.layer()))
        )
      }
    }))

  it.effect("every wire fixture has its protocol's terminal event, and loses it under eof", () =>
    Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      for (const route of SimulatorScript.routes) {
        const files = Fs.readdirSync(Path.join(fixturesDir, route)).filter((f) => f.endsWith(".sse"))
        assert.isAtLeast(files.length, 2, route)
        for (const file of files) {
          const fixture = `${route}/${file}`
          yield* sim.setScript(script(route, { reply: { fixture }, steps: [{ kind: "stream" }, { kind: "eof" }] }))
          const full = yield* post(sim, route)
          assert.strictEqual(full.body, Fs.readFileSync(Path.join(fixturesDir, fixture), "utf8"), fixture)
          assert.isTrue(hasTerminal(route, full.body), fixture)
          const eof = yield* post(sim, route)
          assert.isFalse(hasTerminal(route, eof.body), fixture)
        }
      }
    }).pipe(Effect.provide(Simulator.layer({ fixturesDir }))))
})
