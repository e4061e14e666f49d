/**
 * The OTLP exporters of `Telemetry.layerExport`, in a module of their own: `Telemetry` imports it only when
 * something is to be exported, so the bundle keeps it (and what it alone needs) out of every other start-up.
 */
import * as OtlpMetrics from "@effect/opentelemetry/OtlpMetrics"
import * as OtlpSerialization from "@effect/opentelemetry/OtlpSerialization"
import * as OtlpTracer from "@effect/opentelemetry/OtlpTracer"
import * as NodeHttpClient from "@effect/platform-node/NodeHttpClient"
import type * as Duration from "effect/Duration"
import * as Layer from "effect/Layer"

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
  ).pipe(Layer.provide(Layer.merge(
    NodeHttpClient.layerUndici,
    options.protocol === "http/protobuf" ? OtlpSerialization.layerProtobuf : OtlpSerialization.layerJson
  )))
}
