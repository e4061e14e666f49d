/**
 * A real terminal for the CLI suites: a detached tmux session of a fixed size, on a server of its own (`tmux -L`),
 * running one shell command, with its screen read back by `capture-pane`. Poll the screen with {@link Pane.waitFor};
 * kill the server with {@link killServer} when the suite ends.
 */
import { Duration, Effect } from "effect"
import { execFile, spawnSync } from "node:child_process"
import * as fs from "node:fs"
import * as path from "node:path"

/** A string as one word of a POSIX shell command. */
export const quote = (word: string): string => `'${word.replace(/'/g, `'\\''`)}'`

/** Runs tmux on `socket`; fails with its stderr. */
const tmux = (socket: string, args: ReadonlyArray<string>) =>
  Effect.async<string, Error>((resume) => {
    execFile("tmux", ["-L", socket, "-f", "/dev/null", ...args], { encoding: "utf8" }, (error, stdout, stderr) =>
      resume(error === null ? Effect.succeed(stdout) : Effect.fail(new Error(`tmux ${args[0]}: ${stderr || error}`))))
  })

export interface Pane {
  /** The screen now: its lines with wrapped lines joined and trailing blanks dropped, empty lines at the end left out. */
  readonly screen: Effect.Effect<string, Error>
  /** Types `keys` into the pane, in tmux's key names (`C-c` is Ctrl-C: the terminal sends SIGINT). */
  readonly keys: (...keys: ReadonlyArray<string>) => Effect.Effect<void, Error>
  /** Every distinct screen seen by {@link waitFor} so far, in order. */
  readonly seen: ReadonlyArray<string>
  /**
   * Reads the screen every 20 ms until `done` holds and returns that screen; fails after `timeout` naming `what` and
   * showing the last screen.
   */
  readonly waitFor: (
    what: string,
    done: (screen: string) => boolean,
    timeout?: Duration.DurationInput
  ) => Effect.Effect<string, Error>
}

/**
 * Starts a session of `columns` × `rows` on the tmux server `socket` (starting the server) running `command` with
 * `sh`. The pane stays after the command ends only if the command itself waits (e.g. `…; exec sleep 600`).
 */
export const open = (socket: string, command: string, size: { readonly columns: number; readonly rows: number }) =>
  Effect.gen(function*() {
    const name = `pane${Math.random().toString(36).slice(2, 8)}`
    yield* tmux(socket, [
      "new-session",
      "-d",
      "-s",
      name,
      "-x",
      String(size.columns),
      "-y",
      String(size.rows),
      `exec sh -c ${quote(command)}`
    ])
    const screen = tmux(socket, ["capture-pane", "-p", "-J", "-t", name]).pipe(
      Effect.map((text) => text.split("\n").map((line) => line.trimEnd()).join("\n").trimEnd())
    )
    const seen: Array<string> = []
    const waitFor = (what: string, done: (screen: string) => boolean, timeout: Duration.DurationInput = "8 seconds") =>
      Effect.gen(function*() {
        let last = ""
        return yield* Effect.gen(function*() {
          while (true) {
            last = yield* screen
            if (seen.at(-1) !== last) seen.push(last)
            if (done(last)) return last
            yield* Effect.sleep(Duration.millis(20))
          }
        }).pipe(
          Effect.timeoutFail({
            duration: timeout,
            onTimeout: () => new Error(`the terminal never showed ${what}; it shows:\n${last}`)
          })
        )
      })
    const keys = (...keys: ReadonlyArray<string>) => Effect.asVoid(tmux(socket, ["send-keys", "-t", name, ...keys]))
    return { screen, keys, seen, waitFor } satisfies Pane
  })

/** Whether tmux can be run here. */
export const available = (): boolean => spawnSync("tmux", ["-V"]).status === 0

/** Stops the tmux server `socket` and every session on it, and removes its socket file (tmux leaves it). */
export const killServer = (socket: string): void => {
  spawnSync("tmux", ["-L", socket, "kill-server"])
  const dir = path.join(process.env.TMUX_TMPDIR ?? "/tmp", `tmux-${process.getuid?.() ?? 0}`)
  fs.rmSync(path.join(dir, socket), { force: true })
}
