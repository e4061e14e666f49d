/**
 * The Redis fleet against a real `redis-server` (started on a free port on 127.0.0.1): the Lua scripts' arithmetic,
 * their keys and expiries, sharing across connections, and the faults (unreachable, slow, killed and restarted).
 * No mock: every answer comes from the server.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import * as FleetLimits from "@reprise/core/FleetLimits"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import { Context, Duration, Effect, Layer, Option, Redacted, Ref } from "effect"
import { Redis } from "ioredis"
import * as FleetAddress from "../src/FleetAddress.js"
import * as RedisFleet from "../src/RedisFleet.js"
import { cases } from "./utils/cases.js"
import { type RedisServer, redisServer } from "./utils/redisServer.js"

class Server extends Context.Tag("test/RedisServer")<Server, RedisServer>() {}
class Inspect extends Context.Tag("test/Inspect")<Inspect, Redis>() {}

/** A server and a plain client to look at its keys. */
const serverLayer = Layer.scoped(Server, redisServer).pipe(
  Layer.merge(Layer.empty),
  (server) =>
    Layer.provideMerge(
      Layer.scoped(
        Inspect,
        Effect.flatMap(Server, (s) =>
          Effect.acquireRelease(
            Effect.sync(() => new Redis(s.port, "127.0.0.1", { maxRetriesPerRequest: 1 })),
            (c) => Effect.sync(() => c.disconnect())
          ))
      ),
      server
    )
)

let names = 0
const freshName = () => `test-${process.pid}-${++names}`

const recorder = Effect.map(Ref.make<Array<RecoveryNotifications.Notification>>([]), (ref) => ({
  layer: RecoveryNotifications.layerCallback((n) => Ref.update(ref, (all) => [...all, n])),
  tags: Effect.map(Ref.get(ref), (all) => all.map((n) => n._tag))
}))

const fleetOf = (name: string, options: Partial<RedisFleet.Options> = {}) =>
  Effect.flatMap(Server, (s) => RedisFleet.make({ url: s.url, name, ...options }))

const inspect = <A>(f: (redis: Redis) => Promise<A>) => Effect.flatMap(Inspect, (r) => Effect.promise(() => f(r)))

const pauseMillis = (pause: Option.Option<FleetLimits.Pause>) =>
  Option.match(pause, { onNone: () => 0, onSome: (p) => Duration.toMillis(p.remaining) })

/** Waits until `check` holds, polling every 20 ms, for at most `within`. */
const eventually = <E, R>(check: Effect.Effect<boolean, E, R>, within = Duration.seconds(5)) =>
  Effect.gen(function*() {
    while (!(yield* check)) yield* Effect.sleep(Duration.millis(20))
  }).pipe(Effect.timeoutFail({ duration: within, onTimeout: () => new Error("condition not reached in time") }))

/** The fleet with every call made under `notifications`. */
const notifying = (f: FleetLimits.Service, notifications: Layer.Layer<never>): FleetLimits.Service => ({
  deposit: Effect.provide(f.deposit, notifications),
  withdraw: Effect.provide(f.withdraw, notifications),
  paused: Effect.provide(f.paused, notifications),
  pushback: (p) => Effect.provide(f.pushback(p), notifications)
})

const serverSecond = inspect((r) => r.time()).pipe(Effect.map(([s]) => Number(s)))

/** The first attempts the fleet's budget holds: a deposit is credited in the background once the fleet follows. */
const firstAttempts = (name: string) =>
  inspect((r) => r.hgetall(FleetAddress.keys(name).budget)).pipe(
    Effect.map((fields) =>
      Object.entries(fields).reduce((n, [field, count]) => field.startsWith("f:") ? n + Number(count) : n, 0)
    )
  )

/** The scripts the server has run (EVALSHA and EVAL), from its command statistics. */
const scriptsRun = inspect((r) => r.info("commandstats")).pipe(
  Effect.map((info) =>
    [...info.matchAll(/^cmdstat_(?:evalsha|eval):calls=(\d+)/gm)].reduce((n, m) => n + Number(m[1]), 0)
  )
)

/** Whether `paused` answered without running a script on the server. */
const answersFromCopy = (f: FleetLimits.Service) =>
  Effect.gen(function*() {
    const before = yield* scriptsRun
    yield* f.paused
    return (yield* scriptsRun) === before
  })

/**
 * Blocks the server's clients for `seconds` (`CLIENT PAUSE`, `ALL` or only what writes): in force once this returns.
 * Returns a promise that resolves when the server answers again.
 */
const blockServer = (seconds: number, mode: "ALL" | "WRITE" = "ALL") =>
  Effect.gen(function*() {
    const server = yield* Server
    const blocker = new Redis(server.port, "127.0.0.1")
    yield* Effect.addFinalizer(() => Effect.sync(() => blocker.disconnect()))
    yield* Effect.promise(() => blocker.call("CLIENT", "PAUSE", String(Math.round(seconds * 1000)), mode))
    return blocker.ping()
  })

layer(serverLayer, { excludeTestServices: true, timeout: Duration.seconds(30) })(
  "RedisFleet: the scripts on a real server",
  (it) => {
    for (const c of cases) {
      it.scoped(c.name, () =>
        Effect.gen(function*() {
          // A case assumes one second of the server's clock when its floor counts; run it again if a second turned.
          for (let tries = 0;; tries++) {
            const f = yield* fleetOf(freshName(), { budget: c.settings })
            const before = yield* serverSecond
            const answers: Array<FleetLimits.Withdrawal> = []
            for (const op of c.ops) {
              if (op === "d") yield* f.deposit
              else answers.push(yield* f.withdraw)
            }
            if (c.settings.floor > 0 && (yield* serverSecond) !== before && tries < 3) continue
            assert.deepStrictEqual(answers.map((a) => a.allowed), c.allowed)
            assert.closeTo(answers.at(-1)!.allowance, c.lastAllowance, 1e-9)
            return
          }
        }), { timeout: 20_000 })
    }

    it.scoped("the floor accrues with the server's seconds", () =>
      Effect.gen(function*() {
        const f = yield* fleetOf(freshName(), { budget: { ratio: 0, floor: 2, window: Duration.seconds(10) } })
        const start = yield* serverSecond
        const first = [(yield* f.withdraw).allowed, (yield* f.withdraw).allowed, (yield* f.withdraw).allowed]
        if ((yield* serverSecond) === start) assert.deepStrictEqual(first, [true, true, false])
        yield* eventually(Effect.map(serverSecond, (s) => s > start))
        // one more second is active: the window allows 4 (or 6 if a further second began), 2 or 3 are used
        const w = yield* f.withdraw
        assert.isTrue(w.allowed)
        assert.isAtLeast(w.allowance, 4)
      }))

    it.scoped("two connections with the same name share one budget; another name is another fleet", () =>
      Effect.gen(function*() {
        const name = freshName()
        const settings = { ratio: 0.5, floor: 0, window: Duration.seconds(10) }
        const a = yield* fleetOf(name, { budget: settings })
        const b = yield* fleetOf(name, { budget: settings })
        const other = yield* fleetOf(freshName(), { budget: settings })
        yield* a.deposit
        yield* a.deposit
        // credited in the background: another connection sees them once Redis ran them
        yield* eventually(Effect.map(firstAttempts(name), (n) => n === 2))
        assert.isFalse((yield* other.withdraw).allowed, "the other fleet saw no first attempt")
        assert.isTrue((yield* b.withdraw).allowed, "b spends what a deposited")
        assert.isFalse((yield* a.withdraw).allowed, "and a sees b's replay")
        yield* b.pushback({ delay: Duration.seconds(3), status: 429 })
        // announced on the fleet's channel: a hears of it about when a round trip would have read it
        yield* eventually(Effect.map(a.paused, (p) => Option.isSome(p)))
        const seen = yield* a.paused
        assert.isTrue(pauseMillis(seen) > 2500 && pauseMillis(seen) <= 3000)
        assert.strictEqual(Option.getOrThrow(seen).status, 429)
        assert.isTrue(Option.isNone(yield* other.paused))
      }))

    it.scoped("following the pause: deposit and paused answer without a round trip; the credit still lands", () =>
      Effect.gen(function*() {
        const rec = yield* recorder
        const name = freshName()
        // a timeout longer than the block below: nothing here may be noticed as an outage
        const f = yield* fleetOf(name, { timeout: Duration.seconds(3) })
        const g = yield* fleetOf(name)
        yield* g.pushback({ delay: Duration.seconds(4), status: 503 })
        yield* eventually(Effect.map(f.paused, (p) => Option.isSome(p)))
        assert.isTrue(yield* answersFromCopy(f), "a fleet follows the pause from the moment it is made")
        // Redis blocked for 0.8 s: a round trip would wait it out
        const sleeping = yield* blockServer(0.8)
        const started = performance.now()
        const answers = yield* Effect.all([f.paused, f.deposit, f.deposit]).pipe(Effect.provide(rec.layer))
        const took = performance.now() - started
        assert.isTrue(took < 400, `answered in ${took} ms, not after the block`)
        for (const answer of answers) {
          assert.isTrue(pauseMillis(answer) > 2500 && pauseMillis(answer) <= 4000, `${pauseMillis(answer)}`)
          assert.strictEqual(Option.getOrThrow(answer).status, 503)
        }
        yield* Effect.promise(() => sleeping)
        // the two credits were sent at once and land when Redis wakes, with nothing to report
        yield* eventually(Effect.map(firstAttempts(name), (n) => n === 2))
        assert.deepStrictEqual(yield* rec.tags, [])
      }))

    it.scoped("a lost subscription: a pause nobody announced is read from Redis, and following resumes with it", () =>
      Effect.gen(function*() {
        const name = freshName()
        const f = yield* fleetOf(name, { timeout: Duration.seconds(3) })
        assert.isTrue(yield* answersFromCopy(f))
        // f's subscriber connection is cut, and a pause is set that no pushback announces: f learns of it only by
        // reading it (not following while unsubscribed, and reading the pause once subscribed again)
        const killed = yield* inspect((r) => r.call("CLIENT", "KILL", "TYPE", "pubsub"))
        assert.isAtLeast(Number(killed), 1)
        yield* inspect((r) => r.set(FleetAddress.keys(name).pause, "429", "PX", 4000))
        yield* eventually(Effect.map(f.paused, (p) => Option.isSome(p)))
        // subscribed again, f answers from its copy, which has that pause
        yield* eventually(answersFromCopy(f))
        const sleeping = yield* blockServer(0.5)
        const started = performance.now()
        const seen = yield* f.paused
        assert.isTrue(performance.now() - started < 300, "answered from the copy")
        assert.isTrue(pauseMillis(seen) > 2500, `${pauseMillis(seen)}`)
        assert.strictEqual(Option.getOrThrow(seen).status, 429)
        yield* Effect.promise(() => sleeping)
      }))

    it.scoped("a Redis user whose ACL denies the channel: pushback still pauses the fleet; it asks before each send", () =>
      Effect.gen(function*() {
        const rec = yield* recorder
        const server = yield* Server
        const name = freshName()
        const user = `nopub${names}`
        yield* inspect((r) => r.call("ACL", "SETUSER", user, "on", ">pw", "~*", "+@all", "resetchannels"))
        const url = `redis://${user}:pw@127.0.0.1:${server.port}/0`
        // the fleet's processes share the user, as they share its permissions
        const f = yield* RedisFleet.make({ url, name }).pipe(Effect.map((f) => notifying(f, rec.layer)))
        const g = yield* RedisFleet.make({ url, name })
        yield* f.pushback({ delay: Duration.seconds(3), status: 429 })
        assert.isTrue(pauseMillis(yield* g.paused) > 2000, "the pause is stored though it is not announced")
        assert.isFalse(yield* answersFromCopy(g), "g does not follow: it asks")
        yield* inspect((r) => r.del(FleetAddress.keys(name).pause))
        yield* g.pushback({ delay: Duration.seconds(2), status: 503 })
        assert.strictEqual(Option.getOrThrow(yield* f.paused).status, 503)
        assert.deepStrictEqual(yield* rec.tags, [])
      }))

    it.scoped("keys: a hash tag per fleet, the budget expires window + 1 s after its last write, the pause at its end", () =>
      Effect.gen(function*() {
        const name = freshName()
        const keys = FleetAddress.keys(name)
        assert.deepStrictEqual(keys, {
          budget: `reprise:fleet:{${name}}:budget`,
          pause: `reprise:fleet:{${name}}:pause`
        })
        const f = yield* fleetOf(name, { budget: { ratio: 1, floor: 0, window: Duration.seconds(1) } })
        yield* f.deposit
        assert.isTrue((yield* f.withdraw).allowed)
        const ttl = yield* inspect((r) => r.pttl(keys.budget))
        assert.isTrue(ttl > 1000 && ttl <= 2000, `budget TTL ${ttl}`)
        const fields = Object.keys(yield* inspect((r) => r.hgetall(keys.budget)))
        assert.isTrue(fields.every((field) => /^[fr]:\d+$/.test(field)), fields.join())
        yield* f.pushback({ delay: Duration.millis(300), status: 503 })
        const pttl = yield* inspect((r) => r.pttl(keys.pause))
        assert.isTrue(pttl > 0 && pttl <= 300, `pause TTL ${pttl}`)
        assert.strictEqual(yield* inspect((r) => r.get(keys.pause)), "503")
        // an idle fleet leaves no key behind
        yield* eventually(Effect.map(inspect((r) => r.exists(keys.budget, keys.pause)), (n) => n === 0))
        assert.deepStrictEqual(yield* inspect((r) => r.keys(`reprise:fleet:{${name}}*`)), [])
      }))

    it.scoped("a shorter pushback never shortens the pause; a longer one extends it; maxPause caps it", () =>
      Effect.gen(function*() {
        const f = yield* fleetOf(freshName(), { maxPause: Duration.seconds(20) })
        yield* f.pushback({ delay: Duration.seconds(5), status: 429 })
        yield* f.pushback({ delay: Duration.seconds(1), status: 503 })
        const kept = yield* f.paused
        assert.isTrue(pauseMillis(kept) > 4000, `${pauseMillis(kept)}`)
        assert.strictEqual(Option.getOrThrow(kept).status, 429)
        yield* f.pushback({ delay: Duration.seconds(8), status: 503 })
        assert.isTrue(pauseMillis(yield* f.deposit) > 7000, "a deposit returns the pause as well")
        yield* f.pushback({ delay: Duration.hours(2) })
        const capped = pauseMillis(yield* f.paused)
        assert.isTrue(capped > 19_000 && capped <= 20_000, `${capped}`)
      }))

    it.scoped("a server that lost its script cache (a restart) is answered with EVAL, without any outage", () =>
      Effect.gen(function*() {
        const rec = yield* recorder
        const f = yield* fleetOf(freshName(), { budget: { ratio: 1, floor: 0 } })
        yield* f.deposit
        yield* inspect((r) => r.script("FLUSH"))
        const w = yield* f.withdraw.pipe(Effect.provide(rec.layer))
        assert.deepStrictEqual([w.allowed, w.replays], [true, 1])
        assert.deepStrictEqual(yield* rec.tags, [])
      }))
  }
)

describe("RedisFleet: faults", () => {
  it.scopedLive("unreachable from the start: local answers at once, one FleetUnavailable", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      // a port nobody listens on: the server is started and stopped, so the port was free a moment ago
      const port = yield* Effect.scoped(Effect.map(redisServer, (s) => s.port))
      const started = performance.now()
      const f = yield* RedisFleet.make({ url: `redis://127.0.0.1:${port}/0`, name: freshName() })
      const answers = yield* Effect.all([f.deposit, f.withdraw, f.withdraw, f.paused]).pipe(
        Effect.provide(rec.layer)
      )
      const took = performance.now() - started
      assert.isTrue(took < 1000, `took ${took} ms`)
      assert.isTrue(Option.isNone(answers[0]))
      assert.isTrue(answers[1].allowed && answers[2].allowed)
      assert.deepStrictEqual(yield* rec.tags, ["FleetUnavailable"])
    }))

  layer(serverLayer, { excludeTestServices: true, timeout: Duration.seconds(30) })("with a server", (it) => {
    it.scoped("made and released in an uninterruptible region (as the CLI builds it): its end is not held", () =>
      Effect.gen(function*() {
        const server = yield* Server
        const started = performance.now()
        // past the subscriber's first ping (every 100 ms here) and its pause read
        yield* Effect.uninterruptible(Effect.scoped(Effect.gen(function*() {
          const f = yield* RedisFleet.make({ url: server.url, name: freshName(), retryInterval: Duration.millis(100) })
          yield* f.deposit
          yield* Effect.sleep(Duration.millis(250))
        })))
        const took = performance.now() - started
        assert.isTrue(took < 2000, `released after ${took} ms`)
      }))

    it.scoped("slow (DEBUG SLEEP): each call gives up at its timeout, is reported once, and recovers", () =>
      Effect.gen(function*() {
        const rec = yield* recorder
        const server = yield* Server
        const f = yield* fleetOf(freshName(), {
          timeout: Duration.millis(100),
          retryInterval: Duration.millis(200)
        })
        yield* f.deposit
        // block the server for 1.5 s from another connection
        const blocker = new Redis(server.port, "127.0.0.1")
        yield* Effect.addFinalizer(() => Effect.sync(() => blocker.disconnect()))
        yield* Effect.promise(() => blocker.ping())
        const sleeping = blocker.call("DEBUG", "SLEEP", "1.5")
        const started = performance.now()
        const w = yield* f.withdraw.pipe(Effect.provide(rec.layer))
        const took = performance.now() - started
        assert.isTrue(w.allowed, "the local budget decides")
        assert.isTrue(took >= 90 && took < 600, `took ${took} ms`)
        const again = performance.now()
        yield* f.deposit.pipe(Effect.provide(rec.layer))
        assert.isTrue(performance.now() - again < 50, "within the retry interval, Redis is not asked again")
        assert.deepStrictEqual(yield* rec.tags, ["FleetUnavailable"])
        yield* Effect.promise(() => sleeping)
        yield* eventually(
          Effect.map(Effect.zipRight(f.paused.pipe(Effect.provide(rec.layer)), rec.tags), (t) => t.length === 2)
        )
        assert.deepStrictEqual(yield* rec.tags, ["FleetUnavailable", "FleetRestored"])
      }))

    it.scoped("a stalled connection while following: a deposit unanswered past the timeout is reported", () =>
      Effect.gen(function*() {
        const rec = yield* recorder
        const name = freshName()
        const f = yield* Effect.map(
          fleetOf(name, { timeout: Duration.millis(100), retryInterval: Duration.millis(200) }),
          (f) => notifying(f, rec.layer)
        )
        assert.isTrue(yield* answersFromCopy(f))
        // scripts that write wait 1.5 s; the subscriber and reads go on
        const resumed = yield* blockServer(1.5, "WRITE")
        yield* f.deposit
        assert.deepStrictEqual(yield* rec.tags, [], "a deposit does not wait")
        // the next calls find the first deposit unanswered past the timeout
        yield* eventually(Effect.map(Effect.zipRight(f.deposit, rec.tags), (tags) => tags.length > 0))
        assert.deepStrictEqual(yield* rec.tags, ["FleetUnavailable"])
        yield* Effect.promise(() => resumed)
        yield* eventually(Effect.map(Effect.zipRight(f.paused, rec.tags), (tags) => tags.length === 2))
        assert.deepStrictEqual(yield* rec.tags, ["FleetUnavailable", "FleetRestored"])
      }))

    it.scoped("killed mid-run: the local budget; restarted: the fleet shares again, announced once each", () =>
      Effect.gen(function*() {
        // each fleet reports to its own consumer, as two processes would
        const recA = yield* recorder
        const recB = yield* recorder
        const server = yield* Server
        const name = freshName()
        const settings = { ratio: 0.5, floor: 0, window: Duration.seconds(10) }
        const a = yield* Effect.map(fleetOf(name, { budget: settings }), (f) => notifying(f, recA.layer))
        const b = yield* Effect.map(fleetOf(name, { budget: settings }), (f) => notifying(f, recB.layer))
        yield* a.deposit
        yield* a.deposit
        yield* eventually(Effect.map(firstAttempts(name), (n) => n === 2))
        assert.isTrue((yield* b.withdraw).allowed)
        assert.isFalse((yield* b.withdraw).allowed, "shared: the fleet's 1 replay is spent")
        yield* server.kill
        const local = yield* Effect.all([b.withdraw, b.withdraw, b.deposit])
        assert.isTrue(local[0].allowed && local[1].allowed, "without Redis, replays are the local Budget's business")
        assert.deepStrictEqual(yield* recB.tags, ["FleetUnavailable"], "said once")
        yield* server.restart
        // the clients reconnect on their own; the next calls after that reach the (empty) server
        yield* eventually(Effect.map(
          Effect.zipRight(Effect.all([a.paused, b.paused]), Effect.all([recA.tags, recB.tags])),
          ([ta, tb]) =>
            (!ta.includes("FleetUnavailable") || ta.includes("FleetRestored")) && tb.includes("FleetRestored")
        ))
        assert.deepStrictEqual(yield* recB.tags, ["FleetUnavailable", "FleetRestored"])
        assert.isTrue(["", "FleetUnavailable,FleetRestored"].includes((yield* recA.tags).join()))
        yield* a.pushback({ delay: Duration.seconds(2), status: 429 })
        yield* eventually(Effect.map(b.paused, (p) => pauseMillis(p) > 1500))
        yield* a.deposit
        yield* a.deposit
        yield* eventually(Effect.map(firstAttempts(name), (n) => n === 2))
        assert.isTrue((yield* b.withdraw).allowed)
        assert.isFalse((yield* b.withdraw).allowed)
      }))
  })
})

describe("FleetAddress: names and URLs", () => {
  it("the default name is the endpoint and a hash of the key, never the key", () => {
    const key = Redacted.make("sk-live-0123456789abcdef")
    const name = FleetAddress.defaultName("https://api.openai.com/v1/", key)
    assert.match(name, /^api\.openai\.com\/v1#[0-9a-f]{16}$/)
    assert.notInclude(name, "0123456789abcdef")
    assert.strictEqual(FleetAddress.defaultName("https://api.openai.com/v1", key), name)
    assert.notStrictEqual(FleetAddress.defaultName("https://api.openai.com/v1", Redacted.make("sk-other")), name)
    assert.notStrictEqual(FleetAddress.defaultName("https://api.anthropic.com", key), name)
  })

  it("accepts redis:// and rediss:// URLs with a numeric database, and shows them without credentials", () => {
    assert.isUndefined(FleetAddress.urlProblem("redis://127.0.0.1:6379/0"))
    assert.isUndefined(FleetAddress.urlProblem("rediss://cache.internal:6380"))
    assert.match(FleetAddress.urlProblem("http://127.0.0.1:6379")!, /redis:\/\//)
    assert.match(FleetAddress.urlProblem("redis://127.0.0.1:6379/main")!, /database/)
    assert.match(FleetAddress.urlProblem("not a url")!, /not a URL/)
    assert.strictEqual(FleetAddress.describeUrl("redis://:hunter2@10.0.0.5:6379/2"), "redis://10.0.0.5:6379/2")
  })
})
