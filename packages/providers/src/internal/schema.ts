/**
 * Building blocks for the event schemas, shaped for decoding one JSON event at a time on the hot path. They accept
 * exactly what `Schema.optional`, `Schema.NullOr` and `Schema.Union` accept for JSON input, and skip the unions those
 * build: a union parse allocates its candidate and issue lists on every call, and the event schemas have one or two per
 * field. `byType` does the same for a union of events told apart by their `type`, which is how the Responses events are
 * typed (`OpenAiResponses.ResponsesEvent`).
 *
 * @internal
 */
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import * as ParseResult from "effect/ParseResult"
import * as Predicate from "effect/Predicate"
import * as Schema from "effect/Schema"
import * as AST from "effect/SchemaAST"

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

/**
 * A member of `byType`: a struct whose `type` is one or more string literals.
 *
 * @internal
 */
export interface Typed extends Schema.Schema.AnyNoContext {
  readonly fields: { readonly type: { readonly literals: ReadonlyArray<string> } }
}

type Parser = (input: unknown, options?: AST.ParseOptions) => Either.Either<unknown, ParseResult.ParseIssue>

type JsonObject = { readonly [key: string | symbol]: unknown }

type Guard = (input: JsonObject, type: string) => unknown

const GuardId = Symbol.for("@reprise/providers/internal/schema/Guard")

/**
 * A member of `byType` with a guard for its hot path: `byType` asks `guard` first and decodes with the schema only
 * what the guard declines (`undefined`), so a value the guard accepts costs a few property reads instead of the
 * schema's parse, and a value it declines is still reported with the schema's issue. The guard must accept nothing
 * the schema rejects and return what the schema returns: test/ResponsesEvent.test.ts checks `byType` against
 * `Schema.Union`, which ignores the guard, over generated values. `type` is the literal the value's `type` matched.
 *
 * @internal
 */
export const guarded = <Fields extends { readonly type: Schema.Schema.AnyNoContext } & Schema.Struct.Fields>(
  schema: Schema.Struct<Fields>,
  guard: (
    input: JsonObject,
    type: Schema.Schema.Type<Fields["type"]>
  ) => Schema.Struct.Type<Fields> | undefined
): Schema.Struct<Fields> => schema.annotations({ [GuardId]: guard })

/**
 * Whether a value is what `optional(nullable(Schema.String))` accepts: absent (`undefined`), `null` or a string.
 *
 * @internal
 */
export const isNullableString = (u: unknown): u is string | null | undefined =>
  u === undefined || u === null || typeof u === "string"

/**
 * Whether a value is what `optional(nullable(Schema.Number))` accepts: absent (`undefined`), `null` or a number.
 *
 * @internal
 */
export const isNullableNumber = (u: unknown): u is number | null | undefined =>
  u === undefined || u === null || typeof u === "number"

const TopGuardId = Symbol.for("@reprise/providers/internal/schema/TopGuard")

/**
 * A schema whose decoding by {@link decodeFast} asks `guard` first: the guard returns the value of an input it
 * recognises, or `undefined` to leave the input to the schema's own parse, which then accepts it or reports its issue.
 * The guard must accept nothing the schema rejects, and return a value that agrees with what the schema returns on
 * every member the schema declares: the guards of the hot events type-check every declared member and return the input
 * itself (what `JSON.parse` built), so members the schema does not declare stay on it, unread by the machines, where
 * the schema's value is a copy without them (a copy would be most of a guard's cost). `Schema.decodeUnknownEither`
 * ignores the guard, so the schema stays the reference the guard is checked against over generated values
 * (test/HotEvents.test.ts). For the events of a protocol that come once per token or so, where the schema's parse costs
 * several times the guard's property reads.
 *
 * @internal
 */
export const withGuard = <S extends Schema.Schema.AnyNoContext>(
  schema: S,
  guard: (input: unknown) => Schema.Schema.Type<S> | undefined
): S => schema.annotations({ [TopGuardId]: guard }) as S

/**
 * The guard `withGuard` gave `schema`, if any.
 *
 * @internal
 */
export const guardOf = <A, I>(schema: Schema.Schema<A, I>): ((input: unknown) => A | undefined) | undefined =>
  Option.getOrUndefined(AST.getAnnotation<(input: unknown) => A | undefined>(schema.ast, TopGuardId))

/**
 * `Schema.decodeUnknownEither(schema)`, with the schema's guard (`withGuard`) first when it has one, returning the
 * decoded value or the schema's `ParseError` bare (no `Either` per value: it runs once per event). It accepts and
 * rejects what the schema does, with the schema's issue, and what it returns agrees with the schema's value on every
 * declared member. The stream's JSON decoder (`internal/sse.ts`, `jsonDecoder`) decodes every event with it.
 *
 * @internal
 */
export const decodeFast = <A, I>(
  schema: Schema.Schema<A, I>
): (input: unknown) => A | ParseResult.ParseError => {
  const validate = Schema.decodeUnknownEither(schema)
  const guard = guardOf(schema)
  return (input) => {
    if (guard !== undefined) {
      const value = guard(input)
      if (value !== undefined) return value
    }
    const result = validate(input)
    return result._tag === "Right" ? result.right : result.left
  }
}

/**
 * The parse of `byType`: one parser per literal of each member (with the member's guard first, when decoding), and
 * `rest` for every other value.
 */
const dispatch = <A>(
  members: ReadonlyArray<Typed>,
  schemas: ReadonlyArray<Schema.Schema.AnyNoContext>,
  parser: (schema: Schema.Schema.AnyNoContext) => Parser,
  decoding: boolean
) => {
  const byName = new Map<
    unknown,
    (input: JsonObject, options: AST.ParseOptions) => Either.Either<unknown, ParseResult.ParseIssue>
  >()
  members.forEach((member, i) => {
    const parse = parser(schemas[i])
    const guard = decoding ? Option.getOrUndefined(AST.getAnnotation<Guard>(member.ast, GuardId)) : undefined
    for (const literal of member.fields.type.literals) {
      byName.set(
        literal,
        guard === undefined ? parse : (input, options) => {
          const value = guard(input, literal)
          return value === undefined ? parse(input, options) : Either.right(value)
        }
      )
    }
  })
  const rest = parser(schemas[members.length])
  const parse = (input: unknown, options: AST.ParseOptions) => {
    if (Predicate.isRecord(input)) {
      const member = byName.get(input.type)
      if (member !== undefined) return member(input, options)
    }
    return rest(input, options)
  }
  // Each value goes through the one schema its `type` selects, so a success is that schema's output, one of `A`.
  return parse as (input: unknown, options: AST.ParseOptions) => Either.Either<A, ParseResult.ParseIssue>
}

/**
 * The union of `members` and `other`, decoded by the input's `type`: a value whose `type` is one of a member's
 * literals is decoded (or encoded) by that member, and reported with its issue; any other value by `other`. It
 * accepts and returns exactly what `Schema.Union(...members, other)` does when `other` accepts none of the members'
 * `type`s (checked over generated values in test/ResponsesEvent.test.ts), with one lookup per value where the union
 * tries its candidates in turn.
 *
 * @internal
 */
export const byType = <const Members extends ReadonlyArray<Typed>, Other extends Schema.Schema.AnyNoContext>(
  members: Members,
  other: Other
): Schema.Schema<
  Schema.Schema.Type<Members[number]> | Schema.Schema.Type<Other>,
  Schema.Schema.Encoded<Members[number]> | Schema.Schema.Encoded<Other>
> => {
  const typeParameters: ReadonlyArray<Schema.Schema.AnyNoContext> = [...members, other]
  return Schema.declare(typeParameters, {
    decode: (...schemas) =>
      dispatch<Schema.Schema.Type<Members[number]> | Schema.Schema.Type<Other>>(
        members,
        schemas,
        ParseResult.decodeUnknownEither,
        true
      ),
    encode: (...schemas) =>
      dispatch<Schema.Schema.Encoded<Members[number]> | Schema.Schema.Encoded<Other>>(
        members,
        schemas,
        ParseResult.encodeUnknownEither,
        false
      )
  })
}
