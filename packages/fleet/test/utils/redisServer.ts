/**
 * A real `redis-server` for tests: started on 127.0.0.1 on a free port, with no persistence, in a temporary
 * directory; killed (SIGKILL) and restarted on the same port on demand, stopped with the scope. `redis-cli` looks at
 * it for the suites that hold no Redis client (the CLI's fleet suite).
 */
import { Duration, Effect } from "effect"
import { type ChildProcess, execFile, spawn } from "node:child_process"
import * as Fs from "node:fs"
import * as Net from "node:net"
import * as Os from "node:os"
import * as Path from "node:path"

const freePort = Effect.async<number>((resume) => {
  const server = Net.createServer()
  server.listen(0, "127.0.0.1", () => {
    const port = (server.address() as Net.AddressInfo).port
    server.close(() => resume(Effect.succeed(port)))
  })
})

const launch = (port: number, dir: string) =>
  Effect.async<ChildProcess, Error>((resume) => {
    const child = spawn("redis-server", [
      "--port",
      String(port),
      "--bind",
      "127.0.0.1",
      "--save",
      "",
      "--appendonly",
      "no",
      "--dir",
      dir,
      "--enable-debug-command",
      "yes"
    ], { stdio: ["ignore", "pipe", "pipe"] })
    let out = ""
    child.stdout!.setEncoding("utf8").on("data", (d: string) => {
      out += d
      if (out.includes("Ready to accept connections")) resume(Effect.succeed(child))
    })
    child.on("error", (error) => resume(Effect.fail(error)))
    child.on("exit", (code) => resume(Effect.fail(new Error(`redis-server exited (${code}): ${out}`))))
  }).pipe(
    Effect.timeoutFail({ duration: Duration.seconds(10), onTimeout: () => new Error("redis-server did not start") })
  )

const stop = (child: ChildProcess) =>
  Effect.async<void>((resume) => {
    if (child.exitCode !== null || child.signalCode !== null) return resume(Effect.void)
    child.once("exit", () => resume(Effect.void))
    child.kill("SIGKILL")
  })

export interface RedisServer {
  readonly port: number
  readonly url: string
  /** SIGKILL, as a crash would. */
  readonly kill: Effect.Effect<void>
  /** Starts it again on the same port (empty: no persistence). */
  readonly restart: Effect.Effect<void>
  /** `redis-cli` against the server: its output, trimmed. */
  readonly cli: (...args: ReadonlyArray<string>) => Effect.Effect<string>
}

export const redisServer: Effect.Effect<RedisServer, never, import("effect/Scope").Scope> = Effect.gen(function*() {
  const dir = Fs.mkdtempSync(Path.join(Os.tmpdir(), "reprise-redis-"))
  let child: ChildProcess | undefined
  let port = 0
  // A port found free may be taken before redis binds it: try a few.
  for (let i = 0; child === undefined; i++) {
    port = yield* freePort
    const started = yield* Effect.either(launch(port, dir))
    if (started._tag === "Right") child = started.right
    else if (i >= 4) return yield* Effect.die(started.left)
  }
  yield* Effect.addFinalizer(() =>
    Effect.suspend(() => child === undefined ? Effect.void : stop(child)).pipe(
      Effect.zipRight(Effect.sync(() => Fs.rmSync(dir, { recursive: true, force: true })))
    )
  )
  return {
    port,
    url: `redis://127.0.0.1:${port}/0`,
    kill: Effect.suspend(() => child === undefined ? Effect.void : stop(child)),
    restart: Effect.gen(function*() {
      if (child !== undefined) yield* stop(child)
      child = yield* Effect.orDie(launch(port, dir))
    }),
    cli: (...args) =>
      Effect.async<string>((resume) => {
        execFile("redis-cli", ["-p", String(port), ...args], (error, stdout) =>
          resume(Effect.succeed(error === null ? stdout.trim() : "")))
      })
  }
})
