#!/usr/bin/env node
/**
 * stdio_client.mjs -- COMMAND ARGS… — an MCP client built with the official TypeScript SDK
 * (@modelcontextprotocol/sdk 1.x, StdioClientTransport) that launches COMMAND as a stdio server,
 * directly or through `mcpscope stdio`. Runs tools/list, echo and slow (counting progress
 * notifications) and prints one JSON object:
 *   {"tools": [...], "echo": ..., "slow": ..., "progress": N, "protocol": "..."}
 * Install with scripts/setup-peers.sh (npm ci in this folder).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const argv = process.argv.slice(2);
const command = argv[0] === "--" ? argv.slice(1) : argv;
if (command.length === 0) throw new Error("usage: stdio_client.mjs -- COMMAND ARGS…");

const textOf = (r) => (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");

const transport = new StdioClientTransport({ command: command[0], args: command.slice(1), stderr: "inherit" });
const client = new Client({ name: "mcpscope-node-stdio-peer", version: "1.0.0" });
await client.connect(transport);
const out = { protocol: transport.protocolVersion ?? null };
const tools = await client.listTools();
out.tools = tools.tools.map((t) => t.name).sort();
out.echo = textOf(await client.callTool({ name: "echo", arguments: { text: "hello mcpscope" } }));
let progress = 0;
out.slow = textOf(
  await client.callTool({ name: "slow", arguments: { steps: 5 } }, undefined, {
    onprogress: () => {
      progress += 1;
    },
  }),
);
out.progress = progress;
await client.close();
console.log(JSON.stringify(out, Object.keys(out).sort()));
