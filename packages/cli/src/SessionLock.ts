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
 * A holder that does not answer within {@link greetingTimeout} (stopped with Ctrl-Z, or a name squatted by a process
 * that is not a reprise, another user's included) holds the lock all the same: it is named from `/proc` when it can
 * be, and waited for like any other. Every wait here (the greeting, the release, a holder letting go) is
 * interruptible: Ctrl-C ends it.
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
  /** Set when the holder did not answer: why, as far as `/proc` tells (`stopped`, or `not answering`). */
  readonly silent?: "stopped" | "not answering" | undefined
}

/**
 * How long a holder may take to say who it is. One that says nothing by then is named from `/proc` (Linux), or
 * reported as unknown.
 *
 * @since 0.1.0
 * @category models
 */
export const greetingTimeout: Duration.Duration = Duration.seconds(1)

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

const describe = (holder: Holder | undefined) =>
  holder === undefined
    ? "by another process, which does not say who it is (another user's, or not a reprise)"
    : `by pid ${holder.pid} (${holder.command})${
      holder.silent === undefined ? "" : `, which ${holder.silent === "stopped" ? "is stopped" : "does not answer"}`
    }`

const busy = (path: string, holder: Holder | undefined, hint: string) =>
  new Transcript.TranscriptError({ reason: "Busy", path, detail: `${describe(holder)}${hint}` })

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

/**
 * The process listening on an abstract socket, from `/proc` (Linux): its pid, command line and state. `undefined`
 * when it cannot be told (another user's process, whose descriptors this one may not read).
 */
const listener = (at: string): Holder | undefined => {
  if (process.platform !== "linux" || !at.startsWith("\0")) return undefined
  try {
    const name = `@${at.slice(1)}`
    // Num RefCount Protocol Flags Type St Inode Path; the listening socket has the __SO_ACCEPTCON flag, and Node
    // binds an abstract name padded with NULs to the address's full length (shown as "@")
    const row = fs.readFileSync("/proc/net/unix", "utf8").split("\n").map((line) => line.trim().split(/\s+/))
      .find((fields) => fields[3] === "00010000" && fields[7]?.replace(/@+$/, "") === name)
    if (row === undefined) return undefined
    const socket = `socket:[${row[6]}]`
    for (const pid of fs.readdirSync("/proc")) {
      if (!/^\d+$/.test(pid)) continue
      let fds: Array<string>
      try {
        fds = fs.readdirSync(`/proc/${pid}/fd`)
      } catch {
        continue
      }
      for (const fd of fds) {
        try {
          if (fs.readlinkSync(`/proc/${pid}/fd/${fd}`) !== socket) continue
        } catch {
          continue
        }
        const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8")
        const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3)
        const command = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter((arg) => arg !== "")
          .join(" ").slice(0, 80).replace(/[^\x20-\x7e]/g, "?")
        return { pid: Number(pid), command, silent: state === "T" || state === "t" ? "stopped" : "not answering" }
      }
    }
  } catch {
    // no /proc to read: the holder stays unnamed
  }
  return undefined
}

/** Connects to a taken lock; the socket, connected, or "refused" when nothing accepts. */
const connect = (at: string) =>
  Effect.async<net.Socket | "refused">((resume) => {
    const socket = net.connect({ path: at })
    // the holder let go between our bind and our connect (or the file is a stale socket): try again
    const refused = () => resume(Effect.succeed("refused"))
    socket.once("error", refused)
    socket.once("close", refused)
    socket.once("connect", () => {
      socket.off("error", refused)
      socket.off("close", refused)
      // errors after this end in "close", which a wait for the release watches
      socket.on("error", () => socket.destroy())
      resume(Effect.succeed(socket))
    })
    return Effect.sync(() => socket.destroy())
  })

/** The holder's greeting (one JSON line), `undefined` for one that is not a holder's, or "closed" when it let go. */
const greetingOf = (socket: net.Socket) =>
  Effect.async<Holder | undefined | "closed">((resume) => {
    let buffered = ""
    const onData = (chunk: string) => {
      buffered += chunk
      const newline = buffered.indexOf("\n")
      if (newline !== -1 || buffered.length > 4096) resume(Effect.succeed(parseHolder(buffered.slice(0, newline))))
    }
    const onClose = () => resume(Effect.succeed("closed" as const))
    socket.setEncoding("utf8")
    socket.on("data", onData)
    socket.once("close", onClose)
    return Effect.sync(() => {
      socket.off("data", onData)
      socket.off("close", onClose)
    })
  }).pipe(Effect.ensuring(Effect.sync(() => socket.pause())))

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
  /**
   * The lock found taken: who holds it, and with `wait`, its release. "refused" when the holder let go meanwhile (or
   * the socket is stale). Every wait is interruptible; the connection closes with it, whatever ends it.
   */
  const taken = (announced: boolean): Effect.Effect<"released" | "refused", Transcript.TranscriptError, R> =>
    Effect.scoped(Effect.gen(function*() {
      const socket = yield* Effect.acquireRelease(
        Effect.interruptible(connect(at)),
        (socket) => Effect.sync(() => socket !== "refused" && socket.destroy())
      )
      if (socket === "refused") return "refused"
      const greeted = yield* Effect.interruptible(
        greetingOf(socket).pipe(Effect.timeoutTo({
          duration: greetingTimeout,
          onSuccess: (holder) => holder,
          onTimeout: () => "silent" as const
        }))
      )
      if (greeted === "closed") return "refused"
      const holder = greeted === "silent" ? listener(at) : greeted
      if (!options.wait) return yield* Effect.fail(busy(path, holder, "; pass --wait-session to wait for it"))
      if (!announced && options.onWait !== undefined) yield* options.onWait(holder)
      yield* Effect.interruptible(waitForClose(socket))
      return "released"
    }))
  const loop = (announced: boolean, stale: number): Effect.Effect<Lock, Transcript.TranscriptError, R> =>
    // Binding the socket never waits (a bind, no peer): it is the acquisition, in the uninterruptible region of
    // `acquireRelease`, so that a lock taken is always released. Everything else waits, interruptibly.
    Effect.flatMap(Effect.mapError(listen(at, greeting), (error) => failed(path, error)), (listened) => {
      if (listened !== "in use") return Effect.succeed(listened)
      return Effect.flatMap(taken(announced), (result) => {
        if (result === "released") return loop(true, 0)
        // In the abstract namespace nothing is stale: taken but refusing connections is a holder letting go (its
        // socket still bound while it closes), so try again in a moment. A socket file is removed and taken over.
        if (at.startsWith("\0")) {
          if (stale >= 1000) return Effect.fail(failed(path, new Error(`the lock ${at} is not released`)))
          return Effect.zipRight(Effect.interruptible(Effect.sleep(Duration.millis(5))), loop(announced, stale + 1))
        }
        if (stale >= 3) return Effect.fail(failed(path, new Error(`the lock ${at} cannot be taken over`)))
        return Effect.zipRight(removeStale(at), loop(announced, stale + 1))
      })
    })
  return Effect.asVoid(Effect.acquireRelease(loop(false, 0), (lock) => lock.release))
}
