/**
 * tracing: a reply's spans and metrics through the real OpenTelemetry SDK (`@effect/opentelemetry`'s `NodeSdk`, an
 * in-memory span exporter and a metric reader collected on demand), for every protocol, through the real provider
 * layers and undici against the loopback simulator. Every wait runs under TestClock.
 */
import * as NodeSdk from "@effect/opentelemetry/NodeSdk"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import { assert, describe, it } from "@effect/vitest"
import { SpanStatusCode } from "@opentelemetry/api"
import { type DataPoint, type Histogram, MetricReader, type ResourceMetrics } from "@opentelemetry/sdk-metrics"
import { InMemorySpanExporter, type ReadableSpan, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base"
import * as Budget from "@reprise/core/Budget"
import * as Circuit from "@reprise/core/Circuit"
import * as Message from "@reprise/core/Message"
import * as Policy from "@reprise/core/Policy"
import * as Recovery from "@reprise/core/Recovery"
import * as Routes from "@reprise/core/Routes"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as Simulator from "@reprise/simulator/Simulator"
import { Duration, Effect, Fiber, Layer, Redacted, TestClock } from "effect"
import {
  awaitSleepUntil,
  committed,
  failure,
  generate,
  KEY,
  longReply,
  midEvent,
  ofTag,
  protocols,
  script,
  simulator,
  start
} from "./support/e2e.js"

/** A metric reader the test collects from. */
class TestReader extends MetricReader {
  protected override onShutdown = () => Promise.resolve()
  protected override onForceFlush = () => Promise.resolve()
}

const telemetry = () => {
  const exporter = new InMemorySpanExporter()
  const reader = new TestReader()
  const layer = NodeSdk.layer(() => ({
    resource: { serviceName: "reprise-tracing-test" },
    spanProcessor: new SimpleSpanProcessor(exporter),
    metricReader: reader
  }))
  return { exporter, reader, layer }
}

/** Backoff of 10, 20, … ms without jitter. */
const backoff = Policy.layer({ backoffBase: Duration.millis(10), backoffMax: Duration.millis(40), jitter: false })

/** Metric data points of one run (tagged `test.run`), by metric name. */
const pointsOf = (metrics: ResourceMetrics, run: string) => {
  const out = new Map<string, Array<DataPoint<number | Histogram>>>()
  for (const scope of metrics.scopeMetrics) {
    for (const metric of scope.metrics) {
      const points = (metric.dataPoints as Array<DataPoint<number | Histogram>>).filter((p) =>
        p.attributes["test.run"] === run
      )
      if (points.length > 0) out.set(metric.descriptor.name, points)
    }
  }
  return out
}

const sum = (points: ReadonlyArray<DataPoint<number | Histogram>> | undefined) =>
  (points ?? []).reduce((total, p) => total + (p.value as number), 0)

let runs = 0

for (const protocol of protocols) {
  describe(`${protocol}: spans and metrics`, () => {
    it.effect("a reply with two failed attempts: one reply span, three attempt spans, their attributes and metrics", () => {
      const { exporter, reader, layer } = telemetry()
      const run = `${protocol}-${++runs}`
      return Effect.gen(function*() {
        const sim = yield* Simulator.Simulator
        yield* script(protocol, {
          steps: [
            { kind: "status", status: 429, headers: { "retry-after": "2", "x-request-id": "req_429_test" } },
            { kind: "reset", afterBytes: midEvent, reply: longReply("never shown") },
            { kind: "stream", reply: { text: "the committed answer" } }
          ]
        })
        const { run: generation, notes } = yield* start(protocol)
        const fiber = yield* Effect.fork(generation.pipe(Effect.tagMetrics("test.run", run)))
        yield* awaitSleepUntil(2000)
        yield* TestClock.adjust("2 seconds")
        yield* awaitSleepUntil(2020)
        yield* TestClock.adjust("20 millis")
        const outcome = yield* Fiber.join(fiber)
        const reply = committed(outcome)
        assert.strictEqual(reply.text, "the committed answer")
        assert.strictEqual(yield* sim.count(protocol), 3)
        const discarded = ofTag(outcome.notes, "AttemptDiscarded")
        assert.strictEqual(discarded.length, 2)
        assert.strictEqual(notes, outcome.notes)

        const spans = exporter.getFinishedSpans()
        const replies = spans.filter((s) => s.name === "reprise.reply")
        const attempts = spans.filter((s) => s.name === "reprise.attempt")
        assert.strictEqual(replies.length, 1)
        assert.strictEqual(attempts.length, 3)
        const [replySpan] = replies
        assert.isUndefined(replySpan.parentSpanContext, "the reply span is a root here")
        for (const a of attempts) {
          assert.strictEqual(a.parentSpanContext?.spanId, replySpan.spanContext().spanId)
          assert.strictEqual(a.spanContext().traceId, replySpan.spanContext().traceId)
        }
        // each send's own span (the HTTP client's) is a child of its attempt's
        const sends = spans.filter((s) => s.name.startsWith("http.client"))
        assert.strictEqual(sends.length, 3, spans.map((s) => s.name).join(", "))
        assert.sameMembers(
          sends.map((s) => s.parentSpanContext?.spanId),
          attempts.map((a) => a.spanContext().spanId)
        )
        const byAttempt = [...attempts].sort((a, b) =>
          (a.attributes["reprise.attempt"] as number) - (b.attributes["reprise.attempt"] as number)
        )
        const system = protocol === "anthropic" ? "anthropic" : "openai"
        assert.deepInclude(replySpan.attributes, {
          "gen_ai.system": system,
          "gen_ai.operation.name": "chat",
          "gen_ai.request.model": "sim-model",
          "reprise.protocol": protocol,
          "reprise.attempts": 3,
          "reprise.committed_chars": "the committed answer".length,
          "reprise.tool_calls": 0
        })
        assert.deepStrictEqual(finishReasons(replySpan), ["stop"])
        assert.strictEqual(replySpan.status.code, SpanStatusCode.OK)

        const [first, second, third] = byAttempt
        assert.deepStrictEqual(first.attributes, {
          "reprise.attempt": 1,
          "reprise.max_attempts": 11,
          "error.type": "TransportError",
          "reprise.error.class": "TransportError.HttpStatus",
          "http.response.status_code": 429,
          "reprise.provider.code": protocol === "anthropic" ? "rate_limit_error" : "rate_limit_exceeded",
          "reprise.provider.request_id": "req_429_test",
          "reprise.retry_after_ms": 2000,
          "reprise.discarded_chars": 0,
          "reprise.retryable": true,
          "reprise.outcome": "retried",
          "reprise.retry.delay_ms": 2000,
          "reprise.retry.delay_source": "retry-after",
          // its ledger entry: an answer before inference, not billed
          "gen_ai.usage.input_tokens": 0,
          "gen_ai.usage.output_tokens": 0,
          "reprise.usage.verdict": "not-billed",
          "reprise.usage.phase": "headers",
          "reprise.usage.input_source": "none",
          "reprise.usage.output_source": "none"
        })
        assert.strictEqual(first.status.code, SpanStatusCode.ERROR)
        assert.match(first.status.message ?? "", /HTTP 429/)

        assert.deepInclude(second.attributes, {
          "reprise.attempt": 2,
          "error.type": "TransportError",
          "reprise.error.class": "TransportError.Reset",
          "reprise.discarded_chars": discarded[1].discardedText.length,
          "reprise.retryable": true,
          "reprise.outcome": "retried",
          "reprise.retry.delay_ms": 20,
          "reprise.retry.delay_source": "backoff"
        })
        assert.isAbove(second.attributes["reprise.discarded_chars"] as number, 0)
        // a stream cut after content: estimated, its output from the characters it produced
        assert.deepInclude(second.attributes, {
          "gen_ai.usage.output_tokens": Math.ceil(discarded[1].discardedText.length / 4),
          "reprise.usage.verdict": "estimated",
          "reprise.usage.phase": "content",
          "reprise.usage.output_source": "estimated"
        })
        const ledger = reply.ledger!
        assert.deepStrictEqual(discarded.map((d) => d.entry), ledger.entries.slice(0, 2))
        assert.strictEqual(second.attributes["gen_ai.usage.input_tokens"], ledger.entries[1]!.tokens.input)
        assert.deepInclude(replySpan.attributes, {
          "reprise.discarded.input_tokens": ledger.discarded.tokens.input,
          "reprise.discarded.output_tokens": ledger.discarded.tokens.output
        })
        assert.strictEqual(second.status.code, SpanStatusCode.ERROR)

        assert.deepInclude(third.attributes, {
          "reprise.attempt": 3,
          "reprise.outcome": "committed",
          "reprise.usage.phase": "terminal",
          "reprise.usage.verdict": ledger.entries[2]!.verdict
        })
        assert.strictEqual(ledger.entries[2]!.verdict, reply.usage._tag === "Some" ? "exact" : "estimated")
        assert.deepStrictEqual(finishReasons(third), ["stop"])
        assert.isUndefined(third.attributes["error.type"])
        assert.strictEqual(third.status.code, SpanStatusCode.OK)
        // the attempts do not overlap, and the backoff sleeps lie between them, in the reply span
        assert.isTrue(spanEnd(first) <= spanStart(second) && spanEnd(second) <= spanStart(third))
        assert.strictEqual(spanStart(second) - spanEnd(first), 2000)
        assert.notInclude(JSON.stringify(spans.map(spanJson)), KEY)

        const { resourceMetrics } = yield* Effect.promise(() => reader.collect())
        const points = pointsOf(resourceMetrics, run)
        assert.strictEqual(sum(points.get("reprise.attempts")), 3)
        assert.strictEqual(sum(points.get("reprise.discards")), 2)
        assert.strictEqual(sum(points.get("reprise.replies.committed")), 1)
        assert.strictEqual(sum(points.get("reprise.retry_after.waits")), 1)
        assert.isUndefined(points.get("reprise.exhaustions"))
        const tokens = (outcome: string, kind: string) =>
          sum(
            points.get("reprise.tokens")!.filter((p) => p.attributes.outcome === outcome && p.attributes.kind === kind)
          )
        assert.strictEqual(tokens("discarded", "output"), ledger.discarded.tokens.output)
        assert.strictEqual(tokens("discarded", "input"), ledger.discarded.tokens.input)
        assert.strictEqual(tokens("committed", "output"), ledger.committed.tokens.output)
        for (const p of points.get("reprise.attempts")!) assert.strictEqual(p.attributes["gen_ai.system"], system)
        const delays = points.get("reprise.retry.delay")!.map((p) => ({
          source: p.attributes.source,
          count: (p.value as Histogram).count,
          sum: (p.value as Histogram).sum
        }))
        assert.sameDeepMembers(delays, [
          { source: "retry-after", count: 1, sum: 2000 },
          { source: "backoff", count: 1, sum: 20 }
        ])
      }).pipe(Effect.provide(Layer.mergeAll(simulator, backoff, layer)))
    })
  })
}

describe("exhaustion and permanent failures", () => {
  it.effect("attempts exhausted: the reply span fails with RecoveryExhausted and the exhaustion is counted", () => {
    const { exporter, reader, layer } = telemetry()
    const run = `exhausted-${++runs}`
    return Effect.gen(function*() {
      yield* script("openai-chat", { steps: [{ kind: "status", status: 503 }], afterLast: "repeat-last" })
      const { run: generation } = yield* start("openai-chat")
      const fiber = yield* Effect.fork(generation.pipe(Effect.tagMetrics("test.run", run)))
      yield* awaitSleepUntil(10)
      yield* TestClock.adjust("10 millis")
      const error = failure(yield* Fiber.join(fiber))
      assert.strictEqual(error._tag, "RecoveryExhausted")
      assert.strictEqual(error.reason, "Attempts")

      const spans = exporter.getFinishedSpans()
      const [replySpan] = spans.filter((s) => s.name === "reprise.reply")
      const attempts = spans.filter((s) => s.name === "reprise.attempt")
      assert.strictEqual(attempts.length, 2)
      assert.strictEqual(replySpan.status.code, SpanStatusCode.ERROR)
      assert.deepInclude(replySpan.attributes, { "reprise.exhausted.reason": "Attempts", "reprise.attempts": 2 })
      const last = attempts.find((a) => a.attributes["reprise.attempt"] === 2)!
      assert.deepInclude(last.attributes, { "reprise.outcome": "surfaced", "http.response.status_code": 503 })
      assert.isUndefined(last.attributes["reprise.retry.delay_ms"])
      assert.match(last.status.message ?? "", /HTTP 503/, "the attempt's span fails with the attempt's own error")

      const points = pointsOf((yield* Effect.promise(() => reader.collect())).resourceMetrics, run)
      assert.deepStrictEqual(
        points.get("reprise.exhaustions")!.map((p) => [p.attributes.reason, p.value]),
        [["Attempts", 1]]
      )
      assert.isUndefined(points.get("reprise.replies.committed"))
    }).pipe(
      Effect.provide(Layer.mergeAll(simulator, backoff, layer, Budget.layer({ maxAttempts: 2 })))
    )
  })

  it.effect("a permanent failure (401) is sent once: one attempt span, surfaced, counted by class", () => {
    const { exporter, reader, layer } = telemetry()
    const run = `permanent-${++runs}`
    return Effect.gen(function*() {
      yield* script("anthropic", { steps: [{ kind: "status", status: 401 }] })
      const { run: generation } = yield* start("anthropic")
      const error = failure(yield* generation.pipe(Effect.tagMetrics("test.run", run)))
      assert.strictEqual(error._tag, "ProviderRejection")
      const spans = exporter.getFinishedSpans()
      const [attempt] = spans.filter((s) => s.name === "reprise.attempt")
      assert.deepInclude(attempt.attributes, {
        "reprise.error.class": "ProviderRejection.Authentication",
        "reprise.retryable": false,
        "reprise.outcome": "surfaced",
        "http.response.status_code": 401
      })
      const [replySpan] = spans.filter((s) => s.name === "reprise.reply")
      assert.deepInclude(replySpan.attributes, { "reprise.error.class": "ProviderRejection.Authentication" })
      assert.notInclude(JSON.stringify(spans.map(spanJson)), KEY)
      const points = pointsOf((yield* Effect.promise(() => reader.collect())).resourceMetrics, run)
      assert.deepStrictEqual(
        points.get("reprise.surfaced")!.map((p) => [p.attributes["error.type"], p.value]),
        [["ProviderRejection", 1]]
      )
      assert.strictEqual(sum(points.get("reprise.attempts")), 1)
    }).pipe(Effect.provide(Layer.mergeAll(simulator, backoff, layer)))
  })
})

describe("a server that echoes the key in response headers", () => {
  // the platform's client span records every response header but authorization, cookies and x-api-key
  const echo = {
    "x-echo": KEY,
    "x-echo-bearer": `Bearer ${KEY}`,
    "x-echo-start": KEY.slice(0, 12),
    "x-echo-end": KEY.slice(-10)
  }
  const pieces = Array.from({ length: KEY.length - 7 }, (_, i) => KEY.slice(i, i + 8))

  for (const protocol of protocols) {
    it.effect(`${protocol}: the reply and a permanent failure, both echoing: their client spans hold no piece of it`, () => {
      const { exporter, layer } = telemetry()
      return Effect.gen(function*() {
        yield* script(protocol, { steps: [{ kind: "stream", reply: { text: "echoed" }, headers: echo }] })
        assert.strictEqual(committed(yield* generate(protocol)).text, "echoed")
        yield* script(protocol, { steps: [{ kind: "status", status: 400, headers: echo }] })
        assert.strictEqual(failure(yield* generate(protocol))._tag, "ProviderRejection")

        const spans = exporter.getFinishedSpans()
        const sends = spans.filter((s) => s.name.startsWith("http.client"))
        assert.strictEqual(sends.length, 2)
        for (const send of sends) {
          assert.deepInclude(send.attributes, {
            "http.response.header.x-echo": "<redacted>",
            "http.response.header.x-echo-bearer": "Bearer <redacted>",
            "http.response.header.x-echo-start": "<redacted>",
            "http.response.header.x-echo-end": "<redacted>"
          })
        }
        const exported = JSON.stringify(spans.map(spanJson))
        for (const piece of pieces) assert.notInclude(exported, piece)
      }).pipe(Effect.provide(Layer.mergeAll(simulator, layer)))
    })
  }
})

/**
 * `gen_ai.response.finish_reasons` is a string array; `@effect/opentelemetry` 0.64 passes only primitive attribute
 * values to the SDK and writes others as JSON, so the exported value is the array's JSON.
 */
const finishReasons = (span: ReadableSpan) => JSON.parse(span.attributes["gen_ai.response.finish_reasons"] as string)

const nanos = ([seconds, ns]: readonly [number, number]) => seconds * 1e3 + ns / 1e6
const spanStart = (span: ReadableSpan) => nanos(span.startTime)
const spanEnd = (span: ReadableSpan) => nanos(span.endTime)
const spanJson = (span: ReadableSpan) => ({
  name: span.name,
  attributes: span.attributes,
  status: span.status,
  events: span.events
})

describe("resume (openai-responses background mode)", () => {
  it.effect("a cut background response: the first attempt's span says resumed, the second names the response and cursor", () => {
    const { exporter, reader, layer } = telemetry()
    const run = `resumed-${++runs}`
    return Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* script("openai-responses", {
        reply: { text: "an answer that goes on after the cut" },
        steps: [{ kind: "reset", afterEvents: 6 }]
      })
      const { run: generation } = yield* start("openai-responses", {
        request: { model: "sim-model", messages: [{ role: "user", text: "hello" }], background: true }
      })
      const fiber = yield* Effect.fork(generation.pipe(Effect.tagMetrics("test.run", run)))
      yield* awaitSleepUntil(10)
      yield* TestClock.adjust("10 millis")
      const reply = committed(yield* Fiber.join(fiber))
      assert.strictEqual(reply.text, "an answer that goes on after the cut")
      assert.strictEqual(yield* sim.count("openai-responses", "resume"), 1)
      const [send] = yield* sim.requestsTo("openai-responses")
      const id = send!.responseId!

      const spans = exporter.getFinishedSpans()
      const attempts = spans.filter((s) => s.name === "reprise.attempt").sort((a, b) =>
        (a.attributes["reprise.attempt"] as number) - (b.attributes["reprise.attempt"] as number)
      )
      assert.strictEqual(attempts.length, 2)
      const [first, second] = attempts
      assert.deepInclude(first.attributes, {
        "reprise.attempt": 1,
        "reprise.error.class": "TransportError.Reset",
        "reprise.retryable": true,
        "reprise.outcome": "resumed",
        "reprise.resume.response_id": id,
        "reprise.retry.delay_ms": 10,
        "reprise.retry.delay_source": "backoff"
      })
      assert.isUndefined(first.attributes["reprise.discarded_chars"], "nothing was discarded")
      assert.deepInclude(second.attributes, {
        "reprise.attempt": 2,
        "reprise.outcome": "committed",
        "reprise.resume.response_id": id,
        "reprise.resume.mode": "stream"
      })
      assert.isNumber(second.attributes["reprise.resume.from_sequence"])

      const points = pointsOf((yield* Effect.promise(() => reader.collect())).resourceMetrics, run)
      assert.strictEqual(sum(points.get("reprise.attempts")), 2)
      assert.isUndefined(points.get("reprise.discards"))
      assert.deepStrictEqual(points.get("reprise.resumes")!.map((p) => [p.attributes.mode, p.value]), [["stream", 1]])
      assert.isUndefined(points.get("reprise.response_cancels"))
    }).pipe(Effect.provide(Layer.mergeAll(simulator, backoff, layer)))
  })
})

describe("routes: spans", () => {
  it.effect("each attempt's span names its route and model; the reply's names the route that served", () => {
    const { exporter, layer } = telemetry()
    return Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript({
        routes: {
          "openai-chat": { steps: [{ kind: "status", status: 401 }] },
          anthropic: { reply: { text: "from the fallback" }, steps: [{ kind: "stream" }] }
        }
      })
      const routeOf = (protocol: "openai-chat" | "anthropic", model: string) =>
        Effect.map(
          HttpProvider.make(protocol, { apiKey: Redacted.make(KEY), baseUrl: sim.baseUrl(protocol) }),
          (provider): Routes.Route => ({ provider, model })
        )
      const plan = Routes.make(yield* routeOf("openai-chat", "primary-model"), yield* routeOf("anthropic", "claude-x"))
      const reply = yield* Recovery.generate({ model: "primary-model", messages: [Message.user("hello")] }).pipe(
        Effect.provide(Layer.merge(Routes.layer(plan), Circuit.layerMemory()))
      )
      assert.strictEqual(reply.text, "from the fallback")
      const spans = exporter.getFinishedSpans()
      const attempts = spans.filter((s) => s.name === "reprise.attempt")
      assert.deepStrictEqual(
        attempts.map((a) => [a.attributes["reprise.route.index"], a.attributes["gen_ai.request.model"]]),
        [[1, "primary-model"], [2, "claude-x"]]
      )
      assert.strictEqual(attempts[0]!.attributes["reprise.outcome"], "switched")
      assert.strictEqual(attempts[0]!.attributes["reprise.route.switch_reason"], "Rejected")
      const [replySpan] = spans.filter((s) => s.name === "reprise.reply")
      assert.strictEqual(replySpan!.attributes["reprise.route.index"], 2)
      assert.strictEqual(replySpan!.attributes["reprise.route"], "anthropic claude-x")
      assert.strictEqual(replySpan!.attributes["gen_ai.response.model"], reply.model)
    }).pipe(
      Effect.provide(Layer.mergeAll(simulator, layer, NodeHttpClient.layerUndici))
    )
  })
})
