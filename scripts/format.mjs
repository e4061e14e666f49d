#!/usr/bin/env node
// The repository's formatter: dprint's TypeScript and JSON plugins (Wasm, from npm) driven through
// @dprint/formatter, configured by dprint.json. `--check` lists unformatted files and exits 1; without it, files
// are rewritten in place. (The dprint CLI is not used: its platform binaries are not all on every registry.)
import { createFromBuffer } from "@dprint/formatter"
import { getPath as jsonPlugin } from "@dprint/json"
import { getPath as typescriptPlugin } from "@dprint/typescript"
import * as fs from "node:fs"
import * as path from "node:path"

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..")
const config = JSON.parse(fs.readFileSync(path.join(root, "dprint.json"), "utf8"))
const check = process.argv.includes("--check")
const only = process.argv.slice(2).filter((a) => !a.startsWith("--"))

const global = { lineWidth: config.lineWidth, indentWidth: config.indentWidth, newLineKind: "lf" }
const make = (wasm, pluginConfig) => {
  const formatter = createFromBuffer(fs.readFileSync(wasm))
  formatter.setConfig(global, pluginConfig ?? {})
  return formatter
}
const formatters = { ".ts": make(typescriptPlugin(), config.typescript), ".json": make(jsonPlugin(), config.json) }

const skipDirs = new Set(["node_modules", "build", "dist", "coverage", ".git", "fixtures"])
const skipFiles = new Set(["package-lock.json", "results.json"])

const walk = (dir, out) => {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    if (entry.isDirectory()) {
      if (!skipDirs.has(entry.name)) walk(path.join(dir, entry.name), out)
    } else if (path.extname(entry.name) in formatters && !skipFiles.has(entry.name)) {
      out.push(path.join(dir, entry.name))
    }
  }
  return out
}

const files = only.length > 0 ? only.map((f) => path.resolve(f)) : walk(root, [])
const unformatted = []
for (const file of files) {
  const formatter = formatters[path.extname(file)]
  if (formatter === undefined) continue
  const text = fs.readFileSync(file, "utf8")
  const formatted = formatter.formatText({ filePath: file, fileText: text })
  if (formatted === text) continue
  if (check) unformatted.push(path.relative(root, file))
  else fs.writeFileSync(file, formatted)
}
if (check && unformatted.length > 0) {
  console.error(`Not formatted (run npm run format):\n${unformatted.map((f) => `  ${f}`).join("\n")}`)
  process.exit(1)
}
if (check) console.log(`${files.length} files formatted correctly`)
