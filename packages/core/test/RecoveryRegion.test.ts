/**
 * The regions `Recovery` runs a reply and its attempts in: the reply's `Budget` and span, and an attempt's `Budget`,
 * `Resumption`, span and `Scope`, are in the fiber's context while they run and gone after, whether the reply
 * commits, fails, dies or is interrupted. An attempt's allowance is the reply's. An attempt's scope is closed with its read's exit, once the attempt's context is given back and
 * before what follows is decided; a finalizer's defect ends the reply with it, even when the reply was interrupted.
 * A background response's cancel that dies on interruption still leaves the context given back and the span ended.
 * Each span ends with its exit, the attempt's inside the reply's. The `Resumption` service's `offer` works taken off
 * the service.
 */
import { assert, describe, it } from "@effect/vitest"
import {
  Cause,
  Chunk,
  Context,
  Deferred,
  Duration,
  Effect,
  Exit,
  Fiber,
  Layer,
  Option,
  Scope,
  Stream,
  TestClock,
  Tracer
} from "effect"
import * as Budget from "../src/Budget.js"
import * as Generation from "../src/Generation.js"
import * as Provider from "../src/Provider.js"
import * as Recovery from "../src/Recovery.js"
import * as Resumption from "../src/Resumption.js"
import * as TransportError from "../src/TransportError.js"

const finish = Generation.Finish({ reason: "stop", providerReason: "stop" })

class Outer extends Context.Tag("test/RecoveryRegion/Outer")<Outer, string>() {}

/** What the fiber's context holds of the services a region provides. */
const services = Effect.map(Effect.context<never>(), (context) => ({
  budget: Context.getOption(context, Budget.Budget),
  span: Context.getOption(context, Tracer.ParentSpan),
  resumption: Context.getOption(context, Resumption.Resumption),
  scope: Context.getOption(context, Scope.Scope),
  outer: Context.getOption(context, Outer)
}))

type Seen = Effect.Effect.Success<typeof services>

/**
 * A generation made from its pull, opened once per attempt: what the open saw of the context, the exit its scope was
 * closed with, and the read's end (`"finish"`, a reset, a defect of the finalizer, or never).
 */
const generation = (
  end: "finish" | "reset" | "dies on close" | "never" | "never, dies on close",
  started?: Deferred.Deferred<void>,
  resumable?: Resumption.Resumable
) => {
  const seen: Array<Seen> = []
  const closedWith: Array<Exit.Exit<unknown, unknown>> = []
  /** What the scope's finalizer saw of the fiber's context as the scope closed. */
  const closingSaw: Array<Seen> = []
  const open = Effect.gen(function*() {
    yield* Budget.reserve
    seen.push(yield* services)
    // taken off the service, as a provider may
    const { offer } = yield* Resumption.Resumption
    if (resumable !== undefined) yield* offer(resumable)
    // added to the scope as it is (`Scope.addFinalizerExit`, not `Effect.addFinalizer`, which would run it with the
    // context it was added in): it runs in the context of the fiber that closes the scope
    yield* Effect.flatMap(
      Effect.scope,
      (scope) =>
        Scope.addFinalizerExit(scope, (exit) =>
          Effect.flatMap(services, (closing) => {
            closedWith.push(exit)
            closingSaw.push(closing)
            return end === "dies on close" || end === "never, dies on close" ? Effect.die("finalizer bug") : Effect.void
          }))
    )
    if (started !== undefined) yield* Deferred.succeed(started, undefined)
    let done = false
    const pull: Provider.Pull<TransportError.TransportError | Budget.BudgetExhausted> = Effect.suspend(() => {
      if (end === "never" || end === "never, dies on close") return Effect.never
      if (done) return Effect.fail(Option.none())
      done = true
      return end === "reset"
        ? Effect.fail(Option.some(new TransportError.TransportError({ reason: "Reset", detail: "cut" })))
        : Effect.succeed(Chunk.make(Generation.TextDelta({ text: "hi" }), finish))
    })
    return pull
  })
  return { open, seen, closedWith, closingSaw }
}

/** Spans as a tracer sees them: each with its parent's name, and its exit once ended. */
const recording = () => {
  const spans: Array<
    { name: string; parent: string | undefined; exit: () => Exit.Exit<unknown, unknown> | undefined }
  > = []
  const tracer = Tracer.make({
    span: (name, parent, context, links, startTime, kind) => {
      let exit: Exit.Exit<unknown, unknown> | undefined
      const span: Tracer.Span = {
        _tag: "Span",
        name,
        spanId: `${name}-${spans.length}`,
        traceId: "trace",
        parent,
        context,
        status: { _tag: "Started", startTime },
        attributes: new Map(),
        links,
        sampled: true,
        kind,
        end: (endTime, e) => {
          exit = e
          ;(span as { status: Tracer.SpanStatus }).status = { _tag: "Ended", startTime, endTime, exit: e }
        },
        attribute: (key, value) => void (span.attributes as Map<string, unknown>).set(key, value),
        event: () => {},
        addLinks: () => {}
      }
      spans.push({
        name,
        parent: Option.match(parent, {
          onNone: () => undefined,
          onSome: (p) => (p._tag === "Span" ? p.name : "external")
        }),
        exit: () => exit
      })
      return span
    },
    context: (f) => f()
  })
  return { spans, layer: Layer.setTracer(tracer) }
}

describe("Recovery's regions", () => {
  it.effect("an attempt sees its services and a scope of its own; after the reply, the context is as before", () =>
    Effect.gen(function*() {
      const { open, seen } = generation("finish")
      // a hook after the commit runs in the reply's region, not in its attempt's
      let afterCommit: Seen | undefined
      const reply = yield* Recovery.runOpen(open, {
        hooks: { afterGeneration: () => Effect.map(services, (inReply) => void (afterCommit = inReply)) }
      })
      assert.isTrue(afterCommit !== undefined && Option.isSome(afterCommit.budget) && Option.isSome(afterCommit.span))
      assert.isTrue(Option.isNone(afterCommit!.scope))
      assert.strictEqual(reply.text, "hi")
      assert.strictEqual(seen.length, 1)
      const inside = seen[0]
      assert.isTrue(Option.isSome(inside.budget) && Option.isSome(inside.span))
      assert.isTrue(Option.isSome(inside.resumption) && Option.isSome(inside.scope))
      assert.deepStrictEqual(inside.outer, Option.some("outer"))
      const after = yield* services
      assert.isTrue(Option.isNone(after.budget) && Option.isNone(after.span))
      assert.isTrue(Option.isNone(after.scope))
      // a reference with a default: the attempt's is the reply's, not the default given back after
      assert.notStrictEqual(Option.getOrUndefined(after.resumption), Option.getOrUndefined(inside.resumption))
      assert.deepStrictEqual(after.outer, Option.some("outer"))
    }).pipe(Effect.provideService(Outer, "outer")))

  it.effect("each attempt's scope is closed with its read's exit, a failure's before the next attempt opens", () =>
    Effect.gen(function*() {
      const { closedWith, open, seen } = generation("reset")
      const exit = yield* Effect.exit(Recovery.runOpen(open).pipe(Recovery.disabled))
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(seen.length, 1)
      assert.strictEqual(closedWith.length, 1)
      const closed = closedWith[0]
      assert.isTrue(Exit.isFailure(closed) && Option.isSome(Cause.failureOption(closed.cause)))
      const after = yield* services
      assert.isTrue(Option.isNone(after.budget) && Option.isNone(after.scope))
      const committed = generation("finish")
      yield* Recovery.runOpen(committed.open)
      assert.deepStrictEqual(committed.closedWith, [Exit.void])
    }))

  it.effect("a finalizer that dies as the attempt's scope closes ends the reply with that defect, its spans ended", () =>
    Effect.gen(function*() {
      const { layer, spans } = recording()
      const { open } = generation("dies on close")
      const exit = yield* Effect.exit(Effect.provide(Recovery.runOpen(open), layer))
      assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause))
      assert.deepStrictEqual(spans.map((span) => [span.name, span.parent]), [
        ["reprise.reply", undefined],
        ["reprise.attempt", "reprise.reply"]
      ])
      for (const span of spans) {
        const ended = span.exit()
        assert.isTrue(ended !== undefined && Exit.isFailure(ended) && Cause.isDie(ended.cause), span.name)
      }
      const after = yield* services
      assert.isTrue(Option.isNone(after.budget) && Option.isNone(after.span))
    }))

  it.effect("an interrupted reply closes its attempt's scope, ends both spans interrupted, and restores the context", () =>
    Effect.gen(function*() {
      const { layer, spans } = recording()
      const started = yield* Deferred.make<void>()
      const { closedWith, open } = generation("never", started)
      const fiber = yield* Effect.fork(
        Effect.onInterrupt(
          Effect.provide(Recovery.runOpen(open), layer),
          // what runs after the reply, in the same fiber, sees the context from before it
          () => Effect.flatMap(services, (after) => Effect.sync(() => assert.isTrue(Option.isNone(after.budget))))
        )
      )
      yield* Deferred.await(started)
      const exit = yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.isInterrupted(exit))
      assert.strictEqual(closedWith.length, 1)
      assert.isTrue(Exit.isInterrupted(closedWith[0]))
      assert.deepStrictEqual(spans.map((span) => span.name), ["reprise.reply", "reprise.attempt"])
      for (const span of spans) {
        const ended = span.exit()
        assert.isTrue(ended !== undefined && Exit.isInterrupted(ended), span.name)
      }
    }))

  it.effect("a committed attempt's span succeeds and a failed one's fails with its error, inside the reply's", () =>
    Effect.gen(function*() {
      const { layer, spans } = recording()
      let opened = 0
      const stream = Stream.unwrap(Effect.map(Budget.reserve, () => {
        opened++
        return opened === 1
          ? Stream.fail(new TransportError.TransportError({ reason: "Reset", detail: "cut" }))
          : Stream.make(Generation.TextDelta({ text: "ok" }), finish)
      }))
      const fiber = yield* Effect.fork(Effect.provide(Recovery.run(stream), layer))
      yield* TestClock.adjust(Duration.minutes(1))
      const reply = yield* Fiber.join(fiber)
      assert.strictEqual(reply.text, "ok")
      const [first, second] = spans.filter((span) => span.name === "reprise.attempt")
      const failed = first.exit()
      assert.isTrue(failed !== undefined && Exit.isFailure(failed) && Option.isSome(Cause.failureOption(failed.cause)))
      assert.deepStrictEqual(second.exit(), Exit.void)
      assert.isTrue(spans.every((span) => span.name === "reprise.reply" || span.parent === "reprise.reply"))
      const replyEnd = spans.find((span) => span.name === "reprise.reply")!.exit()
      assert.isTrue(replyEnd !== undefined && Exit.isSuccess(replyEnd))
    }))
  it.effect("an attempt's allowance is the reply's; its scope closes in the reply's context", () =>
    Effect.gen(function*() {
      const { closingSaw, open, seen } = generation("finish")
      const reply = yield* Budget.scoped(
        Effect.flatMap(Budget.Budget, (allowance) => Effect.as(Recovery.runOpen(open), allowance))
      )
      const inAttempt = Option.getOrThrow(seen[0].budget)
      assert.isTrue(inAttempt === reply, "the open saw the reply's allowance")
      assert.strictEqual(yield* reply.used, 1)
      // the attempt's scope is closed once its context is given back: a finalizer run by the closing fiber sees the
      // reply's allowance and no scope
      assert.isTrue(Option.getOrUndefined(closingSaw[0].budget) === reply, "the finalizer saw the reply's allowance")
      assert.isTrue(Option.isNone(closingSaw[0].scope))
    }))

  it.effect("interrupted mid-read with a finalizer that dies: the reply and its spans end with the defect as well", () =>
    Effect.gen(function*() {
      const { layer, spans } = recording()
      const started = yield* Deferred.make<void>()
      const { closedWith, open } = generation("never, dies on close", started)
      const fiber = yield* Effect.fork(Effect.provide(Recovery.runOpen(open), layer))
      yield* Deferred.await(started)
      const exit = yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.isFailure(exit) && Cause.isDie(exit.cause) && Cause.isInterrupted(exit.cause))
      assert.strictEqual(closedWith.length, 1)
      for (const span of spans) {
        const ended = span.exit()
        assert.isTrue(ended !== undefined && Exit.isFailure(ended) && Cause.isDie(ended.cause), span.name)
      }
    }))

  it.effect("interrupted, a background response whose cancel dies: the context is given back and the span ended", () =>
    Effect.gen(function*() {
      const { layer, spans } = recording()
      const started = yield* Deferred.make<void>()
      let cancels = 0
      const { open } = generation("never", started, {
        responseId: () => "resp_1",
        settled: () => false,
        continuation: () => Option.none(),
        cancel: Effect.suspend(() => {
          cancels++
          return Effect.die("cancel bug")
        })
      })
      let after: Seen | undefined
      const fiber = yield* Effect.fork(
        Effect.provide(Recovery.runOpen(open), layer).pipe(
          Effect.ensuring(Effect.map(services, (seen) => void (after = seen)))
        )
      )
      yield* Deferred.await(started)
      const exit = yield* Fiber.interrupt(fiber)
      assert.strictEqual(cancels, 1, "the response left behind is cancelled once")
      assert.isTrue(Exit.isFailure(exit) && Cause.isInterrupted(exit.cause) && Cause.isDie(exit.cause))
      assert.isTrue(after !== undefined && Option.isNone(after.budget) && Option.isNone(after.span))
      const replyEnd = spans.find((span) => span.name === "reprise.reply")!.exit()
      assert.isTrue(replyEnd !== undefined && Cause.isDie((replyEnd as Exit.Failure<unknown, unknown>).cause))
    }))
})
