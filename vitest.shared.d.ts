import type { ViteUserConfig } from "vitest/config"
/** Settings every vitest project of the repository shares. */
declare const config: ViteUserConfig
export default config
// # sourceMappingURL=vitest.shared.d.ts.map
