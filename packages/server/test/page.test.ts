import { assert, describe, it } from "@effect/vitest"
import * as RelayClient from "@reprise/server/RelayClient"
import * as Crypto from "node:crypto"
import * as Page from "../src/internal/page.js"

const hash = (text: string) => `'sha256-${Crypto.createHash("sha256").update(text).digest("base64")}'`
const between = (html: string, tag: string) => {
  const all = Array.from(html.matchAll(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, "g")), (m) => m[1]!)
  assert.strictEqual(all.length, 1, `one <${tag}>`)
  return all[0]!
}

describe("the chat page's document", () => {
  it("runs RelayClient's own parser, inlined", () => {
    assert.include(between(Page.html, "script"), `const makeParser = (${RelayClient.make.toString()});`)
  })

  it("refers to nothing outside itself but its own origin's chat completions", () => {
    assert.notMatch(Page.html, /\b(src|href)="(?!data:)/)
    assert.notMatch(Page.html, /https?:\/\//)
    assert.deepStrictEqual(Array.from(Page.html.matchAll(/fetch\("([^"]*)"/g), (m) => m[1]), ["/v1/chat/completions"])
  })

  it("is served with a policy that allows exactly its inline script and style", () => {
    const policy = Page.headers["content-security-policy"]!
    assert.include(policy, `script-src ${hash(between(Page.html, "script"))};`)
    assert.include(policy, `style-src ${hash(between(Page.html, "style"))};`)
    assert.include(policy, "default-src 'none'")
    assert.include(policy, "connect-src 'self'")
  })

  it("fills the model field from the options, escaped", () => {
    assert.include(Page.render({ model: `gpt-4o"><x` }), `data-model="gpt-4o&quot;&gt;&lt;x"`)
    assert.include(Page.render({ keyRequired: true }), `data-key-required="true"`)
    assert.include(Page.html, `data-model="" data-key-required="false"`)
  })
})
