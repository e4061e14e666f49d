// Bundles the compiled CLI (packages/cli/dist/bin.js, from `tsc -b`) into packages/cli/dist/bundle/: one ESM entry
// plus chunks, minified, with a source map. The commands' own modules are dynamic imports in Cli.ts, so esbuild puts
// them in chunks of their own and `reprise --help` loads only the command definitions. Measured in docs/cli.md
// ("Start-up") and by `npm run bench` (figure 7).
import * as esbuild from "esbuild"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")
const cli = Path.join(root, "packages/cli")
const outdir = Path.join(cli, "dist/bundle")

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
  logLevel: "warning"
})
