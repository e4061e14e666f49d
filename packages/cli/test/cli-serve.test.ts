/**
 * `reprise serve`: the real binary as the relay in front of the loopback simulator, called with the official
 * `openai` SDK as any OpenAI-compatible client would: one whole answer across a 503, the fallback's answer and model
 * when the primary is down, the URL line and the access log, usage errors before anything listens (a bad flag, a
 * non-loopback host without keys), and SIGINT that stops it and frees its port.
 */
import { assert, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import { Duration, Effect } from "effect"
import * as Net from "node:net"
import OpenAI from "openai"
import { run, start } from "./support/cli.js"

const KEY = "sk-test-upstream-never-printed"
const env = { OPENAI_API_KEY: KEY }

/** `reprise serve` on a free loopback port in front of `base`, with short backoffs, then `extra`. */
const serveArgs = (base: string, ...extra: ReadonlyArray<string>) => [
  "serve",
  "--port",
  "0",
  "--provider",
  "openai-chat",
  "--base-url",
  base,
  "--backoff-base",
  "5",
  "--backoff-max",
  "20",
  ...extra
]

/** The relay started by `args`, and its URL from the line it prints on stdout. */
const relay = (args: ReadonlyArray<string>, extraEnv: Record<string, string> = {}) =>
  Effect.gen(function*() {
    const child = yield* start(args, { ...env, ...extraEnv })
    yield* child.awaitStdout(/listening on \S+\n/, "20 seconds")
    const url = /^reprise relay listening on (http:\/\/\S+)$/m.exec(child.stdout())![1]!
    return { child, url }
  })

/** A streamed Chat Completion through the relay with the official SDK: the text, the models named, the usage. */
const completion = (url: string, model: string) =>
  Effect.promise(async () => {
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "sk-downstream-unused", maxRetries: 0 })
    const stream = await client.chat.completions.create({
      model,
      messages: [{ role: "user", content: "Say hello." }],
      stream: true,
      stream_options: { include_usage: true }
    })
    let text = ""
    const models = new Set<string>()
    let finish: string | null = null
    let usage: OpenAI.CompletionUsage | undefined
    for await (const chunk of stream) {
      models.add(chunk.model)
      const choice = chunk.choices[0]
      text += choice?.delta.content ?? ""
      if (choice?.finish_reason) finish = choice.finish_reason
      if (chunk.usage) usage = chunk.usage
    }
    return { text, models: [...models], finish, usage }
  })

/** Whether something accepts connections on `port` of 127.0.0.1. */
const listening = (port: number) =>
  Effect.promise(() =>
    new Promise<boolean>((resolve) => {
      const socket = Net.connect({ host: "127.0.0.1", port })
      socket.once("connect", () => (socket.destroy(), resolve(true)))
      socket.once("error", () => resolve(false))
    })
  )

layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(60) })("reprise serve", (it) => {
  it.effect("one whole answer across a 503, through the official SDK; one access-log line; no key printed", () =>
    Effect.scoped(Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript({
        routes: {
          "openai-chat": {
            reply: { text: "Hello from the far side of a 503." },
            steps: [{ kind: "status", status: 503 }, { kind: "stream" }]
          }
        }
      })
      const { child, url } = yield* relay(serveArgs(sim.baseUrl("openai-chat"), "--model", "test-model"))
      assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/)
      const got = yield* completion(url, "test-model")
      assert.strictEqual(got.text, "Hello from the far side of a 503.")
      assert.strictEqual(got.finish, "stop")
      assert.isDefined(got.usage)
      assert.strictEqual(yield* sim.count("openai-chat"), 2)
      yield* child.awaitStderr(/POST \/v1\/chat\/completions 200 .*attempts=2/, "10 seconds")
      assert.notInclude(child.stdout() + child.stderr(), KEY)
      // the stdout is the URL line only
      assert.strictEqual(child.stdout(), `reprise relay listening on ${url}\n`)
    })))

  it.effect("--fallback: with the primary down, the fallback's answer, and its model in the chunks", () =>
    Effect.scoped(Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript({
        models: {
          "down-model": { then: { kind: "status", status: 503 } },
          "backup-model": { reply: { text: "The backup answers." }, then: { kind: "stream" } }
        }
      })
      const base = sim.baseUrl("openai-chat")
      const { child, url } = yield* relay(
        serveArgs(base, "--model", "down-model", "--fallback", `openai-chat:backup-model@${base}`)
      )
      const got = yield* completion(url, "down-model")
      assert.strictEqual(got.text, "The backup answers.")
      assert.deepStrictEqual(got.models, ["backup-model"])
      // the primary's budget on its route (two sends by default), then the fallback
      assert.strictEqual((yield* sim.requestsFor("down-model")).length, 2)
      assert.strictEqual((yield* sim.requestsFor("backup-model")).length, 1)
      yield* child.awaitStderr(/200 .*route="openai-chat backup-model"/, "10 seconds")
      assert.notInclude(child.stdout() + child.stderr(), KEY)
    })))

  it.effect("an upstream error that quotes the key reaches neither the client nor the relay's output", () =>
    Effect.scoped(Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript({
        routes: {
          "openai-chat": {
            steps: [{
              kind: "status",
              status: 400,
              error: { type: "invalid_request_error", code: "bad", message: `no such thing for key ${KEY}` }
            }]
          }
        }
      })
      const { child, url } = yield* relay(serveArgs(sim.baseUrl("openai-chat"), "--model", "m"))
      const response = yield* Effect.promise(() =>
        fetch(`${url}/v1/chat/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], stream: true })
        }).then(async (r) => ({ status: r.status, text: await r.text() }))
      )
      assert.strictEqual(response.status, 400)
      assert.notInclude(response.text, KEY)
      yield* child.awaitStderr(/POST \/v1\/chat\/completions 400/, "10 seconds")
      assert.notInclude(child.stdout() + child.stderr(), KEY)
    })))

  it.effect("bad flags are usage errors naming the flag, exit 2, and nothing listens", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, RegExp]> = [
        [["--port", "70000"], /--port must be between 0 and 65535, got 70000/],
        [["--prot", "1"], /unknown option '--prot' for 'reprise serve' \(did you mean '--port'\?\)/],
        [
          ["--preview", "sometimes"],
          /--preview got 'sometimes': Expected one of the following cases: hold, live, reset/
        ],
        [["--max-concurrent", "0"], /--max-concurrent must be at least 1, got 0/],
        [["--max-body-bytes", "0"], /--max-body-bytes must be at least 1, got 0/],
        [["--max-attempts", "0"], /--max-attempts must be at least 1, got 0/],
        [["--fallback", "nope:m"], /--fallback "nope:m": unknown provider "nope"/],
        [["--session", "s.jsonl"], /unknown option '--session' for 'reprise serve'/]
      ]
      for (const [args, pattern] of cases) {
        const result = yield* run(
          ["serve", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", ...args],
          env,
          { within: "20 seconds" }
        )
        assert.strictEqual(result.code, 2, `${args.join(" ")}: ${result.stderr}`)
        assert.match(result.stderr, pattern)
        assert.strictEqual(result.stdout, "")
      }
      const noKey = yield* run(["serve", "--model", "m"], {}, { within: "20 seconds" })
      assert.strictEqual(noKey.code, 2)
      assert.match(noKey.stderr, /missing API key: set OPENAI_API_KEY/)
    }))

  it.effect("a non-loopback --host without REPRISE_SERVE_KEYS: a clear error, exit 2, nothing listens", () =>
    Effect.gen(function*() {
      const result = yield* run(["serve", "--host", "0.0.0.0", "--port", "0", "--model", "m"], env, {
        within: "20 seconds"
      })
      assert.strictEqual(result.code, 2)
      assert.strictEqual(result.stdout, "")
      assert.match(
        result.stderr,
        /^reprise: error \[UsageError\]: --host 0\.0\.0\.0 is not a loopback address: set REPRISE_SERVE_KEYS/
      )
    }))

  it.effect("with REPRISE_SERVE_KEYS it listens beyond loopback, asks clients for a key, and never prints one", () =>
    Effect.scoped(Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      yield* sim.setScript({ routes: { "openai-chat": { reply: { text: "Keyed." }, steps: [{ kind: "stream" }] } } })
      const serveKey = "relay-key-never-printed"
      const { child, url } = yield* relay(
        ["serve", "--host", "0.0.0.0", "--port", "0", "--base-url", sim.baseUrl("openai-chat"), "--model", "m"],
        { REPRISE_SERVE_KEYS: serveKey }
      )
      const port = Number(new URL(url).port)
      const refused = yield* Effect.promise(() => fetch(`http://127.0.0.1:${port}/v1/models`).then((r) => r.status))
      assert.strictEqual(refused, 401)
      const models = yield* Effect.promise(() =>
        fetch(`http://127.0.0.1:${port}/v1/models`, { headers: { authorization: `Bearer ${serveKey}` } })
          .then((r) => r.json() as Promise<{ data: ReadonlyArray<{ id: string }> }>)
      )
      assert.deepStrictEqual(models.data.map((m) => m.id), ["m"])
      assert.notInclude(child.stdout() + child.stderr(), serveKey)
    })))

  it.effect("SIGINT stops it (exit 130, as every interrupted reprise command) and frees the port", () =>
    Effect.scoped(Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      const { child, url } = yield* relay(serveArgs(sim.baseUrl("openai-chat"), "--model", "m"))
      const port = Number(new URL(url).port)
      assert.isTrue(yield* listening(port))
      child.child.kill("SIGINT")
      const result = yield* child.exitWithin("10 seconds")
      assert.strictEqual(result.code, 130)
      assert.isFalse(yield* listening(port))
    })))

  it.effect("SIGTERM stops it the same way", () =>
    Effect.scoped(Effect.gen(function*() {
      const sim = yield* Simulator.Simulator
      const { child, url } = yield* relay(serveArgs(sim.baseUrl("openai-chat"), "--model", "m"))
      child.child.kill("SIGTERM")
      const result = yield* child.exitWithin("10 seconds")
      assert.strictEqual(result.code, 130)
      assert.isFalse(yield* listening(Number(new URL(url).port)))
    })))
})
