/**
 * PLACEHOLDER for the Anthropic Messages codec (`POST /v1/messages`), which another change provides as
 * `export const codec: Codec`. Until it does, the relay answers that route with 501.
 *
 * @internal
 */
import type { Codec } from "../downstream.js"

/** @internal */
export const codec: Codec | undefined = undefined
