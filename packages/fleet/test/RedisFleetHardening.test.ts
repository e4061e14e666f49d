/**
 * The Redis fleet against servers that misbehave, over loopback: one that accepts connections and never answers,
 * one that sends an endless reply, and a real `redis-server` given a bogus pause (an announcement with no key behind
 * it, a key that outlasts any cap). Every wait is bounded, in an uninterruptible region too; what is read from Redis
 * is bounded in size and capped in value; and a process does not wait out the pause its own pushback set.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import type * as FleetLimits from "@reprise/core/FleetLimits"
import { Clock, Context, Duration, Effect, Exit, Fiber, Layer, Option } from "effect"
import { Redis } from "ioredis"
import * as Net from "node:net"
import * as FleetAddress from "../src/FleetAddress.js"
import * as PauseCopy from "../src/internal/pauseCopy.js"
import * as RedisFleet from "../src/RedisFleet.js"
import { type RedisServer, redisServer } from "./utils/redisServer.js"

class Server extends Context.Tag("test/RedisServer")<Server, RedisServer>() {}

let names = 0
const freshName = () => `hardening-${process.pid}-${++names}`

const pauseMillis = (pause: Option.Option<FleetLimits.Pause>) =>
  Option.match(pause, { onNone: () => 0, onSome: (p) => Duration.toMillis(p.remaining) })

/** Waits until `check` holds, polling every 20 ms, for at most `within`. */
const eventually = <E, R>(check: Effect.Effect<boolean, E, R>, within = Duration.seconds(5)) =>
  Effect.gen(function*() {
    while (!(yield* check)) yield* Effect.sleep(Duration.millis(20))
  }).pipe(Effect.timeoutFail({ duration: within, onTimeout: () => new Error("condition not reached in time") }))

/** A plain client, closed with the scope. */
const plainClient = (port: number) =>
  Effect.acquireRelease(
    Effect.sync(() => new Redis(port, "127.0.0.1", { maxRetriesPerRequest: 1 })),
    (c) => Effect.sync(() => c.disconnect())
  )

/**
 * A loopback server that runs `onSocket` for each connection; every connection is destroyed with the scope. Returns
 * its port and a promise of its first connection.
 */
const rawServer = (onSocket: (socket: Net.Socket) => void) =>
  Effect.acquireRelease(
    Effect.async<{ readonly port: number; readonly connected: Promise<void>; readonly close: Effect.Effect<void> }>(
      (resume) => {
        let first = () => {}
        const connected = new Promise<void>((resolve) => (first = resolve))
        const sockets = new Set<Net.Socket>()
        const server = Net.createServer((socket) => {
          sockets.add(socket)
          socket.on("error", () => undefined)
          socket.on("close", () => sockets.delete(socket))
          first()
          onSocket(socket)
        })
        const close = Effect.async<void>((done) => {
          server.close(() => done(Effect.void))
          for (const socket of sockets) socket.destroy()
        })
        server.listen(0, "127.0.0.1", () =>
          resume(Effect.succeed({ port: (server.address() as Net.AddressInfo).port, connected, close })))
      }
    ),
    (server) =>
      server.close
  )

describe("RedisFleet: a server that accepts the connection and never answers", () => {
  it.scopedLive("built in an uninterruptible region (as the CLI builds it): gives up at connectTimeout", () =>
    Effect.gen(function*() {
      const silent = yield* rawServer(() => undefined)
      const started = performance.now()
      // `disconnect`: the test's own bound must not wait for an uninterruptible fiber it cannot end
      const answer = yield* Effect.uninterruptible(Effect.scoped(Effect.gen(function*() {
        const f = yield* RedisFleet.make({ url: `redis://127.0.0.1:${silent.port}/0`, name: freshName() })
        return yield* Effect.all([f.deposit, f.withdraw, f.paused])
      }))).pipe(Effect.disconnect, Effect.timeoutFail({ duration: Duration.seconds(5), onTimeout: () => "hung" }))
      const took = performance.now() - started
      assert.isTrue(took < 2500, `took ${took} ms`)
      assert.isTrue(Option.isNone(answer[0]) && answer[1].allowed && Option.isNone(answer[2]))
    }))

  it.scopedLive("built in an uninterruptible region: an interruption (Ctrl-C) ends the build at once", () =>
    Effect.gen(function*() {
      const silent = yield* rawServer(() => undefined)
      const building = yield* Effect.fork(Effect.uninterruptible(Effect.scoped(
        RedisFleet.make({
          url: `redis://127.0.0.1:${silent.port}/0`,
          name: freshName(),
          connectTimeout: Duration.seconds(30)
        })
      )))
      yield* Effect.promise(() => silent.connected)
      const started = performance.now()
      const exit = yield* Fiber.interrupt(building).pipe(
        Effect.disconnect,
        Effect.timeoutFail({ duration: Duration.seconds(5), onTimeout: () => "still building" })
      )
      assert.isTrue(performance.now() - started < 1000)
      assert.isTrue(Exit.isInterrupted(exit))
    }))
})

describe("RedisFleet: a server that sends an endless reply", () => {
  it.scopedLive("the connection is dropped once it has read 1 MiB of one reply", () =>
    Effect.gen(function*() {
      // per connection: bytes written before the client closed it; the test stops at 64 MiB (a failure)
      const written: Array<number> = []
      const limit = 64 * 1024 * 1024
      const chunk = Buffer.alloc(64 * 1024, "x")
      const endless = yield* rawServer((socket) => {
        let sent = 0
        let done = false
        const pump = () => {
          while (!done && sent < limit) {
            sent += chunk.length
            if (!socket.write(chunk)) {
              socket.once("drain", pump)
              return
            }
          }
          if (sent >= limit) socket.destroy()
        }
        socket.once("data", () => {
          socket.write("$1000000000000\r\n")
          pump()
        })
        socket.on("close", () => {
          done = true
          written.push(sent)
        })
      })
      const f = yield* RedisFleet.make({ url: `redis://127.0.0.1:${endless.port}/0`, name: freshName() })
      yield* eventually(Effect.sync(() => written.length >= 2), Duration.seconds(10))
      for (const bytes of written) assert.isBelow(bytes, 8 * 1024 * 1024, `${bytes} bytes of one reply were read`)
      // and the fleet answers as without Redis
      assert.isTrue((yield* f.withdraw).allowed)
    }))
})

const serverLayer = Layer.scoped(Server, redisServer)

layer(serverLayer, { excludeTestServices: true, timeout: Duration.seconds(30) })(
  "RedisFleet: a bogus pause on a real server",
  (it) => {
    it.scoped("an announcement with no pause key behind it holds nobody; a genuine one after it is followed", () =>
      Effect.gen(function*() {
        const server = yield* Server
        const name = freshName()
        const f = yield* RedisFleet.make({ url: server.url, name })
        const g = yield* RedisFleet.make({ url: server.url, name })
        const publisher = yield* plainClient(server.port)
        yield* Effect.promise(() => publisher.publish(FleetAddress.pauseChannel(name), "999999999999:429"))
        // announced after the bogus one, on the same channel: f has heard both once it follows this one
        yield* g.pushback({ delay: Duration.seconds(2), status: 503 })
        yield* eventually(Effect.map(f.paused, (p) => Option.isSome(p)))
        const seen = yield* f.paused
        assert.isAtMost(pauseMillis(seen), 2000, `${pauseMillis(seen)} ms`)
        assert.strictEqual(Option.getOrThrow(seen).status, 503)
        yield* Effect.promise(() => publisher.del(FleetAddress.keys(name).pause))
        yield* Effect.promise(() => publisher.publish(FleetAddress.pauseChannel(name), "999999999999:429"))
        yield* eventually(Effect.map(f.paused, (p) => Option.isNone(p)))
      }))

    it.scoped("a pause key that outlasts maxPause, with a status that is none, is read capped", () =>
      Effect.gen(function*() {
        const server = yield* Server
        const name = freshName()
        const writer = yield* plainClient(server.port)
        yield* Effect.promise(() => writer.set(FleetAddress.keys(name).pause, "99999", "PX", 999999999999))
        const f = yield* RedisFleet.make({ url: server.url, name, maxPause: Duration.seconds(30) })
        const seen = yield* f.paused
        assert.isAtMost(pauseMillis(seen), 30000, `${pauseMillis(seen)} ms`)
        assert.isAbove(pauseMillis(seen), 25000)
        assert.isUndefined(Option.getOrThrow(seen).status)
      }))

    it.scoped("the pause a process's own pushback set ends for it with its own wait: it is not waited out again", () =>
      Effect.gen(function*() {
        const server = yield* Server
        const name = freshName()
        const f = yield* RedisFleet.make({ url: server.url, name })
        const g = yield* RedisFleet.make({ url: server.url, name })
        // as Recovery does: the pushback's delay is counted from the moment it is given, as the reply's own wait
        const given = yield* Clock.currentTimeMillis
        yield* f.pushback({ delay: Duration.millis(400), status: 429 })
        // the announcement reaches the other process (and this one's own subscriber)
        yield* eventually(Effect.map(g.paused, (p) => Option.isSome(p)))
        yield* Effect.sleep(Duration.millis(400 - ((yield* Clock.currentTimeMillis) - given)))
        assert.isTrue(Option.isNone(yield* f.paused), `${pauseMillis(yield* f.paused)} ms left`)
        assert.isTrue(Option.isNone(yield* f.deposit))
        // the other waits it out once: when its wait is over, the pause is
        const left = pauseMillis(yield* g.paused)
        yield* Effect.sleep(Duration.millis(left))
        assert.isTrue(Option.isNone(yield* g.paused))
      }))
  }
)

describe("FleetAddress: database numbers", () => {
  it("a database past Redis's range is refused; the words leave the URL's form to the caller", () => {
    assert.isUndefined(FleetAddress.urlProblem("redis://127.0.0.1:6379/2147483647"))
    assert.match(FleetAddress.urlProblem("redis://127.0.0.1:6379/99999999999")!, /from 0 to 2147483647/)
    assert.notInclude(FleetAddress.urlProblem("redis://127.0.0.1:6379/main")!, "redis://")
  })
})

describe("PauseCopy: the pause as a process learns it from reads of the key", () => {
  const clock = () => {
    let now = 0
    return { now: () => now, at: (t: number) => (now = t) }
  }

  it("two reads of one pause, a round trip apart, leave the end waited for as it was", () => {
    const time = clock()
    const copy = PauseCopy.make(time.now)
    // sent at 0, answered at 4: the pause ends between 1000 and 1004
    time.at(4)
    copy.observe(0, { left: 1000, status: 429 })
    assert.deepStrictEqual(copy.current(), { left: 1000, status: 429 })
    // read again, answered 3 ms later than the server ran it: the same pause, not a later one
    time.at(503)
    copy.observe(499, { left: 500, status: 429 })
    assert.deepStrictEqual(copy.current(), { left: 501, status: 429 })
    // a pause with less than 20 ms left is over
    time.at(985)
    assert.deepStrictEqual(copy.current(), { left: 0, status: undefined })
  })

  it("a read that does not meet the copy replaces it: lengthened, or gone", () => {
    const time = clock()
    const copy = PauseCopy.make(time.now)
    time.at(2)
    copy.observe(0, { left: 1000, status: 429 })
    time.at(102)
    copy.observe(100, { left: 2000, status: 503 })
    assert.deepStrictEqual(copy.current(), { left: 2000, status: 503 })
    // no key, where the pause must still be in force: it was not (a deleted key, a bogus announcement's read)
    time.at(200)
    copy.observe(198, { left: 0, status: undefined })
    assert.deepStrictEqual(copy.current(), { left: 0, status: undefined })
  })

  it("the pause of the process's own pushback ends with its own wait, whatever its reads say", () => {
    const time = clock()
    const copy = PauseCopy.make(time.now)
    // given at 10 for 300 ms: its own wait ends at 310; the pushback's answer came at 14
    time.at(14)
    copy.observe(10, { left: 300, status: 429 })
    copy.own(310)
    // a later read of the same pause (answered late, a loaded event loop) does not move it
    time.at(60)
    copy.observe(40, { left: 272, status: 429 })
    time.at(310)
    assert.deepStrictEqual(copy.current(), { left: 0, status: undefined })
  })

  it("decode caps the time left at maxPause and keeps only a three-digit status", () => {
    assert.deepStrictEqual(PauseCopy.decode([999999999999, "99999"], 30000), { left: 30000, status: undefined })
    assert.deepStrictEqual(PauseCopy.decode([-5, "429"], 30000), { left: 0, status: 429 })
    assert.isUndefined(PauseCopy.decode(["1000", "429"], 30000))
  })
})
