/**
 * The services `Recovery` provides for a reply and for an attempt (`internal/region.ts`): in fewer operations than
 * `Effect.provide` and `Effect.scoped`, with what those guarantee. The services are seen inside and gone after, whether
 * the region succeeds, fails, dies or is interrupted; the scope is made before and closed with the region's exit, after
 * the context is restored; a scope that fails to close fails the region, beside the region's own failure.
 */
import { assert, describe, it } from "@effect/vitest"
import { Cause, Context, Deferred, Effect, Exit, Fiber, Option, Scope } from "effect"
import * as Region from "../src/internal/region.js"

class Service extends Context.Tag("test/Region/Service")<Service, string>() {}

const seen = Effect.map(Effect.serviceOption(Service), Option.getOrUndefined)

describe("Region.provide", () => {
  it.effect("provides the services inside, and restores the context after a success, a failure and a defect", () =>
    Effect.gen(function*() {
      const context = Context.make(Service, "inside")
      assert.strictEqual(yield* Region.provide(seen, context), "inside")
      assert.isUndefined(yield* seen)
      const failed = yield* Effect.exit(Region.provide(Effect.zipRight(seen, Effect.fail("boom")), context))
      assert.deepStrictEqual(failed, Exit.fail("boom"))
      assert.isUndefined(yield* seen)
      const died = yield* Effect.exit(Region.provide(Effect.die("bug"), context))
      assert.isTrue(Exit.isFailure(died) && Cause.isDie(died.cause))
      assert.isUndefined(yield* seen)
    }))

  it.effect("overrides a service already provided, and gives it back after", () =>
    Effect.gen(function*() {
      const inner = yield* Region.provide(seen, Context.make(Service, "inner"))
      assert.strictEqual(inner, "inner")
      assert.strictEqual(yield* seen, "outer")
    }).pipe(Effect.provideService(Service, "outer")))

  it.effect("an interrupted region restores the context of the fiber that goes on", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      const fiber = yield* Effect.fork(
        Effect.onInterrupt(
          Region.provide(
            Effect.zipRight(Deferred.succeed(started, undefined), Effect.never),
            Context.make(Service, "x")
          ),
          // what runs after the region, in the same fiber, sees the context from before it
          () => Effect.flatMap(seen, (value) => Effect.sync(() => assert.isUndefined(value)))
        )
      )
      yield* Deferred.await(started)
      const exit = yield* Fiber.interrupt(fiber)
      assert.isTrue(Exit.isInterrupted(exit))
    }))
})

/** `self` in a scoped region with no services, whose scope tells `told` the exit it is closed with. */
const closeTold = <A, E>(self: Effect.Effect<A, E>, told: (exit: Exit.Exit<unknown, unknown>) => void) =>
  Region.scoped(
    Effect.zipRight(
      Effect.flatMap(Effect.scope, (scope) => Scope.addFinalizerExit(scope, (exit) => Effect.sync(() => told(exit)))),
      self
    ),
    () => Context.empty()
  )

describe("Region.scoped", () => {
  it.effect("provides its scope and the services, and closes the scope with the region's exit once they are gone", () =>
    Effect.gen(function*() {
      const log: Array<string> = []
      const region = (body: Effect.Effect<string, string>) =>
        Region.scoped(
          Effect.zipRight(
            Effect.flatMap(Effect.scope, (scope) =>
              Scope.addFinalizer(
                scope,
                Effect.flatMap(Effect.exit(seen), (value) =>
                  Effect.sync(() => {
                    // the finalizer runs after the region's context is restored
                    log.push(`closed, service ${Exit.isSuccess(value) ? String(value.value) : "?"}`)
                  }))
              )),
            body
          ),
          () => Context.make(Service, "inside")
        )
      assert.strictEqual(yield* region(Effect.as(seen, "ok")), "ok")
      assert.deepStrictEqual(log, ["closed, service undefined"])
      const failed = yield* Effect.exit(region(Effect.fail("boom")))
      assert.deepStrictEqual(failed, Exit.fail("boom"))
      assert.deepStrictEqual(log, ["closed, service undefined", "closed, service undefined"])
    }))

  it.effect("the scope is closed with the exit: a finalizer sees the region's failure", () =>
    Effect.gen(function*() {
      let closedWith: Exit.Exit<unknown, unknown> | undefined
      const exit = yield* Effect.exit(closeTold(Effect.fail("boom"), (exit) => (closedWith = exit)))
      assert.deepStrictEqual(exit, Exit.fail("boom"))
      assert.deepStrictEqual(closedWith, Exit.fail("boom"))
    }))

  it.effect("a scope that fails to close fails the region, after the region's own failure", () =>
    Effect.gen(function*() {
      const failed = yield* Effect.exit(
        Region.scoped(
          Effect.zipRight(
            Effect.flatMap(Effect.scope, (scope) => Scope.addFinalizer(scope, Effect.die("finalizer"))),
            Effect.fail("boom")
          ),
          () => Context.empty()
        )
      )
      assert.isTrue(Exit.isFailure(failed))
      if (Exit.isFailure(failed)) {
        assert.deepStrictEqual(Cause.failures(failed.cause).pipe((c) => [...c]), ["boom"])
        assert.deepStrictEqual([...Cause.defects(failed.cause)], ["finalizer"])
        assert.isTrue(Cause.isSequentialType(failed.cause))
      }
    }))

  it.effect("an interrupted region closes its scope", () =>
    Effect.gen(function*() {
      const started = yield* Deferred.make<void>()
      let closed: Exit.Exit<unknown, unknown> | undefined
      const fiber = yield* Effect.fork(
        closeTold(Effect.zipRight(Deferred.succeed(started, undefined), Effect.never), (exit) => (closed = exit))
      )
      yield* Deferred.await(started)
      yield* Fiber.interrupt(fiber)
      assert.isDefined(closed)
      assert.isTrue(closed !== undefined && Exit.isInterrupted(closed))
    }))
})
