/**
 * What the CLI's end-to-end suites share: the real `reprise` binary run as a child process ({@link start},
 * {@link run}), the arguments of a `chat` against the loopback simulator ({@link chatArgs}), the simulator's
 * `openai-chat` route scripted for one test ({@link setup}), and a session file in a temporary directory
 * ({@link tempSession}) with another process holding its lock ({@link holder}).
 */
import * as Simulator from "@reprise/simulator/Simulator"
import type * as SimulatorScript from "@reprise/simulator/SimulatorScript"
import { Duration, Effect, TestServices } from "effect"
import { type ChildProcessWithoutNullStreams, spawn } from "node:child_process"
import * as fs from "node:fs"
import * as http from "node:http"
import * as os from "node:os"
import * as path from "node:path"
import { fileURLToPath } from "node:url"

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../../..")

/** The binary's bin script, as `npx reprise` runs it. */
export const bin = path.join(repoRoot, "packages/cli/bin/reprise.js")

/** `reprise chat` against `base`, with short backoffs (5 ms, at most 20 ms), then `extra`. */
export const chatArgs = (base: string, ...extra: ReadonlyArray<string>) => [
  "chat",
  "--base-url",
  base,
  "--model",
  "test-model",
  "--backoff-base",
  "5",
  "--backoff-max",
  "20",
  ...extra
]

/** Scripts `route` (`openai-chat` unless given) for this test: its base URL and its request count. */
export const setup = (script: SimulatorScript.RouteScript, route: SimulatorScript.Route = "openai-chat") =>
  Effect.gen(function*() {
    const sim = yield* Simulator.Simulator
    yield* sim.setScript({ routes: { [route]: script } })
    return { sim, base: sim.baseUrl(route), count: sim.count(route) }
  })

/** The environment of a child: the machine's, without any provider or reprise variable. */
const cleanEnv = (): Record<string, string> => {
  const env: Record<string, string> = {}
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined || /^(OPENAI_|ANTHROPIC_|REPRISE_|OTEL_)/.test(k)) continue
    env[k] = v
  }
  return env
}

export interface Result {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly stdout: string
  readonly stderr: string
  /** Milliseconds from the spawn to the exit. */
  readonly took: number
}

export interface Running {
  readonly child: ChildProcessWithoutNullStreams
  readonly stdout: () => string
  readonly stderr: () => string
  /** Resolves when stdout has printed text matching `pattern`; past `within`, when given, the test fails. */
  readonly awaitStdout: (pattern: RegExp, within?: Duration.DurationInput | undefined) => Effect.Effect<void>
  /** Resolves when stderr has printed text matching `pattern`; past `within`, when given, the test fails. */
  readonly awaitStderr: (pattern: RegExp, within?: Duration.DurationInput | undefined) => Effect.Effect<void>
  readonly write: (text: string) => Effect.Effect<void>
  readonly end: Effect.Effect<void>
  readonly exit: Effect.Effect<Result>
  /** The exit, within `within`: past it the test fails (and the process is killed with the scope). */
  readonly exitWithin: (within: Duration.DurationInput) => Effect.Effect<Result>
}

export interface Options {
  /** The child's working directory; the repository's root unless given. */
  readonly cwd?: string | undefined
  /** {@link run} only: the bound on the exit, as {@link Running.exitWithin}; none unless given. */
  readonly within?: Duration.DurationInput | undefined
}

/**
 * `effect`, or a defect saying `what()` once `within`, when given, has passed: real time (a child runs on the
 * machine's clock), also under the `TestClock` of `it.effect`.
 */
const bounded = <A>(
  effect: Effect.Effect<A>,
  within: Duration.DurationInput | undefined,
  what: () => string
): Effect.Effect<A> =>
  within === undefined ? effect : effect.pipe(
    Effect.timeoutFail({ duration: within, onTimeout: () => new Error(what()) }),
    TestServices.provideLive,
    Effect.orDie
  )

/** Starts the real `reprise` binary (node + its bin script), as `npx reprise` does. */
export const start = (args: ReadonlyArray<string>, env: Record<string, string> = {}, options: Options = {}) =>
  Effect.acquireRelease(
    Effect.sync((): Running => {
      const cwd = options.cwd ?? repoRoot
      const started = performance.now()
      const child = spawn(process.execPath, [bin, ...args], { cwd, env: { ...cleanEnv(), ...env } })
      let stdout = ""
      let stderr = ""
      const waiters: Array<{ readonly on: "stdout" | "stderr"; readonly pattern: RegExp; readonly done: () => void }> =
        []
      const wake = () => {
        for (const w of [...waiters]) {
          if (w.pattern.test(w.on === "stdout" ? stdout : stderr)) {
            waiters.splice(waiters.indexOf(w), 1)
            w.done()
          }
        }
      }
      child.stdout.setEncoding("utf8").on("data", (d: string) => {
        stdout += d
        wake()
      })
      child.stderr.setEncoding("utf8").on("data", (d: string) => {
        stderr += d
        wake()
      })
      const awaitText = (on: "stdout" | "stderr") => (pattern: RegExp, within?: Duration.DurationInput) =>
        bounded(
          Effect.async<void>((resume) => {
            if (pattern.test(on === "stdout" ? stdout : stderr)) return resume(Effect.void)
            waiters.push({ on, pattern, done: () => resume(Effect.void) })
          }),
          within,
          () => `${on} never matched ${pattern}: ${on === "stdout" ? stdout : stderr}`
        )
      const exited = new Promise<Result>((resolve) =>
        child.on(
          "close",
          (code, signal) => resolve({ code, signal, stdout, stderr, took: performance.now() - started })
        )
      )
      const exit = Effect.promise(() => exited)
      return {
        child,
        stdout: () => stdout,
        stderr: () => stderr,
        awaitStdout: awaitText("stdout"),
        awaitStderr: awaitText("stderr"),
        write: (text) => Effect.async<void>((resume) => void child.stdin.write(text, () => resume(Effect.void))),
        end: Effect.sync(() => void child.stdin.end()),
        exit,
        exitWithin: (within) =>
          bounded(exit, within, () => `still running after ${Duration.format(within)}; stderr: ${stderr}`)
      }
    }),
    (running) => Effect.sync(() => running.child.exitCode === null && running.child.kill("SIGKILL"))
  )

/** Runs the binary to completion with empty stdin (within `options.within`, when given). */
export const run = (args: ReadonlyArray<string>, env: Record<string, string> = {}, options: Options = {}) =>
  Effect.scoped(Effect.flatMap(start(args, env, options), (running) =>
    Effect.zipRight(
      running.end,
      options.within === undefined ? running.exit : running.exitWithin(options.within)
    )))

/** A session file (not yet created) in a new temporary directory. */
export const tempSession = () => path.join(fs.mkdtempSync(path.join(os.tmpdir(), "reprise-lock-")), "session.jsonl")

/**
 * Another process holding the lock of `session` (the CLI's own `SessionLock`, from the build: `hold-session.mjs`)
 * until the returned `release` closes its stdin, continuing it first in case a test stopped it: a stand-in for
 * another reprise in a long turn. Released with the scope.
 */
export const holder = (session: string) =>
  Effect.acquireRelease(
    Effect.async<{ readonly pid: number; readonly release: Effect.Effect<void> }>((resume) => {
      const child = spawn(process.execPath, [
        path.join(repoRoot, "packages/cli/test/support/hold-session.mjs"),
        session
      ])
      let out = ""
      let closed = false
      child.on("close", () => (closed = true))
      child.stdout.setEncoding("utf8").on("data", (d: string) => {
        out += d
        if (/held \d+\n/.test(out)) {
          resume(Effect.succeed({
            pid: child.pid!,
            release: Effect.async<void>((done) => {
              if (closed) return done(Effect.void)
              child.on("close", () => done(Effect.void))
              child.kill("SIGCONT")
              child.stdin.end()
            })
          }))
        }
      })
      child.stderr.setEncoding("utf8").on("data", (d: string) => process.stderr.write(d))
    }),
    (h) => h.release
  )

export interface Received {
  readonly path: string
  readonly headers: http.IncomingHttpHeaders
  readonly body: Buffer
}

/**
 * A collector on 127.0.0.1 that records each request once its body has arrived, then answers `200 {}` (or, with
 * `answer: false`, never answers). Everything recorded was received before the answer went out, so before the
 * client could go on.
 */
export const collector = (options: { readonly answer: boolean } = { answer: true }) =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly received: Array<Received>; readonly server: http.Server }>(
      (resume) => {
        const received: Array<Received> = []
        const server = http.createServer((req, res) => {
          const chunks: Array<Buffer> = []
          req.on("data", (chunk: Buffer) => chunks.push(chunk))
          req.on("end", () => {
            received.push({ path: req.url ?? "", headers: req.headers, body: Buffer.concat(chunks) })
            if (options.answer) res.writeHead(200, { "content-type": "application/json" }).end("{}")
          })
        })
        server.listen(0, "127.0.0.1", () => {
          const { port } = server.address() as { readonly port: number }
          resume(Effect.succeed({ url: `http://127.0.0.1:${port}`, received, server }))
        })
      }
    ),
    ({ server }) =>
      Effect.async<void>((resume) => {
        server.closeAllConnections()
        server.close(() => resume(Effect.void))
      })
  )
