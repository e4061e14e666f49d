// What the CLI bundle gets for `import "undici"`: the part of undici that @effect/platform-node's NodeHttpClient
// uses (an Agent, the global dispatcher, and the `request` API that undici's index installs on Dispatcher), without
// the rest of undici's index (fetch, WebSocket, EventSource, mocks, caches, interceptors), whose loading was 70 ms
// of `reprise chat`'s start. scripts/bundle.mjs checks that the names platform-node reads are all here.
"use strict"
const Dispatcher = require("undici/lib/dispatcher/dispatcher")
const Agent = require("undici/lib/dispatcher/agent")
const errors = require("undici/lib/core/errors")
const api = require("undici/lib/api")
const { getGlobalDispatcher, setGlobalDispatcher } = require("undici/lib/global")

Object.assign(Dispatcher.prototype, api)

module.exports = { Agent, Dispatcher, errors, getGlobalDispatcher, setGlobalDispatcher }
