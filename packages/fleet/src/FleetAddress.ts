/**
 * `FleetAddress` is where a fleet lives: the Redis URL (`redis://HOST:PORT/DB`), the fleet's name, and the keys the
 * name gives. It loads no Redis client, so a command line can check its flags without paying for one.
 *
 * The name is the user's (`--fleet-name`); by default it is derived from the provider endpoint and a hash of the API
 * key ({@link defaultName}), so processes that share a key share a fleet. The key itself never reaches Redis.
 *
 * @since 0.1.0
 */
import * as Redacted from "effect/Redacted"
import * as Crypto from "node:crypto"

/**
 * The Redis keys of a fleet. Both carry the hash tag `{name}`, so they live in one slot of a cluster.
 *
 * @since 0.1.0
 * @category keys
 */
export const keys = (name: string): { readonly budget: string; readonly pause: string } => ({
  budget: `reprise:fleet:{${name}}:budget`,
  pause: `reprise:fleet:{${name}}:pause`
})

/**
 * The Redis key of a route's circuit in a fleet: the fleet's hash tag and the first 32 hex digits of a SHA-256 of the
 * route's key (`Routes.key`), which may hold spaces, URLs and any other character.
 *
 * @since 0.1.0
 * @category keys
 */
export const circuitKey = (name: string, route: string): string =>
  `reprise:fleet:{${name}}:circuit:${Crypto.createHash("sha256").update(route).digest("hex").slice(0, 32)}`

/**
 * The channel on which a fleet's pause is announced: every pushback that sets or lengthens the pause publishes the
 * pause in force there (`<milliseconds left>:<status>`), and every process of the fleet follows it
 * (docs/fleet.md, "Following the pause").
 *
 * @since 0.1.0
 * @category keys
 */
export const pauseChannel = (name: string): string => `reprise:fleet:{${name}}:pauses`

/**
 * The default fleet name of a provider endpoint and key: the base URL's host and path, `#`, and the first 16 hex
 * digits of a SHA-256 of the key (e.g. `api.openai.com/v1#3f9a0c6e12b4d7a8`).
 *
 * @since 0.1.0
 * @category names
 */
export const defaultName = (baseUrl: string, apiKey: Redacted.Redacted<string>): string => {
  const digest = Crypto.createHash("sha256").update(`reprise-fleet\u0000${Redacted.value(apiKey)}`).digest("hex")
  let endpoint = baseUrl
  try {
    const url = new URL(baseUrl)
    endpoint = `${url.host}${url.pathname.replace(/\/+$/, "")}`
  } catch {
    // not a URL: the text as given (a provider layer refuses it anyway)
  }
  return `${endpoint}#${digest.slice(0, 16)}`
}

/**
 * The largest database number a Redis URL may name (Redis counts its databases with a C `int`).
 *
 * @since 0.1.0
 * @category urls
 */
export const maxDatabase = 2147483647

/**
 * Why a Redis URL is not usable, or `undefined` when it is: `redis://` or `rediss://` (TLS), a host, and at most a
 * database number (0 to {@link maxDatabase}) as its path. The words name no form to follow: a caller adds its own.
 *
 * @since 0.1.0
 * @category urls
 */
export const urlProblem = (url: string): string | undefined => {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    return "is not a URL"
  }
  if (parsed.protocol !== "redis:" && parsed.protocol !== "rediss:") return "must start with redis:// or rediss://"
  if (parsed.hostname === "") return "has no host"
  const db = /^\/?(\d*)$/.exec(parsed.pathname)
  if (db === null) return "must name the database by its number"
  // Redis numbers its databases with a C int: a larger number names none
  if (db[1] !== "" && Number(db[1]) > maxDatabase) return `must name a database from 0 to ${maxDatabase}`
  return undefined
}

/**
 * A Redis URL without its credentials, for messages.
 *
 * @since 0.1.0
 * @category urls
 */
export const describeUrl = (url: string): string => {
  try {
    const parsed = new URL(url)
    return `${parsed.protocol}//${parsed.host}${parsed.pathname === "/" ? "" : parsed.pathname}`
  } catch {
    return "(an invalid URL)"
  }
}
