/**
 * The real `reprise` binary with fallback routes (`--fallback`, `REPRISE_FALLBACKS`) against the loopback simulator:
 * usage errors before anything is sent, a primary that answers (the fallback is never asked), a primary that fails
 * and a fallback that answers, every route failing, and the first-token timeout.
 */
import { assert, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Duration, Effect } from "effect"
import { run, start } from "./support/cli.js"

const OPENAI_KEY = "sk-test-primary-never-printed"
const ANTHROPIC_KEY = "sk-ant-test-fallback-never-printed"
const env = { OPENAI_API_KEY: OPENAI_KEY, ANTHROPIC_API_KEY: ANTHROPIC_KEY }

/** Scripts the simulator's `openai-chat` route (the primary) and its `anthropic` route (the fallback). */
const setupRoutes = (primary: SimulatorScript.RouteScript, fallback: SimulatorScript.RouteScript) =>
  Effect.gen(function*() {
    const sim = yield* Simulator.Simulator
    yield* sim.setScript({ routes: { "openai-chat": primary, anthropic: fallback } })
    return {
      primary: sim.baseUrl("openai-chat"),
      fallback: sim.baseUrl("anthropic"),
      primaryCount: sim.count("openai-chat"),
      fallbackCount: sim.count("anthropic")
    }
  })

/** `reprise chat` with the primary `openai-chat primary-model` at `base`, short backoffs, then `extra`. */
const chat = (base: string, ...extra: ReadonlyArray<string>) => [
  "chat",
  "--base-url",
  base,
  "--model",
  "primary-model",
  "--backoff-base",
  "5",
  "--backoff-max",
  "20",
  ...extra
]

const outage: SimulatorScript.RouteScript = { steps: [{ kind: "status", status: 503 }], afterLast: "repeat-last" }
const answer = (text: string): SimulatorScript.RouteScript => ({ steps: [{ kind: "stream", reply: { text } }] })

/** Headers and keepalives, but no token for 30 s; then a whole reply. */
const stalled: SimulatorScript.RouteScript = {
  steps: [
    { kind: "stall", afterEvents: 0, keepaliveMs: 50, durationMs: 30000 },
    { kind: "stream", reply: { text: "second attempt, whole" } }
  ]
}

const noKeys = (text: string) => {
  assert.notInclude(text, OPENAI_KEY)
  assert.notInclude(text, ANTHROPIC_KEY)
}

layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(60) })(
  "reprise chat --fallback",
  (it) => {
    it.effect("a bad spec or a missing key is a usage error before anything is sent, naming the variable only", () =>
      Effect.gen(function*() {
        const { fallback, fallbackCount, primary, primaryCount } = yield* setupRoutes(answer("no"), answer("no"))
        const cases: ReadonlyArray<readonly [ReadonlyArray<string>, Record<string, string>, string]> = [
          [
            ["--fallback", "anthropic:claude-test"],
            { OPENAI_API_KEY: OPENAI_KEY },
            "route 2 (anthropic claude-test): missing API key: set ANTHROPIC_API_KEY (or name another variable with " +
            "key-env=VAR)"
          ],
          [
            ["--fallback", `anthropic:claude-test@${fallback}`, "--fallback", "anthropic:x,attempts=many"],
            env,
            `--fallback "anthropic:x,attempts=many": attempts must be a whole number, at least 1, got "many"`
          ],
          [
            [],
            { ...env, REPRISE_FALLBACKS: `anthropic:claude-test@${fallback};openai:gpt` },
            `REPRISE_FALLBACKS "openai:gpt": unknown provider "openai": expected one of openai-chat, openai-responses, ` +
            `anthropic, subscription`
          ],
          [
            ["--fallback", "anthropic:claude-test,key-env=OTHER_KEY"],
            env,
            "route 2 (anthropic claude-test): missing API key: set OTHER_KEY"
          ],
          [
            ["--circuit-threshold", "0", "--fallback", "anthropic:c"],
            env,
            "--circuit-threshold must be at least 1, got 0"
          ],
          [
            [],
            { ...env, REPRISE_CIRCUIT_COOLDOWN: "-5" },
            `(Invalid data at REPRISE_CIRCUIT_COOLDOWN: "must be >= 0 ms")`
          ],
          [["--route-attempts", "0"], env, "--route-attempts must be at least 1, got 0"],
          [["--context-window", "0"], env, "--context-window must be at least 1, got 0"],
          [
            [],
            { ...env, REPRISE_ROUTE_ATTEMPTS: "x" },
            `(Invalid data at REPRISE_ROUTE_ATTEMPTS: "Expected an integer in decimal notation but received "x"")`
          ],
          [["--first-token-timeout", "0"], env, "--first-token-timeout must be > 0 ms, got 0"],
          [
            [],
            { ...env, REPRISE_FIRST_TOKEN_TIMEOUT: "0" },
            `(Invalid data at REPRISE_FIRST_TOKEN_TIMEOUT: "must be > 0 ms")`
          ]
        ]
        for (const [extra, caseEnv, message] of cases) {
          const result = yield* run(chat(primary, ...extra, "go"), caseEnv)
          assert.strictEqual(result.code, 2, `${extra.join(" ")}: ${result.stderr}`)
          assert.strictEqual(result.stderr, `reprise: error [UsageError]: ${message}\n`)
          assert.strictEqual(result.stdout, "")
          noKeys(result.stderr)
        }
        assert.strictEqual(yield* primaryCount, 0)
        assert.strictEqual(yield* fallbackCount, 0)
      }))

    it.effect("a primary that answers: the fallback is never asked, and the output is as without a plan", () =>
      Effect.gen(function*() {
        const { fallback, fallbackCount, primary, primaryCount } = yield* setupRoutes(
          answer("from the primary"),
          answer("never")
        )
        const result = yield* run(chat(primary, "--fallback", `anthropic:claude-test@${fallback}`, "go"), env)
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(result.stdout, "from the primary\n")
        assert.strictEqual(result.stderr, "")
        assert.strictEqual(yield* primaryCount, 1)
        assert.strictEqual(yield* fallbackCount, 0)
      }))

    it.effect("the primary fails (503): the fallback answers; stdout is its text, stderr names the switch", () =>
      Effect.gen(function*() {
        const { fallback, fallbackCount, primary, primaryCount } = yield* setupRoutes(
          outage,
          answer("from the fallback")
        )
        const spec = `anthropic:claude-test@${fallback}`
        const result = yield* run(chat(primary, "--fallback", spec, "go"), env)
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(result.stdout, "from the fallback\n")
        // the primary had its 2 sends (Routes.defaultAttempts): one retry notice, then the switch
        assert.match(
          result.stderr,
          /^reprise: attempt 1\/11 failed \(HTTP 503\); discarded 0 chars; retrying in 0\.0s\nreprise: route 1 \(openai-chat primary-model\) failed \(HTTP 503\); switching to route 2 \(anthropic claude-test\)\n$/
        )
        assert.strictEqual(yield* primaryCount, 2)
        assert.strictEqual(yield* fallbackCount, 1)
        noKeys(result.stdout + result.stderr)

        // --json: a route_switched event, and the commit names route 2 and the model that served it
        yield* setupRoutes(outage, answer("from the fallback"))
        const json = yield* run(chat(primary, "--fallback", spec, "--route-attempts", "1", "--json", "go"), env)
        assert.strictEqual(json.code, 0, json.stderr)
        const events = json.stdout.trim().split("\n").map((l) => JSON.parse(l))
        const switched = events.find((e) => e.type === "route_switched")
        assert.deepStrictEqual(switched, {
          type: "route_switched",
          attempt: 2,
          from: { index: 1, name: "openai-chat primary-model", model: "primary-model" },
          to: { index: 2, name: "anthropic claude-test", model: "claude-test" },
          reason: "Transient",
          failure: "HTTP 503"
        })
        const commit = events.at(-1)
        assert.strictEqual(commit.type, "commit")
        assert.strictEqual(commit.text, "from the fallback")
        assert.deepStrictEqual(commit.route, { index: 2, name: "anthropic claude-test", model: "claude-test" })
        assert.strictEqual(commit.model, "claude-test")
        assert.isNotNull(commit.usage)
        noKeys(json.stdout + json.stderr)
      }))

    it.effect("a rejected primary (401) is left at once; REPRISE_FALLBACKS gives the fallback", () =>
      Effect.gen(function*() {
        const { fallback, fallbackCount, primary, primaryCount } = yield* setupRoutes(
          { steps: [{ kind: "status", status: 401 }], afterLast: "repeat-last" },
          answer("from the fallback")
        )
        const result = yield* run(chat(primary, "go"), {
          ...env,
          REPRISE_FALLBACKS: `anthropic:claude-test@${fallback}`
        })
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(result.stdout, "from the fallback\n")
        assert.strictEqual(
          result.stderr,
          "reprise: route 1 (openai-chat primary-model) failed (HTTP 401); switching to route 2 (anthropic claude-test)\n"
        )
        assert.strictEqual(yield* primaryCount, 1)
        assert.strictEqual(yield* fallbackCount, 1)
      }))

    it.effect("a fallback's key (key-env) is scrubbed from the output as the primary's is", () =>
      Effect.gen(function*() {
        const secret = "sk-fallback-route-secret-0123456789"
        const { fallback, primary } = yield* setupRoutes(
          { steps: [{ kind: "status", status: 401 }], afterLast: "repeat-last" },
          answer(`the key is ${secret}.`)
        )
        for (const extra of [[], ["--json"]]) {
          const result = yield* run(
            chat(primary, "--fallback", `anthropic:claude-test@${fallback},key-env=FALLBACK_KEY`, ...extra, "go"),
            { OPENAI_API_KEY: OPENAI_KEY, FALLBACK_KEY: secret }
          )
          assert.strictEqual(result.code, 0, result.stderr)
          assert.include(result.stdout, "the key is <redacted>.")
          assert.notInclude(result.stdout + result.stderr, secret)
          yield* setupRoutes(
            { steps: [{ kind: "status", status: 401 }], afterLast: "repeat-last" },
            answer(`the key is ${secret}.`)
          )
        }
      }))

    it.effect("every route fails: exit 75, and each route's last failure on a line of its own", () =>
      Effect.gen(function*() {
        const { fallback, primary } = yield* setupRoutes(outage, outage)
        const result = yield* run(
          chat(primary, "--max-attempts", "4", "--fallback", `anthropic:claude-test@${fallback}`, "go"),
          env
        )
        assert.strictEqual(result.code, 75, result.stderr)
        assert.strictEqual(result.stdout, "")
        const lines = result.stderr.trim().split("\n")
        assert.match(lines.at(-3)!, /^reprise: error \[RecoveryExhausted\.Attempts\]: /)
        assert.match(lines.at(-2)!, /^reprise: {3}route 1 \(openai-chat primary-model\): .*503/)
        assert.match(lines.at(-1)!, /^reprise: {3}route 2 \(anthropic claude-test\): .*503/)
      }))

    it.effect("repl: a circuit opened by one reply skips its route in the next, without a send", () =>
      Effect.gen(function*() {
        const { fallback, fallbackCount, primary, primaryCount } = yield* setupRoutes(outage, {
          steps: [{ kind: "stream", reply: { text: "first answer" } }, {
            kind: "stream",
            reply: { text: "second answer" }
          }]
        })
        const args = chat(primary, "--fallback", `anthropic:claude-test@${fallback}`, "--circuit-threshold", "1")
        const repl = yield* start(["repl", ...args.slice(1), "--route-attempts", "1"], env)
        yield* repl.write("one?\n")
        yield* repl.awaitStdout(/first answer\n/, "10 seconds")
        yield* repl.write("two?\n")
        yield* repl.awaitStdout(/second answer\n/, "10 seconds")
        yield* repl.end
        const result = yield* repl.exitWithin("10 seconds")
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(
          result.stderr,
          "reprise: route 1 (openai-chat primary-model) failed (HTTP 503); switching to route 2 (anthropic " +
            "claude-test)\n" +
            "reprise: route 1 (openai-chat primary-model) skipped: circuit open; switching to route 2 (anthropic " +
            "claude-test)\n"
        )
        // the primary had one send in all: the second reply never asked it
        assert.strictEqual(yield* primaryCount, 1)
        assert.strictEqual(yield* fallbackCount, 2)
      }).pipe(Effect.scoped))

    it.effect("--first-token-timeout: headers and keepalives but no token is a retryable timeout", () =>
      Effect.gen(function*() {
        const { primary, primaryCount } = yield* setupRoutes(stalled, answer("never"))
        const result = yield* run(
          chat(primary, "--idle-timeout", "30000", "--first-token-timeout", "300", "go"),
          env
        )
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(result.stdout, "second attempt, whole\n")
        assert.match(result.stderr, /^reprise: attempt 1\/11 failed \(timed out\); discarded 0 chars; retrying in/)
        assert.isBelow(result.took, 15000)
        assert.strictEqual(yield* primaryCount, 2)
      }))

    it.effect("with a plan, a first-token timeout leaves the route at once", () =>
      Effect.gen(function*() {
        const { fallback, fallbackCount, primary, primaryCount } = yield* setupRoutes(
          stalled,
          answer("from the fallback")
        )
        const result = yield* run(
          chat(
            primary,
            "--idle-timeout",
            "30000",
            "--first-token-timeout",
            "300",
            "--fallback",
            `anthropic:claude-test@${fallback}`,
            "go"
          ),
          env
        )
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(result.stdout, "from the fallback\n")
        assert.strictEqual(
          result.stderr,
          "reprise: route 1 (openai-chat primary-model) failed (timed out); switching to route 2 (anthropic " +
            "claude-test)\n" +
            // the stream was open: the policy bills the prompt ("go", 1 token by chars/4), estimated
            "reprise: 1 attempt discarded ~1 input and ~0 output tokens (estimated)\n"
        )
        assert.strictEqual(yield* primaryCount, 1)
        assert.strictEqual(yield* fallbackCount, 1)
      }))
  }
)
