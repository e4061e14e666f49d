/**
 * The key kept out of the spans a provider's requests record. The platform's client records every request and
 * response header as a span attribute (`http.request.header.*`, `http.response.header.*`), redacting only the names of
 * `Headers.currentRedactedNames`: a server that echoes the key in any other header (`x-echo: sk-…`) would have it
 * exported. Around each request the provider's client runs with the app's tracer wrapped ({@link scrubbing}): every
 * span begun there records its name, string attributes and events scrubbed of the key (`redaction.ts`, pieces of
 * 8 characters and more too), and is otherwise the app's span (same ids, parent, sampling, export).
 *
 * @internal
 */
import * as HttpClient from "@effect/platform/HttpClient"
import type * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import type * as Exit from "effect/Exit"
import type * as Option from "effect/Option"
import * as Tracer from "effect/Tracer"

type Scrub = (text: string) => string

const scrubValue = (scrub: Scrub, value: unknown): unknown =>
  typeof value === "string"
    ? scrub(value)
    : Array.isArray(value)
    ? value.map((item) => (typeof item === "string" ? scrub(item) : item))
    : value

const scrubAttributes = (scrub: Scrub, attributes: Record<string, unknown> | undefined) => {
  if (attributes === undefined) return undefined
  const out: Record<string, unknown> = {}
  for (const [key, value] of Object.entries(attributes)) out[scrub(key)] = scrubValue(scrub, value)
  return out
}

/** The app's span, with what is recorded on it scrubbed; everything read from it is the app span's. */
class ScrubbedSpan implements Tracer.Span {
  readonly _tag = "Span"
  constructor(readonly span: Tracer.Span, readonly scrub: Scrub) {}
  get name(): string {
    return this.span.name
  }
  get spanId(): string {
    return this.span.spanId
  }
  get traceId(): string {
    return this.span.traceId
  }
  get parent(): Option.Option<Tracer.AnySpan> {
    return this.span.parent
  }
  get context(): Context.Context<never> {
    return this.span.context
  }
  get status(): Tracer.SpanStatus {
    return this.span.status
  }
  get attributes(): ReadonlyMap<string, unknown> {
    return this.span.attributes
  }
  get links(): ReadonlyArray<Tracer.SpanLink> {
    return this.span.links
  }
  get sampled(): boolean {
    return this.span.sampled
  }
  get kind(): Tracer.SpanKind {
    return this.span.kind
  }
  end(endTime: bigint, exit: Exit.Exit<unknown, unknown>): void {
    this.span.end(endTime, exit)
  }
  attribute(key: string, value: unknown): void {
    this.span.attribute(key, scrubValue(this.scrub, value))
  }
  event(name: string, startTime: bigint, attributes?: Record<string, unknown>): void {
    this.span.event(this.scrub(name), startTime, scrubAttributes(this.scrub, attributes))
  }
  addLinks(links: ReadonlyArray<Tracer.SpanLink>): void {
    this.span.addLinks(links)
  }
}

/**
 * `tracer` with every span it begins recording scrubbed values.
 *
 * @internal
 */
export const scrubbing = (tracer: Tracer.Tracer, scrub: Scrub): Tracer.Tracer =>
  Tracer.make({
    span: (name, parent, context, links, startTime, kind, options) =>
      new ScrubbedSpan(tracer.span(scrub(name), parent, context, links, startTime, kind, options), scrub),
    context: (f, fiber) => tracer.context(f, fiber)
  })

/**
 * `client` with each request run under the current tracer wrapped by {@link scrubbing}: the platform's client span
 * of that request records its headers and URL scrubbed of the key.
 *
 * @internal
 */
export const scrubbedClient = (client: HttpClient.HttpClient, scrub: Scrub): HttpClient.HttpClient =>
  HttpClient.transformResponse(
    client,
    (effect) => Effect.tracerWith((tracer) => Effect.withTracer(effect, scrubbing(tracer, scrub)))
  )
