/**
 * What tokens cost, as the user prices them: a map from model to prices per million tokens. reprise ships no price
 * list (one would go stale); without `Prices` the ledger (see `Ledger`) counts tokens only.
 *
 * A model's entry gives `input` and `output` prices and, optionally, `cacheRead` and `cacheWrite` (each defaults to
 * `input`). The unit is the user's: reprise adds, multiplies and prints the numbers, and names no currency.
 *
 * The variable `REPRISE_PRICES` holds the same map as JSON:
 * `{"gpt-4.1": {"input": 2, "output": 8, "cacheRead": 0.5}, "claude-sonnet-4-5": {"input": 3, "output": 15}}`.
 * An entry is looked up by the model the provider named in its response, then by the model the request asked for.
 *
 * @since 0.1.0
 */
import * as Config from "effect/Config"
import * as ConfigError from "effect/ConfigError"
import * as Context from "effect/Context"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Layer from "effect/Layer"
import * as ParseResult from "effect/ParseResult"
import * as Schema from "effect/Schema"

const Price = Schema.Number.pipe(Schema.finite(), Schema.nonNegative())

/**
 * One model's prices per million tokens.
 *
 * @since 0.1.0
 * @category models
 */
export const ModelPrices = Schema.Struct({
  input: Price,
  output: Price,
  cacheRead: Schema.optional(Price),
  cacheWrite: Schema.optional(Price)
})

/**
 * @since 0.1.0
 * @category models
 */
export interface ModelPrices extends Schema.Schema.Type<typeof ModelPrices> {}

/**
 * Prices by model name.
 *
 * @since 0.1.0
 * @category models
 */
export const PriceList = Schema.Record({ key: Schema.String, value: ModelPrices })

/**
 * @since 0.1.0
 * @category models
 */
export type PriceList = typeof PriceList.Type

/**
 * The prices in effect: none by default.
 *
 * @since 0.1.0
 * @category tags
 */
export class Prices extends Context.Reference<Prices>()("@reprise/core/Prices", {
  defaultValue: (): PriceList => ({})
}) {}

/**
 * @since 0.1.0
 * @category layers
 */
export const layer = (prices: PriceList): Layer.Layer<never> => Layer.succeed(Prices, prices)

/**
 * @since 0.1.0
 * @category config
 */
export const variable = "REPRISE_PRICES"

const decodeList = Schema.decodeUnknownEither(Schema.parseJson(PriceList))

/** A path into the list: the model's name as JSON, then its field (`"gpt-4.1".input`). */
const where = (path: ReadonlyArray<PropertyKey>): string =>
  path.map((key, i) => i === 0 ? JSON.stringify(String(key)) : `.${String(key)}`).join("")

/** What is wrong with one issue, in a few words (Schema's own words name the whole schema, on several lines). */
const describe = (issue: ParseResult.ArrayFormatterIssue): string => {
  if (issue.path.length === 0) {
    return issue._tag === "Transformation"
      ? `not JSON (${issue.message})`
      : `expected an object of model prices, such as {"gpt-4.1": {"input": 2, "output": 8}}`
  }
  if (issue.path.length === 1 && issue._tag === "Type") {
    return `${where(issue.path)}: expected {"input": N, "output": N}, with "cacheRead" and "cacheWrite" optional`
  }
  return issue._tag === "Missing" ? `${where(issue.path)} is missing` : `${where(issue.path)}: ${issue.message}`
}

/**
 * Reads a price list from its JSON text, or says on one line what is wrong with it: `not JSON (…)`, or each issue
 * with its place, `"gpt-4.1".input: Expected a non-negative number, actual -1`.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse = (text: string): Either.Either<PriceList, string> =>
  Either.mapLeft(
    decodeList(text),
    (error) => ParseResult.ArrayFormatter.formatErrorSync(error).map(describe).join("; ")
  )

/**
 * `REPRISE_PRICES`, a JSON price list; absent or blank: no prices.
 *
 * @since 0.1.0
 * @category config
 */
export const config: Config.Config<PriceList> = Config.string(variable).pipe(
  Config.mapOrFail((text) =>
    text.trim() === "" ? Either.right<PriceList>({}) : Either.mapLeft(
      parse(text),
      (message) => ConfigError.InvalidData([], `${variable} is not a price list: ${message}`)
    )
  ),
  Config.withDefault<PriceList>({})
)

/**
 * Prices from `REPRISE_PRICES`.
 *
 * @since 0.1.0
 * @category layers
 */
export const layerConfig: Layer.Layer<never, ConfigError.ConfigError> = Layer.effect(
  Prices,
  Effect.suspend(() => config)
)

/**
 * The prices of the first of `models` the list names.
 *
 * @since 0.1.0
 * @category lookup
 */
export const lookup = (
  prices: PriceList,
  ...models: ReadonlyArray<string | undefined>
): ModelPrices | undefined => {
  for (const model of models) {
    if (model !== undefined && Object.hasOwn(prices, model)) return prices[model]
  }
  return undefined
}
