/**
 * The fleet's circuits against a real `redis-server` (started on a free port on 127.0.0.1): the transitions of
 * `Circuit.makeMemory` (checked on both), their keys, expiries and server times, one probe for the whole fleet (two
 * connections in this process, and two OS processes), the layers that provide them, and the local circuits that
 * answer while Redis does not. Cool-downs are short and real: waits poll the state, bounded, and nothing asserts a
 * speed.
 */
import { assert, describe, it, layer } from "@effect/vitest"
import * as Circuit from "@reprise/core/Circuit"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import { ConfigProvider, Context, Duration, Effect, Layer, Ref, TestClock } from "effect"
import { Redis } from "ioredis"
import { spawn } from "node:child_process"
import * as Path from "node:path"
import * as Readline from "node:readline"
import { fileURLToPath } from "node:url"
import * as FleetAddress from "../src/FleetAddress.js"
import * as MemoryFleet from "../src/MemoryFleet.js"
import * as RedisFleet from "../src/RedisFleet.js"
import { type Case, cases, failureThreshold } from "./utils/circuitCases.js"
import { type RedisServer, redisServer } from "./utils/redisServer.js"

class Server extends Context.Tag("test/RedisServer")<Server, RedisServer>() {}
class Inspect extends Context.Tag("test/Inspect")<Inspect, Redis>() {}

const serverLayer = Layer.provideMerge(
  Layer.scoped(
    Inspect,
    Effect.flatMap(Server, (s) =>
      Effect.acquireRelease(
        Effect.sync(() => new Redis(s.port, "127.0.0.1", { maxRetriesPerRequest: 1 })),
        (c) => Effect.sync(() => c.disconnect())
      ))
  ),
  Layer.scoped(Server, redisServer)
)

let names = 0
const freshName = () => `circuit-${process.pid}-${++names}`

/** A route's key as `Routes.key` makes them: spaces, a URL. */
const route = "openai-chat https://api.example.com/v1?x=1&y=2 gpt-4o mini"

const coolDown = Duration.millis(400)

const inspect = <A>(f: (redis: Redis) => Promise<A>) => Effect.flatMap(Inspect, (r) => Effect.promise(() => f(r)))

const serverMillis = inspect((r) => r.time()).pipe(
  Effect.map(([s, us]) => Number(s) * 1000 + Math.floor(Number(us) / 1000))
)

const recorder = Effect.map(Ref.make<Array<RecoveryNotifications.Notification>>([]), (ref) => ({
  layer: RecoveryNotifications.layerCallback((n) => Ref.update(ref, (all) => [...all, n])),
  tags: Effect.map(Ref.get(ref), (all) => all.map((n) => n._tag))
}))

/** The circuits with every call made under `notifications`. */
const notifying = (c: Circuit.Service, notifications: Layer.Layer<never>): Circuit.Service => ({
  admit: (key) => Effect.provide(c.admit(key), notifications),
  succeeded: (key) => Effect.provide(c.succeeded(key), notifications),
  failed: (key) => Effect.provide(c.failed(key), notifications),
  state: (key) => Effect.provide(c.state(key), notifications)
})

const circuitOf = (name: string, options: Partial<RedisFleet.Options> = {}) =>
  Effect.flatMap(
    Server,
    (s) => RedisFleet.makeCircuit({ url: s.url, name, circuit: { failureThreshold, coolDown }, ...options })
  )

/** Waits until `check` holds, polling every 20 ms, for at most `within`. */
const eventually = <E, R>(check: Effect.Effect<boolean, E, R>, within = Duration.seconds(5)) =>
  Effect.gen(function*() {
    while (!(yield* check)) yield* Effect.sleep(Duration.millis(20))
  }).pipe(Effect.timeoutFail({ duration: within, onTimeout: () => new Error("condition not reached in time") }))

const halfOpen = (circuit: Circuit.Service, key: string) =>
  eventually(Effect.map(circuit.state(key), (s) => s === "half-open"))

/**
 * Plays a case; `wait` lets the cool-down run out, `retryIn` checks what an `Open` says is left of it (nothing of
 * the cool-down is spent before an `Open` in the cases, but what the calls take).
 */
const play = (
  circuit: Circuit.Service,
  key: string,
  c: Case,
  wait: Effect.Effect<void, unknown>,
  retryIn: (millis: number, where: string) => void
) =>
  Effect.gen(function*() {
    for (const [i, step] of c.steps.entries()) {
      const where = `${c.name}: step ${i + 1} (${step.op})`
      switch (step.op) {
        case "admit": {
          const admission = yield* circuit.admit(key)
          assert.strictEqual(admission._tag, step.expect, where)
          if (admission._tag === "Open") retryIn(Duration.toMillis(admission.retryIn), where)
          break
        }
        case "failed":
          assert.strictEqual(yield* circuit.failed(key), step.expect, where)
          break
        case "state":
          assert.strictEqual(yield* circuit.state(key), step.expect, where)
          break
        case "succeeded":
          yield* circuit.succeeded(key)
          break
        case "wait":
          yield* wait
      }
    }
  })

describe("Circuit.makeMemory: the transitions, on the TestClock (the oracle of the scripts)", () => {
  for (const c of cases) {
    it.effect(c.name, () =>
      play(
        Circuit.makeMemory({ failureThreshold, coolDown }),
        route,
        c,
        TestClock.adjust(coolDown),
        (millis, where) => assert.strictEqual(millis, Duration.toMillis(coolDown), where)
      ))
  }
})

describe("MemoryFleet.layer: circuits of its own", () => {
  it.effect("provides fresh circuits and their settings; another layer's circuits are others", () =>
    Effect.gen(function*() {
      const settings = { failureThreshold: 1, coolDown }
      const [one, provided] = yield* Effect.all([Circuit.Circuit, Circuit.CircuitSettings]).pipe(
        Effect.provide(MemoryFleet.layer({ circuit: settings }))
      )
      assert.deepStrictEqual(provided, settings)
      assert.strictEqual(yield* one.failed(route), "open")
      const other = yield* Effect.provide(Circuit.Circuit, MemoryFleet.layer({ circuit: settings }))
      assert.strictEqual(yield* other.state(route), "closed")
      assert.strictEqual(yield* (yield* Circuit.Circuit).state(route), "closed", "nor the process's default")
    }))
})

layer(serverLayer, { excludeTestServices: true, timeout: Duration.seconds(60) })(
  "RedisFleet circuits: the scripts on a real server",
  (it) => {
    for (const c of cases) {
      it.scoped(c.name, () =>
        Effect.gen(function*() {
          const circuit = yield* circuitOf(freshName())
          yield* play(circuit, route, c, halfOpen(circuit, route), (millis, where) => {
            assert.isTrue(millis > 0 && millis <= Duration.toMillis(coolDown), `${where}: retryIn ${millis}`)
          })
        }))
    }

    it.scoped("keys: a hash of the route's key under the fleet's tag; times from the server's clock; TTLs", () =>
      Effect.gen(function*() {
        const name = freshName()
        const key = FleetAddress.circuitKey(name, route)
        assert.match(key, new RegExp(`^reprise:fleet:\\{${name}\\}:circuit:[0-9a-f]{32}$`))
        assert.notStrictEqual(FleetAddress.circuitKey(name, `${route} `), key)
        const circuit = yield* circuitOf(name)
        yield* circuit.admit(route)
        assert.strictEqual(yield* inspect((r) => r.exists(key)), 0, "a closed circuit with no failure has no key")
        yield* circuit.failed(route)
        yield* circuit.failed(route)
        const ttl = yield* inspect((r) => r.pttl(key))
        const most = Duration.toMillis(coolDown) + 60_000
        assert.isTrue(ttl > 60_000 && ttl <= most, `failures kept for the cool-down and a minute: ${ttl}`)
        const before = yield* serverMillis
        assert.strictEqual(yield* circuit.failed(route), "open")
        const after = yield* serverMillis
        const opened = yield* inspect((r) => r.hgetall(key))
        const cd = Duration.toMillis(coolDown)
        assert.strictEqual(opened.failures, "3")
        assert.isTrue(
          Number(opened.open) >= before + cd && Number(opened.open) <= after + cd,
          `open until ${opened.open}, the failure at [${before}, ${after}] on the server's clock`
        )
        assert.isTrue((yield* inspect((r) => r.pttl(key))) > cd, "the key outlives the cool-down")
        yield* halfOpen(circuit, route)
        const probing = yield* serverMillis
        assert.strictEqual((yield* circuit.admit(route))._tag, "Probe")
        const probed = yield* serverMillis
        const lease = Number(yield* inspect((r) => r.hget(key, "probe")))
        assert.isTrue(lease >= probing + cd && lease <= probed + cd, `a probe leased for one cool-down: ${lease}`)
        // a probe given back: the lease field goes, the circuit is half-open, and the next send probes
        yield* circuit.released!(route, lease)
        assert.isNull(yield* inspect((r) => r.hget(key, "probe")))
        assert.strictEqual(yield* circuit.state(route), "half-open")
        const again = yield* circuit.admit(route)
        assert.strictEqual(again._tag, "Probe")
        const second = Number(yield* inspect((r) => r.hget(key, "probe")))
        assert.deepStrictEqual(again, Circuit.Admission.Probe({ lease: second }))
        // a lease that is not the one out leaves it alone
        yield* circuit.released!(route, second - 1)
        assert.strictEqual(Number(yield* inspect((r) => r.hget(key, "probe"))), second)
        yield* circuit.succeeded(route)
        assert.strictEqual(yield* inspect((r) => r.exists(key)), 0, "closed: the key is deleted")
        assert.deepStrictEqual(yield* inspect((r) => r.keys(`reprise:fleet:{${name}}*`)), [])
      }))

    it.scoped("two connections of one fleet share a circuit and its one probe; another fleet is another circuit", () =>
      Effect.gen(function*() {
        const name = freshName()
        const a = yield* circuitOf(name)
        const b = yield* circuitOf(name)
        const other = yield* circuitOf(freshName())
        assert.strictEqual(yield* a.failed(route), "closed")
        assert.strictEqual(yield* b.failed(route), "closed")
        assert.strictEqual(yield* a.failed(route), "open", "the failures of both count")
        assert.strictEqual((yield* b.admit(route))._tag, "Open")
        assert.strictEqual((yield* other.admit(route))._tag, "Closed")
        yield* halfOpen(b, route)
        // many sends of both at once: exactly one is the probe
        const admissions = yield* Effect.all(
          Array.from({ length: 10 }, (_, i) => (i % 2 === 0 ? a : b).admit(route)),
          { concurrency: "unbounded" }
        )
        const tags = admissions.map((x) => x._tag)
        assert.strictEqual(tags.filter((t) => t === "Probe").length, 1, tags.join())
        assert.strictEqual(tags.filter((t) => t === "Open").length, 9, tags.join())
        yield* b.succeeded(route)
        assert.strictEqual(yield* a.state(route), "closed")
      }))

    it.scoped("RedisFleet.layer provides the fleet's circuits and their settings with its limits", () =>
      Effect.gen(function*() {
        const server = yield* Server
        const name = freshName()
        const settings = { failureThreshold: 1, coolDown: Duration.seconds(5) }
        const elsewhere = yield* circuitOf(name)
        yield* Effect.gen(function*() {
          assert.deepStrictEqual(yield* Circuit.CircuitSettings, settings)
          assert.strictEqual(yield* (yield* Circuit.Circuit).failed(route), "open")
          assert.strictEqual(yield* elsewhere.state(route), "open", "another connection of the fleet sees it")
        }).pipe(Effect.provide(RedisFleet.layer({ url: server.url, name, circuit: settings })))
        // without `circuit`, the settings in context
        const inContext = { failureThreshold: 7, coolDown: Duration.seconds(2) }
        const read = yield* Effect.provide(
          Circuit.CircuitSettings,
          RedisFleet.layer({ url: server.url, name }).pipe(
            Layer.provide(Layer.succeed(Circuit.CircuitSettings, inContext))
          )
        )
        assert.deepStrictEqual(read, inContext)
      }))

    it.scoped("RedisFleet.layerConfig reads REPRISE_CIRCUIT_THRESHOLD and REPRISE_CIRCUIT_COOLDOWN", () =>
      Effect.gen(function*() {
        const server = yield* Server
        const env = new Map([
          ["REPRISE_FLEET_URL", server.url],
          ["REPRISE_FLEET_NAME", freshName()],
          ["REPRISE_CIRCUIT_THRESHOLD", "1"],
          ["REPRISE_CIRCUIT_COOLDOWN", "250"]
        ])
        const settings = yield* Effect.provide(
          Circuit.CircuitSettings,
          RedisFleet.layerConfig().pipe(Layer.provide(Layer.setConfigProvider(ConfigProvider.fromMap(env))))
        )
        assert.strictEqual(settings.failureThreshold, 1)
        assert.strictEqual(Duration.toMillis(settings.coolDown), 250)
      }))
  }
)

describe("RedisFleet circuits: faults", () => {
  it.scopedLive("unreachable from the start: the process's own circuits answer, never hang; one FleetUnavailable", () =>
    Effect.gen(function*() {
      const rec = yield* recorder
      // a port nobody listens on: the server is started and stopped, so the port was free a moment ago
      const port = yield* Effect.scoped(Effect.map(redisServer, (s) => s.port))
      const answers = yield* Effect.uninterruptible(Effect.gen(function*() {
        const circuit = notifying(
          yield* RedisFleet.makeCircuit({
            url: `redis://127.0.0.1:${port}/0`,
            name: freshName(),
            circuit: { failureThreshold, coolDown }
          }),
          rec.layer
        )
        const admitted = (yield* circuit.admit(route))._tag
        const failures = [yield* circuit.failed(route), yield* circuit.failed(route), yield* circuit.failed(route)]
        return [admitted, ...failures, (yield* circuit.admit(route))._tag, yield* circuit.state(route)]
      })).pipe(Effect.disconnect, Effect.timeoutFail({ duration: Duration.seconds(10), onTimeout: () => "hung" }))
      assert.deepStrictEqual(answers, ["Closed", "closed", "closed", "open", "Open", "open"])
      assert.deepStrictEqual(yield* rec.tags, ["FleetUnavailable"])
    }))

  layer(serverLayer, { excludeTestServices: true, timeout: Duration.seconds(60) })("with a server", (it) => {
    it.scoped("slow (CLIENT PAUSE): each call gives up at its timeout and the local circuit answers", () =>
      Effect.gen(function*() {
        const rec = yield* recorder
        const server = yield* Server
        const circuit = notifying(
          yield* circuitOf(freshName(), { timeout: Duration.millis(100), retryInterval: Duration.millis(200) }),
          rec.layer
        )
        yield* circuit.failed(route)
        yield* circuit.failed(route)
        const blocker = new Redis(server.port, "127.0.0.1")
        yield* Effect.addFinalizer(() => Effect.sync(() => blocker.disconnect()))
        yield* Effect.promise(() => blocker.call("CLIENT", "PAUSE", "1500", "ALL"))
        const resumed = blocker.ping()
        // the process saw two failures itself: its own circuit opens with the third
        const answers = yield* Effect.uninterruptible(Effect.all([circuit.failed(route), circuit.admit(route)])).pipe(
          Effect.disconnect,
          Effect.timeoutFail({ duration: Duration.seconds(5), onTimeout: () => "hung" })
        )
        assert.deepStrictEqual([answers[0], answers[1]._tag], ["open", "Open"])
        assert.deepStrictEqual(yield* rec.tags, ["FleetUnavailable"])
        yield* Effect.promise(() => resumed)
        yield* eventually(Effect.map(Effect.zipRight(circuit.state(route), rec.tags), (t) => t.length === 2))
        assert.deepStrictEqual(yield* rec.tags, ["FleetUnavailable", "FleetRestored"])
      }))

    it.scoped("killed mid-run: each process on its own circuits; restarted: shared again, announced once each", () =>
      Effect.gen(function*() {
        const recA = yield* recorder
        const recB = yield* recorder
        const server = yield* Server
        const name = freshName()
        const options = { retryInterval: Duration.millis(200) }
        const a = notifying(yield* circuitOf(name, options), recA.layer)
        const b = notifying(yield* circuitOf(name, options), recB.layer)
        for (let i = 0; i < failureThreshold; i++) yield* a.failed(route)
        assert.strictEqual((yield* b.admit(route))._tag, "Open", "shared while Redis answers")
        yield* server.kill
        // a saw the failures itself; b saw none of them
        assert.strictEqual((yield* a.admit(route))._tag, "Open")
        assert.strictEqual((yield* b.admit(route))._tag, "Closed")
        assert.deepStrictEqual(yield* recB.tags, ["FleetUnavailable"], "said once")
        yield* server.restart
        yield* eventually(Effect.map(
          Effect.zipRight(Effect.all([a.state(route), b.state(route)]), Effect.all([recA.tags, recB.tags])),
          ([ta, tb]) => ta.includes("FleetRestored") && tb.includes("FleetRestored")
        ))
        assert.deepStrictEqual(yield* recB.tags, ["FleetUnavailable", "FleetRestored"])
        assert.deepStrictEqual(yield* recA.tags, ["FleetUnavailable", "FleetRestored"])
        // the restarted server is empty: closed, and shared again
        assert.strictEqual((yield* b.admit(route))._tag, "Closed")
        for (let i = 0; i < failureThreshold; i++) yield* b.failed(route)
        assert.strictEqual(yield* a.state(route), "open")
      }))
  })
})

/** A process of the fleet (`utils/circuitProcess.ts`): one operation a line, one JSON answer a line. */
interface Child {
  readonly ask: (line: string) => Effect.Effect<Record<string, unknown>, Error>
  /** Ends its input and waits for its exit (bounded). */
  readonly end: Effect.Effect<number | null, Error>
}

const script = Path.join(Path.dirname(fileURLToPath(import.meta.url)), "utils", "circuitProcess.ts")
const repository = Path.resolve(Path.dirname(fileURLToPath(import.meta.url)), "../../..")

const startChild = (url: string, name: string, cool: Duration.Duration) =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, [
          "--import",
          "tsx",
          script,
          url,
          name,
          String(failureThreshold),
          `${Duration.toMillis(cool)}`
        ], {
          cwd: repository,
          stdio: ["pipe", "pipe", "inherit"]
        })
      ),
      (child) =>
        Effect.sync(() => {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL")
        })
    )
    const waiting: Array<(answer: Record<string, unknown>) => void> = []
    const answers: Array<Record<string, unknown>> = []
    Readline.createInterface({ input: child.stdout! }).on("line", (line) => {
      const answer = JSON.parse(line) as Record<string, unknown>
      const next = waiting.shift()
      if (next === undefined) answers.push(answer)
      else next(answer)
    })
    const read = Effect.async<Record<string, unknown>>((resume) => {
      const ready = answers.shift()
      if (ready !== undefined) return resume(Effect.succeed(ready))
      const resolve = (answer: Record<string, unknown>) => resume(Effect.succeed(answer))
      waiting.push(resolve)
      return Effect.sync(() => {
        const i = waiting.indexOf(resolve)
        if (i >= 0) waiting.splice(i, 1)
      })
    }).pipe(
      Effect.timeoutFail({ duration: Duration.seconds(30), onTimeout: () => new Error("the child did not answer") })
    )
    const ready = yield* read
    assert.strictEqual(ready.op, "ready")
    return {
      ask: (line) => Effect.zipRight(Effect.sync(() => child.stdin!.write(`${line}\n`)), read),
      end: Effect.async<number | null>((resume) => {
        if (child.exitCode !== null) return resume(Effect.succeed(child.exitCode))
        child.once("exit", (code) => resume(Effect.succeed(code)))
        child.stdin!.end()
      }).pipe(
        Effect.timeoutFail({ duration: Duration.seconds(10), onTimeout: () => new Error("the child did not exit") })
      )
    } satisfies Child
  })

layer(serverLayer, { excludeTestServices: true, timeout: Duration.seconds(90) })(
  "RedisFleet circuits: two OS processes on one redis-server",
  (it) => {
    it.scoped("A's failures open the circuit; B sees it open; after the cool-down one of them gets the probe", () =>
      Effect.gen(function*() {
        const server = yield* Server
        const name = freshName()
        // long enough that B's question comes within it on a loaded machine; waits poll, so it costs no more
        const cool = Duration.seconds(2)
        const [a, b] = yield* Effect.all([startChild(server.url, name, cool), startChild(server.url, name, cool)], {
          concurrency: 2
        })
        assert.deepStrictEqual(yield* b.ask(`admit ${route}`), { op: "admit", tag: "Closed" })
        assert.deepStrictEqual(yield* a.ask(`failed ${route}`), { op: "failed", state: "closed" })
        assert.deepStrictEqual(yield* a.ask(`failed ${route}`), { op: "failed", state: "closed" })
        assert.deepStrictEqual(yield* a.ask(`failed ${route}`), { op: "failed", state: "open" })
        const refused = yield* b.ask(`admit ${route}`)
        assert.strictEqual(refused.tag, "Open")
        assert.isTrue(Number(refused.retryIn) > 0 && Number(refused.retryIn) <= Duration.toMillis(cool))
        yield* eventually(
          Effect.map(b.ask(`state ${route}`), (answer) => answer.state === "half-open"),
          Duration.seconds(10)
        )
        // both ask at once, as two processes whose sends are due
        const [fromA, fromB] = yield* Effect.all([a.ask(`admit ${route}`), b.ask(`admit ${route}`)], {
          concurrency: 2
        })
        const tags = [fromA.tag, fromB.tag].sort()
        assert.deepStrictEqual(tags, ["Open", "Probe"])
        const prober = fromA.tag === "Probe" ? a : b
        const other = prober === a ? b : a
        yield* prober.ask(`succeeded ${route}`)
        assert.deepStrictEqual(yield* other.ask(`admit ${route}`), { op: "admit", tag: "Closed" })
        assert.strictEqual(yield* a.end, 0)
        assert.strictEqual(yield* b.end, 0)
        assert.deepStrictEqual(yield* inspect((r) => r.keys(`reprise:fleet:{${name}}*`)), [])
      }))
  }
)
