#!/usr/bin/env node
/**
 * client.mjs URL --scenario healthy|poke [--timeout SECONDS] — an MCP client built with the official
 * TypeScript SDK (@modelcontextprotocol/sdk 1.x, StreamableHTTPClientTransport), driving
 * tests/peers/py_server.py directly or through mcpscope. The 1.x SDK only speaks the `initialize`
 * handshake (it offers 2025-11-25).
 *
 * Scenario healthy: tools/list, echo, slow (counting progress notifications), ask (the elicitation
 * is answered with the fixed value "42"). Prints one JSON object:
 *   {"tools": [...], "echo": ..., "slow": ..., "progress": N, "ask": ..., "protocol": "..."}
 * Scenario poke: calls `poke` once (with a progress callback), bounded by the SDK's request timeout
 * set to --timeout seconds (default 20), and prints
 *   {"outcome": "error"|"result"|"timeout", "error": "...", "elapsed_ms": N, "protocol": "...", ...}
 * Exit code 0 whenever the script itself worked, even if the tool call failed.
 *
 * Install with scripts/setup-peers.sh (npm ci in this folder).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ElicitRequestSchema, ErrorCode } from "@modelcontextprotocol/sdk/types.js";

const ELICIT_ANSWER = "42";

function parseArgs(argv) {
  const out = { url: null, scenario: "healthy", timeout: 20 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--scenario") out.scenario = argv[++i];
    else if (a === "--timeout") out.timeout = Number(argv[++i]);
    else if (a === "--style") i++; // accepted for symmetry with py_client.py; 1.x has one style
    else if (!out.url) out.url = a;
    else throw new Error(`unexpected argument ${a}`);
  }
  if (!out.url) throw new Error("usage: client.mjs URL --scenario healthy|poke [--timeout S]");
  if (!["healthy", "poke"].includes(out.scenario)) throw new Error(`bad scenario ${out.scenario}`);
  return out;
}

const textOf = (r) => (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");

async function healthy(client, transport) {
  const out = { protocol: transport.protocolVersion ?? null };
  const tools = await client.listTools();
  out.tools = tools.tools.map((t) => t.name).sort();
  out.echo = textOf(await client.callTool({ name: "echo", arguments: { text: "hello mcpscope" } }));
  let count = 0;
  const slow = await client.callTool({ name: "slow", arguments: { steps: 5 } }, undefined, {
    onprogress: () => {
      count += 1;
    },
  });
  out.slow = textOf(slow);
  out.progress = count;
  out.ask = textOf(await client.callTool({ name: "ask", arguments: {} }));
  return out;
}

async function poke(client, transport, timeoutS) {
  const out = { protocol: transport.protocolVersion ?? null, progress: 0 };
  const start = performance.now();
  try {
    const r = await client.callTool({ name: "poke", arguments: {} }, undefined, {
      timeout: timeoutS * 1000,
      onprogress: () => {
        out.progress += 1;
      },
    });
    out.outcome = r.isError ? "error" : "result";
    out.result = textOf(r);
    out.error = r.isError ? textOf(r) : "";
  } catch (e) {
    out.outcome = e && e.code === ErrorCode.RequestTimeout ? "timeout" : "error";
    out.error = `${e && e.name}: ${e && e.message}`;
  }
  out.elapsed_ms = Math.round(performance.now() - start);
  // On its timeout the SDK sends notifications/cancelled without awaiting it: let it reach the wire.
  await new Promise((r) => setTimeout(r, 500));
  return out;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  // Hard bound: never hang, whatever the SDK does.
  const guard = setTimeout(() => {
    console.error("client.mjs: hard deadline reached");
    process.exit(3);
  }, (args.timeout + 15) * 1000);
  guard.unref();

  const client = new Client(
    { name: "mcpscope-node-peer", version: "1.0.0" },
    { capabilities: { elicitation: { form: {} } } },
  );
  client.setRequestHandler(ElicitRequestSchema, async () => ({
    action: "accept",
    content: { value: ELICIT_ANSWER },
  }));
  client.onerror = () => {}; // transport noise (e.g. the GET stream dying) is not the scenario's answer
  const transport = new StreamableHTTPClientTransport(new URL(args.url));
  await client.connect(transport);
  const out =
    args.scenario === "healthy" ? await healthy(client, transport) : await poke(client, transport, args.timeout);
  try {
    await Promise.race([client.close(), new Promise((r) => setTimeout(r, 2000))]);
  } catch (e) {
    out.close_error = String(e);
  }
  const keys = Object.keys(out).sort();
  const sorted = Object.fromEntries(keys.map((k) => [k, out[k]]));
  process.stdout.write(JSON.stringify(sorted) + "\n");
  process.exit(0);
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(2);
});
