/**
 * PLACEHOLDER for the relay's chat page (`GET /`), which another change provides as `export const html: string`.
 *
 * @internal
 */

/** @internal */
export const html = "<!doctype html><meta charset=utf-8><title>reprise relay</title><p>reprise relay (placeholder page)"
