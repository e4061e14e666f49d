import { assert, describe, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const src = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../src")

const sources = (dir: string): ReadonlyArray<string> =>
  Fs.readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? sources(Path.join(dir, entry.name)) : [Path.join(dir, entry.name)]
  )

const importsOf = (file: string) =>
  [...Fs.readFileSync(file, "utf8").matchAll(/^import .* from "([^"]+)"$/gm)].map((m) => m[1]!)

describe("@reprise/simulator", () => {
  it("is an independent oracle: it imports no reprise package, only Effect, its platform and Node", () => {
    const files = sources(src)
    assert.isAbove(files.length, 5)
    for (const file of files) {
      for (const specifier of importsOf(file)) {
        assert.match(specifier, /^(effect\/|@effect\/platform(-node)?\/|node:|\.\.?\/)/, `${file} imports ${specifier}`)
      }
    }
    const manifest = JSON.parse(Fs.readFileSync(Path.join(src, "../package.json"), "utf8"))
    assert.deepStrictEqual(
      Object.keys({ ...manifest.dependencies, ...manifest.peerDependencies }).filter((d) => d.startsWith("@reprise/")),
      []
    )
  })

  it("has no import cycle between its modules", () => {
    const graph = new Map(
      sources(src).map((file) => [
        file,
        importsOf(file).filter((s) => s.startsWith(".")).map((s) =>
          Path.resolve(Path.dirname(file), s.replace(/\.js$/, ".ts"))
        )
      ])
    )
    const visiting = new Set<string>()
    const done = new Set<string>()
    const visit = (file: string, path: ReadonlyArray<string>): void => {
      if (done.has(file)) return
      assert.isFalse(
        visiting.has(file),
        `import cycle: ${[...path, file].map((f) => Path.relative(src, f)).join(" → ")}`
      )
      visiting.add(file)
      for (const next of graph.get(file) ?? []) visit(next, [...path, file])
      visiting.delete(file)
      done.add(file)
    }
    for (const file of graph.keys()) visit(file, [])
  })
})
