#!/usr/bin/env node
// Runs the TypeScript sources directly through tsx's loader: the workspace ships no build step.
import { register } from "tsx/esm/api"

register()
await import("../src/bin.ts")
