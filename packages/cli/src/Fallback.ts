/**
 * The fallback routes of `reprise chat` and `reprise repl`: `--fallback SPEC`, repeatable, or `REPRISE_FALLBACKS`
 * when no `--fallback` is given. With one or more, a reply runs a plan of routes (`Routes` of `@reprise/core`): the
 * primary (`--provider`, `--model`, `--base-url`, `--api-key-env`), then each fallback in the order given.
 *
 * A spec is `PROVIDER:MODEL[@BASE_URL][,OPTION=VALUE...]`:
 *
 * - `PROVIDER` is a wire protocol: `openai-chat`, `openai-responses`, `anthropic` or `subscription`;
 * - `MODEL` is the model the route asks for (it may hold a `:` or an `@`);
 * - `BASE_URL`, after the `@` that is followed by a scheme (`http://`, `https://`), is the route's endpoint; default the
 *   protocol's base URL variable (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`), else its public endpoint. A comma in it
 *   is written `%2C`;
 * - the options: `attempts=N` (sends on the route before a transient failure leaves it, at least 1; default
 *   `Routes.defaultAttempts`), `context=TOKENS` (the context window the route declares: an overflow moves to a later
 *   route that declares a larger one), `key-env=VAR` (the variable holding the route's key; default the protocol's,
 *   `OPENAI_API_KEY` or `ANTHROPIC_API_KEY`).
 *
 * `REPRISE_FALLBACKS` holds specs separated by whitespace or `;`. Every route's key must be set: a missing one is a
 * usage error naming its variable (never a key). The primary route's own limit and window are `--route-attempts` and
 * `--context-window` (`REPRISE_ROUTE_ATTEMPTS`, `REPRISE_CONTEXT_WINDOW`). They, and the circuits' settings
 * (`--circuit-threshold`, `--circuit-cooldown`), belong to a plan: they are checked whenever given, and have no effect
 * without a fallback route, as a reply without a plan has one route and no circuit.
 *
 * @since 0.1.0
 */
import * as Range from "@reprise/core/Range"
import * as ProviderOptions from "@reprise/providers/ProviderOptions"
import * as Config from "effect/Config"
import * as Effect from "effect/Effect"
import * as Either from "effect/Either"
import * as Option from "effect/Option"
import type * as Redacted from "effect/Redacted"
import * as ApiKey from "./internal/apiKey.js"

/**
 * A fallback route as written.
 *
 * @since 0.1.0
 * @category models
 */
export interface Spec {
  readonly protocol: ProviderOptions.Protocol
  readonly model: string
  readonly baseUrl?: string | undefined
  readonly attempts?: number | undefined
  readonly contextWindow?: number | undefined
  readonly keyEnv?: string | undefined
}

/**
 * A fallback route with its endpoint and key.
 *
 * @since 0.1.0
 * @category models
 */
export interface Fallback {
  readonly protocol: ProviderOptions.Protocol
  readonly model: string
  readonly baseUrl: string
  readonly apiKey: Redacted.Redacted<string>
  /** The variable the key was read from. */
  readonly keyVariable: string
  readonly attempts?: number | undefined
  readonly contextWindow?: number | undefined
}

/**
 * @since 0.1.0
 * @category config
 */
export const variable = "REPRISE_FALLBACKS"

/**
 * @since 0.1.0
 * @category config
 */
export const routeAttemptsVariable = "REPRISE_ROUTE_ATTEMPTS"

/**
 * @since 0.1.0
 * @category config
 */
export const contextWindowVariable = "REPRISE_CONTEXT_WINDOW"

const atLeastOne = (name: string): Config.Config<Option.Option<number>> =>
  Range.integer().pipe(Config.validate(Range.atLeastOne), Config.nested(name), Config.option)

/**
 * `REPRISE_ROUTE_ATTEMPTS`: the primary route's sends before a transient failure leaves it, an integer, at least 1;
 * unset by default (`Routes.defaultAttempts`).
 *
 * @since 0.1.0
 * @category config
 */
export const routeAttemptsConfig: Config.Config<Option.Option<number>> = atLeastOne(routeAttemptsVariable)

/**
 * `REPRISE_CONTEXT_WINDOW`: the context window the primary route declares, in tokens, an integer, at least 1; unset
 * by default.
 *
 * @since 0.1.0
 * @category config
 */
export const contextWindowConfig: Config.Config<Option.Option<number>> = atLeastOne(contextWindowVariable)

/**
 * The form of a spec, for messages.
 *
 * @since 0.1.0
 * @category constants
 */
export const form = "PROVIDER:MODEL[@BASE_URL][,OPTION=VALUE...]"

const optionNames = "attempts=N, context=TOKENS, key-env=VAR"

/** The `@` that starts a base URL: one followed by a scheme. */
const urlStart = /@(?=[A-Za-z][A-Za-z0-9+.-]*:\/\/)/

/** An `@` followed by what looks like an address without its scheme (`@localhost:8080`, `@proxy/v1`). */
const bareAddress = /@([^@]*[/:][^@]*)$/

const wholeNumber = /^[0-9]+$/

/**
 * Reads one spec; on failure, what is wrong with it (the start of a sentence, without the spec).
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse = (spec: string): Either.Either<Spec, string> => {
  const colon = spec.indexOf(":")
  if (colon < 0) return Either.left(`expected ${form}`)
  const provider = spec.slice(0, colon)
  if (!(ProviderOptions.protocols as ReadonlyArray<string>).includes(provider)) {
    return Either.left(
      `unknown provider ${JSON.stringify(provider)}: expected one of ${ProviderOptions.protocols.join(", ")}`
    )
  }
  const protocol = provider as ProviderOptions.Protocol
  const [target = "", ...options] = spec.slice(colon + 1).split(",")
  const at = target.search(urlStart)
  const model = at < 0 ? target : target.slice(0, at)
  const baseUrl = at < 0 ? undefined : target.slice(at + 1)
  if (model.trim() === "") return Either.left(`the model is empty (${form})`)
  const bare = at < 0 ? bareAddress.exec(target) : null
  if (bare !== null) {
    return Either.left(`the base URL must start with http:// or https://, got ${JSON.stringify(bare[1])}`)
  }
  if (baseUrl !== undefined) {
    const problem = ProviderOptions.baseUrlProblem(baseUrl)
    if (problem !== undefined) return Either.left(`the base URL ${problem}, got ${JSON.stringify(baseUrl)}`)
  }
  const result: { -readonly [K in keyof Spec]: Spec[K] } = { protocol, model, baseUrl }
  const seen = new Set<string>()
  for (const option of options) {
    const eq = option.indexOf("=")
    if (option === "") return Either.left(`an option is empty (a trailing or doubled comma)`)
    if (eq < 0) return Either.left(`option ${JSON.stringify(option)} needs a value (${optionNames})`)
    const name = option.slice(0, eq)
    const value = option.slice(eq + 1)
    if (seen.has(name)) return Either.left(`option ${name} is given twice`)
    seen.add(name)
    switch (name) {
      case "attempts":
      case "context": {
        const n = Number(value)
        if (!wholeNumber.test(value) || n < 1 || !Number.isSafeInteger(n)) {
          return Either.left(`${name} must be a whole number, at least 1, got ${JSON.stringify(value)}`)
        }
        if (name === "attempts") result.attempts = n
        else result.contextWindow = n
        break
      }
      case "key-env":
        if (!ApiKey.variableName.test(value)) {
          return Either.left(`key-env must name an environment variable, got ${JSON.stringify(value)}`)
        }
        result.keyEnv = value
        break
      default:
        return Either.left(`unknown option ${JSON.stringify(name)} (${optionNames})`)
    }
  }
  return Either.right(result)
}

/**
 * The specs of `REPRISE_FALLBACKS`: separated by whitespace or `;`, empty ones left out.
 *
 * @since 0.1.0
 * @category parsing
 */
export const split = (text: string): ReadonlyArray<string> => text.split(/[\s;]+/).filter((spec) => spec !== "")

/**
 * The variable a spec's key is read from, when the spec names its provider: its `key-env`, else the protocol's.
 * `undefined` for a spec that cannot be read (its error is reported by {@link resolve}).
 *
 * @since 0.1.0
 * @category parsing
 */
export const keyVariable = (spec: string): string | undefined =>
  Either.match(parse(spec), {
    onLeft: () => undefined,
    onRight: (parsed) => parsed.keyEnv ?? ProviderOptions.apiKeyVariable(parsed.protocol)
  })

/**
 * The variables the keys of the fallback routes may be read from: each spec's of `flags` and of `REPRISE_FALLBACKS`
 * that can be read (what the CLI scrubs from its output, whichever of them the routes use).
 *
 * @since 0.1.0
 * @category parsing
 */
export const keyVariables = (flags: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<string>> =>
  Effect.map(
    Effect.orElseSucceed(Config.option(Config.string(variable)), Option.none),
    (fromEnv) => [
      ...new Set([...flags, ...split(Option.getOrElse(fromEnv, () => ""))].flatMap((spec) => {
        const name = keyVariable(spec)
        return name === undefined ? [] : [name]
      }))
    ]
  )

/**
 * The route of a spec with its endpoint and key; `route` is its place in the plan (2 for the first fallback). On
 * failure, the message of a usage error, naming where the spec came from (`--fallback` or `REPRISE_FALLBACKS`).
 *
 * @since 0.1.0
 * @category resolving
 */
export const resolveOne = (
  spec: string,
  source: string,
  route: number
): Effect.Effect<Fallback, string> =>
  Effect.gen(function*() {
    const parsed = yield* Either.mapLeft(parse(spec), (problem) => `${source} ${JSON.stringify(spec)}: ${problem}`)
    const where = `route ${route} (${parsed.protocol} ${parsed.model})`
    const baseUrl = parsed.baseUrl ?? (yield* Effect.mapError(
      ProviderOptions.baseUrlConfig(parsed.protocol),
      (error) => `${where}: ${String(error)}`
    ))
    const keyVariable = parsed.keyEnv ?? ProviderOptions.apiKeyVariable(parsed.protocol)
    const apiKey = yield* Effect.mapError(
      ApiKey.read(keyVariable, parsed.keyEnv === undefined ? ` (or name another variable with key-env=VAR)` : ""),
      (problem) => `${where}: ${problem}`
    )
    return {
      protocol: parsed.protocol,
      model: parsed.model,
      baseUrl,
      apiKey,
      keyVariable,
      ...(parsed.attempts === undefined ? {} : { attempts: parsed.attempts }),
      ...(parsed.contextWindow === undefined ? {} : { contextWindow: parsed.contextWindow })
    }
  })

/**
 * The fallback routes: each `--fallback` given, in order, else the specs of `REPRISE_FALLBACKS`; none when neither
 * is. On failure, the message of a usage error.
 *
 * @since 0.1.0
 * @category resolving
 */
export const resolve = (flags: ReadonlyArray<string>): Effect.Effect<ReadonlyArray<Fallback>, string> =>
  Effect.gen(function*() {
    const fromEnv = flags.length === 0
    const specs = fromEnv
      ? split(
        Option.getOrElse(yield* Effect.orElseSucceed(Config.option(Config.string(variable)), Option.none), () => "")
      )
      : flags
    const source = fromEnv ? variable : "--fallback"
    return yield* Effect.forEach(specs, (spec, i) => resolveOne(spec, source, i + 2))
  })
