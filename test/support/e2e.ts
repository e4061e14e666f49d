/**
 * Support for the end-to-end suites: a generation through the real provider layers and the undici client against the
 * loopback simulator, with every `RecoveryNotifications` notification recorded, and small readers over what was
 * recorded (the surfaced error, the notifications of one kind, the previews of one attempt).
 */
import { assert } from "@effect/vitest"
import type * as Generation from "@reprise/core/Generation"
import * as Policy from "@reprise/core/Policy"
import * as Recovery from "@reprise/core/Recovery"
import * as RecoveryNotifications from "@reprise/core/RecoveryNotifications"
import * as HttpProvider from "@reprise/providers/HttpProvider"
import * as ProviderOptions from "@reprise/providers/ProviderOptions"
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Cause, Chunk, Deferred, Duration, Effect, Exit, Option, Redacted, TestClock } from "effect"
import * as fs from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const KEY = "sk-e2e-SECRET-4b1d9c7e2a0f"

export const protocols: ReadonlyArray<ProviderOptions.Protocol> = ProviderOptions.protocols

/** The repository's `fixtures/` folder (wire-format SSE files). */
export const fixturesDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../fixtures")

/** The text of a fixture file, e.g. `fixture("subscription/text.sse")`. */
export const fixture = (name: string): string => fs.readFileSync(path.join(fixturesDir, name), "utf8")

/** A simulator per test, reading fixtures from `fixtures/`. */
export const simulator = Simulator.layer({ fixturesDir })

/** Small backoffs without jitter, for live-clock tests: 5, 10, 20, 20, … ms. */
export const fastBackoff = Policy.layer({
  backoffBase: Duration.millis(5),
  backoffMax: Duration.millis(20),
  jitter: false
})

export const request: Generation.GenerationRequest = {
  model: "sim-model",
  messages: [{ role: "user", text: "hello" }]
}

/** Replaces the simulator's script with one route's. */
export const script = (protocol: ProviderOptions.Protocol, route: SimulatorScript.RouteScript) =>
  Effect.flatMap(Simulator.Simulator, (sim) => sim.setScript({ routes: { [protocol]: route } }))

/** A 200 text/event-stream response whose body is `body`, byte for byte. */
export const sseBody = (body: string): SimulatorScript.Step => ({
  kind: "status",
  status: 200,
  headers: { "content-type": "text/event-stream; charset=utf-8" },
  body
})

/**
 * A reply whose fourth word is 6000 characters long: every protocol's event carrying it spans at least byte 2300 to
 * byte 8000, so a cut at {@link midEvent} bytes lands inside that event, after the text {@link beforeCut}.
 */
export const longReply = (ending: string) => ({ text: `one two three ${"Z".repeat(6000)} ${ending}` })
export const midEvent = 4000
export const beforeCut = "one two three"

export type Notification = RecoveryNotifications.Notification

export interface Options {
  readonly provider?: Partial<HttpProvider.Options> | undefined
  readonly request?: Generation.GenerationRequest | undefined
  /** Run inside `Recovery.disabled`: every failure surfaces unchanged after one attempt. */
  readonly disabled?: boolean | undefined
  /** Called after each notification is recorded. */
  readonly onNotification?: ((n: Notification) => Effect.Effect<void>) | undefined
}

export interface Outcome {
  readonly exit: Exit.Exit<Generation.Reply, Recovery.RecoveryError>
  readonly notes: ReadonlyArray<Notification>
}

/**
 * One reply with recovery through `HttpProvider.layerUndici(protocol, …)` pointed at the simulator. `notes` is the
 * live array of notifications, so a forked run can be inspected while it runs.
 */
export const start = (protocol: ProviderOptions.Protocol, options: Options = {}) =>
  Effect.gen(function*() {
    const sim = yield* Simulator.Simulator
    const notes: Array<Notification> = []
    const generate = Recovery.generate(options.request ?? request)
    const run = (options.disabled === true ? Recovery.disabled(generate) : generate).pipe(
      Effect.provide(HttpProvider.layerUndici(protocol, {
        apiKey: Redacted.make(KEY),
        baseUrl: sim.baseUrl(protocol),
        ...options.provider
      })),
      Effect.provideService(RecoveryNotifications.RecoveryNotifications, {
        notify: (n) =>
          Effect.suspend(() => {
            notes.push(n)
            return options.onNotification?.(n) ?? Effect.void
          })
      }),
      Effect.exit,
      Effect.map((exit): Outcome => ({ exit, notes }))
    )
    return { run, notes }
  })

/** Runs one reply to its end. */
export const generate = (protocol: ProviderOptions.Protocol, options: Options = {}) =>
  Effect.flatMap(start(protocol, options), ({ run }) => run)

/** The committed reply, or a failed assertion naming what happened instead. */
export const committed = (outcome: Outcome): Generation.Reply => {
  if (Exit.isSuccess(outcome.exit)) return outcome.exit.value
  return assert.fail(`expected a commit, got ${Cause.pretty(outcome.exit.cause)}`)
}

/** The error the reply failed with (a typed failure, not a defect or an interruption). */
export const failure = (outcome: Outcome): any => {
  if (Exit.isSuccess(outcome.exit)) return assert.fail("expected a failure, got a commit")
  const error = Cause.failureOption(outcome.exit.cause)
  if (Option.isNone(error)) return assert.fail(`expected a typed failure, got ${Cause.pretty(outcome.exit.cause)}`)
  return error.value
}

/** The notifications of one kind, in order. */
export const ofTag = <T extends Notification["_tag"]>(
  notes: ReadonlyArray<Notification>,
  tag: T
): Array<Extract<Notification, { readonly _tag: T }>> =>
  notes.filter((n): n is Extract<Notification, { readonly _tag: T }> => n._tag === tag)

/** The sequence of notification kinds, previews left out. */
export const outline = (notes: ReadonlyArray<Notification>): Array<string> =>
  notes.filter((n) => n._tag !== "Preview").map((n) => n._tag)

/** The preview events of one attempt. */
export const previews = (notes: ReadonlyArray<Notification>, attempt: number): Array<Generation.GenerationEvent> =>
  ofTag(notes, "Preview").filter((n) => n.attempt === attempt).map((n) => n.event)

/** The preview text of one attempt. */
export const previewText = (notes: ReadonlyArray<Notification>, attempt: number): string =>
  previews(notes, attempt).map((e) => (e._tag === "TextDelta" ? e.text : "")).join("")

/** Lets promise callbacks and socket events run, without any clock. */
export const settle = Effect.promise(() => new Promise<void>((resolve) => setImmediate(resolve))).pipe(
  Effect.repeatN(3)
)

/**
 * Under TestClock: waits (without time passing) until some fiber sleeps until `end` (test-clock milliseconds).
 * Sleeps of timeouts that already completed stay listed by `TestClock.sleeps`, so a wait is found by its end.
 */
export const awaitSleepUntil = (end: number) =>
  Effect.gen(function*() {
    for (let i = 0; i < 1000; i++) {
      if (Chunk.some(yield* TestClock.sleeps(), (at) => at === end)) return
      yield* settle
    }
    assert.fail(`no fiber ever slept until ${end} ms on the test clock`)
  })

/** A Deferred completed by the first notification that `pick` accepts. */
export const when = <A>(pick: (n: Notification) => A | undefined) =>
  Effect.map(Deferred.make<A>(), (deferred) => ({
    await: Deferred.await(deferred),
    onNotification: (n: Notification) => {
      const picked = pick(n)
      return picked === undefined ? Effect.void : Effect.asVoid(Deferred.succeed(deferred, picked))
    }
  }))

/** The JSON payloads of an SSE body's `data:` lines, one per event. */
export const dataLines = (body: string): Array<string> =>
  body.split("\n\n").flatMap((block) =>
    block.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trim())
  )

/** The body without the events whose data matches `drop`. */
export const withoutEvents = (body: string, drop: (data: string) => boolean): string =>
  body.split("\n\n").filter((block) => {
    const data = block.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trim())
    return data.length === 0 ? block.length > 0 : !data.some(drop)
  }).map((block) => `${block}\n\n`).join("")
