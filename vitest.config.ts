import * as Os from "node:os"
import { defineConfig } from "vitest/config"

export default defineConfig({
  test: {
    projects: ["packages/*/vitest.config.ts", "test/vitest.config.ts"],
    // Most of the suite waits on child processes, sockets and Redis rather than on the CPU: vitest's default of one
    // worker per core minus one is a single worker on 2 cores, and two workers there take the suite from about
    // 300 s to 215-225 s. No test asserts on speed; the few bounds on time (a prompt exit) are seconds wide.
    maxWorkers: Math.max(2, Os.availableParallelism() - 1),
    minWorkers: 1
  }
})
