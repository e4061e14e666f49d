/**
 * `reprise simulate --scenarios failoverbench`: the binary serves the catalogue by model name and names its models
 * on startup; `--scenarios`, `--script` and `--profile` are checked before anything listens.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { run, start } from "./support/cli.js"

describe("reprise simulate --scenarios", () => {
  it.live("serves the failoverbench catalogue and prints the openai-chat base URL and the scenario models", () =>
    Effect.scoped(Effect.gen(function*() {
      const child = yield* start(["simulate", "--scenarios", "failoverbench", "--profile", "fast"])
      yield* child.awaitStdout(/fb-s16-503-persistent .*\n/, "20 seconds")
      const stdout = child.stdout()
      assert.include(stdout, "failoverbench scenarios (fast profile)")
      assert.match(stdout, /^ {2}fb-ok-noprefill +healthy, refuses assistant prefill$/m)
      assert.match(stdout, /^ {2}fb-s14-stream-cut +S14 .*\(fallback fb-ok-noprefill\)$/m)
      const base = /^openai-chat (\S+)$/m.exec(stdout)![1]!
      const post = (model: string) =>
        Effect.promise(() =>
          fetch(`${base}/chat/completions`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ model, messages: [{ role: "user", content: "hi" }], stream: true })
          }).then(async (r) => ({ status: r.status, body: await r.text() }))
        )
      assert.strictEqual((yield* post("fb-s04-503-persistent")).status, 503)
      const ok = yield* post("fb-ok")
      assert.strictEqual(ok.status, 200)
      assert.include(ok.body, `"model":"fb-ok"`)
      assert.include(ok.body, "data: [DONE]")
    })))

  it.live("--scenarios with --script, --profile without --scenarios and an unknown catalogue are usage errors", () =>
    Effect.gen(function*() {
      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, RegExp]> = [
        [["--scenarios", "failoverbench", "--script", "script.json"], /--scenarios and --script are exclusive/],
        [["--profile", "fast"], /--profile sets the timings of --scenarios/],
        [["--scenarios", "nope"], /failoverbench/],
        [["--scenarios", "failoverbench", "--profile", "slow"], /full, fast/]
      ]
      for (const [args, pattern] of cases) {
        const result = yield* run(["simulate", ...args], {}, { within: "20 seconds" })
        assert.strictEqual(result.code, 2, `${args.join(" ")}: ${result.stderr}`)
        assert.match(result.stderr, pattern)
      }
    }))
})
