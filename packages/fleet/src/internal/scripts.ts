/**
 * The Lua scripts of the Redis fleet. Each runs atomically on the server (EVALSHA, EVAL when the server's script
 * cache lost it) and reads time from the server alone: the budget from `redis.call('TIME')`, the pause from the
 * key's own expiry. Clock skew between the hosts of a fleet changes nothing.
 *
 * Keys (one fleet, one hash slot through the `{name}` tag):
 *
 * - `KEYS[1]`, the budget: a hash with one field per second and kind, `f:<second>` (first attempts) and
 *   `r:<second>` (replays). Every script that writes it deletes the fields that left the window, and sets the key to
 *   expire `window + 1` seconds after the write: an idle fleet leaves no key.
 * - `KEYS[2]`, the pause: a string holding the HTTP status that set it, expiring when the pause ends.
 *
 * One channel, not a key: the pushback script publishes every pause it sets there, for the processes that follow it.
 *
 * The arithmetic is `RetryBudget`'s; the tests check both against the same cases.
 *
 * @internal
 */
import * as Crypto from "node:crypto"

/**
 * A script and its SHA-1, for EVALSHA.
 *
 * @internal
 */
export interface Script {
  readonly name: string
  /** The fleet's keys the script is given, in order (a circuit's key is its route's). */
  readonly keys: ReadonlyArray<"budget" | "pause" | "circuit">
  readonly source: string
  readonly sha: string
}

/**
 * @internal
 */
export const script = (name: string, keys: Script["keys"], source: string): Script => ({
  name,
  keys,
  source,
  sha: Crypto.createHash("sha1").update(source).digest("hex")
})

/** The pause in force: `{milliseconds left, status}`, or `{0, ''}`. */
const pauseFunction = `
local function pause(key)
  local left = redis.call('PTTL', key)
  if left <= 0 then return {0, ''} end
  local status = redis.call('GET', key)
  return {left, status or ''}
end
`

/** Counts the window of the budget hash at the server's current second, deleting the fields that left it. */
const windowFunction = `
local function window(key, seconds)
  local now = tonumber(redis.call('TIME')[1])
  local firsts, replays, oldest = 0, 0, now
  local fields = redis.call('HGETALL', key)
  for i = 1, #fields, 2 do
    local kind, second = string.match(fields[i], '^([fr]):(%d+)$')
    second = tonumber(second)
    if second == nil or second <= now - seconds or second > now + seconds then
      redis.call('HDEL', key, fields[i])
    else
      local n = tonumber(fields[i + 1]) or 0
      if kind == 'f' then firsts = firsts + n else replays = replays + n end
      if second < oldest then oldest = second end
    end
  end
  local active = math.max(1, math.min(seconds, now - oldest + 1))
  return now, firsts, replays, active
end
`

/**
 * A first attempt: `HINCRBY f:<now>`, then the pause in force.
 * ARGV: window seconds, TTL of the budget key in ms. Returns `{pause ms left, status}`.
 *
 * @internal
 */
export const deposit = script(
  "deposit",
  ["budget", "pause"],
  `${pauseFunction}${windowFunction}
local now = window(KEYS[1], tonumber(ARGV[1]))
redis.call('HINCRBY', KEYS[1], 'f:' .. now, 1)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return pause(KEYS[2])
`
)

/**
 * A replay: allowed when `replays + 1 <= ratio * firsts + floor * active seconds`, and then `HINCRBY r:<now>`.
 * ARGV: window seconds, TTL in ms, ratio, floor. Returns `{1 allowed | 0 refused, replays, allowance as text}`
 * (replays count this one when it was allowed; the allowance is text because Redis truncates Lua numbers).
 *
 * @internal
 */
export const withdraw = script(
  "withdraw",
  ["budget"],
  `${windowFunction}
local now, firsts, replays, active = window(KEYS[1], tonumber(ARGV[1]))
local allowance = tonumber(ARGV[3]) * firsts + tonumber(ARGV[4]) * active
if replays + 1 <= allowance + 1e-9 then
  redis.call('HINCRBY', KEYS[1], 'r:' .. now, 1)
  redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
  return {1, replays + 1, tostring(allowance)}
end
return {0, replays, tostring(allowance)}
`
)

/**
 * The pause in force. Returns `{ms left, status}` or `{0, ''}`.
 *
 * @internal
 */
export const paused = script("paused", ["pause"], `${pauseFunction}\nreturn pause(KEYS[1])\n`)

/**
 * Server pushback: pauses the fleet for ARGV[1] ms with status ARGV[2], unless the pause in force lasts longer
 * (never shortened), and announces a pause it set on the channel ARGV[3] as `<ms left>:<status>:<announcer>`
 * (ARGV[4], so that the announcing process knows its own). Returns the pause in force after it and whether this
 * call set it, `{ms left, status, 1 | 0}` (the stored status: a shorter pushback's is not it).
 *
 * @internal
 */
export const pushback = script(
  "pushback",
  ["pause"],
  `${pauseFunction}
local delay = tonumber(ARGV[1])
local left = redis.call('PTTL', KEYS[1])
local set = 0
if delay > left then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', delay)
  -- pcall: a user whose ACL denies the channel still pauses the fleet (its processes ask before each send)
  redis.pcall('PUBLISH', ARGV[3], delay .. ':' .. ARGV[2] .. ':' .. ARGV[4])
  set = 1
end
local now = pause(KEYS[1])
return {now[1], now[2], set}
`
)

/**
 * @internal
 */
export const all: ReadonlyArray<Script> = [deposit, withdraw, paused, pushback]

/**
 * The fleet's keys a script of its budget or its pause is given, in order (a circuit's script is given its route's).
 *
 * @internal
 */
export const fleetKeys = (
  script: Script,
  keys: { readonly budget: string; readonly pause: string }
): ReadonlyArray<string> => script.keys.map((key) => key === "budget" ? keys.budget : keys.pause)
