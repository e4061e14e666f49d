import * as Path from "node:path"
import { fileURLToPath } from "node:url"
import type { ViteUserConfig } from "vitest/config"

const packages = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "packages")

/**
 * Settings every vitest project of the repository shares. Tests run on the TypeScript sources: `@reprise/x` and
 * `@reprise/x/Module` resolve to `packages/x/src`, not to the compiled `dist` that the packages' `exports` name.
 * (The CLI tests spawn the built binary, so `npm test` builds first.)
 */
const config: ViteUserConfig = {
  resolve: {
    alias: [
      { find: /^@reprise\/([a-z]+)$/, replacement: `${packages}/$1/src/index.ts` },
      { find: /^@reprise\/([a-z]+)\/(.+)$/, replacement: `${packages}/$1/src/$2.ts` }
    ]
  },
  test: {
    include: ["test/**/*.test.ts"],
    sequence: { concurrent: false },
    testTimeout: 30_000,
    hookTimeout: 30_000
  }
}

export default config
