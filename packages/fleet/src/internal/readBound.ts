/**
 * A bound on what one Redis connection buffers. The client's parser keeps every byte of a reply until the reply is
 * complete, and it has no limit of its own: a server (or anything on its port) that sends one endless reply would
 * grow the process without end. Every reply the fleet reads is a few hundred bytes at most (the client's ready check,
 * `INFO`, a few kilobytes), so a connection that receives more than {@link maxReplyBytes} without completing a reply
 * is destroyed, and the client connects again as after any lost connection.
 *
 * @internal
 */
import type { Redis } from "ioredis"

/**
 * The most a connection may receive between two complete replies: 1 MiB.
 *
 * @internal
 */
export const maxReplyBytes = 1024 * 1024

/**
 * Watches each connection of `client` (the current and every reconnection). `completed` must be called whenever a
 * reply was read (a command settled, a message arrived); `exceeded` is told when a connection is destroyed.
 *
 * @internal
 */
export const guard = (client: Redis, exceeded: (detail: string) => void): { readonly completed: () => void } => {
  let pending = 0
  const completed = () => {
    pending = 0
  }
  client.on("connect", () => {
    pending = 0
    const stream = client.stream
    stream.on("data", (chunk: Buffer) => {
      pending += chunk.length
      if (pending > maxReplyBytes && !stream.destroyed) {
        pending = 0
        exceeded(`a reply longer than ${maxReplyBytes} bytes`)
        stream.destroy()
      }
    })
  })
  // the ready check's INFO is the one reply the fleet does not send itself
  client.on("ready", completed)
  return { completed }
}
