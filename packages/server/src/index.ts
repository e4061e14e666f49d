/**
 * @since 0.1.0
 */
export * as RelayProtocol from "./RelayProtocol.js"
