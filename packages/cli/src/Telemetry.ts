/**
 * OpenTelemetry export for the CLI: the spans and metrics a command records (`reprise.reply`, `reprise.attempt`,
 * the HTTP client's spans, `effect/Metric`s) sent over OTLP/HTTP to the collector that the standard
 * OpenTelemetry environment variables name, with `@effect/opentelemetry`'s OTLP exporters (no OpenTelemetry SDK).
 *
 * | variable | meaning |
 * |---|---|
 * | `OTEL_EXPORTER_OTLP_ENDPOINT` | base URL: traces go to `{endpoint}/v1/traces`, metrics to `{endpoint}/v1/metrics` |
 * | `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT` | full URL of one signal, used as is |
 * | `OTEL_EXPORTER_OTLP_HEADERS` | `key=value,…` (values percent-decoded) sent with every export; kept `Redacted` |
 * | `OTEL_EXPORTER_OTLP_PROTOCOL` | `http/json` (the default here) or `http/protobuf` |
 * | `OTEL_TRACES_EXPORTER`, `OTEL_METRICS_EXPORTER` | `none` turns that signal off |
 * | `OTEL_SERVICE_NAME` | `service.name` (else `service.name` of `OTEL_RESOURCE_ATTRIBUTES`, else `reprise`) |
 * | `OTEL_SDK_DISABLED` | `true` turns everything off |
 *
 * Nothing exported holds a key: every string of every export (span names, attributes, events, status messages,
 * metric labels, the resource) is scrubbed of the keys named by `keyVariables` (the key, and each piece of it of
 * 8 characters or more, becomes `<redacted>`), whatever recorded it, a header echoed by a server included.
 *
 * Without an endpoint nothing is loaded: the exporters and their HTTP client are a dynamic import, made only when
 * a signal is on, so start-up is unchanged. A bad value (an endpoint that is not an http(s) URL, a header entry that
 * is not `key=value`, `grpc`) is a `ConfigError` naming the variable: exit 2 like any bad setting. A collector that
 * is down, slow or refusing never changes the outcome: nothing is printed, and the final export, made when the
 * layer's scope closes, is given at most {@link shutdownTimeout}.
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as Option from "effect/Option"
import * as Redacted from "effect/Redacted"

/**
 * What the environment asks to export, validated.
 *
 * @since 0.1.0
 * @category models
 */
export interface Settings {
  /** Where spans are posted (a full URL), when traces are on. */
  readonly tracesUrl: string | undefined
  /** Where metrics are posted (a full URL), when metrics are on. */
  readonly metricsUrl: string | undefined
  /** `OTEL_SERVICE_NAME`, else `service.name` of `OTEL_RESOURCE_ATTRIBUTES`, else `reprise`. */
  readonly serviceName: string
  /** `OTEL_RESOURCE_ATTRIBUTES`, parsed: `@effect/opentelemetry` adds them to the resource itself. */
  readonly resourceAttributes: Readonly<Record<string, string>>
  readonly protocol: "http/json" | "http/protobuf"
  /** Sent with every export; values are secrets (tokens), never printed. */
  readonly headers: ReadonlyArray<readonly [name: string, value: Redacted.Redacted<string>]>
}

/**
 * How long the final export may take when the scope closes, per signal (traces and metrics are flushed in
 * parallel): the most an unreachable collector adds to a command's exit.
 *
 * @since 0.1.0
 * @category constants
 */
export const shutdownTimeout: Duration.Duration = Duration.seconds(1)

/** A variable, with an empty value read as unset (as the OpenTelemetry specification says). */
const variable = (name: string): Config.Config<Option.Option<string>> =>
  Config.string(name).pipe(
    Config.option,
    Config.map(Option.filter((value) => value.trim() !== ""))
  )

const invalid = (name: string, message: string) => Either.left(ConfigError.InvalidData([name], message))

/** An http(s) URL; the error describes the value by its kind only (a URL may hold credentials). */
const httpUrl = (name: string) => (value: string): Either.Either<URL, ConfigError.ConfigError> => {
  let url: URL
  try {
    url = new URL(value.trim())
  } catch {
    return invalid(name, "must be an http:// or https:// URL, got a value that is not a URL")
  }
  return url.protocol === "http:" || url.protocol === "https:"
    ? Either.right(url)
    : invalid(name, `must be an http:// or https:// URL, got a ${url.protocol} URL`)
}

/** `{endpoint}/v1/traces`: the signal's path appended to the base URL's own path (its query string kept). */
const signalUrl = (base: URL, path: string): string => {
  const url = new URL(base.href)
  url.pathname = url.pathname.replace(/\/+$/, "") + path
  return url.href
}

/** A token, as an HTTP header name must be. */
const headerName = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/
/** Visible ASCII with inner spaces and tabs: what a header value can carry unchanged. */
const headerValue = /^([\x21-\x7e]([\t\x20-\x7e]*[\x21-\x7e])?)?$/

const HEADERS = "OTEL_EXPORTER_OTLP_HEADERS"

/**
 * `OTEL_EXPORTER_OTLP_HEADERS`: `key=value` entries separated by commas, values percent-decoded (the W3C Baggage
 * format the specification names). Errors say which entry is wrong and why, never what it holds.
 */
const parseHeaders = (
  redacted: Redacted.Redacted<string>
): Either.Either<Settings["headers"], ConfigError.ConfigError> => {
  const result: Array<readonly [string, Redacted.Redacted<string>]> = []
  const entries = Redacted.value(redacted).split(",")
  for (let i = 0; i < entries.length; i++) {
    const entry = entries[i]
    if (entry.trim() === "") continue
    const at = entry.indexOf("=")
    const name = at < 0 ? "" : entry.slice(0, at).trim()
    if (!headerName.test(name)) return invalid(HEADERS, `entry ${i + 1} is not key=value with a header name as key`)
    let value: string
    try {
      value = decodeURIComponent(entry.slice(at + 1).trim())
    } catch {
      return invalid(HEADERS, `the value of ${name} has a malformed percent-encoding`)
    }
    if (!headerValue.test(value)) {
      return invalid(HEADERS, `the value of ${name} holds a character that cannot be sent in an HTTP header`)
    }
    result.push([name, Redacted.make(value)])
  }
  return Either.right(result)
}

const PROTOCOL = "OTEL_EXPORTER_OTLP_PROTOCOL"

const parseProtocol = (value: Option.Option<string>): Either.Either<Settings["protocol"], ConfigError.ConfigError> => {
  const name = Option.getOrElse(value, () => "http/json").trim()
  return name === "http/json" || name === "http/protobuf"
    ? Either.right(name)
    : invalid(PROTOCOL, `must be http/json or http/protobuf (reprise exports over HTTP), got ${JSON.stringify(name)}`)
}

/**
 * `OTEL_RESOURCE_ATTRIBUTES` (`key=value,…`) read as `@effect/opentelemetry` reads it for the resource (an entry
 * that is not one `key=value` is skipped).
 */
const parseResourceAttributes = (text: string): Record<string, string> => {
  const attributes: Record<string, string> = {}
  for (const entry of text.split(",")) {
    const parts = entry.split("=")
    if (parts.length === 2) attributes[parts[0].trim()] = parts[1].trim()
  }
  return attributes
}

const is = (expected: string) => (value: Option.Option<string>): boolean =>
  Option.exists(value, (v) => v.trim().toLowerCase() === expected)

const ENDPOINT = "OTEL_EXPORTER_OTLP_ENDPOINT"
const TRACES_ENDPOINT = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
const METRICS_ENDPOINT = "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"

/**
 * The settings of the standard variables, or `None` when nothing is to be exported: no endpoint for either
 * signal, both signals `none`, or `OTEL_SDK_DISABLED=true`. The other variables are only checked when something is
 * exported, so a bad one cannot fail a command that exports nothing.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<Option.Option<Settings>> = Config.mapOrFail(
  Config.all({
    disabled: variable("OTEL_SDK_DISABLED"),
    endpoint: variable(ENDPOINT),
    tracesEndpoint: variable(TRACES_ENDPOINT),
    metricsEndpoint: variable(METRICS_ENDPOINT),
    tracesExporter: variable("OTEL_TRACES_EXPORTER"),
    metricsExporter: variable("OTEL_METRICS_EXPORTER"),
    serviceName: variable("OTEL_SERVICE_NAME"),
    resourceAttributes: variable("OTEL_RESOURCE_ATTRIBUTES"),
    protocol: variable(PROTOCOL),
    headers: Config.redacted(HEADERS).pipe(Config.withDefault(Redacted.make("")))
  }),
  (raw) =>
    Either.gen(function*() {
      if (is("true")(raw.disabled)) return Option.none()
      // a signal-specific endpoint is the whole URL; the general one is a base the signal's path is appended to
      const url = (name: string, own: Option.Option<string>, path: string, exporter: Option.Option<string>) =>
        Either.gen(function*() {
          if (is("none")(exporter)) return undefined
          if (Option.isSome(own)) return (yield* httpUrl(name)(own.value)).href
          if (Option.isSome(raw.endpoint)) return signalUrl(yield* httpUrl(ENDPOINT)(raw.endpoint.value), path)
          return undefined
        })
      const tracesUrl = yield* url(TRACES_ENDPOINT, raw.tracesEndpoint, "/v1/traces", raw.tracesExporter)
      const metricsUrl = yield* url(METRICS_ENDPOINT, raw.metricsEndpoint, "/v1/metrics", raw.metricsExporter)
      if (tracesUrl === undefined && metricsUrl === undefined) return Option.none()
      const resourceAttributes = Option.match(raw.resourceAttributes, {
        onNone: (): Record<string, string> => ({}),
        onSome: parseResourceAttributes
      })
      const serviceName = Option.getOrElse(
        Option.orElse(
          Option.map(raw.serviceName, (name) => name.trim()),
          () => Option.fromNullable(resourceAttributes["service.name"] || undefined)
        ),
        () => "reprise"
      )
      return Option.some<Settings>({
        tracesUrl,
        metricsUrl,
        serviceName,
        resourceAttributes,
        protocol: yield* parseProtocol(raw.protocol),
        headers: yield* parseHeaders(raw.headers)
      })
    })
)

/**
 * The exporters of `settings`: `OtlpTracer` (installed as the tracer) and `OtlpMetrics` (a snapshot of the global
 * metric registry) over the undici HTTP client of `@effect/platform-node`, whose connections close with the scope.
 * Every export is scrubbed of `secrets` before it is serialized. Everything here is loaded by this call, not before.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerExport = (
  settings: Settings,
  options: {
    readonly serviceVersion: string
    readonly secrets?: ReadonlyArray<Redacted.Redacted<string>> | undefined
  }
): Layer.Layer<never> =>
  Layer.unwrapEffect(Effect.map(Effect.promise(() => import("./internal/otlpExport.js")), (OtlpExport) => {
    const own = { "service.name": settings.serviceName, "service.version": options.serviceVersion }
    return OtlpExport.layer({
      tracesUrl: settings.tracesUrl,
      metricsUrl: settings.metricsUrl,
      // @effect/opentelemetry writes the resource's attributes from OTEL_RESOURCE_ATTRIBUTES and then service.name
      // and service.version: where the variable has them too, give those copies our values, so every copy agrees
      resource: {
        serviceName: own["service.name"],
        serviceVersion: own["service.version"],
        attributes: Object.fromEntries(Object.entries(own).filter(([key]) => key in settings.resourceAttributes))
      },
      headers: Object.fromEntries(settings.headers.map(([name, value]) => [name, Redacted.value(value)])),
      protocol: settings.protocol,
      shutdownTimeout,
      secrets: options.secrets ?? []
    })
  }))

/** The values of the variables that are set (an unreadable one is taken as unset: it holds no key to scrub). */
const secretsIn = (variables: ReadonlyArray<string>): Effect.Effect<Array<Redacted.Redacted<string>>> =>
  Effect.map(
    Effect.forEach(
      variables,
      (name) => Effect.orElseSucceed(Config.option(Config.redacted(name)), () => Option.none())
    ),
    (found) => found.flatMap(Option.toArray)
  )

/**
 * Export for as long as the layer's scope is open, as the standard variables say ({@link config}); nothing at all
 * when they name no endpoint. What is exported is scrubbed of the value of each of `keyVariables` (read only when
 * something is exported): name every variable a key of the command may come from. Closing the scope flushes what
 * is buffered (at most {@link shutdownTimeout}), so provide it around the whole command, inside whatever decides the
 * exit code.
 *
 * @since 0.1.0
 * @category layers
 */
export const layer = (options: {
  readonly serviceVersion: string
  readonly keyVariables?: ReadonlyArray<string> | undefined
}): Layer.Layer<never, ConfigError.ConfigError> =>
  Layer.unwrapEffect(Effect.flatMap(
    config,
    Option.match({
      onNone: () => Effect.succeed(Layer.empty),
      onSome: (settings) =>
        Effect.map(
          secretsIn(options.keyVariables ?? []),
          (secrets) => layerExport(settings, { serviceVersion: options.serviceVersion, secrets })
        )
    })
  ))
