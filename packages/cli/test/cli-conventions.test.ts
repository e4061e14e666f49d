/**
 * The Unix conventions of the real `reprise` binary, spawned as a child process: a single-value option given twice
 * takes the last value, an unknown option is named, `--version`, colour only on a terminal and never with
 * `NO_COLOR`, SIGINT handled from the first moment the process could send anything, and a help-only start that does not
 * wait for V8's optimising compiler.
 */
import { assert, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import { Duration, Effect } from "effect"
import { spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import { bin, repoRoot, run, setup } from "./support/cli.js"

const env = { OPENAI_API_KEY: "sk-test-conventions" }
const here = path.dirname(fileURLToPath(import.meta.url))
const preload = `--import=${new URL(`file://${path.join(here, "support/sigint-on-listener.mjs")}`).href}`
const escape = "\u001b["

layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(30) })("reprise conventions", (it) => {
  it.effect("a single-value option given twice takes the last value, flags and env fallbacks included", () =>
    Effect.gen(function*() {
      const { base, count } = yield* setup({ steps: [{ kind: "status", status: 503 }], afterLast: "repeat-last" })
      // a wrapper's defaults, then the user's overrides
      const result = yield* run([
        "chat",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--max-attempts",
        "5",
        "--backoff-base",
        "20",
        "--json",
        "--base-url",
        base,
        "--max-attempts=2",
        "--json",
        "--backoff-base",
        "1",
        "--model",
        "m",
        "go"
      ], env)
      assert.strictEqual(result.code, 75, result.stderr)
      assert.strictEqual(yield* count, 2)
      const events = result.stdout.trim().split("\n").map((line) => JSON.parse(line))
      const retry = events.find((e) => e.type === "retry")
      assert.isAtMost(retry.delay, 1)
      assert.strictEqual(events.at(-1).type, "error")
      // without the flag, the environment still applies
      const fromEnv = yield* run(["chat", "--base-url", base, "--model", "m", "--backoff-base", "1", "go"], {
        ...env,
        REPRISE_MAX_ATTEMPTS: "3"
      })
      assert.strictEqual(fromEnv.code, 75)
      assert.include(fromEnv.stderr, "after 3 of 3 attempts")
    }))

  it.effect("an unknown option is named, with a suggestion, and nothing is sent", () =>
    Effect.gen(function*() {
      const { base, count } = yield* setup({ steps: [{ kind: "stream" }], afterLast: "repeat-last" })
      const cases: ReadonlyArray<readonly [ReadonlyArray<string>, RegExp]> = [
        [
          ["chat", "--base-url", base, "--modle", "m", "go"],
          /unknown option '--modle' for 'reprise chat' \(did you mean '--model'\?\)/
        ],
        [
          ["chat", "--base-url", base, "--model", "m", "--frobnicate", "go"],
          /unknown option '--frobnicate' for 'reprise chat'/
        ],
        [["simulate", "--prot", "1"], /unknown option '--prot' for 'reprise simulate' \(did you mean '--port'\?\)/],
        [["chat", "--base-url", base, "--model", "m", "go", "--max-attempts"], /option '--max-attempts' needs a value/],
        [["chat", "--base-url", base, "--model", "m", "--json=yes", "go"], /option '--json' takes no value/]
      ]
      for (const [args, pattern] of cases) {
        const result = yield* run(args, env)
        assert.strictEqual(result.code, 2, `${args.join(" ")}: ${result.stderr}`)
        assert.match(result.stderr, pattern)
        assert.strictEqual(result.stdout, "")
      }
      assert.strictEqual(yield* count, 0)
    }))

  it.effect("--version prints the package's version", () =>
    Effect.gen(function*() {
      const manifest = JSON.parse(fs.readFileSync(path.join(repoRoot, "packages/cli/package.json"), "utf8"))
      const result = yield* run(["--version"])
      assert.strictEqual(result.code, 0)
      assert.strictEqual(result.stdout.trim(), manifest.version)
    }))

  it.effect("help has colour only on a terminal, and none with NO_COLOR", () =>
    Effect.gen(function*() {
      const piped = yield* run(["chat", "--help"])
      assert.strictEqual(piped.code, 0)
      assert.include(piped.stdout, "--max-attempts")
      assert.notInclude(piped.stdout, escape)
      // `script` runs the binary on a real pseudo-terminal
      const onTerminal = (noColor: string | undefined) => {
        const childEnv: Record<string, string | undefined> = { ...process.env, NO_COLOR: noColor }
        if (noColor === undefined) delete childEnv.NO_COLOR
        const out = spawnSync("script", ["-qec", `${process.execPath} ${bin} chat --help`, "/dev/null"], {
          env: childEnv as NodeJS.ProcessEnv,
          encoding: "utf8",
          timeout: 20_000
        })
        assert.strictEqual(out.status, 0, out.stderr)
        assert.include(out.stdout, "--max-attempts")
        return out.stdout
      }
      assert.include(onTerminal(undefined), escape)
      assert.notInclude(onTerminal("1"), escape)
      assert.include(onTerminal(""), escape, "an empty NO_COLOR does not count (no-color.org)")
    }), { timeout: 60_000 })

  it.effect(
    "a command line that can only print help runs without the optimising compiler, any other with it",
    () =>
      Effect.sync(() => {
        // V8's own trace: one "completed optimizing" line per function TurboFan compiled
        const compiled = (args: ReadonlyArray<string>) => {
          const out = spawnSync(process.execPath, ["--trace-opt", bin, ...args], { encoding: "utf8", timeout: 30_000 })
          assert.strictEqual(out.status, 0, out.stderr)
          return {
            text: out.stdout,
            compiles: out.stdout.split("\n").filter((l) => l.includes("completed optimizing"))
          }
        }
        for (const args of [[], ["--help"], ["-h"], ["chat", "--help"], ["repl", "-h"]]) {
          const { compiles, text } = compiled(args)
          assert.include(text, "USAGE", args.join(" "))
          assert.deepStrictEqual(compiles, [], args.join(" "))
        }
        // the demo's replies run long enough for V8 to optimise them
        assert.isAbove(compiled(["demo"]).compiles.length, 0)
      }),
    { timeout: 60_000 }
  )

  it.effect("SIGINT while the binary is still loading exits 130 with nothing sent", () =>
    Effect.gen(function*() {
      const { base, count } = yield* setup({ steps: [{ kind: "stream" }], afterLast: "repeat-last" })
      const args = ["chat", "--base-url", base, "--model", "m", "go"]
      for (const at of ["load", "runtime"]) {
        const result = yield* run(args, { ...env, NODE_OPTIONS: preload, REPRISE_TEST_SIGINT_AT: at })
        assert.strictEqual(result.code, 130, `SIGINT at ${at}: ${result.signal} ${result.stderr}`)
        assert.strictEqual(result.stdout, "")
      }
      assert.strictEqual(yield* count, 0)
    }))
})
