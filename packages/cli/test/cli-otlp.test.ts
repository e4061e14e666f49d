/**
 * The real `reprise` binary exports its spans and metrics over OTLP/HTTP when `OTEL_EXPORTER_OTLP_ENDPOINT` says so,
 * to a collector played by a `node:http` server in this process that records every POST. The export is flushed
 * before the process exits: the bodies are read as soon as the child has closed, with no waiting after it. A
 * collector that is down or never answers changes neither the exit code nor the output, and holds the exit for at
 * most `Telemetry.shutdownTimeout` (1 s); without the variable nothing is sent.
 */
import { assert, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Duration, Effect } from "effect"
import * as fs from "node:fs"
import * as http from "node:http"
import * as path from "node:path"
import { chatArgs, collector, type Received, repoRoot, run, setup, start } from "./support/cli.js"

const KEY = "sk-test-otlp-key-never-exported"
const { version } = JSON.parse(fs.readFileSync(path.join(repoRoot, "packages/cli/package.json"), "utf8"))

/** A port on 127.0.0.1 that nothing listens on (it was bound, then closed). */
const closedPort = Effect.async<number>((resume) => {
  const server = http.createServer()
  server.listen(0, "127.0.0.1", () => {
    const { port } = server.address() as { readonly port: number }
    server.close(() => resume(Effect.succeed(port)))
  })
})

interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly status: { readonly code: number; readonly message?: string }
  readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: Record<string, unknown> }>
}

interface OtlpResource {
  readonly attributes: ReadonlyArray<{ readonly key: string; readonly value: { readonly stringValue?: string } }>
}

const posts = (received: ReadonlyArray<Received>, path: string) => received.filter((r) => r.path === path)

const spansOf = (received: ReadonlyArray<Received>) =>
  posts(received, "/v1/traces").flatMap((r) =>
    JSON.parse(r.body.toString("utf8")).resourceSpans.flatMap((rs: { scopeSpans: Array<{ spans: Array<OtlpSpan> }> }) =>
      rs.scopeSpans.flatMap((ss) => ss.spans)
    ) as Array<OtlpSpan>
  )

/** Each resource attribute's values (@effect/opentelemetry may write a key twice: every copy must agree). */
const resourceOf = (r: Received, signal: "resourceSpans" | "resourceMetrics") => {
  const values: Record<string, Array<string | undefined>> = {}
  for (const a of (JSON.parse(r.body.toString("utf8"))[signal][0].resource as OtlpResource).attributes) {
    ;(values[a.key] ??= []).push(a.value.stringValue)
  }
  return values
}

/** The value of the counter `name` in the metrics posted, summed over its data points (the last post's). */
const counterValue = (received: ReadonlyArray<Received>, name: string) => {
  const last = posts(received, "/v1/metrics").at(-1)
  if (last === undefined) return undefined
  const metrics = JSON.parse(last.body.toString("utf8")).resourceMetrics.flatMap((rm: any) =>
    rm.scopeMetrics.flatMap((sm: any) => sm.metrics)
  )
  const metric = metrics.find((m: any) => m.name === name)
  return metric?.sum.dataPoints.reduce((acc: number, p: any) => acc + Number(p.asDouble ?? p.asInt ?? 0), 0)
}

const failedThenCommitted: SimulatorScript.RouteScript = {
  steps: [
    { kind: "status", status: 503 },
    { kind: "stream", reply: { text: "traced answer" } }
  ]
}

layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(60) })(
  "reprise chat over OTLP",
  (it) => {
    it.effect("a 503 then the reply: one reprise.reply span with its two reprise.attempt spans, before the exit", () =>
      Effect.gen(function*() {
        const { base } = yield* setup(failedThenCommitted)
        const otlp = yield* collector()
        const result = yield* run(chatArgs(base, "go"), {
          OPENAI_API_KEY: KEY,
          OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
          OTEL_SERVICE_NAME: "reprise-otlp-test",
          OTEL_RESOURCE_ATTRIBUTES: "service.name=overridden,deployment.environment=ci",
          OTEL_EXPORTER_OTLP_HEADERS: "x-collector-token=tok%20123"
        })
        assert.strictEqual(result.code, 0)
        assert.strictEqual(result.stdout, "traced answer\n")
        assert.match(
          result.stderr,
          /^reprise: attempt 1\/11 failed \(HTTP 503\); discarded 0 chars; retrying in [\d.]+s\n$/
        )

        // read at once: the child has exited, so what it exported has already arrived
        const traces = posts(otlp.received, "/v1/traces")
        assert.isAbove(traces.length, 0, "no trace export arrived before the exit")
        assert.isAbove(posts(otlp.received, "/v1/metrics").length, 0, "no metrics export arrived before the exit")
        for (const r of otlp.received) {
          assert.strictEqual(r.headers["content-type"], "application/json")
          assert.strictEqual(r.headers["x-collector-token"], "tok 123")
        }

        const spans = spansOf(otlp.received)
        const replies = spans.filter((s) => s.name === "reprise.reply")
        assert.strictEqual(replies.length, 1)
        const [reply] = replies
        const attempts = spans.filter((s) => s.name === "reprise.attempt")
        assert.strictEqual(attempts.length, 2)
        for (const attempt of attempts) {
          assert.strictEqual(attempt.parentSpanId, reply.spanId)
          assert.strictEqual(attempt.traceId, reply.traceId)
        }
        // the first failed with the 503, the second committed
        const failed = attempts.filter((s) => s.status.code === 2)
        assert.strictEqual(failed.length, 1)
        assert.include(failed[0].status.message, "503")
        assert.deepInclude(
          attempts.map((s) => s.attributes.find((a) => a.key === "reprise.attempt")?.value.intValue),
          1
        )

        for (const r of traces) {
          const resource = resourceOf(r, "resourceSpans")
          assert.deepStrictEqual([...new Set(resource["service.name"])], ["reprise-otlp-test"])
          assert.deepStrictEqual([...new Set(resource["service.version"])], [version])
          assert.deepStrictEqual(resource["deployment.environment"], ["ci"])
        }
        const metricsResource = resourceOf(posts(otlp.received, "/v1/metrics")[0], "resourceMetrics")
        assert.deepStrictEqual([...new Set(metricsResource["service.name"])], ["reprise-otlp-test"])
        assert.strictEqual(counterValue(otlp.received, "reprise.attempts"), 2)

        // no part of the key in anything exported (the HTTP client's spans carry `authorization: <redacted>`)
        for (const r of otlp.received) {
          const body = r.body.toString("utf8")
          assert.notInclude(body, KEY)
          assert.notInclude(body, KEY.slice(0, 12))
          assert.notInclude(body, KEY.slice(-12))
        }
        assert.notInclude(result.stdout + result.stderr, "tok 123")
      }).pipe(Effect.scoped))

    it.effect("a server echoing the keys in response headers, on a failure and on the reply: no piece of a key exported", () =>
      Effect.gen(function*() {
        // the command's key, and another key the process holds (every key in use is scrubbed, not only the sent one)
        const key = "sk-echo-7Qz9Xw2Lm4Vb8Nc3Rt6Yh1Jp5"
        const other = "sk-ant-echo-Gf4Dk8Sw2Pq6Zm0Xv"
        const echo = {
          "x-echo": key,
          "x-echo-bearer": `Bearer ${key}`,
          "x-echo-start": key.slice(0, 12),
          "x-echo-end": key.slice(-10),
          "x-other": other
        }
        const pieces = (secret: string) => Array.from({ length: secret.length - 7 }, (_, i) => secret.slice(i, i + 8))
        const scripts: ReadonlyArray<readonly [SimulatorScript.RouteScript, number, "http/json" | "http/protobuf"]> = [
          // a 503 then the reply, both echoing
          [
            {
              steps: [
                { kind: "status", status: 503, headers: echo },
                { kind: "stream", reply: { text: "echoed answer" }, headers: echo }
              ]
            },
            0,
            "http/json"
          ],
          // a permanent failure echoing, over protobuf
          [{ steps: [{ kind: "status", status: 400, headers: echo }] }, 1, "http/protobuf"]
        ]
        for (const [script, code, protocol] of scripts) {
          const { base } = yield* setup(script)
          const otlp = yield* collector()
          const result = yield* run(chatArgs(base, "go"), {
            OPENAI_API_KEY: key,
            ANTHROPIC_API_KEY: other,
            OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
            OTEL_EXPORTER_OTLP_PROTOCOL: protocol
          })
          assert.strictEqual(result.code, code, result.stderr)
          const body = Buffer.concat(otlp.received.map((r) => r.body))
          assert.isAbove(posts(otlp.received, "/v1/traces").length, 0, "no trace export arrived")
          // the echoed headers were recorded (the HTTP client's spans), with the keys replaced
          assert.isTrue(body.includes("http.response.header.x-echo"), "the client's span records response headers")
          assert.isTrue(body.includes("<redacted>"))
          for (const piece of [...pieces(key), ...pieces(other)]) {
            assert.isFalse(body.includes(piece), `${protocol}: ${JSON.stringify(piece)} exported`)
          }
        }
      }).pipe(Effect.scoped))

    it.effect("OTEL_SERVICE_NAME unset: service.name is reprise; without a collector's answer the exit waits ≤ 1 s", () =>
      Effect.gen(function*() {
        const { base } = yield* setup({ steps: [{ kind: "stream", reply: { text: "answer" } }] })
        const otlp = yield* collector({ answer: false })
        const running = yield* start(chatArgs(base, "go"), {
          OPENAI_API_KEY: KEY,
          OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url
        })
        // the answer is printed before the export is flushed: from there, the exit waits on the collector alone
        yield* running.awaitStdout(/answer\n/)
        const printed = Date.now()
        const result = yield* running.exit
        const held = Date.now() - printed
        assert.strictEqual(result.code, 0)
        assert.strictEqual(result.stdout, "answer\n")
        assert.strictEqual(result.stderr, "")
        // both signals were posted (in parallel) and never answered; the shutdown timeout let the process go
        assert.strictEqual(posts(otlp.received, "/v1/traces").length, 1)
        assert.strictEqual(posts(otlp.received, "/v1/metrics").length, 1)
        assert.isBelow(held, 2_000)
        assert.deepStrictEqual(resourceOf(posts(otlp.received, "/v1/traces")[0], "resourceSpans")["service.name"], [
          "reprise"
        ])
      }).pipe(Effect.scoped))

    it.effect("an unreachable collector: exit 0, exactly the reply on stdout, nothing on stderr, a prompt exit", () =>
      Effect.gen(function*() {
        const { base, count } = yield* setup(failedThenCommitted)
        const port = yield* closedPort
        const running = yield* start(chatArgs(base, "go"), {
          OPENAI_API_KEY: KEY,
          OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}`
        })
        yield* running.awaitStdout(/traced answer\n/)
        const printed = Date.now()
        const result = yield* running.exit
        assert.strictEqual(result.code, 0)
        assert.strictEqual(result.stdout, "traced answer\n")
        assert.match(result.stderr, /^reprise: attempt 1\/11 failed \(HTTP 503\)[^\n]*\n$/)
        assert.isBelow(Date.now() - printed, 2_000)
        assert.strictEqual(yield* count, 2)
      }).pipe(Effect.scoped))

    it.effect(
      "without OTEL_EXPORTER_OTLP_ENDPOINT (or with OTEL_SDK_DISABLED=true) nothing is sent",
      () =>
        Effect.gen(function*() {
          const { base } = yield* setup({
            steps: [{ kind: "stream", reply: { text: "answer" } }],
            afterLast: "repeat-last"
          })
          const otlp = yield* collector()
          for (
            const env of [
              { OTEL_SERVICE_NAME: "reprise-otlp-test" },
              { OTEL_EXPORTER_OTLP_ENDPOINT: "" },
              { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_SDK_DISABLED: "true" },
              { OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url, OTEL_TRACES_EXPORTER: "none", OTEL_METRICS_EXPORTER: "none" }
            ]
          ) {
            const result = yield* run(chatArgs(base, "go"), { OPENAI_API_KEY: KEY, ...env })
            assert.strictEqual(result.code, 0, JSON.stringify(env))
            assert.strictEqual(result.stdout, "answer\n")
            assert.strictEqual(result.stderr, "")
          }
          assert.deepStrictEqual(
            otlp.received.map((r) => r.path),
            []
          )
        }).pipe(Effect.scoped),
      { timeout: 60_000 }
    )

    it.effect("per-signal variables and http/protobuf: traces to their own URL, metrics off", () =>
      Effect.gen(function*() {
        const { base } = yield* setup(failedThenCommitted)
        const otlp = yield* collector()
        const result = yield* run(chatArgs(base, "go"), {
          OPENAI_API_KEY: KEY,
          OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:1",
          OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: `${otlp.url}/custom/traces`,
          OTEL_METRICS_EXPORTER: "none",
          OTEL_EXPORTER_OTLP_PROTOCOL: "http/protobuf"
        })
        assert.strictEqual(result.code, 0)
        assert.strictEqual(result.stdout, "traced answer\n")
        assert.deepStrictEqual([...new Set(otlp.received.map((r) => r.path))], ["/custom/traces"])
        const body = Buffer.concat(otlp.received.map((r) => r.body))
        assert.strictEqual(otlp.received[0].headers["content-type"], "application/x-protobuf")
        // protobuf strings are their UTF-8 bytes: the span names are there, the key is not
        assert.isTrue(body.includes("reprise.reply") && body.includes("reprise.attempt"))
        assert.isFalse(body.includes(KEY))
      }).pipe(Effect.scoped))

    it.effect("exit 130: SIGINT mid-stream still flushes the export, the reply span interrupted", () =>
      Effect.gen(function*() {
        const { sim, base } = yield* setup({
          steps: [{ kind: "stall", afterEvents: 3, keepaliveMs: 100, reply: { text: "a long answer that never ends" } }]
        })
        const otlp = yield* collector()
        const running = yield* start(chatArgs(base, "go"), {
          OPENAI_API_KEY: KEY,
          OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url
        })
        yield* sim.awaitRequest("openai-chat", 1)
        running.child.kill("SIGINT")
        const result = yield* running.exit
        assert.strictEqual(result.code, 130)
        assert.strictEqual(result.stdout, "")
        const spans = spansOf(otlp.received)
        const replies = spans.filter((s) => s.name === "reprise.reply")
        assert.strictEqual(replies.length, 1)
        assert.match(replies[0].status.message ?? "", /interrupted/)
        assert.deepStrictEqual(
          spans.filter((s) => s.name === "reprise.attempt").map((s) => s.parentSpanId),
          [replies[0].spanId]
        )
      }).pipe(Effect.scoped))

    it.effect(
      "exit 2: an endpoint that is not an http(s) URL, a header entry that is not key=value, grpc",
      () =>
        Effect.gen(function*() {
          const { base, count } = yield* setup({ steps: [{ kind: "stream", reply: { text: "never" } }] })
          const cases: ReadonlyArray<readonly [Record<string, string>, RegExp]> = [
            [{ OTEL_EXPORTER_OTLP_ENDPOINT: "localhost:4318" }, /OTEL_EXPORTER_OTLP_ENDPOINT: "must be an http/],
            [{ OTEL_EXPORTER_OTLP_ENDPOINT: "not a url" }, /OTEL_EXPORTER_OTLP_ENDPOINT: "must be an http/],
            [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "ftp://collector/v1/traces" }, /OTEL_EXPORTER_OTLP_TRACES_ENDPOINT/],
            [
              { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_EXPORTER_OTLP_HEADERS: "SECRETVALUE" },
              /OTEL_EXPORTER_OTLP_HEADERS: "entry 1 is not key=value/
            ],
            [
              {
                OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318",
                OTEL_EXPORTER_OTLP_HEADERS: "a=b,authorization=Bearer%zzSECRETVALUE"
              },
              /OTEL_EXPORTER_OTLP_HEADERS: "the value of authorization has a malformed percent-encoding/
            ],
            [
              { OTEL_EXPORTER_OTLP_ENDPOINT: "http://127.0.0.1:4318", OTEL_EXPORTER_OTLP_PROTOCOL: "grpc" },
              /OTEL_EXPORTER_OTLP_PROTOCOL: "must be http\/json or http\/protobuf/
            ]
          ]
          for (const [env, pattern] of cases) {
            const result = yield* run(chatArgs(base, "go"), { OPENAI_API_KEY: KEY, ...env })
            assert.strictEqual(result.code, 2, `${JSON.stringify(env)} → ${result.stderr}`)
            assert.match(result.stderr, /^reprise: error \[UsageError\]: /)
            assert.match(result.stderr, pattern)
            assert.notInclude(result.stderr, "SECRETVALUE")
            assert.strictEqual(result.stdout, "")
          }
          assert.strictEqual(yield* count, 0)
        }),
      { timeout: 60_000 }
    )
  }
)
