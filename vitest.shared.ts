import type { ViteUserConfig } from "vitest/config"

/** Settings every vitest project of the repository shares. */
const config: ViteUserConfig = {
  test: {
    include: ["test/**/*.test.ts"],
    sequence: { concurrent: false },
    testTimeout: 30_000,
    hookTimeout: 30_000
  }
}

export default config
