import { assert, describe, it } from "@effect/vitest"
import {
  Clock,
  Duration,
  Effect,
  Exit,
  FastCheck as fc,
  Fiber,
  Layer,
  Option,
  Random,
  Ref,
  Stream,
  TestClock
} from "effect"
import * as Budget from "../src/Budget.js"
import * as Generation from "../src/Generation.js"
import * as ProviderFailure from "../src/ProviderFailure.js"
import * as Recovery from "../src/Recovery.js"
import * as RecoveryNotifications from "../src/RecoveryNotifications.js"
import * as TransportError from "../src/TransportError.js"

type Fault =
  | { readonly kind: "ok" | "reset" | "eof" | "503" | "401" | "timeout" }
  | { readonly kind: "429"; readonly retryAfterMs: number }

const fault: fc.Arbitrary<Fault> = fc.oneof(
  { weight: 2, arbitrary: fc.constant({ kind: "ok" } as const) },
  { weight: 3, arbitrary: fc.constantFrom(...(["reset", "eof", "503", "timeout"] as const)).map((kind) => ({ kind })) },
  { weight: 1, arbitrary: fc.constant({ kind: "401" } as const) },
  {
    weight: 2,
    arbitrary: fc.integer({ min: 0, max: 200_000 }).map((retryAfterMs) => ({ kind: "429", retryAfterMs } as const))
  }
)

const textOf = (send: number) => `answer of send ${send}`

/** One physical send per run; send k plays faults[k-1] (or succeeds past the end). Sends take 0–3 s. */
const generationOf = (faults: ReadonlyArray<Fault>, durations: ReadonlyArray<number>, sends: Ref.Ref<number>) =>
  Stream.unwrap(Effect.gen(function*() {
    yield* Budget.reserve
    const n = yield* Ref.updateAndGet(sends, (k) => k + 1)
    const f = faults[n - 1] ?? { kind: "ok" }
    const body = Stream.make(
      Generation.TextDelta({ text: textOf(n).slice(0, 7) }),
      Generation.TextDelta({ text: textOf(n).slice(7) })
    ).pipe(
      Stream.concat(
        Stream.fromEffect(Effect.sleep(Duration.millis(durations[(n - 1) % durations.length] ?? 0))).pipe(Stream.drain)
      )
    )
    const fail = (e: ProviderFailure.ProviderFailure) => Stream.concat(body, Stream.fail(e))
    switch (f.kind) {
      case "ok":
        return Stream.concat(body, Stream.make(Generation.Finish({ reason: "stop", providerReason: "stop" })))
      case "eof":
        return body
      case "reset":
        return fail(new TransportError.TransportError({ reason: "Reset" }))
      case "timeout":
        return fail(new TransportError.TransportError({ reason: "Timeout" }))
      case "503":
        return fail(ProviderFailure.fromHttpStatus({ status: 503 }))
      case "401":
        return fail(ProviderFailure.fromHttpStatus({ status: 401 }))
      case "429":
        return fail(ProviderFailure.fromHttpStatus({ status: 429, retryAfter: Duration.millis(f.retryAfterMs) }))
    }
  }))

describe("Recovery properties", () => {
  it.effect.prop(
    "for any faults: sends ≤ maxAttempts, no wait crosses the deadline, the committed text is the terminal attempt's",
    {
      faults: fc.array(fault, { minLength: 0, maxLength: 14 }),
      durations: fc.array(fc.integer({ min: 0, max: 3_000 }), { minLength: 1, maxLength: 5 }),
      maxAttempts: fc.integer({ min: 1, max: 12 }),
      deadlineSeconds: fc.integer({ min: 1, max: 700 }),
      seed: fc.integer()
    },
    ({ deadlineSeconds, durations, faults, maxAttempts, seed }) =>
      Effect.gen(function*() {
        const sends = yield* Ref.make(0)
        const log = yield* Ref.make<Array<readonly [number, RecoveryNotifications.Notification]>>([])
        const notifications = RecoveryNotifications.layerCallback((n) =>
          Effect.flatMap(Clock.currentTimeMillis, (now) => Ref.update(log, (l) => [...l, [now, n] as const]))
        )
        const start = yield* Clock.currentTimeMillis
        const deadlineAt = start + deadlineSeconds * 1000
        const fiber = yield* Effect.fork(
          Recovery.run(generationOf(faults, durations, sends)).pipe(
            Effect.provide(
              Layer.merge(notifications, Budget.layer({ maxAttempts, deadline: Duration.seconds(deadlineSeconds) }))
            ),
            Effect.withRandom(Random.make(seed))
          )
        )
        for (let i = 0; i < 50 && Option.isNone(yield* fiber.poll); i++) yield* TestClock.adjust(Duration.hours(1))
        const exit = yield* Fiber.await(fiber)
        const n = yield* Ref.get(sends)
        const entries = yield* Ref.get(log)

        // Bounded physical sends.
        assert.isAtMost(n, maxAttempts)
        assert.isAtLeast(n, 1)
        // Every attempt starts before the deadline; every wait ends before it.
        for (const [at, notification] of entries) {
          if (notification._tag === "AttemptStarted") assert.isBelow(at, deadlineAt)
          if (notification._tag === "RetryScheduled") {
            assert.isBelow(at + Duration.toMillis(notification.delay), deadlineAt)
          }
        }
        // A permanent fault is never replayed.
        const firstStop = faults.findIndex((f) => f.kind === "ok" || f.kind === "401")
        if (firstStop >= 0) assert.isAtMost(n, firstStop + 1)

        if (Exit.isSuccess(exit)) {
          // The committed text is exactly the text of the one attempt that reached its terminal: the last send.
          assert.strictEqual(exit.value.text, textOf(n))
          assert.strictEqual(faults[n - 1]?.kind ?? "ok", "ok")
          assert.strictEqual(exit.value.attempts, n)
          const committed = entries.filter(([, e]) => e._tag === "Committed")
          assert.strictEqual(committed.length, 1)
        } else {
          const error = yield* Effect.flip(exit)
          assert.notStrictEqual(faults[n - 1]?.kind ?? "ok", "ok")
          if (error._tag === "RecoveryExhausted") {
            assert.strictEqual(error.attempts, n)
            assert.strictEqual(error.errors.length, n)
          } else {
            assert.strictEqual(faults[n - 1]?.kind, "401")
          }
          assert.isFalse(entries.some(([, e]) => e._tag === "Committed"))
        }
      }),
    { fastCheck: { numRuns: 200 } }
  )
})
