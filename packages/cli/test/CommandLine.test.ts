import * as Args from "@effect/cli/Args"
import * as Command from "@effect/cli/Command"
import * as Options from "@effect/cli/Options"
import * as NodeContext from "@effect/platform-node/NodeContext"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as CommandLine from "../src/CommandLine.js"

const chat = Command.make("chat", {
  model: Options.text("model").pipe(Options.optional),
  attempts: Options.integer("max-attempts").pipe(Options.withDefault(11)),
  json: Options.boolean("json"),
  fallback: Options.text("fallback").pipe(Options.repeated),
  preview: Options.choice("preview", ["hold", "live", "reset"]).pipe(Options.withDefault("hold" as const)),
  prompt: Args.text({ name: "prompt" })
})
const usages = new Map([["chat", Command.getUsage(chat)]])
const normalize = (...args: ReadonlyArray<string>) => CommandLine.normalize(usages, args)
const problem = (...args: ReadonlyArray<string>) => Effect.map(Effect.flip(normalize(...args)), (error) => error.detail)

describe("CommandLine", () => {
  it("reads option names and whether they take a value from the usage", () => {
    const names = CommandLine.optionsOf(Command.getUsage(chat))
    assert.strictEqual(names.get("--model"), true)
    assert.strictEqual(names.get("--max-attempts"), true)
    assert.strictEqual(names.get("--json"), false)
    assert.strictEqual(names.get("--help"), false)
    assert.isFalse(names.has("prompt"))
  })

  it.effect("a word outside an option's choices names the option and its words; a choice passes", () =>
    Effect.gen(function*() {
      assert.strictEqual(
        yield* problem("chat", "--preview", "sometimes", "hi"),
        "--preview got 'sometimes': Expected one of the following cases: hold, live, reset"
      )
      assert.strictEqual(
        yield* problem("chat", "--preview=Hold", "hi"),
        "--preview got 'Hold': Expected one of the following cases: hold, live, reset"
      )
      assert.deepStrictEqual(yield* normalize("chat", "--preview", "live", "hi"), [
        "chat",
        "--preview",
        "live",
        "--",
        "hi"
      ])
    }))

  it.effect("the last value of a repeated option wins; a repeated flag is one flag; --name=value is split", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(
        yield* normalize("chat", "--model", "a", "--json", "hi", "--max-attempts=3", "--model", "b", "--json"),
        ["chat", "--model", "b", "--json", "--max-attempts", "3", "--", "hi"]
      )
      // a value may itself start with a dash
      assert.deepStrictEqual(yield* normalize("chat", "--model", "-x", "hi"), ["chat", "--model", "-x", "--", "hi"])
      // a prompt that reads like a boolean stays the prompt
      assert.deepStrictEqual(yield* normalize("chat", "no", "--json"), ["chat", "--json", "--", "no"])
      // after --, nothing is an option
      assert.deepStrictEqual(yield* normalize("chat", "--", "--model"), ["chat", "--", "--model"])
      // an unknown subcommand is left for @effect/cli to report
      assert.deepStrictEqual(yield* normalize("chta", "--bogus"), ["chta", "--bogus"])
    }))

  it.effect("an unknown option, a flag with a value and a missing value are usage errors that say which", () =>
    Effect.gen(function*() {
      assert.strictEqual(
        yield* problem("chat", "--modle", "a", "hi"),
        "unknown option '--modle' for 'reprise chat' (did you mean '--model'?); see 'reprise chat --help'"
      )
      assert.strictEqual(
        yield* problem("chat", "--zzzzzz", "hi"),
        "unknown option '--zzzzzz' for 'reprise chat'; see 'reprise chat --help'"
      )
      assert.strictEqual(yield* problem("chat", "--json=no", "hi"), "option '--json' takes no value, got '--json=no'")
      assert.strictEqual(yield* problem("chat", "hi", "--model"), "option '--model' needs a value")
    }))

  it.effect("a repeatable option keeps every value, in order, with the other rules", () =>
    Effect.gen(function*() {
      assert.deepStrictEqual(
        yield* normalize("chat", "--fallback", "a:1", "--model", "x", "--fallback=b:2", "hi", "--fallback", "c:3"),
        ["chat", "--fallback", "a:1", "--fallback", "b:2", "--fallback", "c:3", "--model", "x", "--", "hi"]
      )
      assert.strictEqual(yield* problem("chat", "hi", "--fallback"), "option '--fallback' needs a value")
      // and @effect/cli reads them so
      const parsed = yield* Effect.flip(
        Command.run(
          Command.make("chat", { fallback: Options.text("fallback").pipe(Options.repeated) }, ({ fallback }) =>
            Effect.fail(fallback)),
          { name: "t", version: "0" }
        )(["node", "t", ...(yield* normalize("chat", "--fallback", "a:1", "--fallback", "b:2")).slice(1)])
      )
      assert.deepStrictEqual(parsed, ["a:1", "b:2"])
    }).pipe(Effect.provide(NodeContext.layer)))
})
