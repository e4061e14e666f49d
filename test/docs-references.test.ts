/**
 * What the docs and the examples name exists, so that a reader who copies them gets a program that runs: every
 * `@reprise/*` import in a TypeScript block of the README or `docs/` (and in `examples/`) names a value its module
 * exports, and every simulator script they tell `reprise simulate --script` (or `Simulator.serve`) to load is a file
 * that decodes.
 */
import { assert, describe, it } from "@effect/vitest"
import * as ScriptLoader from "@reprise/simulator/ScriptLoader"
import { Effect } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..")

const read = (file: string) => fs.readFileSync(path.join(root, file), "utf8")

const documents = [
  "README.md",
  ...fs.readdirSync(path.join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)
]
const examples = fs.readdirSync(path.join(root, "examples")).filter((f) => f.endsWith(".ts")).map((f) =>
  `examples/${f}`
)

/** The TypeScript a reader copies: the `ts` blocks of a page, or a whole example. */
const typescriptOf = (file: string): string =>
  file.endsWith(".ts")
    ? read(file)
    : Array.from(read(file).matchAll(/```(?:ts|typescript)\n([\s\S]*?)```/g), (m) => m[1]!).join("\n")

/** `@reprise/core` → its `src/index.ts`; `@reprise/core/Budget` → its `src/Budget.ts` (as vitest resolves them). */
const sourceOf = (specifier: string): string => {
  const [, pkg, module] = /^@reprise\/([a-z]+)(?:\/(.+))?$/.exec(specifier)!
  return path.join(root, "packages", pkg!, "src", `${module ?? "index"}.ts`)
}

describe("docs and examples", () => {
  it.effect("every @reprise import in their TypeScript names a value its module exports", () =>
    Effect.gen(function*() {
      let checked = 0
      for (const file of [...documents, ...examples]) {
        for (
          const [, names, specifier] of typescriptOf(file).matchAll(
            /import\s*\{([^}]*)\}\s*from\s*"(@reprise\/[^"]+)"/g
          )
        ) {
          const exports = yield* Effect.promise(() => import(pathToFileURL(sourceOf(specifier!)).href))
          for (
            const entry of names!.split(",").map((n) => n.trim()).filter((n) => n !== "" && !n.startsWith("type "))
          ) {
            const name = entry.split(/\s+as\s+/)[0]!
            assert.property(exports, name, `${file}: ${specifier} exports no ${name}`)
            checked++
          }
        }
      }
      assert.isAbove(checked, 10)
    }), { timeout: 60_000 })

  it.effect("every simulator script they run is a file that decodes", () =>
    Effect.gen(function*() {
      const named = new Set<string>()
      for (const file of [...documents, ...examples]) {
        for (
          const [, script] of read(file).matchAll(/(?:--script |scriptFile: ")(fixtures\/scripts\/[\w.-]+\.json)/g)
        ) {
          named.add(script!)
        }
      }
      assert.include([...named], "fixtures/scripts/cut-then-ok.json")
      for (const script of named) {
        assert.isTrue(fs.existsSync(path.join(root, script)), `${script} does not exist`)
        yield* ScriptLoader.parse(read(script), { file: script }).pipe(
          Effect.catchAll((error) => Effect.sync(() => assert.fail(error.message)))
        )
      }
    }))
})
