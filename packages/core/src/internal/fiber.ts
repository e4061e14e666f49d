/**
 * Bookkeeping done in the operation that needs it, on the fiber in hand (`Effect.withFiberRuntime`), instead of an
 * effect per step: a metric's update with the fiber's metric labels (what `Metric.increment` does in two operations
 * and a fiber-ref lookup), span attributes set on the span in hand (what `Effect.annotateCurrentSpan` does in three,
 * looking the span up in the fiber's context), and the fiber's `Clock`. On the path every attempt takes, each of
 * those steps was a few of the 569 Effect operations an attempt ran in figure 3 (docs/performance.md, fix 32).
 *
 * @internal
 */
import * as Clock from "effect/Clock"
import * as Context from "effect/Context"
import type * as Fiber from "effect/Fiber"
import * as FiberRef from "effect/FiberRef"
import type * as Metric from "effect/Metric"
import type * as Tracer from "effect/Tracer"

/**
 * The fiber an operation runs on (`Effect.withFiberRuntime`'s).
 *
 * @internal
 */
export type Running = Fiber.RuntimeFiber<unknown, unknown>

/**
 * A counter's increment by one, tagged with the fiber's metric labels (`Effect.tagMetrics`) as `Metric.increment`
 * tags it.
 *
 * @internal
 */
export const increment = (fiber: Fiber.RuntimeFiber<unknown, unknown>, counter: Metric.Metric.Counter<number>): void =>
  counter.unsafeUpdate(1, fiber.getFiberRef(FiberRef.currentMetricLabels))

/**
 * The fiber's `Clock` (the one `Effect.clock` returns).
 *
 * @internal
 */
export const clock = (fiber: Fiber.RuntimeFiber<unknown, unknown>): Clock.Clock =>
  Context.get(fiber.currentDefaultServices, Clock.Clock)

/**
 * Sets each attribute on `span`, as `Effect.annotateCurrentSpan` sets them on the current span.
 *
 * @internal
 */
export const annotate = (span: Tracer.Span, attributes: Readonly<Record<string, unknown>>): void => {
  for (const key in attributes) span.attribute(key, attributes[key])
}
