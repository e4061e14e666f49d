/**
 * What the real `reprise` binary does with bad input from the server (the loopback simulator): a reply over
 * `--max-reply-bytes`, tool arguments nested 20,000 levels deep, and what it does with a base URL that carries a
 * query (kept) or a fragment (refused before any request).
 */
import { assert, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import { Duration, Effect } from "effect"
import { chatArgs, run, setup } from "./support/cli.js"

const KEY = "sk-test-secret-never-printed"
const env = { OPENAI_API_KEY: KEY }

const longText = Array.from({ length: 2000 }, (_, i) => `word${i}`).join(" ")

layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(30) })(
  "reprise and a hostile server",
  (it) => {
    it.effect("--max-reply-bytes: a longer reply is a permanent ReplyTooLarge (exit 1), sent once", () =>
      Effect.gen(function*() {
        const { base, count } = yield* setup({
          steps: [{ kind: "stream", reply: { text: longText } }],
          afterLast: "repeat-last"
        })
        const result = yield* run(chatArgs(base, "--max-reply-bytes", "2048", "go"), env)
        assert.strictEqual(result.code, 1, result.stderr)
        assert.match(result.stderr, /ProviderRejection\.ReplyTooLarge/)
        assert.match(result.stderr, /reply too large: .*2048 bytes/)
        assert.notInclude(result.stderr, "retrying")
        assert.strictEqual(yield* count, 1)
      }))

    it.effect("REPRISE_MAX_REPLY_BYTES sets the same bound; the default lets the reply through", () =>
      Effect.gen(function*() {
        const { base, count } = yield* setup({
          steps: [{ kind: "stream", reply: { text: longText } }],
          afterLast: "repeat-last"
        })
        const bounded = yield* run(chatArgs(base, "go"), { ...env, REPRISE_MAX_REPLY_BYTES: "2048" })
        assert.strictEqual(bounded.code, 1, bounded.stderr)
        assert.match(bounded.stderr, /ProviderRejection\.ReplyTooLarge/)
        const unbounded = yield* run(chatArgs(base, "go"), env)
        assert.strictEqual(unbounded.code, 0, unbounded.stderr)
        assert.strictEqual(unbounded.stdout, `${longText}\n`)
        assert.strictEqual(yield* count, 2)
      }))

    it.effect("tool arguments nested 20,000 levels: a permanent MalformedStream (exit 1), not an internal error", () =>
      Effect.gen(function*() {
        const deep = "[".repeat(20_000) + "]".repeat(20_000)
        const { base, count } = yield* setup({
          steps: [{ kind: "stream", reply: { toolCalls: [{ name: "append_file", arguments: deep }] } }],
          afterLast: "repeat-last"
        })
        const result = yield* run(chatArgs(base, "go"), env)
        assert.strictEqual(result.code, 1, result.stderr)
        assert.match(result.stderr, /ProviderRejection\.MalformedStream/)
        assert.match(result.stderr, /nested 20000 levels deep/)
        assert.notMatch(result.stderr, /InternalError|internal error/i)
        assert.strictEqual(yield* count, 1)
      }))

    it.effect("a base URL with a query keeps it on the request", () =>
      Effect.gen(function*() {
        const { base, sim } = yield* setup({ steps: [{ kind: "stream", reply: { text: "ok" } }] })
        const result = yield* run(chatArgs(`${base}?api-version=2024-10-21`, "go"), env)
        assert.strictEqual(result.code, 0, result.stderr)
        const [received] = yield* sim.requestsTo("openai-chat")
        assert.strictEqual(received.path, "/v1/chat/completions?api-version=2024-10-21")
      }))

    it.effect("a base URL with a fragment is a usage error (exit 2), from a flag or the environment, no request", () =>
      Effect.gen(function*() {
        const { base, count } = yield* setup({ steps: [{ kind: "stream", reply: { text: "ok" } }] })
        const flag = yield* run(chatArgs(`${base}#section`, "go"), env)
        assert.strictEqual(flag.code, 2, flag.stderr)
        assert.match(flag.stderr, /the base URL must not have a fragment/)
        const fromEnv = yield* run(["chat", "--model", "m", "go"], { ...env, OPENAI_BASE_URL: `${base}?v=1#x` })
        assert.strictEqual(fromEnv.code, 2, fromEnv.stderr)
        assert.match(fromEnv.stderr, /fragment/)
        assert.strictEqual(yield* count, 0)
      }))
  }
)
