#!/usr/bin/env node
/**
 * http_server.mjs PORT [--mode healthy|dies] — an MCP server built with the official TypeScript SDK
 * (@modelcontextprotocol/sdk 1.x: McpServer + StreamableHTTPServerTransport on Node's http module),
 * the same tools as tests/peers/py_server.py.
 *
 * Serves Streamable HTTP at http://127.0.0.1:PORT/mcp (PORT 0 picks a free port) and prints
 * `READY <port>` on stdout once it accepts connections. Stateful: every `initialize` opens a session
 * (`Mcp-Session-Id`) with its own transport; the 1.x SDK speaks revisions up to 2025-11-25, so a
 * request without a session that is not `initialize` (e.g. a 2026-07-28 `server/discover` probe)
 * gets 400, and an unknown session gets 404.
 *
 * Tools:
 *   echo(text)   -> text
 *   slow(steps)  -> `steps` progress notifications ~50 ms apart (or `interval_ms`), then "done"
 *   ask()        -> one elicitation (`elicitation/create` on the call's own stream); returns
 *                   "answer=<value>" or "action=<decline|cancel>"
 *   peek()       -> "peeked" (annotated readOnlyHint)
 *   poke()       -> "poked" (no hints). In `--mode dies` the first poke sends one progress
 *                   notification, waits ~300 ms and then the whole process dies before the result.
 *
 * Part of mcpscope's interop tests; install with scripts/setup-peers.sh (npm ci in this folder).
 */
import { randomUUID } from "node:crypto";
import http from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { ElicitResultSchema, isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import { readJson, reject } from "./http_common.mjs";

function parseArgs(argv) {
  const out = { port: 0, mode: "healthy" };
  let positional = 0;
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--mode") out.mode = argv[++i];
    else if (positional++ === 0) out.port = Number(argv[i]);
    else throw new Error(`unexpected argument ${argv[i]}`);
  }
  if (!["healthy", "dies"].includes(out.mode)) throw new Error(`bad mode ${out.mode}`);
  if (!Number.isInteger(out.port) || out.port < 0) throw new Error("usage: http_server.mjs PORT [--mode healthy|dies]");
  return out;
}

const args = parseArgs(process.argv.slice(2));
const text = (t) => ({ content: [{ type: "text", text: t }] });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let poked = 0;

/** Sends one progress notification for the call, if the client asked for progress. */
async function progress(extra, value, total, message) {
  const token = extra._meta?.progressToken;
  if (token === undefined) return;
  await extra.sendNotification({
    method: "notifications/progress",
    params: { progressToken: token, progress: value, total, message },
  });
}

/** One McpServer per session, as the SDK expects (a server connects to one transport). */
function build() {
  const server = new McpServer({ name: "mcpscope-node-peer", version: "1.0.0" });

  server.registerTool(
    "echo",
    { description: "Returns its argument.", inputSchema: { text: z.string() } },
    async ({ text: t }) => text(t),
  );

  server.registerTool(
    "slow",
    {
      description: "Sends `steps` progress notifications, then returns done.",
      inputSchema: { steps: z.number().int(), interval_ms: z.number().int().optional() },
    },
    async ({ steps, interval_ms }, extra) => {
      for (let i = 0; i < steps; i++) {
        await progress(extra, i + 1, steps, `step ${i + 1}`);
        await sleep(interval_ms ?? 50);
      }
      return text("done");
    },
  );

  server.registerTool("ask", { description: "Asks the client a question through elicitation." }, async (extra) => {
    // extra.sendRequest ties the request to this call, so it travels on the call's own stream.
    const answer = await extra.sendRequest(
      {
        method: "elicitation/create",
        params: {
          mode: "form",
          message: "What value should ask() return?",
          requestedSchema: {
            type: "object",
            properties: { value: { type: "string", title: "Value" } },
            required: ["value"],
          },
        },
      },
      ElicitResultSchema,
    );
    if (answer.action === "accept" && answer.content) return text(`answer=${answer.content.value}`);
    return text(`action=${answer.action}`);
  });

  server.registerTool(
    "peek",
    { description: "Reads state.", annotations: { readOnlyHint: true } },
    async () => text("peeked"),
  );

  server.registerTool("poke", { description: "Changes state." }, async (extra) => {
    poked += 1;
    if (args.mode === "dies" && poked === 1) {
      await progress(extra, 0, 1, "poking");
      await sleep(300);
      process.stdout.write("DYING\n", () => process.exit(1));
      await new Promise(() => {});
    }
    return text("poked");
  });

  return server;
}

/** Live sessions by `Mcp-Session-Id`. */
const sessions = new Map();


/** A new session's transport, registered once the SDK assigns its id. */
async function openSession() {
  const transport = new StreamableHTTPServerTransport({
    sessionIdGenerator: () => randomUUID(),
    onsessioninitialized: (id) => sessions.set(id, transport),
  });
  transport.onclose = () => {
    if (transport.sessionId) sessions.delete(transport.sessionId);
  };
  await build().connect(transport);
  return transport;
}

async function handle(req, res) {
  const url = new URL(req.url ?? "/", "http://127.0.0.1");
  if (url.pathname !== "/mcp") return reject(res, 404, "Not found");
  const sid = req.headers["mcp-session-id"];
  let body;
  if (req.method === "POST") {
    try {
      body = await readJson(req);
    } catch {
      res.writeHead(400, { "content-type": "application/json" });
      return res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32700, message: "Parse error" }, id: null }));
    }
  }
  if (typeof sid === "string") {
    const transport = sessions.get(sid);
    if (!transport) return reject(res, 404, "Session not found");
    return transport.handleRequest(req, res, body);
  }
  if (req.method === "POST" && body !== undefined && !Array.isArray(body) && isInitializeRequest(body)) {
    const transport = await openSession();
    return transport.handleRequest(req, res, body);
  }
  return reject(res, 400, "Bad Request: no valid session id (this server speaks the initialize handshake)");
}

const httpServer = http.createServer((req, res) => {
  handle(req, res).catch((e) => {
    process.stderr.write(`http_server.mjs: ${e && e.stack ? e.stack : e}\n`);
    if (!res.headersSent) reject(res, 500, "Internal error");
    else res.end();
  });
});

httpServer.listen(args.port, "127.0.0.1", () => {
  process.stdout.write(`READY ${httpServer.address().port}\n`);
});

for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, () => {
    for (const t of sessions.values()) t.close().catch(() => {});
    httpServer.close();
    process.exit(0);
  });
}
