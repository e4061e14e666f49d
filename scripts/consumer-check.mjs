#!/usr/bin/env node
// Proof that a user can install reprise: packs every workspace package (after `npm run build`), runs the install
// lines of the docs in fresh projects in a temporary directory, and there, in plain Node (no tsx, no loader):
//   1. checks what each tarball ships (dist, src, README, LICENSE; no tests, no tsconfig);
//   2. runs every documented install line (see "Install lines" below) against the registry, each file's lines in a
//      fresh project, and checks that each project holds one copy of `effect`, of the 3.x line; then completes
//      README.md's project (the app) with what the examples need, and checks that every public module imports while
//      `internal/*` stays closed;
//   3. type-checks the programs of examples/ under module nodenext, strict, exactOptionalPropertyTypes, and a
//      file of deliberate type errors that must be rejected;
//   4. runs them: the README's layer composition (examples/recovery.ts) against `reprise simulate` with a cut
//      stream, `Chat.step` with a tool and a JSONL transcript, an @effect/ai program over `@reprise/ai` (a Chat
//      turn with a tool and a replay), and a TestClock test with `node --test`;
//   5. runs the `reprise` of packages/cli/README.md's global install: `--version`, `reprise demo`, and `reprise chat`
//      against `reprise simulate`.
// Every child process has a time limit; the whole check prints one line per step and exits 1 on the first failure.
//
// Install lines: every line that starts with `npm install ` inside a ```sh fence (its ``` at the start of a line) of
// README.md, packages/*/README.md or docs/*.md. A line is plain words (no quotes, no `&&`, no redirection) and runs as
// written, with two substitutions, because the registry does not hold reprise's packages: each `@reprise/<name>`
// becomes the path of that package's tarball, and the tarballs of the `@reprise/*` peers the line does not name are
// added (npm would fetch those from the registry). README.md's lines install into the app the rest of the check uses.
// Every other file's lines run, in order, in an empty project of its own, with `--package-lock-only`: npm resolves the
// whole tree against the registry (where a peer conflict is an ERESOLVE) without unpacking node_modules that nothing
// else uses. A `--global` line installs for real, under a prefix inside the work directory: its `reprise` is the
// binary step 5 runs.
import { execFileSync, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Os from "node:os"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const root = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "..")
const rootPackage = JSON.parse(Fs.readFileSync(Path.join(root, "package.json"), "utf8"))
const workspaces = rootPackage.workspaces.map((dir) => ({
  dir,
  manifest: JSON.parse(Fs.readFileSync(Path.join(root, dir, "package.json"), "utf8"))
}))
const keep = process.argv.includes("--keep")
const work = Fs.mkdtempSync(Path.join(Os.tmpdir(), "reprise-consumer-"))
const app = Path.join(work, "app")
const tarballs = Path.join(work, "tarballs")
const started = Date.now()

const step = (text) =>
  process.stdout.write(`consumer-check: ${text} (${((Date.now() - started) / 1000).toFixed(1)} s)\n`)
const fail = (text) => {
  process.stderr.write(`consumer-check: FAILED: ${text}\n(work directory kept: ${work})\n`)
  process.exit(1)
}
const expect = (condition, text) => {
  if (!condition) fail(text)
}

/** Runs a command to completion, within `timeoutMs`; returns its exit code and output. */
const run = (command, args, options = {}) =>
  new Promise((resolve) => {
    const child = spawn(command, args, {
      cwd: options.cwd ?? app,
      env: { ...process.env, NO_COLOR: "1", ...options.env },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.setEncoding("utf8").on("data", (d) => stdout += d)
    child.stderr.setEncoding("utf8").on("data", (d) => stderr += d)
    const timer = setTimeout(() => child.kill("SIGKILL"), options.timeoutMs ?? 60_000)
    child.on("close", (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr })
    })
  })

const mustRun = async (what, command, args, options) => {
  const result = await run(command, args, options)
  if (result.code !== 0) {
    fail(`${what}: exit ${result.code ?? result.signal}\n--- stdout\n${result.stdout}\n--- stderr\n${result.stderr}`)
  }
  return result
}

/** Starts `reprise simulate` from the global install and resolves with its base URLs once it listens. */
const simulate = (script) =>
  new Promise((resolve) => {
    const scriptFile = Path.join(work, `script-${Date.now()}.json`)
    Fs.writeFileSync(scriptFile, JSON.stringify(script))
    const child = spawn(reprise, ["simulate", "--script", scriptFile], { cwd: app, stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    const timer = setTimeout(() => {
      child.kill("SIGKILL")
      fail(`reprise simulate did not start: ${out}`)
    }, 30_000)
    child.stdout.setEncoding("utf8").on("data", (d) => {
      out += d
      const bases = Object.fromEntries(
        out.split("\n").slice(1).map((line) => line.split(" ")).filter((parts) => parts.length === 2)
      )
      if (bases["subscription"] !== undefined) {
        clearTimeout(timer)
        resolve({ bases, stop: () => child.kill("SIGINT") })
      }
    })
  })

// --- 1. pack -------------------------------------------------------------------------------------------------

for (const { dir } of workspaces) {
  expect(Fs.existsSync(Path.join(root, dir, "dist/index.js")), `${dir}/dist is missing: run npm run build first`)
}
Fs.mkdirSync(tarballs, { recursive: true })
const packed = JSON.parse(
  execFileSync("npm", ["pack", "--json", "--workspaces", "--pack-destination", tarballs], {
    cwd: root,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"]
  })
)
for (const pack of packed) {
  const files = pack.files.map((f) => f.path)
  const bad = files.filter((f) => /(^|\/)test\/|\.test\.|tsconfig|tsbuildinfo|vitest/.test(f))
  expect(bad.length === 0, `${pack.name} ships ${bad.join(", ")}`)
  for (const needed of ["package.json", "README.md", "LICENSE", "dist/index.js", "dist/index.d.ts", "src/index.ts"]) {
    expect(files.includes(needed), `${pack.name} does not ship ${needed}`)
  }
  expect(files.some((f) => f.endsWith(".d.ts.map")), `${pack.name} ships no declaration maps`)
  expect(files.some((f) => f.endsWith(".js.map")), `${pack.name} ships no source maps`)
  step(`packed ${pack.filename} (${pack.entryCount} files, ${(pack.unpackedSize / 1024).toFixed(0)} KB unpacked)`)
}

// --- 2. the documented install lines, each file's in a fresh project -------------------------------------------

const tarballOf = new Map(packed.map((p) => [p.name, Path.join(tarballs, p.filename)]))
const peersOf = new Map(workspaces.map(({ manifest }) => [manifest.name, Object.keys(manifest.peerDependencies ?? {})]))

/** The install lines of one Markdown file, in order: lines starting with `npm install ` in its ```sh fences. */
const installLines = (file) => {
  const lines = []
  let fence = undefined // the info string of the fence the line is in
  for (const line of Fs.readFileSync(Path.join(root, file), "utf8").split("\n")) {
    const marker = /^```(.*)$/.exec(line)
    if (marker !== null) fence = fence === undefined ? marker[1].trim() : undefined
    else if (fence === "sh" && line.startsWith("npm install ")) lines.push(line.trimEnd())
  }
  return lines
}

/** A documented line as the check runs it: npm's arguments, the reprise names replaced by tarballs (see the top). */
const substitute = (line) => {
  expect(/^[\w@^~.:/=-]+( +[\w@^~.:/=-]+)*$/.test(line), `an install line is plain words: ${line}`)
  const words = line.split(/ +/).slice(1)
  const named = new Set(words.filter((w) => w.startsWith("@reprise/")))
  for (const name of named) expect(tarballOf.has(name), `${line}: no workspace package ${name}`)
  const peers = new Set()
  const addPeers = (name) => {
    for (const peer of peersOf.get(name) ?? []) {
      if (peer.startsWith("@reprise/") && !named.has(peer) && !peers.has(peer)) {
        peers.add(peer)
        addPeers(peer)
      }
    }
  }
  for (const name of named) addPeers(name)
  return [
    ...words.map((w) => tarballOf.get(w) ?? w),
    ...[...peers].map((name) => tarballOf.get(name)),
    "--no-audit",
    "--no-fund"
  ]
}

const documents = [
  "README.md",
  ...workspaces.map(({ dir }) => `${dir}/README.md`),
  ...Fs.readdirSync(Path.join(root, "docs")).filter((f) => f.endsWith(".md")).map((f) => `docs/${f}`)
].map((file) => ({ file, lines: installLines(file) })).filter((d) => d.lines.length > 0)
expect(documents[0]?.file === "README.md", "README.md has no install line")

const globalPrefix = Path.join(work, "global")
const emptyProject = (dir) => {
  Fs.mkdirSync(dir, { recursive: true })
  Fs.writeFileSync(Path.join(dir, "package.json"), JSON.stringify({ name: "fresh", private: true }, null, 2))
}

/** The versions of every copy of `effect` in the project at `dir`, from its package-lock.json. */
const effectInLock = (dir) =>
  Object.entries(JSON.parse(Fs.readFileSync(Path.join(dir, "package-lock.json"), "utf8")).packages)
    .filter(([path]) => path === "node_modules/effect" || path.endsWith("/node_modules/effect"))
    .map(([, entry]) => entry.version)

/** The versions of every copy of `effect` under the global prefix. */
const effectInGlobal = async () => {
  const listed = await run("npm", ["ls", "effect", "--all", "--json", "--global"], {
    env: { npm_config_prefix: globalPrefix }
  })
  const versions = []
  const walk = (node) => {
    for (const [name, child] of Object.entries(node.dependencies ?? {})) {
      if (name === "effect" && child.version !== undefined) versions.push(child.version)
      walk(child)
    }
  }
  walk(JSON.parse(listed.stdout || "{}"))
  return versions
}

/**
 * Runs one file's install lines in `dir`, then checks the copies of `effect` the project holds: one, of the 3.x
 * line (a global install: every copy of the 3.x line). With `resolveOnly`, a local line runs with
 * `--package-lock-only`: npm resolves the whole tree (where a peer conflict is an ERESOLVE) and writes the lock,
 * without unpacking node_modules that nothing else in the check uses.
 */
const installAs = async ({ file, lines }, dir, resolveOnly) => {
  let global = false
  for (const line of lines) {
    const args = substitute(line)
    const isGlobal = args.includes("--global") || args.includes("-g")
    global ||= isGlobal
    await mustRun(`${file}: ${line}`, "npm", [
      "install",
      ...args,
      ...(resolveOnly && !isGlobal ? ["--package-lock-only"] : [])
    ], {
      cwd: dir,
      env: isGlobal ? { npm_config_prefix: globalPrefix } : {},
      timeoutMs: 300_000
    })
  }
  const versions = global ? await effectInGlobal() : effectInLock(dir)
  expect(versions.length > 0, `${file}: no copy of effect after ${lines.join("; ")}`)
  expect(versions.every((v) => v.startsWith("3.")), `${file}: effect ${versions.join(", ")} is not the 3.x line`)
  expect(global || versions.length === 1, `${file}: expected one copy of effect, found ${versions.length}`)
  const how = resolveOnly && !global ? "resolved" : "installed"
  step(`${file}: ${lines.map((l) => JSON.stringify(l)).join(", ")} ${how}; effect ${[...new Set(versions)]}`)
}

Fs.mkdirSync(Path.join(app, "src"), { recursive: true })
Fs.writeFileSync(
  Path.join(app, "package.json"),
  JSON.stringify({ name: "reprise-consumer", private: true, type: "module" }, null, 2)
)
// README.md's lines in the app, the other files' lines two at a time beside it (npm spends most of its time waiting)
const others = documents.slice(1)
const installs = [installAs(documents[0], app, false)]
const lanes = Array.from({ length: 2 }, async () => {
  for (let doc = others.shift(); doc !== undefined; doc = others.shift()) {
    const dir = Path.join(work, "projects", doc.file.replaceAll("/", "-").replace(/\.md$/, ""))
    emptyProject(dir)
    await installAs(doc, dir, true)
  }
})
await Promise.all([...installs, ...lanes])
const reprise = Path.join(globalPrefix, "bin", "reprise")
expect(Fs.existsSync(reprise), `no install line installs the reprise binary globally (${reprise})`)

// What the examples and the module probe use beyond README.md's lines: every other package, with the versions of
// the peers table (the root package.json's devDependencies).
const registry = ["@effect/experimental", "@effect/cli", "@effect/ai", "@effect/rpc", "@types/node"]
  .map((name) => `${name}@${rootPackage.devDependencies[name]}`)
const readmeWords = new Set(documents[0].lines.flatMap((line) => line.split(/ +/)))
const rest = packed.map((p) => p.name).filter((name) => !readmeWords.has(name))
await mustRun(
  "npm install (the rest of the app)",
  "npm",
  ["install", "--no-audit", "--no-fund", "--prefer-offline", ...rest.map((name) => tarballOf.get(name)), ...registry],
  { timeoutMs: 300_000 }
)
const effectCopies = (await run("npm", ["ls", "effect", "--all", "--parseable"])).stdout.trim().split("\n")
  .filter((line) => line.length > 0)
expect(effectCopies.length === 1, `expected one copy of effect, found ${effectCopies.length}:\n${effectCopies}`)
step(`the app completed with ${[...rest, ...registry].join(", ")}: one copy of effect`)

// Every public module imports from plain Node; internal modules are not exported.
const imports = workspaces.flatMap(({ dir, manifest }) =>
  Fs.readdirSync(Path.join(root, dir, "src")).filter((f) => f.endsWith(".ts") && f !== "bin.ts").map((f) =>
    f === "index.ts" ? manifest.name : `${manifest.name}/${f.slice(0, -3)}`
  )
)
const probe = `
const modules = ${JSON.stringify(imports)}
for (const m of modules) await import(m)
const closed = []
for (const m of ["@reprise/core/internal/attempt", "@reprise/providers/internal/sse", "@reprise/fleet/internal/scripts", "@reprise/ai/internal/attemptParts"]) {
  try { await import(m); closed.push(m + " is importable") } catch (e) {
    if (e.code !== "ERR_PACKAGE_PATH_NOT_EXPORTED") closed.push(m + ": " + e.code)
  }
}
if (closed.length > 0) { console.error(closed.join("\\n")); process.exit(1) }
console.log(modules.length)
`
Fs.writeFileSync(Path.join(app, "probe.mjs"), probe)
const probed = await mustRun("importing every public module", "node", ["probe.mjs"])
step(`plain node imports all ${probed.stdout.trim()} public modules; internal/* is not exported`)

// --- 3 and 4. type-check and run the examples -----------------------------------------------------------------

for (const file of Fs.readdirSync(Path.join(root, "examples")).filter((f) => f.endsWith(".ts"))) {
  Fs.copyFileSync(Path.join(root, "examples", file), Path.join(app, "src", file))
}
const compilerOptions = {
  module: "nodenext",
  moduleResolution: "nodenext",
  target: "es2022",
  lib: ["es2022"],
  types: ["node"],
  strict: true,
  exactOptionalPropertyTypes: true,
  noUncheckedIndexedAccess: true,
  // Effect's own declarations assume DOM and ws typings; the app's use of reprise's declarations is what is checked.
  skipLibCheck: true,
  outDir: "build",
  rootDir: "src"
}
Fs.writeFileSync(Path.join(app, "tsconfig.json"), JSON.stringify({ compilerOptions, include: ["src"] }, null, 2))
const tsc = Path.join(root, "node_modules/typescript/bin/tsc")
await mustRun("tsc on the examples", "node", [tsc, "-p", "."], { timeoutMs: 180_000 })
step("the examples type-check under nodenext, strict, exactOptionalPropertyTypes")

// The same compiler must reject misuse, or the check above proves nothing.
Fs.mkdirSync(Path.join(app, "misuse"), { recursive: true })
Fs.writeFileSync(
  Path.join(app, "misuse/misuse.ts"),
  `import { Budget, Recovery } from "@reprise/core"
import { Simulator } from "@reprise/simulator"
export const a = Budget.layer({ maxAttempts: "eleven" })
export const b = Recovery.generate({ model: 1, messages: [] })
export const c = Simulator.layer({ port: undefined, bogus: true })
`
)
Fs.writeFileSync(
  Path.join(app, "misuse/tsconfig.json"),
  JSON.stringify({ compilerOptions: { ...compilerOptions, noEmit: true, rootDir: "." }, include: ["misuse.ts"] })
)
const misuse = await run("node", [tsc, "-p", "misuse"], { timeoutMs: 180_000 })
const errors = misuse.stdout.split("\n").filter((line) => /error TS\d+/.test(line))
expect(misuse.code !== 0 && errors.length === 3, `expected 3 type errors in misuse.ts, got:\n${misuse.stdout}`)
step("misuse of the API is rejected (3 of 3 type errors)")

const cut = await simulate({
  routes: {
    "openai-chat": {
      steps: [
        { kind: "reset", afterEvents: 3, reply: { text: "A draft that is cut before its end" } },
        { kind: "stream", reply: { text: "Hello from the consumer check." } }
      ]
    }
  }
})
const recovered = await mustRun("examples/recovery.js", "node", ["build/recovery.js"], {
  env: {
    OPENAI_API_KEY: "sk-consumer-check",
    OPENAI_BASE_URL: cut.bases["openai-chat"],
    REPRISE_BACKOFF_BASE: "20"
  }
})
cut.stop()
expect(/attempt 1 discarded/.test(recovered.stdout), `no discard notice in:\n${recovered.stdout}`)
expect(
  /Hello from the consumer check\. \(2 attempts, finish stop\)/.test(recovered.stdout),
  `the committed text and attempt count are not in:\n${recovered.stdout}`
)
step("examples/recovery.js (the README's layers): a cut stream replayed, committed after 2 attempts")

const stepped = await mustRun("examples/chat-step.js", "node", ["build/chat-step.js", Path.join(work, "t.jsonl")])
const facts = JSON.parse(stepped.stdout.trim().split("\n").at(-1))
expect(
  facts.text === "2 + 3 = 5" && facts.toolRuns === 1 && facts.requests === 3 && facts.committed === 3,
  `chat-step: ${stepped.stdout}`
)
const lines = Fs.readFileSync(Path.join(work, "t.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l))
expect(
  lines.map((l) => l.role).join(",") === "user,assistant,tool,assistant",
  `the transcript holds ${lines.map((l) => l.role)}`
)
step("examples/chat-step.js: the tool ran once across a replay; the transcript holds the 4 committed messages")

// The @effect/ai program: a Chat turn with a tool, its second reply cut once, then a plain generateText.
const aiServer = await simulate({
  routes: {
    "openai-chat": {
      reply: { text: "Once more." },
      steps: [
        { kind: "stream", reply: { toolCalls: [{ name: "record", arguments: { line: "hello" } }] } },
        { kind: "reset", afterEvents: 3, reply: { text: "A draft that is cut before its end" } },
        { kind: "stream", reply: { text: "Recorded hello." } }
      ]
    }
  }
})
const ai = await mustRun("examples/effect-ai.js", "node", ["build/effect-ai.js"], {
  env: {
    OPENAI_API_KEY: "sk-consumer-check",
    OPENAI_BASE_URL: aiServer.bases["openai-chat"],
    REPRISE_MODEL: "gpt-4.1-mini",
    REPRISE_BACKOFF_BASE: "20"
  }
})
aiServer.stop()
expect(
  /Recorded hello\. \(tool runs: 1, attempts of the last reply: 2\)/.test(ai.stdout) &&
    /Once more\. \(finish stop\)/.test(ai.stdout),
  `examples/effect-ai.js:\n${ai.stdout}`
)
step("examples/effect-ai.js (@effect/ai over RecoveringLanguageModel): the tool ran once, the cut reply replayed")

await mustRun("node --test build/retry-after.test.js", "node", ["--test", "build/retry-after.test.js"])
step("examples/retry-after.test.ts: a TestClock test against the simulator passes under node --test")

// --- 5. the binary of the global install ----------------------------------------------------------------------

const version = await mustRun("reprise --version", reprise, ["--version"])
const cliVersion = workspaces.find((w) => w.manifest.name === "@reprise/cli").manifest.version
expect(version.stdout.trim() === cliVersion, `reprise --version printed ${JSON.stringify(version.stdout)}`)
const demo = await mustRun("reprise demo", reprise, ["demo"], { timeoutMs: 120_000 })
expect(/Every step behaved as described\./.test(demo.stdout), `reprise demo:\n${demo.stdout}`)
step("the globally installed reprise demo passes every step")

const served = await simulate({
  routes: { anthropic: { steps: [{ kind: "status", status: 529 }, { kind: "stream", reply: { text: "Installed." } }] } }
})
const chat = await mustRun("reprise chat", reprise, [
  "chat",
  "--provider",
  "anthropic",
  "--base-url",
  served.bases["anthropic"],
  "--model",
  "claude-test",
  "--backoff-base",
  "20",
  "hello"
], { env: { ANTHROPIC_API_KEY: "sk-ant-consumer-check" } })
served.stop()
expect(chat.stdout === "Installed.\n", `reprise chat printed ${JSON.stringify(chat.stdout)}`)
expect(/attempt 1\/11 failed \(HTTP 529\)/.test(chat.stderr), `reprise chat stderr: ${chat.stderr}`)
step("the globally installed reprise chat against reprise simulate: a 529 replayed, the answer on stdout")

if (!keep) Fs.rmSync(work, { recursive: true, force: true })
step(`all checks passed in ${((Date.now() - started) / 1000).toFixed(1)} s`)
