/**
 * @since 0.1.0
 */
export * as Failoverbench from "./Failoverbench.js"

/**
 * @since 0.1.0
 */
export * as RecordedRequest from "./RecordedRequest.js"

/**
 * @since 0.1.0
 */
export * as ScriptLoader from "./ScriptLoader.js"

/**
 * @since 0.1.0
 */
export * as Simulator from "./Simulator.js"

/**
 * @since 0.1.0
 */
export * as SimulatorScript from "./SimulatorScript.js"
