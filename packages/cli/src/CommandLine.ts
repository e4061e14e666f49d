/**
 * The command-line conventions reprise keeps that @effect/cli 0.77 does not, applied to the arguments before
 * @effect/cli parses them. Which options a subcommand has, and which of them take a value, is read from the
 * subcommand's own @effect/cli usage, so nothing here repeats the option list.
 *
 * - A single-value option given more than once takes its last value, as git and curl do: a wrapper script can set
 *   a default and let the user's own flag override it. (@effect/cli rejects the second occurrence.) A repeatable
 *   option (`Options.repeated`, such as `--fallback`) keeps every value, in order.
 * - A flag given more than once is the flag once.
 * - `--name=value` is the same as `--name value`.
 * - An option the subcommand does not have is a usage error that names it, with the nearest real option as a
 *   suggestion. (@effect/cli takes an unknown `--flag` for the positional argument and then complains about the
 *   argument after it.)
 * - A number is written in decimal notation: an integer option takes digits (`-5`, `600`) and a number option digits
 *   with a decimal point (`2.5`). @effect/cli would also take what JavaScript's `Number` takes (`0x10`, `1e3`,
 *   `Infinity`); reprise refuses those with a usage error that names the option.
 * - A word outside an option's choices (`Options.choice`: `--provider`, `--preview`) is a usage error that names the
 *   option and the words it takes. (@effect/cli's own message names only the words.)
 * - `--` ends the options: what follows is passed on untouched. The positionals are passed after a `--` of their
 *   own, so a prompt such as `no` is never read as the value of the flag before it.
 *
 * @since 0.1.0
 */
import * as AutoCorrect from "@effect/cli/AutoCorrect"
import * as CliConfig from "@effect/cli/CliConfig"
import type * as Usage from "@effect/cli/Usage"
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import { UsageError } from "./ExitCode.js"

/** Options @effect/cli adds to every command, and whether they take a value. */
const builtIn: ReadonlyArray<readonly [string, boolean]> = [
  ["--help", false],
  ["-h", false],
  ["--version", false],
  ["--wizard", false],
  ["--completions", true],
  ["--log-level", true]
]

/**
 * Every option name in a usage, and whether it takes a value.
 *
 * @since 0.1.0
 * @category usage
 */
export const optionsOf = (usage: Usage.Usage): ReadonlyMap<string, boolean> => {
  const names = new Map(builtIn)
  named(usage, (name, accepted) => names.set(name, Option.isSome(accepted)))
  return names
}

/**
 * Calls `f` with every option name in a usage, the values it accepts (@effect/cli's placeholder or choices) and
 * whether it may be repeated.
 */
const named = (
  usage: Usage.Usage,
  f: (name: string, accepted: Option.Option<string>, repeated: boolean) => void
): void => {
  const walk = (u: Usage.Usage, repeated: boolean): void => {
    switch (u._tag) {
      case "Named":
        for (const name of u.names) if (name.startsWith("-")) f(name, u.acceptedValues, repeated)
        return
      case "Optional":
        return walk(u.usage, repeated)
      case "Repeated":
        return walk(u.usage, true)
      case "Alternation":
      case "Concat":
        walk(u.left, repeated)
        return walk(u.right, repeated)
      case "Empty":
      case "Mixed":
        return
    }
  }
  walk(usage, false)
}

/** The options of a usage that may be given more than once, each value kept. */
const repeatedOf = (usage: Usage.Usage): ReadonlySet<string> => {
  const repeated = new Set<string>()
  named(usage, (name, _, isRepeated) => {
    if (isRepeated) repeated.add(name)
  })
  return repeated
}

/** The notation of each kind of number @effect/cli names in a usage (`Options.integer`, `Options.float`). */
const notations: ReadonlyMap<string, { readonly pattern: RegExp; readonly what: string }> = new Map([
  ["integer", { pattern: /^[+-]?[0-9]+$/, what: "a whole number in decimal digits" }],
  ["float", { pattern: /^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)$/, what: "a number in decimal notation (such as 2.5)" }]
])

/** The numeric options of a usage, with the notation of each. */
const numbersOf = (usage: Usage.Usage) => {
  const numbers = new Map<string, { readonly pattern: RegExp; readonly what: string }>()
  named(usage, (name, accepted) => {
    const notation = Option.isSome(accepted) ? notations.get(accepted.value) : undefined
    if (notation !== undefined) numbers.set(name, notation)
  })
  return numbers
}

/**
 * The options of a usage that take one of a list of words (`Options.choice`, whose usage names them `a | b | c`), with
 * their words.
 */
const choicesOf = (usage: Usage.Usage) => {
  const choices = new Map<string, ReadonlyArray<string>>()
  named(usage, (name, accepted) => {
    if (Option.isSome(accepted) && accepted.value.includes(" | ")) choices.set(name, accepted.value.split(" | "))
  })
  return choices
}

const nearest = (name: string, known: ReadonlyMap<string, boolean>): string | undefined => {
  let best: readonly [string, number] | undefined
  for (const candidate of known.keys()) {
    if (!candidate.startsWith("--")) continue
    const d = AutoCorrect.levensteinDistance(name, candidate, CliConfig.defaultConfig)
    if (d <= 2 && (best === undefined || d < best[1])) best = [candidate, d]
  }
  return best?.[0]
}

/**
 * Rewrites the arguments after the executable (`subcommand …`) by the rules above. Arguments of an unknown
 * subcommand are returned as they are, for @effect/cli to report.
 *
 * @since 0.1.0
 * @category normalizing
 */
export const normalize = (
  usages: ReadonlyMap<string, Usage.Usage>,
  args: ReadonlyArray<string>
): Effect.Effect<ReadonlyArray<string>, UsageError> => {
  const subcommand = args[0]
  const usage = subcommand === undefined ? undefined : usages.get(subcommand)
  if (subcommand === undefined || usage === undefined) return Effect.succeed(args)
  const known = optionsOf(usage)
  const numbers = numbersOf(usage)
  const repeatable = repeatedOf(usage)
  const choices = choicesOf(usage)
  const values = new Map<string, string>()
  // the values of a repeatable option, in order
  const all = new Map<string, Array<string>>()
  const keep = (name: string, value: string) => {
    values.set(name, value)
    if (repeatable.has(name)) all.set(name, [...(all.get(name) ?? []), value])
  }
  const flags = new Set<string>()
  const order: Array<string> = []
  const positional: Array<string> = []
  for (let i = 1; i < args.length; i++) {
    const arg = args[i]!
    if (arg === "--") {
      positional.push(...args.slice(i))
      break
    }
    if (!arg.startsWith("-") || arg === "-") {
      positional.push(arg)
      continue
    }
    const eq = arg.indexOf("=")
    const name = eq > 0 ? arg.slice(0, eq) : arg
    const takesValue = known.get(name)
    if (takesValue === undefined) {
      const suggestion = nearest(name, known)
      return Effect.fail(
        new UsageError({
          detail: `unknown option '${name}' for 'reprise ${subcommand}'${
            suggestion === undefined ? "" : ` (did you mean '${suggestion}'?)`
          }; see 'reprise ${subcommand} --help'`
        })
      )
    }
    if (!order.includes(name)) order.push(name)
    if (!takesValue) {
      if (eq > 0) {
        return Effect.fail(new UsageError({ detail: `option '${name}' takes no value, got '${arg}'` }))
      }
      flags.add(name)
    } else if (eq > 0) {
      keep(name, arg.slice(eq + 1))
    } else if (i + 1 < args.length) {
      keep(name, args[i + 1]!)
      i++
    } else {
      return Effect.fail(new UsageError({ detail: `option '${name}' needs a value` }))
    }
  }
  for (const [name, value] of values) {
    const notation = numbers.get(name)
    if (notation !== undefined && !notation.pattern.test(value)) {
      return Effect.fail(new UsageError({ detail: `${name} takes ${notation.what}, got '${value}'` }))
    }
    const words = choices.get(name)
    if (words !== undefined && !words.includes(value)) {
      return Effect.fail(
        new UsageError({
          detail: `${name} got '${value}': Expected one of the following cases: ${words.join(", ")}`
        })
      )
    }
  }
  const options = order.flatMap((name) =>
    flags.has(name)
      ? [name]
      : repeatable.has(name)
      ? all.get(name)!.flatMap((value) => [name, value])
      : [name, values.get(name)!]
  )
  // The positionals go after a `--`: @effect/cli would otherwise read a word such as `no` or `true` right after a
  // flag as that flag's value.
  const rest = positional.length === 0 || positional[0] === "--" ? positional : ["--", ...positional]
  return Effect.succeed([subcommand, ...options, ...rest])
}
