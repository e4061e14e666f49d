/**
 * Building blocks for the event schemas, shaped for decoding one JSON event at a time on the hot path. They accept
 * exactly what `Schema.optional` and `Schema.NullOr` accept for JSON input, and skip the unions those build: a union
 * parse allocates its candidate and issue lists on every call, and the event schemas have one or two per field
 * (see `docs/performance.md`, fix 6).
 *
 * @internal
 */
import * as Either from "effect/Either"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

/**
 * An optional member of a JSON object: absent, or present with a value of `schema`. JSON has no `undefined`, so the
 * `exact` form loses nothing and saves the `| undefined` union of `Schema.optional`.
 *
 * @internal
 */
export const optional = <S extends Schema.Schema.All>(schema: S) => Schema.optionalWith(schema, { exact: true })

/**
 * `schema | null`, accepting what `Schema.NullOr(schema)` accepts: `null` is returned as it is, any other value is
 * decoded (or encoded) by `schema`, whose issue is reported for a value that is neither.
 *
 * @internal
 */
export const nullable = <A, I, R>(schema: Schema.Schema<A, I, R>): Schema.Schema<A | null, I | null, R> =>
  Schema.declare([schema], {
    decode: (inner) => {
      const decode = ParseResult.decodeUnknown(inner)
      return (input, options) => input === null ? Either.right(null) : decode(input, options)
    },
    encode: (inner) => {
      const encode = ParseResult.encodeUnknown(inner)
      return (input, options) => input === null ? Either.right(null) : encode(input, options)
    }
  }, { identifier: `${String(schema.ast)} | null` })
