#!/usr/bin/env node
// The `reprise` executable: the compiled, bundled CLI in dist/bundle (`npm run build` makes it; the published
// package ships it). Until the runtime has installed its own handler, SIGINT ends the process with 130: nothing
// can have been sent yet.
import { setFlagsFromString } from "node:v8"

const startupSigint = () => process.exit(130)
globalThis[Symbol.for("@reprise/cli/startupSigint")] = startupSigint
process.on("SIGINT", startupSigint)

// A command line that can only print help (`reprise`, `reprise --help`, `reprise chat -h`) runs without V8's
// optimising compiler: the process lives ~200 ms, V8 marks @effect/printer's layout hot near its end, and Node's exit
// waits for that compile, which nothing would use (docs/cli.md, "Start-up"). Set before any of the bundle is compiled.
const args = process.argv.slice(2)
const helpOnly = args.length === 0 ||
  (args.length <= 2 && (args.at(-1) === "--help" || args.at(-1) === "-h") &&
    (args.length === 1 || /^[a-z]+$/.test(args[0])))
if (helpOnly) setFlagsFromString("--no-opt")

await import("../dist/bundle/reprise.js")
