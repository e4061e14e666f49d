/**
 * The Lua scripts of the fleet's circuits (`Circuit.Service` on Redis). Each runs atomically on the server and reads
 * time from the server alone (`redis.call('TIME')`, in milliseconds), so clock skew between the hosts of a fleet
 * changes nothing, and exactly one caller of the fleet is handed each probe.
 *
 * One key per circuit (`FleetAddress.circuitKey`: the fleet's hash tag and a hash of the route's key), a hash:
 *
 * - `failures`: the transient failures counted since the circuit last closed;
 * - `open`: the server time (ms) at which the open circuit lets a probe through; absent while closed;
 * - `probe`: the server time (ms) until which the probe handed out holds the circuit; absent when none is out.
 *
 * A closed circuit with no failure has no key. Every script that writes the key sets it to expire `ARGV[ttl]` ms after
 * the write (the cool-down and a retention, longer than any time the state it holds is needed): an idle circuit
 * leaves no key, and is closed when next asked.
 *
 * The semantics are `Circuit.makeMemory`'s; the tests check both against the same transitions.
 *
 * @internal
 */
import { script } from "./scripts.js"

/** The server's time in milliseconds. */
const nowFunction = `
local function now()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

/**
 * The state of the circuit at `t`: `{0}` closed, `{1}` half-open (a probe may go), `{2, ms left}` open (its
 * cool-down, or its probe's lease, runs for `ms left`).
 */
const stateFunction = `
local function state(key, t)
  local fields = redis.call('HMGET', key, 'open', 'probe')
  local open, probe = tonumber(fields[1]), tonumber(fields[2])
  if open == nil then return {0, 0} end
  if t < open then return {2, open - t} end
  if probe ~= nil and t < probe then return {2, probe - t} end
  return {1, 0}
end
`

/**
 * Whether a send may go now. ARGV: cool-down ms, TTL ms. Returns `{0, 0}` closed, `{1, lease}` this caller holds the
 * probe (leased for one cool-down, until the server time `lease`), `{2, ms left}` open.
 *
 * @internal
 */
export const admit = script(
  "circuit admit",
  ["circuit"],
  `${nowFunction}${stateFunction}
local t = now()
local s = state(KEYS[1], t)
if s[1] ~= 1 then return s end
local lease = t + tonumber(ARGV[1])
redis.call('HSET', KEYS[1], 'probe', lease)
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
return {1, lease}
`
)

/**
 * A probe that will not report gives its lease back: the `probe` field is removed if it still holds that lease
 * (ARGV: the lease `admit` returned), so the circuit is half-open again; a later probe's lease is left alone. Returns
 * 1 when it removed it, 0 otherwise.
 *
 * @internal
 */
export const released = script(
  "circuit released",
  ["circuit"],
  `if redis.call('HGET', KEYS[1], 'probe') == ARGV[1] then
  redis.call('HDEL', KEYS[1], 'probe')
  return 1
end
return 0
`
)

/**
 * A send that completed (or that the server rejected): the circuit closes, its key is deleted. Returns 1.
 *
 * @internal
 */
export const succeeded = script("circuit succeeded", ["circuit"], `redis.call('DEL', KEYS[1])\nreturn 1\n`)

/**
 * A transient failure: counted; a failure while open (a failed probe) or the threshold reached opens the circuit for
 * a cool-down from now, with no probe out. ARGV: cool-down ms, threshold, TTL ms. Returns the state after it, as
 * {@link state} does.
 *
 * @internal
 */
export const failed = script(
  "circuit failed",
  ["circuit"],
  `${nowFunction}${stateFunction}
local t = now()
local failures = redis.call('HINCRBY', KEYS[1], 'failures', 1)
if redis.call('HEXISTS', KEYS[1], 'open') == 1 or failures >= tonumber(ARGV[2]) then
  redis.call('HSET', KEYS[1], 'open', t + tonumber(ARGV[1]))
  redis.call('HDEL', KEYS[1], 'probe')
end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[3]))
return state(KEYS[1], t)
`
)

/**
 * The state now, read only: `{0, 0}` closed, `{1, 0}` half-open, `{2, ms left}` open.
 *
 * @internal
 */
export const state = script(
  "circuit state",
  ["circuit"],
  `${nowFunction}${stateFunction}
return state(KEYS[1], now())
`
)
