// Module loader hooks for sigint-on-listener.mjs: the first time a module of the CLI bundle is loaded, SIGINT the
// process (the hooks run off the main thread; the main thread handles the signal while it waits for the module).
let sent = false
export async function load(url, context, next) {
  if (!sent && url.includes("/dist/bundle/")) {
    sent = true
    process.kill(process.pid, "SIGINT")
  }
  return next(url, context)
}
