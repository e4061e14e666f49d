#!/usr/bin/env node
// The `reprise` executable: the compiled, bundled CLI in dist/bundle (`npm run build` makes it; the published
// package ships it). Until the runtime has installed its own handler, SIGINT ends the process with 130: nothing
// can have been sent yet.
const startupSigint = () => process.exit(130)
globalThis[Symbol.for("@reprise/cli/startupSigint")] = startupSigint
process.on("SIGINT", startupSigint)
await import("../dist/bundle/reprise.js")
