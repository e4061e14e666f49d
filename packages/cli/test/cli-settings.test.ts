/**
 * The settings the CLI reads with their owners' Configs (`Budget`, `Policy`, `ProviderOptions`), with the flags as a
 * `ConfigProvider` in front of the environment: the flag wins over the variable, the variable over the default, and a
 * bad value gets its owner's one message naming what the user gave, with nothing sent.
 */
import { assert, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Duration, Effect } from "effect"
import { run, setup } from "./support/cli.js"

const env = { OPENAI_API_KEY: "sk-test-settings" }

const chat = (
  base: string,
  ...extra: ReadonlyArray<string>
) => ["chat", "--base-url", base, "--model", "m", ...extra, "go"]

/** Waits of 1-2 ms between the attempts. */
const fast = ["--backoff-base", "1", "--backoff-max", "2"]

/** Every request gets a 503. */
const outage: SimulatorScript.RouteScript = { steps: [{ kind: "status", status: 503 }], afterLast: "repeat-last" }

layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(60) })("reprise settings", (it) => {
  it.effect("the flag wins over its variable, the variable over the default", () =>
    Effect.gen(function*() {
      const { base, count } = yield* setup(outage)
      const fromEnv = yield* run(chat(base, ...fast), { ...env, REPRISE_MAX_ATTEMPTS: "2" })
      assert.strictEqual(fromEnv.code, 75, fromEnv.stderr)
      assert.strictEqual(yield* count, 2)
      // a bad variable is not read when its flag is given
      const fromFlag = yield* run(chat(base, ...fast, "--max-attempts", "3"), { ...env, REPRISE_MAX_ATTEMPTS: "lots" })
      assert.strictEqual(fromFlag.code, 75, fromFlag.stderr)
      assert.strictEqual(yield* count, 5)
    }))

  it.effect("a bad value is one message, naming the flag or the variable the user gave", () =>
    Effect.gen(function*() {
      const { base, count } = yield* setup(outage)
      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, Record<string, string>, string]> = [
        [["--max-attempts", "0"], {}, "--max-attempts must be at least 1, got 0"],
        [[], { REPRISE_MAX_ATTEMPTS: "0" }, `(Invalid data at REPRISE_MAX_ATTEMPTS: "must be at least 1")`],
        [["--deadline", "0.0001"], {}, "--deadline must be at least 0.001 seconds (1 ms), got 0.0001"],
        [
          [],
          { REPRISE_DEADLINE: "0.0001" },
          `(Invalid data at REPRISE_DEADLINE: "must be at least 0.001 seconds (1 ms)")`
        ],
        [["--idle-timeout", "0"], {}, "--idle-timeout must be > 0 ms, got 0"],
        [[], { REPRISE_FIRST_BYTE_TIMEOUT: "0" }, `(Invalid data at REPRISE_FIRST_BYTE_TIMEOUT: "must be > 0 ms")`],
        [[], { REPRISE_MAX_REPLY_BYTES: "0" }, `(Invalid data at REPRISE_MAX_REPLY_BYTES: "must be at least 1")`],
        [["--backoff-base", "-1"], {}, "--backoff-base must be >= 0 ms, got -1"],
        [
          ["--backoff-base", "20", "--backoff-max", "10"],
          {},
          "--backoff-max (10) must not be smaller than --backoff-base (20)"
        ],
        [
          ["--backoff-max", "10"],
          { REPRISE_BACKOFF_BASE: "20" },
          "--backoff-max (10) must not be smaller than REPRISE_BACKOFF_BASE (20)"
        ]
      ]
      for (const [extra, caseEnv, message] of cases) {
        const result = yield* run(chat(base, ...extra), { ...env, ...caseEnv })
        assert.strictEqual(result.code, 2, `${extra.join(" ")} ${JSON.stringify(caseEnv)}: ${result.stderr}`)
        assert.strictEqual(result.stderr, `reprise: error [UsageError]: ${message}\n`)
        assert.strictEqual(result.stdout, "")
      }
      assert.strictEqual(yield* count, 0)
    }))
})
