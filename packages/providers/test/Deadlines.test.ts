/**
 * The deadlines of a provider (`internal/deadlines.ts`), one timer fiber for each kind, on the TestClock.
 *
 * - First byte (`internal/send.ts`, `sendIn`, in an attempt of its own): a send whose headers are late fails with the `Timeout` at exactly
 *   the first-byte timeout from its own start, its request aborted through its `AbortSignal`; a send in time beside
 *   it is untouched; the timer runs only while a send is pending.
 * - Idle (`internal/sse.ts`, `pull` with `idle`): the streams of one provider share one queue; each times out at
 *   exactly the idle timeout from the start of its own wait, an event restarting it; the timer runs while a stream is
 *   open, and stops with the last one.
 */
import { HttpClient, HttpClientRequest, HttpClientResponse } from "@effect/platform"
import * as HttpClientError from "@effect/platform/HttpClientError"
import { assert, describe, it } from "@effect/vitest"
import * as Budget from "@reprise/core/Budget"
import * as Generation from "@reprise/core/Generation"
import { Duration, Effect, ExecutionStrategy, Exit, Fiber, Option, Redacted, Scope, Stream, TestClock } from "effect"
import { pipeArguments } from "effect/Pipeable"
import * as Attempt from "../src/internal/attempt.js"
import * as Body from "../src/internal/body.js"
import * as Deadlines from "../src/internal/deadlines.js"
import * as Send from "../src/internal/send.js"
import * as Settings from "../src/internal/settings.js"
import { type Machine, prematureEof, run } from "../src/internal/sse.js"
import { fedResponse } from "./support/harness.js"

const settings = Settings.settings("openai-chat", {
  apiKey: Redacted.make("sk-test"),
  firstByteTimeout: Duration.seconds(60),
  idleTimeout: Duration.seconds(120)
})

/**
 * A client whose `/late` requests are never answered (they end when their signal aborts them, as the platform's
 * clients' requests do; `aborted` lists them) and whose `/in-time` ones are, after 30 s.
 */
const client = (aborted: Array<string>, abortedAfterHeaders: Array<string> = []) =>
  HttpClient.make((request, url, signal) =>
    url.pathname === "/in-time"
      ? Effect.zipRight(
        Effect.sleep("30 seconds"),
        // an abort after the headers is recorded apart: a send in time must not be aborted by its deadline
        Effect.sync(() => {
          signal.addEventListener("abort", () => abortedAfterHeaders.push(url.pathname))
          return HttpClientResponse.fromWeb(request, new Response("{}"))
        })
      )
      : Effect.async<HttpClientResponse.HttpClientResponse, HttpClientError.RequestError>((resume) => {
        signal.addEventListener("abort", () => {
          aborted.push(url.pathname)
          resume(Effect.fail(new HttpClientError.RequestError({ request, reason: "Transport", cause: signal.reason })))
        })
      })
  )

/** A send in an attempt of its own (`Attempt.within`, no idle queue): what a provider's attempt does before its body. */
const sendTimed = (
  http: HttpClient.HttpClient,
  request: HttpClientRequest.HttpClientRequest,
  settings: Settings.Settings,
  deadlines: Deadlines.Deadlines
) => Attempt.within(deadlines, undefined, undefined, (attempt) => Send.sendIn(attempt, http, request, settings))

const reasonOf = (exit: Exit.Exit<unknown, unknown>) =>
  Exit.isFailure(exit) && exit.cause._tag === "Fail" ? (exit.cause.error as { reason?: string }).reason : undefined

const yieldAll = Effect.repeatN(Effect.yieldNow(), 20)

describe("first-byte deadlines", () => {
  it.effect("a late send times out at 60 s from its own start, aborted; one in time beside it is untouched", () =>
    Effect.gen(function*() {
      const aborted: Array<string> = []
      const http = client(aborted)
      const deadlines = Deadlines.make(settings.firstByteTimeout)
      const send = (path: string) =>
        Effect.fork(
          Effect.scoped(sendTimed(http, HttpClientRequest.get(`http://127.0.0.1:9${path}`), settings, deadlines))
        )
      const late = yield* Effect.scoped(Effect.gen(function*() {
        const first = yield* send("/late")
        const inTime = yield* send("/in-time")
        yield* yieldAll
        yield* TestClock.adjust("30 seconds")
        assert.isTrue(Exit.isSuccess(yield* Fiber.await(inTime)), "the send in time failed")
        // a second late send, 40 s after the first
        yield* TestClock.adjust("10 seconds")
        const second = yield* send("/late")
        yield* yieldAll
        yield* TestClock.adjust("19 seconds")
        assert.isTrue(Option.isNone(yield* Fiber.poll(first)), "timed out before 60 s")
        yield* TestClock.adjust("1 second")
        assert.strictEqual(reasonOf(yield* Fiber.await(first)), "Timeout")
        assert.deepStrictEqual(aborted, ["/late"])
        assert.isTrue(Option.isNone(yield* Fiber.poll(second)), "the second late send timed out with the first")
        yield* TestClock.adjust("40 seconds")
        return yield* Fiber.await(second)
      })).pipe(Budget.scoped)
      assert.strictEqual(reasonOf(late), "Timeout")
      assert.deepStrictEqual(aborted, ["/late", "/late"])
      assert.strictEqual(deadlines.users, 0)
      assert.isUndefined(deadlines.timer, "the timer still runs with no send pending")
    }))

  it.effect("the timer runs while a send is pending, and stops with the last one", () =>
    Effect.gen(function*() {
      const http = client([])
      const deadlines = Deadlines.make(settings.firstByteTimeout)
      const fiber = yield* Effect.fork(
        Effect.scoped(sendTimed(http, HttpClientRequest.get("http://127.0.0.1:9/in-time"), settings, deadlines))
          .pipe(Budget.scoped)
      )
      yield* yieldAll
      assert.strictEqual(deadlines.users, 1)
      assert.isDefined(deadlines.timer)
      yield* TestClock.adjust("30 seconds")
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(fiber)))
      assert.strictEqual(deadlines.users, 0)
      assert.isUndefined(deadlines.timer)
    }))

  it.effect("a send in time is disarmed: its response outlives the first-byte timeout unaborted", () =>
    Effect.gen(function*() {
      const aborted: Array<string> = []
      const deadlines = Deadlines.make(settings.firstByteTimeout)
      // another user holds the queue open, so the timer runs past the send's 60 s
      yield* Deadlines.open(deadlines)
      const fiber = yield* Effect.fork(
        Effect.scoped(Effect.gen(function*() {
          const response = yield* sendTimed(
            client([], aborted),
            HttpClientRequest.get("http://127.0.0.1:9/in-time"),
            settings,
            deadlines
          )
          // the response is still being read, in the send's scope, long after 60 s from the send
          yield* Effect.sleep("120 seconds")
          return response.status
        })).pipe(Budget.scoped)
      )
      yield* yieldAll
      yield* TestClock.adjust("30 seconds")
      yield* yieldAll
      yield* TestClock.adjust("60 seconds")
      assert.deepStrictEqual(aborted, [], "the deadline of a send in time aborted it")
      yield* TestClock.adjust("60 seconds")
      assert.strictEqual(yield* Fiber.join(fiber), 200)
      assert.isDefined(deadlines.timer)
      yield* Deadlines.close(deadlines)
    }))

  it.effect("an interrupted send is settled: its request aborted, and the timer stopped", () =>
    Effect.gen(function*() {
      const aborted: Array<string> = []
      const deadlines = Deadlines.make(settings.firstByteTimeout)
      const fiber = yield* Effect.fork(
        Effect.scoped(
          sendTimed(client(aborted), HttpClientRequest.get("http://127.0.0.1:9/late"), settings, deadlines)
        )
          .pipe(Budget.scoped)
      )
      yield* yieldAll
      yield* Fiber.interrupt(fiber)
      assert.deepStrictEqual(aborted, ["/late"])
      assert.strictEqual(deadlines.users, 0)
      assert.isUndefined(deadlines.timer)
    }))
})

describe("an attempt's scope (`attempt.ts`)", () => {
  // a scope whose owner alone may close it: not a `CloseableScope`
  const uncloseable = (scope: Scope.CloseableScope): Scope.Scope =>
    ({
      [Scope.ScopeTypeId]: Scope.ScopeTypeId,
      strategy: scope.strategy,
      fork: (strategy: ExecutionStrategy.ExecutionStrategy) => (scope as any).fork(strategy),
      addFinalizer: (finalizer: Scope.Scope.Finalizer) => (scope as any).addFinalizer(finalizer),
      pipe() {
        return pipeArguments(this, arguments)
      }
    }) as unknown as Scope.Scope

  const lateIn = (aborted: Array<string>, deadlines: Deadlines.Deadlines, scope: Scope.Scope) =>
    Effect.fork(
      sendTimed(client(aborted), HttpClientRequest.get("http://127.0.0.1:9/late"), settings, deadlines).pipe(
        Effect.provideService(Scope.Scope, scope),
        Budget.scoped
      )
    )

  // a scope of the test's own, which tells whether it has been closed
  const watchedScope = Effect.gen(function*() {
    const scope = yield* Scope.make()
    let released = false
    yield* Scope.addFinalizer(scope, Effect.sync(() => (released = true)))
    return { scope, released: () => released }
  })

  it.effect("a deadline that passes closes the attempt's own scope: what was added to it runs then", () =>
    Effect.gen(function*() {
      const aborted: Array<string> = []
      const deadlines = Deadlines.make(settings.firstByteTimeout)
      const { released, scope } = yield* watchedScope
      const fiber = yield* lateIn(aborted, deadlines, scope)
      yield* yieldAll
      yield* TestClock.adjust("60 seconds")
      assert.strictEqual(reasonOf(yield* Fiber.await(fiber)), "Timeout")
      assert.deepStrictEqual(aborted, ["/late"])
      assert.isTrue(released(), "the attempt's scope is still open after its deadline")
      assert.strictEqual(deadlines.users, 0)
      assert.isUndefined(deadlines.timer)
    }))

  it.effect("in a scope that cannot be closed, the attempt runs in a scope forked from it, and only that one is closed", () =>
    Effect.gen(function*() {
      const aborted: Array<string> = []
      const deadlines = Deadlines.make(settings.firstByteTimeout)
      const { released, scope } = yield* watchedScope
      const fiber = yield* lateIn(aborted, deadlines, uncloseable(scope))
      yield* yieldAll
      yield* TestClock.adjust("59 seconds")
      assert.isTrue(Option.isNone(yield* Fiber.poll(fiber)), "timed out before 60 s")
      yield* TestClock.adjust("1 second")
      assert.strictEqual(reasonOf(yield* Fiber.await(fiber)), "Timeout")
      assert.deepStrictEqual(aborted, ["/late"])
      assert.isFalse(released(), "the deadline closed its caller's scope")
      assert.strictEqual(deadlines.users, 0)
      yield* Scope.close(scope, Exit.void)
      assert.isTrue(released())
    }))
})

/** The deadlines of `deadlines` still armed. */
const armed = (deadlines: Deadlines.Deadlines) =>
  deadlines.entries.slice(deadlines.head).filter((entry) => !entry.settled).length

/** A web response whose body the test feeds by hand, one SSE event per `feed`. */
const fedEvents = () => {
  const { feed, response } = fedResponse()
  return { response, feed: (data: string) => feed(`data: ${data}\n\n`) }
}

/** Every event a delta; never done, and its end a premature EOF (or the failure it is given). */
const machine = (): Machine<string> => ({
  step: (data, out) => {
    out.push(Generation.TextDelta({ text: data }))
    return undefined
  },
  done: () => false,
  end: (failure) => Effect.fail(Option.getOrElse(failure, () => prematureEof("test")))
})

/** {@link machine}, done once it steps the event `terminal`, and ending in success. */
const endsOn = (terminal: string): Machine<string> => {
  let done = false
  return {
    step: (data, out) => {
      done = data === terminal
      return machine().step(data, out)
    },
    done: () => done,
    end: () => Effect.succeed([])
  }
}

describe("idle deadlines", () => {
  it.effect("two streams share one queue: each times out 120 s into its own wait, and the timer stops after both", () =>
    Effect.gen(function*() {
      const idle = Deadlines.make(settings.idleTimeout)
      const a = fedEvents()
      const b = fedEvents()
      // as a provider's attempt uses the queue: open from before the read to the end of the stream's scope
      const consume = (response: HttpClientResponse.HttpClientResponse) =>
        Effect.fork(Effect.scoped(Effect.zipRight(
          Deadlines.use(idle),
          Stream.runCollect(
            run({ body: Body.pull(response), settings, decode: (event) => event.data, machine: machine(), idle })
          )
        )))
      assert.isTrue(Body.abandonable(yield* Effect.scoped(Body.pull(fedEvents().response))), "not the path under test")
      const first = yield* consume(a.response)
      const second = yield* consume(b.response)
      yield* yieldAll
      assert.strictEqual(idle.users, 2)
      assert.isDefined(idle.timer)
      assert.strictEqual(armed(idle), 2, "each waiting stream has one deadline in the queue")
      // an event for the first at 60 s restarts its wait: it times out at 180 s, the second at 120 s
      yield* TestClock.adjust("60 seconds")
      a.feed("1")
      yield* yieldAll
      yield* TestClock.adjust("59 seconds")
      assert.isTrue(Option.isNone(yield* Fiber.poll(second)), "timed out before 120 s")
      yield* TestClock.adjust("1 second")
      assert.strictEqual(reasonOf(yield* Fiber.await(second)), "Timeout")
      assert.isTrue(Option.isNone(yield* Fiber.poll(first)), "the first timed out with the second")
      assert.strictEqual(idle.users, 1)
      assert.isDefined(idle.timer, "the timer stopped with a stream still open")
      yield* TestClock.adjust("59 seconds")
      assert.isTrue(Option.isNone(yield* Fiber.poll(first)), "timed out before 120 s from its event")
      yield* TestClock.adjust("1 second")
      assert.strictEqual(reasonOf(yield* Fiber.await(first)), "Timeout")
      assert.strictEqual(idle.users, 0)
      assert.isUndefined(idle.timer, "the timer still runs with no stream open")
    }))

  it.effect("a stream that ends in time disarms its deadline: nothing in the queue expires later", () =>
    Effect.gen(function*() {
      const idle = Deadlines.make(settings.idleTimeout)
      // the queue held open beyond the stream, as by a provider's other attempts
      yield* Deadlines.open(idle)
      const a = fedEvents()
      const fiber = yield* Effect.fork(Stream.runCollect(
        run({ body: Body.pull(a.response), settings, decode: (event) => event.data, machine: endsOn("end"), idle })
      ))
      yield* yieldAll
      yield* TestClock.adjust("100 seconds")
      a.feed("end")
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(fiber)))
      yield* TestClock.adjust("200 seconds")
      assert.isTrue(idle.entries.every((entry) => !entry.timedOut), "a deadline of the finished stream expired")
      assert.strictEqual(armed(idle), 0)
      yield* Deadlines.close(idle)
      assert.isUndefined(idle.timer)
    }))

  it.effect("a stream interrupted while it waits leaves no deadline armed", () =>
    Effect.gen(function*() {
      const idle = Deadlines.make(settings.idleTimeout)
      yield* Deadlines.open(idle)
      const fiber = yield* Effect.fork(Stream.runCollect(
        run({
          body: Body.pull(fedEvents().response),
          settings,
          decode: (event) => event.data,
          machine: machine(),
          idle
        })
      ))
      yield* yieldAll
      assert.strictEqual(armed(idle), 1)
      yield* Fiber.interrupt(fiber)
      assert.strictEqual(armed(idle), 0, "the interrupted pull's deadline stays in the queue")
      yield* Deadlines.close(idle)
    }))

  it.effect("a stream with a queue of its own stops its timer when it ends", () =>
    Effect.gen(function*() {
      const roots = (yield* Fiber.roots).length
      const a = fedEvents()
      const fiber = yield* Effect.fork(Stream.runCollect(
        run({ body: Body.pull(a.response), settings, decode: (event) => event.data, machine: endsOn("end") })
      ))
      yield* yieldAll
      a.feed("end")
      assert.isTrue(Exit.isSuccess(yield* Fiber.await(fiber)))
      yield* yieldAll
      assert.strictEqual((yield* Fiber.roots).length, roots)
    }))

  it.effect("a provider's attempt holds the queue open from its send: a stream after it finds the timer running", () =>
    Effect.gen(function*() {
      const idle = Deadlines.make(settings.idleTimeout)
      const a = fedEvents()
      yield* Deadlines.open(idle)
      yield* yieldAll
      const timer = idle.timer
      assert.isDefined(timer)
      const fiber = yield* Effect.fork(Stream.runCollect(
        run({ body: Body.pull(a.response), settings, decode: (event) => event.data, machine: machine(), idle })
      ))
      yield* yieldAll
      assert.strictEqual(idle.timer, timer, "the stream started a timer of its own")
      yield* TestClock.adjust("120 seconds")
      assert.strictEqual(reasonOf(yield* Fiber.await(fiber)), "Timeout")
      assert.strictEqual(idle.users, 1)
      yield* Deadlines.close(idle)
      assert.isUndefined(idle.timer)
    }))
})

describe("the deadline queue", () => {
  it.effect("a deadline armed for long does not keep the disarmed ones after it", () =>
    Effect.gen(function*() {
      const deadlines = Deadlines.make(settings.idleTimeout)
      const clock = yield* Effect.clock
      yield* Deadlines.open(deadlines)
      Deadlines.arm(deadlines, clock, undefined)
      for (let i = 0; i < 100_000; i++) Deadlines.disarm(deadlines, Deadlines.arm(deadlines, clock, undefined))
      assert.isBelow(deadlines.entries.length - deadlines.head, 3000)
      assert.strictEqual(armed(deadlines), 1)
      yield* Deadlines.close(deadlines)
    }))

  it.effect("an expiry that fails stops neither the others nor the timer", () =>
    Effect.gen(function*() {
      const deadlines = Deadlines.make(settings.idleTimeout)
      const clock = yield* Effect.clock
      yield* Deadlines.open(deadlines)
      yield* yieldAll
      const told: Array<string> = []
      Deadlines.arm(deadlines, clock, Effect.die("a finalizer failed"))
      Deadlines.arm(deadlines, clock, Effect.sync(() => told.push("second")))
      yield* TestClock.adjust("120 seconds")
      assert.deepStrictEqual(told, ["second"])
      Deadlines.arm(deadlines, clock, Effect.sync(() => told.push("later")))
      yield* TestClock.adjust("120 seconds")
      assert.deepStrictEqual(told, ["second", "later"])
      yield* Deadlines.close(deadlines)
    }))

  it.effect("enterRunning joins only a queue whose timer runs, and keeps it running until its own leave", () =>
    Effect.gen(function*() {
      const deadlines = Deadlines.make(settings.idleTimeout)
      const clock = yield* Effect.clock
      assert.isFalse(Deadlines.enterRunning(deadlines), "joined a queue with no timer")
      assert.strictEqual(deadlines.users, 0)
      yield* Deadlines.open(deadlines)
      yield* yieldAll
      assert.isTrue(Deadlines.enterRunning(deadlines))
      // the user that opened it leaves (an attempt's end); the one that joined (a body's drain) keeps it timed
      yield* Deadlines.close(deadlines)
      assert.isDefined(deadlines.timer)
      const told: Array<string> = []
      Deadlines.arm(deadlines, clock, Effect.sync(() => told.push("cut")))
      yield* TestClock.adjust("120 seconds")
      assert.deepStrictEqual(told, ["cut"])
      Deadlines.leave(deadlines)
      assert.isUndefined(deadlines.timer, "the timer runs on after its last user")
      assert.strictEqual(deadlines.users, 0)
    }))
})
