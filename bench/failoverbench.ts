/**
 * The failoverbench scorecard of the `reprise` CLI: the sixteen scenarios of failoverbench's catalogue (methodology
 * v0.1), reproduced by the loopback simulator (`@reprise/simulator/Failoverbench`), each run as a user runs the CLI
 * (one process per call, real time), and graded as the catalogue grades a cell — pass / partial / safe / fail — from
 * what the caller got (exit, stdout, the `--json` commit's model and usage) and what the provider saw (the simulator's
 * request log: attempts per model, their times), then a healthy `fb-ok` call through the same system.
 *
 *   node --import tsx bench/failoverbench.ts [--system cli|relay [--relay per-scenario|once]] [--profile full|fast]
 *     [--config interactive|defaults] [--only S01,S15] [--fleet redis://127.0.0.1:PORT/0]
 *
 * `interactive` is the configuration docs/routes.md gives (a fallback route, the interactive bounds); `defaults` is
 * the CLI with no flag but the fallback.
 *
 * `--system relay` grades `reprise serve` as the gateway instead: the relay runs with the same upstream flags (the
 * scenario's model as the primary route, its fallback from `--fallback`), and each call is what failoverbench's
 * `endpoint` adapter makes, a plain OpenAI-compatible streaming client: `fetch` POST `/v1/chat/completions` with
 * `stream: true` and `stream_options.include_usage`, the content the concatenated deltas, the model the chunks',
 * the usage the usage chunk's; an HTTP error or an in-band `{"error": …}` chunk is an error, and a success needs a
 * `finish_reason` and then `[DONE]`. By default (`--relay once`) one relay serves the whole run, as a gateway is
 * deployed (`--model fb-ok --fallback fb-ok`): each call's `model` names the scenario, and the relay sends it to its
 * primary route. `--relay per-scenario` starts a relay per scenario instead, `--model` the scenario's and `--fallback`
 * its own fallback (`fb-ok-noprefill` for S14), with the alive probe through a relay of its own.
 *
 * Each check is the catalogue's; the grading code is ours. Not part of `npm test` (the full profile takes minutes of real time): its result is recorded in docs/routes.md.
 */
import * as Failoverbench from "@reprise/simulator/Failoverbench"
import * as Simulator from "@reprise/simulator/Simulator"
import { Effect } from "effect"
import * as ChildProcess from "node:child_process"
import * as Path from "node:path"
import { fileURLToPath } from "node:url"

const here = Path.dirname(fileURLToPath(import.meta.url))
const bin = Path.join(here, "..", "packages", "cli", "bin", "reprise.js")
const prompt = "Explain in exactly sixty words why a gateway earns trust only when the provider behind it misbehaves."
const norm = (text: string) => text.trim().replace(/\s+/g, " ")

type Severity = "required" | "advisory" | "informational"
interface Check {
  readonly id: string
  readonly severity: Severity
  readonly ok: boolean
  readonly detail: string
}
interface Call {
  readonly ok: boolean
  readonly hang: boolean
  readonly content: string
  readonly model: string | undefined
  readonly usage: unknown
  readonly error: string
  readonly seconds: number
}

const arg = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`)
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : fallback
}
const profile = arg("profile", "full") as Failoverbench.Profile
const config = arg("config", "interactive")
const system = arg("system", "cli")
/**
 * `once`: one relay for the whole run, `--model fb-ok --fallback fb-ok`, each call's `model` choosing the scenario;
 * `per-scenario`: a relay per scenario, `--model` the scenario's.
 */
const relayMode = arg("relay", "once")
if (relayMode !== "per-scenario" && relayMode !== "once") {
  throw new Error(`--relay must be per-scenario or once, got ${relayMode}`)
}
if (system !== "cli" && system !== "relay") throw new Error(`--system must be cli or relay, got ${system}`)
const only = arg("only", "").split(",").filter((s) => s.length > 0)
/** A fleet's Redis (`redis://…`): every call of the CLI then shares its circuits and budget with the others. */
const fleet = arg("fleet", "")

/** The upstream flags `chat` and `serve` share: the primary route, its fallback, the configuration's bounds. */
const upstream = (baseUrl: string, model: string, fallback: string | undefined): Array<string> => [
  "--provider",
  "openai-chat",
  "--base-url",
  baseUrl,
  "--model",
  model,
  ...(fallback === undefined ? [] : ["--fallback", `openai-chat:${fallback}@${baseUrl},context=200000`]),
  ...(fleet === "" ? [] : ["--fleet", fleet]),
  ...(config === "interactive"
    ? ["--deadline", "40", "--first-byte-timeout", "10000", "--first-token-timeout", "5000", "--idle-timeout", "10000"]
    : [])
]

const flags = (baseUrl: string, model: string, fallback: string | undefined): Array<string> => [
  "chat",
  "--json",
  ...upstream(baseUrl, model, fallback),
  "--",
  prompt
]

const key = "sk-failoverbench-loopback"

/** One call of the CLI, killed at `limit` seconds (a hang is a result). */
const call = (baseUrl: string, model: string, fallback: string | undefined, limit: number): Promise<Call> =>
  new Promise((resolve) => {
    const start = performance.now()
    const child = ChildProcess.spawn(process.execPath, [bin, ...flags(baseUrl, model, fallback)], {
      env: { ...process.env, OPENAI_API_KEY: key },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (d) => (stdout += d))
    child.stderr.on("data", (d) => (stderr += d))
    let hang = false
    const timer = setTimeout(() => {
      hang = true
      child.kill("SIGKILL")
    }, (limit + 1) * 1000)
    child.on("close", (code) => {
      clearTimeout(timer)
      const events = stdout.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l))
      const commit = events.filter((e) => e.type === "commit").at(-1)
      const error = events.find((e) => e.type === "error")
      resolve({
        ok: !hang && code === 0 && commit !== undefined,
        hang,
        content: commit?.text ?? "",
        model: commit?.model,
        usage: commit?.usage ?? undefined,
        error: error?.message ?? stderr.trim().split("\n").at(-1) ?? "",
        seconds: (performance.now() - start) / 1000
      })
    })
  })

/**
 * One call as failoverbench's `endpoint` adapter makes it: a plain streaming Chat Completions request to `url`,
 * aborted at `limit` seconds (a hang is a result).
 */
const endpointCall = async (url: string, model: string, limit: number): Promise<Call> => {
  const start = performance.now()
  const abort = new AbortController()
  let hang = false
  const timer = setTimeout(() => {
    hang = true
    abort.abort()
  }, (limit + 1) * 1000)
  let content = ""
  let reported: string | undefined
  let usage: unknown
  let error = ""
  let finished = false
  let done = false
  try {
    const response = await fetch(`${url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: "Bearer failoverbench" },
      body: JSON.stringify({
        model,
        messages: [{ role: "user", content: prompt }],
        stream: true,
        stream_options: { include_usage: true }
      }),
      signal: abort.signal
    })
    if (response.status !== 200) {
      const body = await response.text()
      let message = body
      try {
        message = JSON.parse(body).error?.message ?? body
      } catch {
        // not JSON: the body as it is
      }
      error = `HTTP ${response.status}: ${message}`
    } else {
      const decoder = new TextDecoder()
      let buffer = ""
      for await (const bytes of response.body!) {
        buffer += decoder.decode(bytes as Uint8Array, { stream: true })
        let end: number
        while ((end = buffer.indexOf("\n")) >= 0) {
          const line = buffer.slice(0, end).replace(/\r$/, "")
          buffer = buffer.slice(end + 1)
          if (!line.startsWith("data:")) continue
          const data = line.slice(5).trim()
          if (data === "[DONE]") {
            done = true
            continue
          }
          const chunk = JSON.parse(data)
          if (chunk.error !== undefined) {
            error = chunk.error?.message ?? JSON.stringify(chunk.error)
            continue
          }
          if (typeof chunk.model === "string") reported = chunk.model
          if (chunk.usage) usage = chunk.usage
          for (const choice of chunk.choices ?? []) {
            content += choice.delta?.content ?? ""
            if (choice.finish_reason) finished = true
          }
        }
      }
      if (error === "" && !(finished && done)) {
        error = finished ? "the stream ended without [DONE]" : "the stream ended without a finish_reason"
      }
    }
  } catch (cause) {
    error = hang ? "no answer within the limit" : String(cause)
  } finally {
    clearTimeout(timer)
  }
  return {
    ok: !hang && error === "" && finished && done,
    hang,
    content,
    model: reported,
    usage,
    error,
    seconds: (performance.now() - start) / 1000
  }
}

/** The system under test for one scenario: a call of `model`, the alive probe, and the end of the system. */
interface Gateway {
  readonly call: (model: string, limit: number) => Promise<Call>
  readonly alive: () => Promise<Call>
  readonly close: () => Promise<void>
}

const cliGateway = (baseUrl: string, fallback: string): Gateway => ({
  call: (model, limit) => call(baseUrl, model, fallback, limit),
  alive: () => call(baseUrl, Failoverbench.healthyModel, undefined, 10),
  close: async () => {}
})

/** `reprise serve` with the scenario's model as the primary route and its fallback; calls go to its URL. */
const relayGateway = (
  baseUrl: string,
  model: string,
  fallback: string | undefined,
  probe: "own relay" | "same relay"
): Promise<Gateway> =>
  new Promise((resolve, reject) => {
    const child = ChildProcess.spawn(process.execPath, [
      bin,
      "serve",
      "--port",
      "0",
      ...upstream(baseUrl, model, fallback)
    ], {
      env: { ...process.env, OPENAI_API_KEY: key },
      stdio: ["ignore", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    const closed = new Promise<void>((done) => child.on("close", () => done()))
    child.stderr.on("data", (d) => (stderr += d))
    child.on("close", (code) => reject(new Error(`reprise serve exited ${code}: ${stderr}`)))
    child.stdout.on("data", (d) => {
      stdout += d
      const url = /listening on (http:\/\/\S+)/.exec(stdout)?.[1]
      if (url === undefined) return
      resolve({
        call: (m, limit) => endpointCall(url, m, limit),
        // per scenario, the relay serves its plan whatever the request's model: the probe gets a relay of its own
        alive: () =>
          probe === "same relay"
            ? endpointCall(url, Failoverbench.healthyModel, 10)
            : relayGateway(baseUrl, Failoverbench.healthyModel, undefined, "same relay").then(async (own) => {
              const got = await own.alive()
              await own.close()
              return got
            }),
        close: () => {
          child.kill("SIGINT")
          return closed
        }
      })
    })
  })

const verdict = (ideal: "success" | "error", got: Call, checks: ReadonlyArray<Check>): string => {
  if (got.hang) return "fail"
  const complete = got.ok && norm(got.content) === norm(Failoverbench.canonicalAnswer)
  if (got.ok && !complete && ideal === "success") return "fail"
  if (checks.some((c) => !c.ok && c.severity === "required")) return "fail"
  const advisory = checks.some((c) => !c.ok && c.severity === "advisory")
  if (ideal === "error") return got.ok ? "partial" : advisory ? "safe" : "pass"
  return complete ? (advisory ? "partial" : "pass") : "safe"
}

const check = (id: string, severity: Severity, ok: boolean, detail: string): Check => ({ id, severity, ok, detail })

const main = Effect.gen(function*() {
  const sim = yield* Simulator.Simulator
  const baseUrl = sim.baseUrl("openai-chat")
  const t = Failoverbench.timings[profile]
  const rows: Array<{ id: string; title: string; verdict: string; checks: ReadonlyArray<Check>; got: Call }> = []
  const shared = system === "relay" && relayMode === "once"
    ? yield* Effect.promise(() =>
      relayGateway(baseUrl, Failoverbench.healthyModel, Failoverbench.healthyModel, "same relay")
    )
    : undefined
  for (const s of Failoverbench.scenarios) {
    if (only.length > 0 && !only.includes(s.id)) continue
    yield* sim.setScript(Failoverbench.script(profile))
    const since = Date.now()
    const log = (model: string) =>
      Effect.map(
        sim.requestsFor(model),
        (rs) => rs.map((r) => ({ at: (r.receivedAt - since) / 1000, action: r.action }))
      )
    const checks: Array<Check> = []
    const gateway = shared ?? (system === "relay"
      ? yield* Effect.promise(() => relayGateway(baseUrl, s.model, s.fallback, "own relay"))
      : cliGateway(baseUrl, s.fallback))
    let got: Call
    if (s.id === "S15") {
      const down = t.outageMs / 1000
      const interval = profile === "full" ? 4 : 1.2
      const count = profile === "full" ? 20 : 10
      const items: Array<{ sent: number; call: Call }> = []
      for (let i = 0; i < count; i++) {
        const wait = since + i * interval * 1000 - Date.now()
        if (wait > 0) yield* Effect.promise(() => new Promise((r) => setTimeout(r, wait)))
        const sent = (Date.now() - since) / 1000
        items.push({ sent, call: yield* Effect.promise(() => gateway.call(s.model, 30)) })
      }
      const primary = yield* log(s.model)
      const during = items.filter((it) => it.sent < down)
      const recovered = primary.filter((p) => p.action?.startsWith("200")).map((p) => p.at - down)
      checks.push(check("no_hang", "required", items.every((it) => !it.call.hang), `${items.length} requests`))
      checks.push(check(
        "served_during_outage",
        "required",
        during.length > 0 && during.every((it) => it.call.ok),
        `${during.filter((it) => it.call.ok).length}/${during.length}`
      ))
      checks.push(check(
        "recovered",
        "required",
        recovered.length > 0 && recovered[0]! <= 30,
        recovered.length > 0 ? `+${recovered[0]!.toFixed(1)}s` : "never"
      ))
      checks.push(check(
        "probe_discipline",
        "informational",
        primary.filter((p) => p.at < down).length <= during.length,
        `${primary.filter((p) => p.at < down).length} primary attempts for ${during.length} requests`
      ))
      const failed = items.find((it) => !it.call.ok)
      got = failed?.call ?? items.at(-1)!.call
    } else {
      got = yield* Effect.promise(() => gateway.call(s.model, catalogue[s.id]!.maxWall))
      const primary = yield* log(s.model)
      const fallback = yield* log(s.fallback)
      checks.push(...catalogue[s.id]!.checks(got, primary, fallback))
    }
    const alive = yield* Effect.promise(() => gateway.alive())
    if (gateway !== shared) yield* Effect.promise(() => gateway.close())
    if (["S09", "S10"].includes(s.id)) {
      checks.push(check("alive_after", "required", alive.ok, alive.ok ? "healthy call succeeded" : alive.error))
    }
    const row = {
      id: s.id,
      title: s.title,
      verdict: verdict(s.id === "S13" ? "error" : "success", got, checks),
      checks,
      got
    }
    rows.push(row)
    console.log(
      `${row.id} ${row.verdict.padEnd(7)} ${got.seconds.toFixed(1).padStart(5)}s  ${
        checks.map((c) => `${c.ok ? "✓" : "✗"}${c.id}(${c.detail})`).join(" ")
      }${got.ok ? "" : `  error: ${got.error.slice(0, 100)}`}`
    )
  }
  if (shared !== undefined) yield* Effect.promise(() => shared.close())
  const tally = (v: string) => rows.filter((r) => r.verdict === v).length
  console.log(
    `
${system === "relay" ? "reprise serve (relay, endpoint client)" : "reprise CLI"}, ${config} configuration${
      fleet === "" ? "" : ", with a fleet"
    }, ${profile} profile: ${tally("pass")} pass, ${tally("partial")} partial, ${tally("safe")} safe, ${
      tally("fail")
    } fail`
  )
})

type Seen = ReadonlyArray<{ readonly at: number; readonly action: string | undefined }>
const within = (attempts: Seen, window: number) =>
  attempts.filter((a) => attempts.length > 0 && a.at - attempts[0]!.at < window).length
const noHang = (got: Call) => check("no_hang", "required", !got.hang, `${got.seconds.toFixed(1)}s`)
const noTruncated = (got: Call) =>
  check(
    "no_truncated_success",
    "required",
    !(got.ok && norm(got.content) !== norm(Failoverbench.canonicalAnswer)),
    got.ok ? `${norm(got.content).split(" ").length}/60 words` : "no success claimed"
  )
const primaryAtMost = (n: number, sev: Severity = "required") => (p: Seen) =>
  check(`attempts_primary<=${n}`, sev, p.length <= n, `${p.length}`)
const wallAtMost = (id: string, n: number, sev: Severity) => (got: Call) =>
  check(id, sev, !got.hang && got.seconds <= n, `${got.seconds.toFixed(1)}s`)

/** The catalogue's checks of the single-call scenarios, with each scenario's `max_wall_s`. */
const catalogue: Record<
  string,
  { maxWall: number; checks: (got: Call, primary: Seen, fallback: Seen) => Array<Check> }
> = {
  S01: {
    maxWall: 20,
    checks: (_, p) => [
      check("retried", "advisory", p.length >= 2, `${p.length}`),
      check(
        "retry_after_honoured",
        "advisory",
        p.length >= 2 && p[1]!.at - p[0]!.at >= 1.8,
        p.length >= 2 ? `gap ${(p[1]!.at - p[0]!.at).toFixed(2)}s` : "no second attempt"
      ),
      check("no_hammer", "required", within(p, 1.5) <= 2, `${within(p, 1.5)} in 1.5s`)
    ]
  },
  S02: {
    maxWall: 40,
    checks: (got, p) => [
      check("no_hammer", "required", within(p, 3) <= 4, `${within(p, 3)} in 3s`),
      primaryAtMost(6)(p),
      noHang(got)
    ]
  },
  S03: {
    maxWall: 20,
    checks: (got, p) => [noHang(got), check("same_provider_retry", "advisory", p.length >= 2, `${p.length}`)]
  },
  S04: { maxWall: 40, checks: (got, p) => [primaryAtMost(6)(p), noHang(got)] },
  S05: { maxWall: 20, checks: (got) => [noHang(got)] },
  S06: {
    maxWall: 130,
    checks: (
      got,
      p
    ) => [wallAtMost("within_budget", 100, "required")(got), noHang(got), primaryAtMost(1, "advisory")(p)]
  },
  S07: { maxWall: 60, checks: (got) => [noHang(got), wallAtMost("ttft_limit", 15, "advisory")(got)] },
  S08: { maxWall: 40, checks: (got) => [noTruncated(got), noHang(got)] },
  S09: {
    maxWall: 70,
    checks: (got) => [wallAtMost("bounded", 45, "required")(got), noTruncated(got), noHang(got)]
  },
  S10: {
    maxWall: 30,
    checks: (got) => [
      noTruncated(got),
      noHang(got),
      check(
        "recovered_in_place",
        "advisory",
        got.ok && norm(got.content) === norm(Failoverbench.canonicalAnswer),
        got.ok ? "complete" : "error"
      )
    ]
  },
  S11: {
    maxWall: 30,
    checks: (got) => [
      wallAtMost("prompt_finalise", 8, "required")(got),
      check("usage_reported", "advisory", got.usage !== undefined && got.usage !== null, JSON.stringify(got.usage))
    ]
  },
  S12: {
    maxWall: 20,
    checks: (got, p) => [check("no_same_model_retry", "required", p.length === 1, `${p.length}`), noHang(got)]
  },
  S13: {
    maxWall: 20,
    checks: (got, p, f) => [
      check("no_same_model_retry", "required", p.length === 1, `${p.length}`),
      noHang(got),
      check("fallback_attempted", "informational", f.length >= 1, `${f.length}`)
    ]
  },
  S14: {
    maxWall: 40,
    checks: (got, p, f) => {
      const prefill = [...p, ...f].filter((r) => r.action === "400 prefill").length
      return [
        check("no_prefill_masking", "required", !(!got.ok && prefill > 0), `${prefill} prefill rejections`),
        noTruncated(got)
      ]
    }
  },
  S16: {
    maxWall: 40,
    checks: (got, p, f) => [
      check(
        "reports_fallback_model",
        "required",
        f.length === 0 || (got.model ?? "").toLowerCase().includes(Failoverbench.healthyModel),
        `model = ${got.model}`
      ),
      check("usage_present", "advisory", got.usage !== undefined && got.usage !== null, JSON.stringify(got.usage)),
      primaryAtMost(6)(p)
    ]
  }
}

Effect.runPromise(Effect.provide(main, Simulator.layer())).then(
  () => process.exit(0),
  (error) => {
    console.error(error)
    process.exit(1)
  }
)
