/**
 * @since 0.1.0
 */
export * as RecoveringLanguageModel from "./RecoveringLanguageModel.js"

/**
 * @since 0.1.0
 */
export * as PromptMapping from "./PromptMapping.js"

/**
 * @since 0.1.0
 */
export * as ResponseMapping from "./ResponseMapping.js"

/**
 * @since 0.1.0
 */
export * as RecoveryAiError from "./RecoveryAiError.js"
