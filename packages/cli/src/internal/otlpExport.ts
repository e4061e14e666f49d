/**
 * The OTLP exporters of `Telemetry.layerExport`, in a module of their own: `Telemetry` imports it only when
 * something is to be exported, so the bundle keeps it (and what it alone needs) out of every other start-up.
 *
 * What is exported is scrubbed of every key the process holds, as the providers scrub their errors
 * (`Redaction.scrubber`: the key and each piece of 8 characters or more): each string of the data posted (span names,
 * attributes, events, status messages, the resource, metric labels) before it is serialized, whichever protocol.
 */
import * as OtlpMetrics from "@effect/opentelemetry/OtlpMetrics"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import * as Redaction from "@reprise/providers/Redaction"
import type * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Layer from "effect/Layer"
import type * as Redacted from "effect/Redacted"

/** @internal */
export interface Options {
  readonly tracesUrl: string | undefined
  readonly metricsUrl: string | undefined
  readonly resource: {
    readonly serviceName: string
    readonly serviceVersion: string
    readonly attributes: Record<string, unknown>
  }
  readonly headers: Readonly<Record<string, string>>
  readonly protocol: "http/json" | "http/protobuf"
  readonly shutdownTimeout: Duration.Duration
  /** The keys nothing exported may hold, or any piece of. */
  readonly secrets: ReadonlyArray<Redacted.Redacted<string>>
}

/**
 * `value` with every string in it (object keys too) scrubbed; numbers, booleans, bigints and byte arrays as they are.
 * The data is what `@effect/opentelemetry` builds for one export: plain objects and arrays.
 *
 * @internal
 */
export const scrubData = (scrub: (text: string) => string) => {
  const walk = (value: unknown): unknown => {
    if (typeof value === "string") return scrub(value)
    if (Array.isArray(value)) return value.map(walk)
    if (value === null || typeof value !== "object" || ArrayBuffer.isView(value)) return value
    const out: Record<string, unknown> = {}
    for (const [key, item] of Object.entries(value)) out[scrub(key)] = walk(item)
    return out
  }
  return walk
}

/** The serialization of `protocol`, with the data scrubbed first. */
const serialization = (
  protocol: Options["protocol"],
  secrets: Options["secrets"]
): Layer.Layer<OtlpSerialization.OtlpSerialization> => {
  const encode = protocol === "http/protobuf" ? OtlpSerialization.layerProtobuf : OtlpSerialization.layerJson
  if (secrets.length === 0) return encode
  const scrubs = secrets.map(Redaction.scrubber)
  const walk = scrubData((text) => scrubs.reduce((acc, scrub) => scrub(acc), text))
  return Layer.effect(
    OtlpSerialization.OtlpSerialization,
    Effect.map(OtlpSerialization.OtlpSerialization, (encoder) => ({
      traces: (data) => encoder.traces(walk(data)),
      metrics: (data) => encoder.metrics(walk(data)),
      logs: (data) => encoder.logs(walk(data))
    }))
  ).pipe(Layer.provide(encode))
}

/** @internal */
export const layer = (options: Options): Layer.Layer<never> => {
  const { headers, resource, shutdownTimeout } = options
  return Layer.mergeAll(
    options.tracesUrl === undefined
      ? Layer.empty
      : OtlpTracer.layer({ url: options.tracesUrl, resource, headers, shutdownTimeout }),
    options.metricsUrl === undefined
      ? Layer.empty
      : OtlpMetrics.layer({ url: options.metricsUrl, resource, headers, shutdownTimeout })
  ).pipe(Layer.provide(Layer.merge(NodeHttpClient.layerUndici, serialization(options.protocol, options.secrets))))
}
