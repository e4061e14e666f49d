/**
 * One writer per session file: `reprise chat` holds an exclusive lock on its `--session` for the whole turn (from
 * reading the history to the last append), `reprise repl` for its whole run. A second process fails at once with
 * exit 2 naming the holder, or waits for it with `--wait-session`.
 *
 * The lock is a listening Unix socket in Linux's abstract namespace, named after the session file's real path. It
 * has `flock` semantics: the kernel holds it, so it is released when the process ends however it ends (`kill -9`
 * included), and it leaves nothing on disk to go stale. A process that finds it taken connects to it: the holder
 * answers with its pid and command, and closes the connection when it lets go, so a waiter is woken by the release
 * itself (no polling, no timer). On systems without an abstract namespace the socket is a file in the temporary
 * directory; a file left by a killed holder refuses connections, and is then removed and taken over.
 *
 * Boundaries: the lock is per machine (per network namespace on Linux, like a lock file on a local disk), and it
 * binds processes that use it: an editor, or a reprise on another machine sharing the file over NFS, is not held
 * off.
 *
 * @since 0.1.0
 */
import * as Transcript from "@reprise/core/Transcript"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import type * as Scope from "effect/Scope"
import * as crypto from "node:crypto"
import * as fs from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import * as nodePath from "node:path"

/**
 * Who holds a session, as it says itself.
 *
 * @since 0.1.0
 * @category models
 */
export interface Holder {
  readonly pid: number
  readonly command: string
}

/**
 * The session's identity: the file itself (its device and inode, so a symlink to it, a hard link or another
 * spelling is the same lock), else its real path (the directory resolved through symlinks), or the resolved
 * path when the directory does not exist (the append check reports that).
 */
const identity = (path: string): string => {
  const absolute = nodePath.resolve(path)
  try {
    // created (empty) when missing, as the first append would, so that every process names it by its inode; never
    // waiting on a FIFO (O_NONBLOCK: no reader fails at once) and never writing
    const { O_WRONLY, O_APPEND, O_CREAT, O_NONBLOCK } = fs.constants
    fs.closeSync(fs.openSync(absolute, O_WRONLY | O_APPEND | O_CREAT | O_NONBLOCK, 0o666))
  } catch {
    // a missing directory, a FIFO, no permission: the session checks that follow say which
  }
  try {
    const info = fs.statSync(absolute)
    return `inode:${info.dev}:${info.ino}`
  } catch {
    // not there yet: its first append creates it, under this lock
  }
  try {
    return nodePath.join(fs.realpathSync(nodePath.dirname(absolute)), nodePath.basename(absolute))
  } catch {
    return absolute
  }
}

/**
 * The socket address of a session's lock.
 *
 * @since 0.1.0
 * @category internals
 */
export const address = (path: string): string => {
  const digest = crypto.createHash("sha256").update(identity(path)).digest("hex").slice(0, 32)
  return process.platform === "linux"
    ? `\0reprise/session/${digest}`
    : nodePath.join(os.tmpdir(), `reprise-session-${digest}.sock`)
}

type Attempt =
  | { readonly _tag: "Held"; readonly lock: Lock }
  | { readonly _tag: "Taken"; readonly holder: Holder | undefined; readonly socket: net.Socket }
  | { readonly _tag: "Stale" }

const busy = (path: string, holder: Holder | undefined, hint: string) =>
  new Transcript.TranscriptError({
    reason: "Busy",
    path,
    detail: `${holder === undefined ? "by another process" : `by pid ${holder.pid} (${holder.command})`}${hint}`
  })

const failed = (path: string, error: unknown) =>
  new Transcript.TranscriptError({
    reason: "Write",
    path,
    detail: `cannot lock the session (${error instanceof Error ? error.message : String(error)})`
  })

const parseHolder = (line: string): Holder | undefined => {
  try {
    const value: unknown = JSON.parse(line)
    if (
      typeof value === "object" && value !== null && "pid" in value && typeof value.pid === "number" &&
      "command" in value && typeof value.command === "string"
    ) {
      // another process's words, printed on our stderr: visible ASCII only
      return { pid: value.pid, command: value.command.slice(0, 80).replace(/[^\x20-\x7e]/g, "?") }
    }
  } catch {
    // not a holder's greeting: say nothing of it
  }
  return undefined
}

/** Connects to a taken lock and reads the holder's greeting (one JSON line); the socket stays open. */
const connect = (at: string) =>
  Effect.async<{ readonly holder: Holder | undefined; readonly socket: net.Socket } | "refused">((resume) => {
    const socket = net.connect({ path: at })
    let buffered = ""
    let done = false
    const finish = (result: { readonly holder: Holder | undefined; readonly socket: net.Socket } | "refused") => {
      if (done) return
      done = true
      socket.removeAllListeners("data")
      resume(Effect.succeed(result))
    }
    socket.setEncoding("utf8")
    socket.on("data", (chunk: string) => {
      buffered += chunk
      const newline = buffered.indexOf("\n")
      if (newline !== -1 || buffered.length > 4096) finish({ holder: parseHolder(buffered.slice(0, newline)), socket })
    })
    // the holder let go between our bind and our connect (or the file is a stale socket): try again
    socket.on("error", () => finish("refused"))
    socket.on("close", () => finish("refused"))
    return Effect.sync(() => socket.destroy())
  })

interface Lock {
  readonly release: Effect.Effect<void>
}

const listen = (at: string, greeting: string) =>
  Effect.async<Lock | "in use", unknown>((resume) => {
    const sockets = new Set<net.Socket>()
    const server = net.createServer((socket) => {
      sockets.add(socket)
      socket.on("close", () => sockets.delete(socket))
      socket.on("error", () => socket.destroy())
      socket.write(greeting)
    })
    // letting go wakes every waiter: their connections end with it (libuv removes a socket file on close)
    const release = Effect.async<void>((done) => {
      server.close(() => done(Effect.void))
      for (const socket of sockets) socket.destroy()
    })
    server.once("error", (error: NodeJS.ErrnoException) => {
      resume(error.code === "EADDRINUSE" ? Effect.succeed("in use" as const) : Effect.fail(error))
    })
    server.listen({ path: at, exclusive: true }, () => {
      // never what keeps the process alive
      server.unref()
      resume(Effect.succeed({ release }))
    })
    return Effect.sync(() => {
      server.close()
    })
  })

const attempt = (at: string, greeting: string): Effect.Effect<Attempt, unknown> =>
  Effect.flatMap(listen(at, greeting), (listened) =>
    listened !== "in use"
      ? Effect.succeed<Attempt>({ _tag: "Held", lock: listened })
      : Effect.map(connect(at), (connected): Attempt =>
        connected === "refused" ? { _tag: "Stale" } : { _tag: "Taken", ...connected }))

const removeStale = (at: string) =>
  Effect.sync(() => {
    // only a socket file can be stale; the abstract namespace has nothing to remove
    if (!at.startsWith("\0")) fs.rmSync(at, { force: true })
  })

const waitForClose = (socket: net.Socket) =>
  Effect.async<void>((resume) => {
    if (socket.destroyed) return resume(Effect.void)
    socket.once("close", () => resume(Effect.void))
    socket.resume()
    return Effect.sync(() => socket.destroy())
  })

/**
 * @since 0.1.0
 * @category models
 */
export interface Options<R = never> {
  /** Wait for the holder instead of failing. */
  readonly wait: boolean
  /** What this process says it is, to a process that finds the session taken (e.g. `reprise chat`). */
  readonly command: string
  /** Called once when the session is taken and `wait` is set, before waiting. */
  readonly onWait?: ((holder: Holder | undefined) => Effect.Effect<void, never, R>) | undefined
}

/**
 * Holds the session's lock for the rest of the scope. When another process holds it: fails with a
 * `TranscriptError{reason: "Busy"}` naming the holder, or, with `wait`, waits until it is released (interruptible:
 * Ctrl-C ends the wait).
 *
 * @since 0.1.0
 * @category locking
 */
export const acquire = <R = never>(
  path: string,
  options: Options<R>
): Effect.Effect<void, Transcript.TranscriptError, Scope.Scope | R> => {
  const at = address(path)
  const greeting = `${JSON.stringify({ pid: process.pid, command: options.command })}\n`
  const loop = (announced: boolean, stale: number): Effect.Effect<Lock, Transcript.TranscriptError, R> =>
    Effect.flatMap(Effect.mapError(attempt(at, greeting), (error) => failed(path, error)), (result) => {
      switch (result._tag) {
        case "Held":
          return Effect.succeed(result.lock)
        case "Stale":
          // In the abstract namespace nothing is stale: taken but refusing connections is a holder letting go (its
          // socket still bound while it closes), so try again in a moment. A socket file is removed and taken over.
          if (at.startsWith("\0")) {
            if (stale >= 1000) return Effect.fail(failed(path, new Error(`the lock ${at} is not released`)))
            return Effect.zipRight(Effect.sleep(Duration.millis(5)), loop(announced, stale + 1))
          }
          if (stale >= 3) return Effect.fail(failed(path, new Error(`the lock ${at} cannot be taken over`)))
          return Effect.zipRight(removeStale(at), loop(announced, stale + 1))
        case "Taken": {
          if (!options.wait) {
            result.socket.destroy()
            return Effect.fail(busy(path, result.holder, "; pass --wait-session to wait for it"))
          }
          const notify = announced || options.onWait === undefined ? Effect.void : options.onWait(result.holder)
          return Effect.zipRight(Effect.zipRight(notify, waitForClose(result.socket)), loop(true, 0))
        }
      }
    })
  return Effect.asVoid(
    Effect.acquireRelease(
      loop(false, 0),
      (lock) => lock.release
    )
  )
}
