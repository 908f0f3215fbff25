#!/usr/bin/env node
/**
 * matrix_client.mjs URL [--tool slow] — one tool call with the official TypeScript SDK, as
 * `mcpscope matrix` runs a client. Calls the tool once (`slow` with 3 progress steps 150 ms apart
 * by default) and prints `result: TEXT` with exit code 0, or `error: WHAT` with exit code 1. The
 * SDK's own request timeout (60 s) is its only bound.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const ARGS = { slow: { steps: 3, interval_ms: 150 }, echo: { text: "hello" } };

const argv = process.argv.slice(2);
const url = argv[0];
const toolAt = argv.indexOf("--tool");
const tool = toolAt >= 0 ? argv[toolAt + 1] : "slow";

try {
  const client = new Client({ name: "mcpscope-matrix-node", version: "1.0.0" });
  client.onerror = () => {};
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  const r = await client.callTool({ name: tool, arguments: ARGS[tool] ?? {} }, undefined, {
    onprogress: (p) => console.log(`progress ${p.progress}`),
  });
  const text = (r.content || []).map((c) => c.text ?? "").join("");
  console.log(`result: ${text}`);
  process.exit(0);
} catch (e) {
  console.log(`error: ${e && e.name}: ${e && e.message}`);
  process.exit(1);
}
