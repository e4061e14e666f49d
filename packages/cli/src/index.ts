/**
 * @since 0.1.0
 */
export * as Cli from "./Cli.js"

/**
 * @since 0.1.0
 */
export * as ExitCode from "./ExitCode.js"

/**
 * @since 0.1.0
 */
export * as Output from "./Output.js"

/**
 * @since 0.1.0
 */
export * as Render from "./Render.js"

/**
 * @since 0.1.0
 */
export * as Settings from "./Settings.js"

/**
 * The fallback routes of `--fallback` and `REPRISE_FALLBACKS`: their specs, endpoints and keys.
 *
 * @since 0.1.0
 */
export * as Fallback from "./Fallback.js"

/**
 * @since 0.1.0
 */
export * as Turn from "./Turn.js"

/**
 * @since 0.1.0
 */
export * as CommandLine from "./CommandLine.js"

/**
 * @since 0.1.0
 */
export * as Run from "./Run.js"

/**
 * @since 0.1.0
 */
export * as Sanitize from "./Sanitize.js"

/**
 * @since 0.1.0
 */
export * as BuiltinTools from "./BuiltinTools.js"
