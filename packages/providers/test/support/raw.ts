/**
 * Test support: a raw node:net server on 127.0.0.1 that reads each HTTP request (its head and a `content-length`
 * body), counts it, and lets the test write any bytes back: what a node:http server would refuse to send.
 */
import { Effect } from "effect"
import * as Net from "node:net"

export interface RawRequest {
  /** The request line, e.g. `POST /v1/chat/completions HTTP/1.1`. */
  readonly line: string
  readonly head: string
  readonly body: string
}

export type RawHandler = (socket: Net.Socket, request: RawRequest, index: number) => void

export interface RawServer {
  readonly url: string
  readonly received: Array<RawRequest>
  /** Waits until the connection of request `index` closed (no time passes if it already has). */
  readonly awaitClose: (index: number) => Effect.Effect<void>
}

const headEnd = "\r\n\r\n"

/** A node:net server on 127.0.0.1, port 0, released (with every socket destroyed) with the scope. */
export const rawServer = (handler: RawHandler) =>
  Effect.acquireRelease(
    Effect.async<RawServer & { readonly net: Net.Server; readonly sockets: Set<Net.Socket> }>((resume) => {
      const sockets = new Set<Net.Socket>()
      const received: Array<RawRequest> = []
      const closed = new Set<number>()
      const waiters: Array<readonly [number, () => void]> = []
      const awaitClose = (index: number) =>
        Effect.async<void>((resume) => {
          if (closed.has(index)) return resume(Effect.void)
          waiters.push([index, () => resume(Effect.void)])
        })
      const net = Net.createServer((socket) => {
        sockets.add(socket)
        let index: number | undefined
        socket.on("close", () => {
          sockets.delete(socket)
          if (index === undefined) return
          closed.add(index)
          for (const [waiting, wake] of waiters) if (waiting === index) wake()
        })
        socket.on("error", () => {})
        let buffer = Buffer.alloc(0)
        const onData = (chunk: Buffer) => {
          buffer = Buffer.concat([buffer, chunk])
          const end = buffer.indexOf(headEnd)
          if (end < 0) return
          const head = buffer.subarray(0, end).toString("latin1")
          const length = Number(/\r\ncontent-length:\s*(\d+)/i.exec(head)?.[1] ?? "0")
          if (buffer.length < end + headEnd.length + length) return
          socket.off("data", onData)
          const body = buffer.subarray(end + headEnd.length, end + headEnd.length + length).toString("utf8")
          const request = { line: head.split("\r\n")[0], head, body }
          index = received.length
          received.push(request)
          handler(socket, request, index)
        }
        socket.on("data", onData)
      })
      net.listen(0, "127.0.0.1", () => {
        const { port } = net.address() as Net.AddressInfo
        resume(Effect.succeed({ url: `http://127.0.0.1:${port}`, received, awaitClose, net, sockets }))
      })
    }),
    (s) =>
      Effect.async<void>((resume) => {
        for (const socket of s.sockets) socket.destroy()
        s.net.close(() => resume(Effect.void))
      })
  )
