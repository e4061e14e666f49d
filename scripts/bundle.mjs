// Bundles the compiled CLI (packages/cli/dist/bin.js, from `tsc -b`) into packages/cli/dist/bundle/: one ESM entry
// plus chunks, minified, with a source map. The commands' own modules are dynamic imports in Cli.ts, so esbuild puts
// them in chunks of their own and `reprise --help` loads only the command definitions. Measured in docs/cli.md
// ("Start-up") and by `npm run bench` (figure 7).
import * as esbuild from "esbuild"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { createRequire } from "node:module"
import { fileURLToPath, pathToFileURL } from "node:url"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")
const cli = Path.join(root, "packages/cli")
const outdir = Path.join(cli, "dist/bundle")

// The names of undici that @effect/platform-node reads must all be in scripts/undici-core.cjs, which stands in for
// undici's index in the bundle (see that file).
const undiciCore = Path.join(root, "scripts/undici-core.cjs")
const platformNode = Path.join(root, "node_modules/@effect/platform-node/dist/esm/internal")
const used = new Set()
for (const file of Fs.readdirSync(platformNode).filter((f) => f.endsWith(".js"))) {
  const text = Fs.readFileSync(Path.join(platformNode, file), "utf8")
  if (!/from "\.\.\/Undici\.js"|from "undici"/.test(text)) continue
  const code = text.split("\n").filter((line) => !line.startsWith("import ") && !line.startsWith("//")).join("\n")
  for (const [, name] of code.matchAll(/\bUndici\.([A-Za-z]+)/g)) used.add(name)
}
// undici-core.cjs requires undici's files from the root node_modules: that must be the copy platform-node resolves
const fromPlatformNode = createRequire(Path.join(root, "node_modules/@effect/platform-node/package.json"))
const fromRoot = createRequire(undiciCore)
if (fromPlatformNode.resolve("undici") !== fromRoot.resolve("undici")) {
  throw new Error(`@effect/platform-node resolves another undici than scripts/undici-core.cjs does`)
}
const provided = Object.keys((await import(pathToFileURL(undiciCore).href)).default)
const missing = [...used].filter((name) => !provided.includes(name))
if (used.size === 0 || missing.length > 0) {
  throw new Error(`scripts/undici-core.cjs lacks what @effect/platform-node uses: ${missing.join(", ") || "(none found)"}`)
}

Fs.rmSync(outdir, { recursive: true, force: true })
await esbuild.build({
  entryPoints: { reprise: Path.join(cli, "dist/bin.js") },
  outdir,
  bundle: true,
  splitting: true,
  format: "esm",
  platform: "node",
  target: "node20",
  minify: true,
  sourcemap: "linked",
  sourcesContent: false,
  legalComments: "linked",
  chunkNames: "chunk-[hash]",
  // CommonJS dependencies (undici's internals, yaml, ini) call `require` for Node's built-ins.
  banner: { js: "import { createRequire as __repriseRequire } from \"node:module\"; const require = __repriseRequire(import.meta.url);" },
  plugins: [{
    name: "undici-core",
    setup: (build) => build.onResolve({ filter: /^undici$/ }, () => ({ path: undiciCore }))
  }],
  logLevel: "warning"
})
