/**
 * @since 0.1.0
 */
export * as AnthropicMessages from "./AnthropicMessages.js"

/**
 * @since 0.1.0
 */
export * as HttpProvider from "./HttpProvider.js"

/**
 * @since 0.1.0
 */
export * as OpenAiChat from "./OpenAiChat.js"

/**
 * @since 0.1.0
 */
export * as OpenAiResponses from "./OpenAiResponses.js"

/**
 * @since 0.1.0
 */
export * as ProviderOptions from "./ProviderOptions.js"

/**
 * @since 0.1.0
 */
export * as Redaction from "./Redaction.js"

/**
 * @since 0.1.0
 */
export * as Subscription from "./Subscription.js"
