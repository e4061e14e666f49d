/**
 * The relay's chat page (`GET /`): one self-contained HTML document, its CSS and script inline, that asks the relay
 * itself (`POST /v1/chat/completions` on its own origin, `"stream": true`, `X-Reprise-Preview: reset`) and shows the
 * reply live: an attempt's text as it streams, removed with a notice line when the relay rolls that attempt back,
 * and the serving route, model and number of attempts once it committed. Stop aborts the request, which the relay
 * turns into an upstream cancel. A key, when the relay requires one, is kept in the page's memory only.
 *
 * The script parses with `RelayClient.make`, inlined from its source (`make.toString()`): the function is
 * self-contained, so the page and the published client run the same parser.
 *
 * @internal
 */
import * as Crypto from "node:crypto"
import * as RelayClient from "../RelayClient.js"

const style = `
:root { color-scheme: light dark; --fg: #1b1b1f; --bg: #fafafa; --muted: #5f6368; --line: #d0d4da; --accent: #0b57d0;
  --warn: #8a4b00; --warn-bg: #fff4e5; --err: #b3261e; }
@media (prefers-color-scheme: dark) { :root { --fg: #e6e6ea; --bg: #16171a; --muted: #a0a4ab; --line: #3a3d44;
  --accent: #8ab4f8; --warn: #ffcc80; --warn-bg: #2e2414; --err: #f2b8b5; } }
* { box-sizing: border-box; }
[hidden] { display: none !important; }
body { margin: 0; font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg); background: var(--bg); }
main { max-width: 46rem; margin: 0 auto; padding: 1.25rem; }
h1 { font-size: 1.15rem; margin: 0 0 .25rem; }
.lede { margin: 0 0 1rem; color: var(--muted); font-size: .9rem; }
.turn { border-top: 1px solid var(--line); padding: .75rem 0; }
.prompt { margin: 0 0 .4rem; font-weight: 600; white-space: pre-wrap; }
.answer { margin: 0; white-space: pre-wrap; min-height: 1.5em; }
.turn[data-state="streaming"] .answer { color: var(--muted); }
.turn[data-state="streaming"] .answer::after { content: "\\2589"; animation: blink 1s steps(2) infinite; }
.turn[data-state="stopped"] .answer, .turn[data-state="failed"] .answer { color: var(--muted); text-decoration: line-through; }
@keyframes blink { to { visibility: hidden; } }
.notices { list-style: none; margin: .4rem 0 0; padding: 0; font-size: .85rem; }
.notice { color: var(--warn); background: var(--warn-bg); border-radius: 4px; padding: .15rem .5rem; margin-top: .25rem; }
.notice.error { color: var(--err); }
.meta { margin: .4rem 0 0; font-size: .8rem; color: var(--muted); }
form { border-top: 1px solid var(--line); padding-top: .75rem; display: grid; gap: .5rem; }
label { font-size: .85rem; font-weight: 600; }
.muted { font-weight: 400; color: var(--muted); }
textarea, input { width: 100%; font: inherit; color: inherit; background: transparent; border: 1px solid var(--line);
  border-radius: 6px; padding: .45rem .6rem; }
textarea { resize: vertical; }
.fields { display: grid; grid-template-columns: 1fr 1fr; gap: .5rem; }
.fields > div { display: grid; gap: .2rem; }
.buttons { display: flex; gap: .5rem; align-items: center; }
button { font: inherit; border-radius: 6px; padding: .4rem 1rem; border: 1px solid var(--accent); cursor: pointer; }
#send { background: var(--accent); color: var(--bg); }
#stop { background: transparent; color: var(--accent); }
button:disabled { opacity: .45; cursor: default; }
#status { margin: 0; font-size: .85rem; color: var(--muted); }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip: rect(0 0 0 0); white-space: nowrap; }
`

// The page's own code, plain ES2020 in a string (the server's TypeScript has no DOM types): it renders what the inlined
// parser says, state by state. No template literal and no "</" in it, so it embeds as is.
const app = `
const main = document.querySelector("main");
const form = document.getElementById("form");
const promptBox = document.getElementById("prompt");
const modelBox = document.getElementById("model");
const keyRow = document.getElementById("key-row");
const keyBox = document.getElementById("key");
const send = document.getElementById("send");
const stop = document.getElementById("stop");
const status = document.getElementById("status");
const turns = document.getElementById("turns");
// the conversation: committed turns only, in memory
const messages = [];
let controller = undefined;

const element = (tag, className, text) => {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
};
// a route's name, and its model unless the name says it
const routeText = (route) => route.name.includes(route.model) ? route.name : route.name + " (" + route.model + ")";
const seconds = (ms) => (ms / 1000).toFixed(1) + " s";
const rollbackText = (r) => {
  let text = "attempt " + r.attempt + " discarded: " + r.reason;
  if (r.nextAttempt !== undefined) {
    text += "; retrying in " + seconds(r.delayMs || 0);
    if (r.route) text += " on " + routeText(r.route);
  }
  return text;
};
const busy = (on) => {
  send.disabled = on;
  stop.disabled = !on;
  promptBox.readOnly = on;
};

const ask = async (prompt) => {
  const turn = element("article", "turn");
  turn.dataset.state = "streaming";
  turn.append(element("p", "prompt", prompt));
  const answer = element("p", "answer");
  answer.setAttribute("aria-live", "polite");
  answer.setAttribute("aria-label", "Reply");
  // read out once the reply settled, not delta by delta
  answer.setAttribute("aria-busy", "true");
  const notices = element("ul", "notices");
  notices.setAttribute("role", "log");
  notices.setAttribute("aria-label", "Recovery notices");
  const meta = element("p", "meta");
  turn.append(answer, notices, meta);
  turns.append(turn);
  const notice = (text, error) => notices.append(element("li", error ? "notice error" : "notice", text));
  const finish = (state, text) => {
    turn.dataset.state = state;
    answer.setAttribute("aria-busy", "false");
    status.textContent = text;
    controller = undefined;
    busy(false);
  };

  let shown = "";
  let rollbacks = 0;
  const render = (state) => {
    for (; rollbacks < state.rollbacks.length; rollbacks++) notice(rollbackText(state.rollbacks[rollbacks]), false);
    const text = state.committed !== undefined ? state.committed : state.preview;
    if (text !== shown) {
      if (text.startsWith(shown)) answer.append(text.slice(shown.length));
      else answer.textContent = text;
      shown = text;
    }
    const last = state.rollbacks[state.rollbacks.length - 1];
    if (state.done || !state.attempt) return;
    if (last && last.attempt === state.attempt.attempt) {
      status.textContent = last.nextAttempt !== undefined ? "retrying: attempt " + last.nextAttempt + " next" : "";
    } else {
      status.textContent = "attempt " + state.attempt.attempt + " of " + state.attempt.maxAttempts +
        (state.attempt.route ? " on " + routeText(state.attempt.route) : "");
    }
  };

  controller = new AbortController();
  const signal = controller.signal;
  busy(true);
  status.textContent = "sending";
  const outgoing = messages.concat([{ role: "user", content: prompt }]);
  const headers = { "content-type": "application/json", "x-reprise-preview": "reset" };
  if (keyBox.value !== "") headers.authorization = "Bearer " + keyBox.value;
  try {
    const response = await fetch("/v1/chat/completions", {
      method: "POST",
      headers,
      body: JSON.stringify({ model: modelBox.value, stream: true, messages: outgoing }),
      signal,
      cache: "no-store"
    });
    if (!response.ok || response.body === null) {
      let message = "HTTP " + response.status;
      try {
        const body = await response.json();
        if (body && body.error && typeof body.error.message === "string") message += ": " + body.error.message;
      } catch (e) {}
      if (response.status === 401) {
        keyRow.hidden = false;
        message += " (this relay requires a key: enter it and send again)";
        keyBox.focus();
      }
      notice(message, true);
      finish("failed", "failed");
      return;
    }
    const parser = makeParser(render);
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    while (!parser.state().done) {
      const read = await reader.read();
      if (read.done) {
        parser.feed(decoder.decode());
        parser.end();
      } else {
        parser.feed(decoder.decode(read.value, { stream: true }));
      }
    }
    reader.cancel().catch(() => undefined);
    const state = parser.state();
    if (state.committed !== undefined) {
      messages.push({ role: "user", content: prompt }, { role: "assistant", content: state.committed });
      const c = state.commit;
      const parts = [];
      if (c.route) parts.push("served by " + routeText(c.route));
      if (c.model) parts.push("model " + c.model);
      parts.push(c.attempts + (c.attempts === 1 ? " attempt" : " attempts"));
      meta.textContent = parts.join(" \\u00b7 ");
      finish("committed", "committed");
    } else {
      answer.textContent = "";
      notice(state.error ? state.error.message : "no answer", true);
      finish("failed", "failed");
    }
  } catch (error) {
    if (signal.aborted) {
      notice("stopped: the request was aborted and nothing was committed", false);
      finish("stopped", "stopped");
    } else {
      notice("request failed: " + (error && error.message ? error.message : String(error)), true);
      finish("failed", "failed");
    }
  }
};

form.addEventListener("submit", (event) => {
  event.preventDefault();
  const prompt = promptBox.value.trim();
  if (prompt === "" || controller !== undefined) return;
  promptBox.value = "";
  ask(prompt);
});
promptBox.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey)) form.requestSubmit();
});
stop.addEventListener("click", () => {
  if (controller !== undefined) controller.abort();
});
if (main.dataset.model) modelBox.value = main.dataset.model;
if (main.dataset.keyRequired === "true") keyRow.hidden = false;
`

/** The inline script: the parser, then the page's code, in one strict function scope. */
const script = `(() => {
"use strict";
const makeParser = (${RelayClient.make.toString()});
${app}
})();`

if (script.includes("</")) throw new Error("the page's inline script would end its element early")

const sha256 = (text: string): string => `'sha256-${Crypto.createHash("sha256").update(text).digest("base64")}'`

/**
 * The headers `GET /` is served with: a policy that lets the page run its own inline script and style and talk to
 * its own origin only.
 *
 * @internal
 */
export const headers: Readonly<Record<string, string>> = {
  "content-type": "text/html; charset=utf-8",
  "content-security-policy": `default-src 'none'; script-src ${sha256(script)}; style-src ${
    sha256(style)
  }; connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`,
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "cache-control": "no-store"
}

const escape = (text: string): string =>
  text.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;").replace(/>/g, "&gt;")

/** @internal */
export interface Options {
  /** The model the page asks for unless the user types another (the primary route's). */
  readonly model?: string | undefined
  /** Show the key field from the start (it appears anyway when the relay answers 401). */
  readonly keyRequired?: boolean | undefined
}

/**
 * The page, with the model field filled with `options.model`.
 *
 * @internal
 */
export const render = (options: Options = {}): string =>
  `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>reprise relay</title>
<link rel="icon" href="data:,">
<style>${style}</style>
</head>
<body>
<main data-model="${escape(options.model ?? "")}" data-key-required="${options.keyRequired === true}">
<h1>reprise relay</h1>
<p class="lede">Each reply runs upstream with recovery. An attempt that fails mid-stream is removed from the page
before the next one streams; the answer is final once the relay commits it.</p>
<section id="turns" aria-label="Conversation"></section>
<form id="form">
<label for="prompt">Prompt</label>
<textarea id="prompt" name="prompt" rows="3" required placeholder="Ask something (Ctrl+Enter sends)"></textarea>
<div class="fields">
<div><label for="model">Model</label><input id="model" name="model" required autocomplete="off" spellcheck="false"></div>
<div id="key-row" hidden><label for="key">Relay key <span class="muted">(kept in this tab's memory only)</span></label>
<input id="key" name="key" type="password" autocomplete="off" spellcheck="false"></div>
</div>
<div class="buttons">
<button id="send" type="submit">Send</button>
<button id="stop" type="button" disabled>Stop</button>
<p id="status" role="status" aria-live="polite"></p>
</div>
</form>
</main>
<script>${script}</script>
</body>
</html>
`

/**
 * The page with an empty model field.
 *
 * @internal
 */
export const html: string = render()
