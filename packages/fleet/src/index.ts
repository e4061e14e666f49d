/**
 * @since 0.1.0
 */
export * as FleetAddress from "./FleetAddress.js"

/**
 * @since 0.1.0
 */
export * as FleetOptions from "./FleetOptions.js"

/**
 * @since 0.1.0
 */
export * as MemoryFleet from "./MemoryFleet.js"

/**
 * @since 0.1.0
 */
export * as RedisFleet from "./RedisFleet.js"

/**
 * @since 0.1.0
 */
export * as RetryBudget from "./RetryBudget.js"
