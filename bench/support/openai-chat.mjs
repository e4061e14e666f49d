// The peer of figure 7: a plain script using the official `openai` SDK, streaming one chat completion from the
// base URL given as its argument and printing the text and one newline, as `reprise chat` does.
import OpenAI from "openai"

const client = new OpenAI({ baseURL: process.argv[2], apiKey: process.env.OPENAI_API_KEY, maxRetries: 0 })
const stream = await client.chat.completions.create({
  model: "bench",
  messages: [{ role: "user", content: "hi" }],
  stream: true
})
const parts = []
for await (const chunk of stream) {
  const delta = chunk.choices[0]?.delta?.content
  if (delta) parts.push(delta)
}
process.stdout.write(parts.join("") + "\n")
