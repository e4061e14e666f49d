/**
 * @since 0.1.0
 */
export * as Budget from "./Budget.js"

/**
 * @since 0.1.0
 */
export * as Classification from "./Classification.js"

/**
 * @since 0.1.0
 */
export * as Generation from "./Generation.js"

/**
 * @since 0.1.0
 */
export * as HookError from "./HookError.js"

/**
 * @since 0.1.0
 */
export * as Ledger from "./Ledger.js"

/**
 * @since 0.1.0
 */
export * as Message from "./Message.js"

/**
 * @since 0.1.0
 */
export * as Pacing from "./Pacing.js"

/**
 * @since 0.1.0
 */
export * as Policy from "./Policy.js"

/**
 * @since 0.1.0
 */
export * as Prices from "./Prices.js"

/**
 * @since 0.1.0
 */
export * as Provider from "./Provider.js"

/**
 * @since 0.1.0
 */
export * as ProviderFailure from "./ProviderFailure.js"

/**
 * @since 0.1.0
 */
export * as ProviderRejection from "./ProviderRejection.js"

/**
 * @since 0.1.0
 */
export * as Recovery from "./Recovery.js"

/**
 * @since 0.1.0
 */
export * as RecoveryError from "./RecoveryError.js"

/**
 * @since 0.1.0
 */
export * as RecoveryExhausted from "./RecoveryExhausted.js"

/**
 * @since 0.1.0
 */
export * as RecoveryNotifications from "./RecoveryNotifications.js"

/**
 * @since 0.1.0
 */
export * as RecoveryTelemetry from "./RecoveryTelemetry.js"

/**
 * @since 0.1.0
 */
export * as Resumption from "./Resumption.js"

/**
 * @since 0.1.0
 */
export * as TransportError from "./TransportError.js"

/**
 * @since 0.1.0
 */
export * as Overflow from "./Overflow.js"

/**
 * @since 0.1.0
 */
export * as Chat from "./Chat.js"

/**
 * @since 0.1.0
 */
export * as Tool from "./Tool.js"

/**
 * @since 0.1.0
 */
export * as Transcript from "./Transcript.js"

/**
 * @since 0.1.0
 */
export * as FleetLimits from "./FleetLimits.js"

/**
 * @since 0.1.0
 */
export * as Range from "./Range.js"

/**
 * `Circuit` is the breaker of each route of a plan.
 *
 * @since 0.1.0
 */
export * as Circuit from "./Circuit.js"

/**
 * `Routes` is a plan of routes.
 *
 * @since 0.1.0
 */
export * as Routes from "./Routes.js"
