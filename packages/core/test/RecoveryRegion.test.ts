/**
 * The regions `Recovery` runs a reply and its attempts in (fix 36 of docs/performance.md): the reply's `Budget` and
 * span, and an attempt's observed `Budget`, `Resumption`, span and `Scope`, are in the fiber's context while they run
 * and gone after, whether the reply commits, fails, dies or is interrupted; an attempt's scope is closed with its read's
 * exit before what follows is decided; a scope whose finalizer dies ends the reply with that defect; and each span
 * ends with its exit, the attempt's inside the reply's.
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
const generation = (end: "finish" | "reset" | "dies on close" | "never", started?: Deferred.Deferred<void>) => {
  const seen: Array<Seen> = []
  const closedWith: Array<Exit.Exit<unknown, unknown>> = []
  const open = Effect.gen(function*() {
    yield* Budget.reserve
    seen.push(yield* services)
    yield* Effect.addFinalizer((exit) =>
      Effect.suspend(() => {
        closedWith.push(exit)
        return end === "dies on close" ? Effect.die("finalizer bug") : Effect.void
      })
    )
    if (started !== undefined) yield* Deferred.succeed(started, undefined)
    let done = false
    const pull: Provider.Pull<TransportError.TransportError | Budget.BudgetExhausted> = Effect.suspend(() => {
      if (end === "never") return Effect.never
      if (done) return Effect.fail(Option.none())
      done = true
      return end === "reset"
        ? Effect.fail(Option.some(new TransportError.TransportError({ reason: "Reset", detail: "cut" })))
        : Effect.succeed(Chunk.make(Generation.TextDelta({ text: "hi" }), finish))
    })
    return pull
  })
  return { stream: Provider.fromPull(open), seen, closedWith }
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
      const { seen, stream } = generation("finish")
      // a hook after the commit runs in the reply's region, not in its attempt's
      let afterCommit: Seen | undefined
      const reply = yield* Recovery.run(stream, {
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
      const { closedWith, seen, stream } = generation("reset")
      const exit = yield* Effect.exit(Recovery.run(stream).pipe(Recovery.disabled))
      assert.isTrue(Exit.isFailure(exit))
      assert.strictEqual(seen.length, 1)
      assert.strictEqual(closedWith.length, 1)
      const closed = closedWith[0]
      assert.isTrue(Exit.isFailure(closed) && Option.isSome(Cause.failureOption(closed.cause)))
      const after = yield* services
      assert.isTrue(Option.isNone(after.budget) && Option.isNone(after.scope))
      const committed = generation("finish")
      yield* Recovery.run(committed.stream)
      assert.deepStrictEqual(committed.closedWith, [Exit.void])
    }))

  it.effect("a finalizer that dies as the attempt's scope closes ends the reply with that defect, its spans ended", () =>
    Effect.gen(function*() {
      const { layer, spans } = recording()
      const { stream } = generation("dies on close")
      const exit = yield* Effect.exit(Effect.provide(Recovery.run(stream), layer))
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
      const { closedWith, stream } = generation("never", started)
      const fiber = yield* Effect.fork(
        Effect.onInterrupt(
          Effect.provide(Recovery.run(stream), layer),
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
})
