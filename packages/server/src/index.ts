/**
 * @since 0.1.0
 */
export * as RelayClient from "./RelayClient.js"

/**
 * @since 0.1.0
 */
export * as RelayProtocol from "./RelayProtocol.js"

/**
 * @since 0.1.0
 */
export * as Relay from "./Relay.js"
