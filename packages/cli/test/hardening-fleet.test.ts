/**
 * No wait without a bound, and Ctrl-C always wins, for what `reprise chat` waits on besides its provider: the fleet's
 * Redis (`--fleet`) and the session's lock (`--session`). Real `reprise` processes, real signals, and real
 * misbehaving peers over loopback: a server that accepts a connection and never answers, a `redis-server` blocked
 * with `CLIENT PAUSE`, a holder of the session stopped with SIGSTOP, and a lock name held by a process that is not a
 * reprise.
 */
import { assert, layer } from "@effect/vitest"
import * as Simulator from "@reprise/simulator/Simulator"
import { Duration, Effect } from "effect"
import * as net from "node:net"
import { redisServer } from "../../fleet/test/utils/redisServer.js"
import * as SessionLock from "../src/SessionLock.js"
import { chatArgs, holder, run, setup, start, tempSession } from "./support/cli.js"

const env = { OPENAI_API_KEY: "sk-test-hardening-key" }
/** The bound on a run that names none: seconds, not the minutes of a wait with no bound. */
const bounded = { within: Duration.seconds(15) }

/**
 * A server on a loopback port that accepts every connection and never writes a byte: a stopped Redis, a silent
 * proxy. `connected` resolves at its first connection.
 */
const silentServer = Effect.acquireRelease(
  Effect.async<{ readonly port: number; readonly close: Effect.Effect<void>; readonly connected: Promise<void> }>(
    (resume) => {
      let onConnection = () => {}
      const connected = new Promise<void>((resolve) => (onConnection = resolve))
      const sockets = new Set<net.Socket>()
      const server = net.createServer((socket) => {
        sockets.add(socket)
        socket.on("error", () => undefined)
        onConnection()
      })
      const close = Effect.async<void>((done) => {
        server.close(() => done(Effect.void))
        for (const socket of sockets) socket.destroy()
      })
      server.listen(
        0,
        "127.0.0.1",
        () => resume(Effect.succeed({ port: (server.address() as net.AddressInfo).port, close, connected }))
      )
    }
  ),
  ({ close }) => close
)

layer(Simulator.layer(), { excludeTestServices: true, timeout: Duration.seconds(60) })(
  "hardening: the fleet's Redis and the session's lock",
  (it) => {
    it.scoped("--fleet on a server that accepts and never answers: the reply goes out after the 1 s connect bound", () =>
      Effect.gen(function*() {
        const { base, count } = yield* setup({ steps: [{ kind: "stream", reply: { text: "hello" } }] })
        const silent = yield* silentServer
        const result = yield* run(chatArgs(base, "--fleet", `redis://127.0.0.1:${silent.port}/0`, "hi"), env, bounded)
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(result.stdout, "hello\n")
        // node's start, the 1 s bound, the turn: seconds, not the minutes of a wait with no bound
        assert.isTrue(result.took < 7000, `took ${result.took} ms`)
        assert.strictEqual(yield* count, 1)
      }))

    it.scoped("--fleet on a server that never answers: Ctrl-C while the layer connects exits 130 at once", () =>
      Effect.gen(function*() {
        const { base, count } = yield* setup({ steps: [{ kind: "stream", reply: { text: "hello" } }] })
        const silent = yield* silentServer
        const running = yield* start(chatArgs(base, "--fleet", `redis://127.0.0.1:${silent.port}/0`, "hi"), env)
        running.child.stdin.end()
        yield* Effect.promise(() => silent.connected)
        const signalled = performance.now()
        running.child.kill("SIGINT")
        const result = yield* running.exitWithin(Duration.seconds(5))
        assert.strictEqual(result.code, 130, result.stderr)
        assert.isTrue(performance.now() - signalled < 3000)
        assert.strictEqual(yield* count, 0)
      }))

    it.scoped("--fleet on a redis-server under CLIENT PAUSE 6000: the reply goes out after the 1 s bound, not 6 s", () =>
      Effect.gen(function*() {
        const { base } = yield* setup({ steps: [{ kind: "stream", reply: { text: "hello" } }] })
        const redis = yield* redisServer
        assert.strictEqual(yield* redis.cli("CLIENT", "PAUSE", "6000", "ALL"), "OK")
        const result = yield* run(chatArgs(base, "--fleet", redis.url, "hi"), env, bounded)
        assert.strictEqual(result.code, 0, result.stderr)
        assert.isTrue(result.took < 4500, `took ${result.took} ms`)
      }))

    it.scoped("a 429 of the process's own: it waits its Retry-After once, and the fleet's pause does not hold it again", () =>
      Effect.gen(function*() {
        const { base, count } = yield* setup({
          reply: { text: "after the wait" },
          steps: [{ kind: "status", status: 429, headers: { "retry-after": "1" } }]
        })
        const redis = yield* redisServer
        const result = yield* run(chatArgs(base, "--fleet", redis.url, "--fleet-name", "own-pause", "hi"), env, bounded)
        assert.strictEqual(result.code, 0, result.stderr)
        assert.strictEqual(result.stdout, "after the wait\n")
        assert.match(result.stderr, /HTTP 429/)
        assert.notMatch(result.stderr, /the fleet is paused/)
        assert.strictEqual(yield* count, 2)
      }))

    it.scoped("fleet URLs: a database past Redis's range is a usage error, and the hint is given once", () =>
      Effect.gen(function*() {
        const { base, count } = yield* setup({ steps: [{ kind: "stream", reply: { text: "hello" } }] })
        const big = yield* run(chatArgs(base, "--fleet", "redis://127.0.0.1:6379/99999999999", "hi"), env, bounded)
        assert.strictEqual(big.code, 2, big.stderr)
        assert.match(big.stderr, /database from 0 to 2147483647/)
        const named = yield* run(chatArgs(base, "--fleet", "redis://127.0.0.1:6379/main", "hi"), env, bounded)
        assert.strictEqual(named.code, 2, named.stderr)
        assert.strictEqual(named.stderr.split("redis://HOST:PORT/DB").length - 1, 1, named.stderr)
        assert.strictEqual(yield* count, 0)
      }))

    it.scoped("--wait-session: Ctrl-C ends the wait for the holder (exit 130), and nothing is sent", () =>
      Effect.gen(function*() {
        const session = tempSession()
        const { base, count } = yield* setup({ steps: [{ kind: "stream", reply: { text: "hello" } }] })
        const held = yield* holder(session)
        const waiting = yield* start(chatArgs(base, "--session", session, "--wait-session", "hi"), env)
        yield* waiting.awaitStderr(new RegExp(`waiting for pid ${held.pid}`), Duration.seconds(10))
        waiting.child.kill("SIGINT")
        const result = yield* waiting.exitWithin(Duration.seconds(5))
        assert.strictEqual(result.code, 130, result.stderr)
        assert.strictEqual(yield* count, 0)
      }))

    it.scoped("a holder stopped with SIGSTOP: exit 2 at once naming it; with --wait-session, Ctrl-C ends the wait", () =>
      Effect.gen(function*() {
        const session = tempSession()
        const { base, count } = yield* setup({ steps: [{ kind: "stream", reply: { text: "hello" } }] })
        const held = yield* holder(session)
        process.kill(held.pid, "SIGSTOP")
        const result = yield* run(chatArgs(base, "--session", session, "hi"), env, { within: Duration.seconds(6) })
        assert.strictEqual(result.code, 2, result.stderr)
        assert.include(result.stderr, `in use by pid ${held.pid}`)
        assert.include(result.stderr, "which is stopped")
        assert.isTrue(result.took < 4000, `took ${result.took} ms`)
        const waiting = yield* start(chatArgs(base, "--session", session, "--wait-session", "hi"), env)
        yield* waiting.awaitStderr(new RegExp(`waiting for pid ${held.pid}`), Duration.seconds(10))
        waiting.child.kill("SIGINT")
        const interrupted = yield* waiting.exitWithin(Duration.seconds(5))
        assert.strictEqual(interrupted.code, 130, interrupted.stderr)
        assert.strictEqual(yield* count, 0)
      }))

    it.scoped("a lock name held by a process that never answers (not a reprise): exit 2 at once", () =>
      Effect.gen(function*() {
        const session = tempSession()
        const { base, count } = yield* setup({ steps: [{ kind: "stream", reply: { text: "hello" } }] })
        // the squatter: this test's own process, listening on the lock's name and saying nothing
        yield* Effect.acquireRelease(
          Effect.async<net.Server>((resume) => {
            const server = net.createServer((socket) => socket.on("error", () => undefined))
            server.listen({ path: SessionLock.address(session) }, () => resume(Effect.succeed(server)))
          }),
          (server) => Effect.async<void>((resume) => void server.close(() => resume(Effect.void)))
        )
        const result = yield* run(chatArgs(base, "--session", session, "hi"), env, { within: Duration.seconds(6) })
        assert.strictEqual(result.code, 2, result.stderr)
        assert.include(result.stderr, "the session is in use")
        assert.include(result.stderr, `pid ${process.pid}`)
        assert.include(result.stderr, "does not answer")
        assert.isTrue(result.took < 4000, `took ${result.took} ms`)
        assert.strictEqual(yield* count, 0)
      }))
  }
)
