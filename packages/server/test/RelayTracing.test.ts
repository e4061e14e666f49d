/**
 * Each request runs in a server span, the parent of its reply's `reprise.reply` span; the access log has one entry per
 * request with its status, the sends of its reply and the route that served it.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option, Tracer } from "effect"
import { chat, post, relay } from "./support.js"

const recording = () => {
  const spans: Array<{ name: string; parent: string | undefined; attributes: Map<string, unknown> }> = []
  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      const attributes = new Map<string, unknown>()
      const span: Tracer.Span = {
        _tag: "Span",
        name,
        spanId: `${name}-${spans.length}`,
        traceId: "trace",
        parent,
        context,
        status: { _tag: "Started", startTime },
        attributes,
        links,
        sampled: true,
        kind,
        end: (endTime, exit: Exit.Exit<unknown, unknown>) => {
          ;(span as { status: Tracer.SpanStatus }).status = { _tag: "Ended", startTime, endTime, exit }
        },
        attribute: (key, value) => void attributes.set(key, value),
        event: () => {},
        addLinks: () => {}
      }
      spans.push({
        name,
        parent: Option.match(parent, {
          onNone: () => undefined,
          onSome: (p) => p._tag === "Span" ? p.name : "external"
        }),
        attributes
      })
      return span
    },
    context: (f) => f()
  })
  return { spans, tracer }
}

describe("Relay tracing and access log", () => {
  it.live("the server span is the parent of reprise.reply; one access-log entry per request", () => {
    const { spans, tracer } = recording()
    return Effect.gen(function*() {
      const h = yield* relay({
        models: { m: { reply: { text: "Hi." }, steps: [{ kind: "reset" }], then: { kind: "stream" } } }
      })
      const r = yield* post(`${h.url}/v1/chat/completions`, chat("m", { stream: true }))
      assert.strictEqual(r.status, 200)
      const reply = spans.find((s) => s.name === "reprise.reply")
      assert.isDefined(reply)
      assert.strictEqual(reply!.parent, "http.server POST")
      const server = spans.find((s) => s.name === "http.server POST")!
      assert.strictEqual(server.attributes.get("url.path"), "/v1/chat/completions")
      assert.strictEqual(server.attributes.get("http.response.status_code"), 200)
      for (let i = 0; i < 100 && h.log.length === 0; i++) yield* Effect.sleep("10 millis")
      assert.strictEqual(h.log.length, 1)
      const entry = h.log[0]!
      assert.deepInclude(entry, {
        method: "POST",
        path: "/v1/chat/completions",
        status: 200,
        attempts: 2,
        route: "openai-chat m",
        mode: "hold"
      })
      assert.isAtLeast(entry.durationMs, 0)
    }).pipe(Effect.scoped, Effect.withTracer(tracer))
  }, 20_000)
})
