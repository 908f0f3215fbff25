#!/usr/bin/env node
/**
 * stdio_server.mjs — an MCP server over stdio built with the official TypeScript SDK
 * (@modelcontextprotocol/sdk 1.x, McpServer + StdioServerTransport), the same tools as
 * tests/peers/py_stdio_server.py:
 *   echo(text)  -> text (and writes `echo: <text>` to stderr)
 *   slow(steps) -> `steps` progress notifications ~50 ms apart, then "done"
 *   hang()      -> never answers
 * Install with scripts/setup-peers.sh (npm ci in this folder).
 */
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "mcpscope-node-stdio-peer", version: "1.0.0" });
const text = (t) => ({ content: [{ type: "text", text: t }] });

server.tool("echo", "Returns its argument.", { text: z.string() }, async ({ text: t }) => {
  process.stderr.write(`echo: ${t}\n`);
  return text(t);
});
server.tool("slow", "Sends progress, then returns done.", { steps: z.number().int() }, async ({ steps }, extra) => {
  const token = extra._meta?.progressToken;
  for (let i = 0; i < steps; i++) {
    if (token !== undefined) {
      await extra.sendNotification({
        method: "notifications/progress",
        params: { progressToken: token, progress: i + 1, total: steps, message: `step ${i + 1}` },
      });
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return text("done");
});
server.tool("hang", "Never answers.", async () => new Promise(() => {}));

await server.connect(new StdioServerTransport());
