/**
 * The real `reprise` binary against the loopback simulator: what a turn's discarded attempts cost, on one stderr line
 * after the turn (text) and in the `discard`, `commit` and `error` events (`--json`); the prices of `--prices FILE`
 * and `REPRISE_PRICES`, and their usage errors.
 *
 * The expected counts come from what the simulator is told to send: a text in deltas of 8 characters cut after 1,570
 * of them is 12,560 discarded characters, 3,140 tokens by `chars/4`; a prompt of 4,816 characters is 1,204 input
 * tokens an attempt.
 */
import { assert, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Duration, Effect } from "effect"
import * as fs from "node:fs"
import * as os from "node:os"
import * as path from "node:path"
import { chatArgs, collector, run, setup, start } from "./support/cli.js"

const KEY = "sk-test-secret-never-printed"
const env = { OPENAI_API_KEY: KEY }

const prompt = "p".repeat(4816)
const inputTokens = 1204
const cutAfter = 1570
const discardedChars = cutAfter * 8
const outputTokens = 3140

/**
 * 16,000 characters in deltas of 8, ended cleanly after 1,570 deltas (an `eof`: a reset could lose what was in
 * flight, and the count with it).
 */
const cut: SimulatorScript.Step = {
  kind: "eof",
  afterTokens: cutAfter,
  reply: { text: "abcdefgh".repeat(2000), deltaSize: 8 }
}
const answer: SimulatorScript.Step = { kind: "stream", reply: { text: "the answer" } }

const retryLine = (attempt: number, max: number) =>
  `reprise: attempt ${attempt}/${max} failed (stream ended early); discarded ${discardedChars} chars; retrying in 0.0s\n`

const eventsOf = (stdout: string) => stdout.trim().split("\n").map((line) => JSON.parse(line))

const tempFile = (name: string, contents: string) => {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "reprise-prices-")), name)
  fs.writeFileSync(file, contents)
  return file
}

layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(60) })(
  "reprise chat: the ledger",
  (it) => {
    it.effect("a cut after content, then a commit: one line after the answer, estimated, with separators", () =>
      Effect.gen(function*() {
        const { base, count } = yield* setup({ steps: [cut, answer] })
        const result = yield* run(chatArgs(base, prompt), env)
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(result.stdout, "the answer\n")
        assert.strictEqual(
          result.stderr,
          retryLine(1, 11) + "reprise: 1 attempt discarded ~1,204 input and ~3,140 output tokens (estimated)\n"
        )
        assert.strictEqual(yield* count, 2)
      }))

    it.effect("--json: discard carries the entry, commit the ledger and the committed usage; no stderr line", () =>
      Effect.gen(function*() {
        const { base } = yield* setup({ steps: [cut, answer] })
        const result = yield* run(chatArgs(base, "--json", prompt), env)
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(result.stderr, retryLine(1, 11))
        const events = eventsOf(result.stdout)
        const discard = events.find((e) => e.type === "discard")
        assert.deepStrictEqual(discard, {
          type: "discard",
          attempt: 1,
          discardedChars,
          entry: {
            attempt: 1,
            model: "test-model",
            phase: "content",
            outcome: "discarded",
            verdict: "estimated",
            tokens: { input: inputTokens, output: outputTokens, cacheRead: 0, cacheWrite: 0 },
            input: "estimated",
            output: "estimated"
          }
        })
        const commit = events.at(-1)
        assert.strictEqual(commit.type, "commit")
        const ledger = commit.ledger
        assert.deepStrictEqual(ledger.entries.map((e: any) => [e.attempt, e.outcome, e.verdict]), [
          [1, "discarded", "estimated"],
          [2, "committed", "exact"]
        ])
        assert.deepStrictEqual(ledger.entries[0], discard.entry)
        assert.deepStrictEqual(ledger.discarded, {
          attempts: 1,
          billed: 1,
          tokens: { input: inputTokens, output: outputTokens, cacheRead: 0, cacheWrite: 0 },
          estimated: true
        })
        assert.strictEqual(ledger.estimator, "chars/4")
        // `usage` stays the committed attempt's, as the provider reported it
        const committed = ledger.entries[1]
        assert.deepStrictEqual(ledger.committed.tokens, committed.tokens)
        assert.deepStrictEqual(commit.usage, {
          input_tokens: committed.tokens.input,
          output_tokens: committed.tokens.output
        })
        assert.strictEqual(committed.input, "reported")
        assert.isFalse(ledger.committed.estimated)
      }))

    it.effect("a 429 then a commit: nothing was billed, so no line; the ledger says not-billed", () =>
      Effect.gen(function*() {
        const steps: ReadonlyArray<SimulatorScript.Step> = [{ kind: "status", status: 429 }, answer]
        const { base } = yield* setup({ steps })
        const result = yield* run(chatArgs(base, prompt), env)
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(result.stdout, "the answer\n")
        assert.strictEqual(
          result.stderr,
          "reprise: attempt 1/11 failed (HTTP 429); discarded 0 chars; retrying in 0.0s\n"
        )

        yield* setup({ steps })
        const json = yield* run(chatArgs(base, "--json", prompt), env)
        assert.strictEqual(json.code, 0, json.stderr)
        const ledger = eventsOf(json.stdout).at(-1).ledger
        assert.deepStrictEqual(ledger.entries.map((e: any) => [e.phase, e.verdict]), [
          ["headers", "not-billed"],
          ["terminal", "exact"]
        ])
        assert.deepStrictEqual(ledger.discarded.tokens, { input: 0, output: 0, cacheRead: 0, cacheWrite: 0 })
        assert.strictEqual(ledger.discarded.billed, 0)
      }))

    it.effect("exhausted: the line follows the error line; --json's error event carries the failed reply's ledger", () =>
      Effect.gen(function*() {
        const script: SimulatorScript.RouteScript = { steps: [cut], afterLast: "repeat-last" }
        const { base, count } = yield* setup(script)
        const result = yield* run(chatArgs(base, "--max-attempts", "2", prompt), env)
        assert.strictEqual(result.code, 75)
        assert.strictEqual(result.stdout, "")
        const lines = result.stderr.split("\n")
        assert.strictEqual(lines.length, 4, result.stderr)
        assert.strictEqual(lines[0] + "\n", retryLine(1, 2))
        assert.match(lines[1], /^reprise: error \[RecoveryExhausted\.Attempts\]: gave up after 2 of 2 attempts/)
        assert.strictEqual(lines[2], "reprise: 2 attempts discarded ~2,408 input and ~6,280 output tokens (estimated)")
        assert.strictEqual(lines[3], "")
        assert.strictEqual(yield* count, 2)

        yield* setup(script)
        const json = yield* run(chatArgs(base, "--max-attempts", "2", "--json", prompt), env)
        assert.strictEqual(json.code, 75)
        assert.notInclude(json.stderr, "attempts discarded")
        const error = eventsOf(json.stdout).at(-1)
        assert.strictEqual(error.type, "error")
        assert.strictEqual(error.class, "RecoveryExhausted.Attempts")
        assert.strictEqual(error.exitCode, 75)
        assert.deepStrictEqual(error.ledger.entries.map((e: any) => [e.attempt, e.outcome, e.verdict]), [
          [1, "discarded", "estimated"],
          [2, "discarded", "estimated"]
        ])
        assert.deepStrictEqual(error.ledger.committed.attempts, 0)
        assert.deepStrictEqual(error.ledger.discarded.tokens, {
          input: 2 * inputTokens,
          output: 2 * outputTokens,
          cacheRead: 0,
          cacheWrite: 0
        })
      }))

    it.effect("--prices FILE: the cost on the line and in the ledger; the flag wins over REPRISE_PRICES", () =>
      Effect.gen(function*() {
        const prices = tempFile("prices.json", JSON.stringify({ "test-model": { input: 2, output: 8 } }))
        // 1,204 input tokens at 2 and 3,140 output tokens at 8 per million
        const cost = (inputTokens * 2 + outputTokens * 8) / 1_000_000
        const { base } = yield* setup({ steps: [cut, answer] })
        const result = yield* run(chatArgs(base, "--prices", prices, prompt), {
          ...env,
          REPRISE_PRICES: JSON.stringify({ "test-model": { input: 100, output: 100 } })
        })
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(
          result.stderr,
          retryLine(1, 11) +
            "reprise: 1 attempt discarded ~1,204 input and ~3,140 output tokens (estimated), cost ~0.0275\n"
        )

        yield* setup({ steps: [cut, answer] })
        const json = yield* run(chatArgs(base, "--json", prompt), {
          ...env,
          REPRISE_PRICES: JSON.stringify({ "test-model": { input: 2, output: 8 } })
        })
        assert.strictEqual(json.code, 0, json.stderr)
        const ledger = eventsOf(json.stdout).at(-1).ledger
        assert.closeTo(ledger.discarded.cost, cost, 1e-12)
        assert.closeTo(ledger.entries[0].cost, cost, 1e-12)
        const committed = ledger.entries[1]
        assert.closeTo(ledger.committed.cost, (committed.tokens.input * 2 + committed.tokens.output * 8) / 1e6, 1e-12)
      }))

    it.effect("a bad REPRISE_PRICES or --prices file is a usage error naming it, before anything is sent", () =>
      Effect.gen(function*() {
        const { base, count } = yield* setup({ steps: [answer] })
        const missing = path.join(os.tmpdir(), "reprise-no-such-prices.json")
        const invalid = tempFile("prices.json", `{"test-model": {"input": 2}}`)
        const cases: ReadonlyArray<readonly [ReadonlyArray<string>, Record<string, string>, string]> = [
          [
            [],
            { REPRISE_PRICES: "{test-model: 2}" },
            "REPRISE_PRICES is not a price list: not JSON (Expected property name or '}' in JSON at position 1)"
          ],
          [
            [],
            { REPRISE_PRICES: `{"test-model": {"input": -1, "output": 8}}` },
            `REPRISE_PRICES is not a price list: "test-model".input: Expected a non-negative number, actual -1`
          ],
          [
            [],
            { REPRISE_PRICES: "[]" },
            `REPRISE_PRICES is not a price list: expected an object of model prices, such as {"gpt-4.1": {"input": 2, ` +
            `"output": 8}}`
          ],
          [["--prices", missing], {}, `--prices ${missing} cannot be read (NotFound)`],
          [["--prices", invalid], {}, `--prices ${invalid} is not a price list: "test-model".output is missing`]
        ]
        for (const [extra, caseEnv, message] of cases) {
          const result = yield* run(chatArgs(base, ...extra, "go"), { ...env, ...caseEnv })
          assert.strictEqual(result.code, 2, result.stderr)
          assert.strictEqual(result.stderr, `reprise: error [UsageError]: ${message}\n`)
          assert.strictEqual(result.stdout, "")
        }
        // --json: the same error as an event
        const json = yield* run(chatArgs(base, "--json", "go"), { ...env, REPRISE_PRICES: "[]" })
        assert.strictEqual(json.code, 2)
        assert.deepInclude(eventsOf(json.stdout)[0], { type: "error", class: "UsageError", exitCode: 2 })
        assert.strictEqual(yield* count, 0)
      }))

    it.effect("reprise serve: a bad --prices stops it before it listens; with prices the relay's spans carry the costs", () =>
      Effect.scoped(Effect.gen(function*() {
        const { base } = yield* setup({ steps: [cut, answer] })
        const serve = (
          ...extra: ReadonlyArray<string>
        ) => ["serve", "--port", "0", ...chatArgs(base, ...extra).slice(1)]
        const invalid = tempFile("prices.json", "not json")
        const refused = yield* run(serve("--prices", invalid), env, { within: Duration.seconds(20) })
        assert.strictEqual(refused.code, 2)
        assert.strictEqual(refused.stdout, "")
        assert.match(refused.stderr, /^reprise: error \[UsageError\]: --prices .* is not a price list: not JSON \(/)

        const otlp = yield* collector()
        const prices = tempFile("prices.json", JSON.stringify({ "test-model": { input: 2, output: 8 } }))
        yield* Effect.scoped(Effect.gen(function*() {
          const child = yield* start(serve("--prices", prices), { ...env, OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url })
          yield* child.awaitStdout(/listening on \S+\n/, "20 seconds")
          const url = /^reprise relay listening on (http:\/\/\S+)$/m.exec(child.stdout())![1]!
          const status = yield* Effect.promise(() =>
            fetch(`${url}/v1/chat/completions`, {
              method: "POST",
              headers: { "content-type": "application/json" },
              body: JSON.stringify({ model: "test-model", messages: [{ role: "user", content: prompt }] })
            }).then((r) => r.status)
          )
          assert.strictEqual(status, 200)
          // the export is flushed as the relay stops
          child.child.kill("SIGINT")
          assert.strictEqual((yield* child.exitWithin("20 seconds")).code, 130)
        }))
        const spans = otlp.received.filter((body) => body.path === "/v1/traces").map((body) =>
          body.body.toString("utf8")
        ).join("\n")
        const valueOf = (key: string) =>
          [...spans.matchAll(
            new RegExp(`"key":"${key.replace(/\./g, "\\.")}","value":\\{"doubleValue":([\\d.e-]+)\\}`, "g")
          )]
            .map((match) => Number(match[1]))
        // the cut attempt: its input (the prompt, chars/4) and its output at the file's prices
        assert.deepStrictEqual(valueOf("reprise.discarded.cost").length, 1, spans.slice(0, 2000))
        assert.closeTo(valueOf("reprise.discarded.cost")[0]!, (inputTokens * 2 + outputTokens * 8) / 1_000_000, 1e-12)
        assert.strictEqual(valueOf("reprise.committed.cost").length, 1)
      })))

    it.effect("--no-stream-usage: the request asks for no usage, and the committed reply is estimated", () =>
      Effect.gen(function*() {
        const { sim, base } = yield* setup({ steps: [answer] })
        const result = yield* run(chatArgs(base, "--json", "--no-stream-usage", "hi"), env)
        assert.strictEqual(result.code, 0, result.stderr)
        const body = (yield* sim.requests).at(-1)!.body as Record<string, unknown>
        assert.isUndefined(body.stream_options)
        const commit = eventsOf(result.stdout).at(-1)
        assert.strictEqual(commit.ledger.entries[0].verdict, "estimated")
        assert.strictEqual(commit.usage, null)
        // asked by default: the same turn is exact
        const exact = yield* run(chatArgs(base, "--json", "hi"), env)
        assert.deepStrictEqual((yield* sim.requests).at(-1)!.body, { ...body, stream_options: { include_usage: true } })
        assert.strictEqual(eventsOf(exact.stdout).at(-1).ledger.entries[0].verdict, "exact")
      }))

    it.effect("REPRISE_STREAM_USAGE: false turns it off; another value is a usage error", () =>
      Effect.gen(function*() {
        const { sim, base } = yield* setup({ steps: [answer] })
        const off = yield* run(chatArgs(base, "hi"), { ...env, REPRISE_STREAM_USAGE: "false" })
        assert.strictEqual(off.code, 0, off.stderr)
        assert.isUndefined(((yield* sim.requests).at(-1)!.body as Record<string, unknown>).stream_options)
        const bad = yield* run(chatArgs(base, "hi"), { ...env, REPRISE_STREAM_USAGE: "yes" })
        assert.strictEqual(bad.code, 2)
        assert.match(bad.stderr, /REPRISE_STREAM_USAGE/)
      }))
  }
)
