#!/usr/bin/env node
/**
 * tasks_server.mjs PORT — a task-capable MCP server built with the official TypeScript SDK
 * (@modelcontextprotocol/sdk 1.x experimental tasks: McpServer.experimental.tasks.registerToolTask
 * with the SDK's InMemoryTaskStore), on Streamable HTTP at http://127.0.0.1:PORT/mcp (PORT 0 picks
 * a free port). Prints `READY <port>` once it accepts connections. Stateful (initialize handshake,
 * 2025-11-25).
 *
 * Tools:
 *   slow_task(ms)  -> task-augmented (taskSupport required): the task works `ms` milliseconds,
 *                     then completes with "done after <ms> ms". `tasks/result` waits for it.
 *
 * Part of mcpscope's interop tests; install with scripts/setup-peers.sh (npm ci in this folder).
 */
import { randomUUID } from "node:crypto";
import http from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { isInitializeRequest } from "@modelcontextprotocol/sdk/types.js";
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from "@modelcontextprotocol/sdk/experimental/tasks/stores/in-memory.js";
import { z } from "zod";
import { readJson, reject } from "./http_common.mjs";

const port = Number(process.argv[2] ?? 0);
if (!Number.isInteger(port) || port < 0) throw new Error("usage: tasks_server.mjs PORT");

const taskStore = new InMemoryTaskStore();

function build() {
  const server = new McpServer(
    { name: "mcpscope-node-tasks", version: "1.0.0" },
    {
      capabilities: { tasks: { requests: { tools: { call: {} } }, list: {}, cancel: {} } },
      taskStore,
      taskMessageQueue: new InMemoryTaskMessageQueue(),
    },
  );
  server.experimental.tasks.registerToolTask(
    "slow_task",
    {
      description: "Works `ms` milliseconds as a task, then completes.",
      inputSchema: { ms: z.number().int() },
      execution: { taskSupport: "required" },
    },
    {
      async createTask({ ms }, { taskStore: store, taskRequestedTtl }) {
        const task = await store.createTask({ ttl: taskRequestedTtl, pollInterval: 100 });
        setTimeout(() => {
          store
            .storeTaskResult(task.taskId, "completed", {
              content: [{ type: "text", text: `done after ${ms} ms` }],
            })
            .catch((e) => process.stderr.write(`storeTaskResult: ${e}\n`));
        }, ms);
        return { task };
      },
      async getTask(_args, { taskId, taskStore: store }) {
        return await store.getTask(taskId);
      },
      async getTaskResult(_args, { taskId, taskStore: store }) {
        return await store.getTaskResult(taskId);
      },
    },
  );
  return server;
}

const sessions = new Map();


async function handle(req, res) {
  const url = new URL(req.url ?? "/", "http://127.0.0.1");
  if (url.pathname !== "/mcp") return reject(res, 404, "Not found");
  const sid = req.headers["mcp-session-id"];
  const body = req.method === "POST" ? await readJson(req) : undefined;
  if (typeof sid === "string") {
    const transport = sessions.get(sid);
    if (!transport) return reject(res, 404, "Session not found");
    return transport.handleRequest(req, res, body);
  }
  if (req.method === "POST" && body !== undefined && !Array.isArray(body) && isInitializeRequest(body)) {
    const transport = new StreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      onsessioninitialized: (id) => sessions.set(id, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await build().connect(transport);
    return transport.handleRequest(req, res, body);
  }
  return reject(res, 400, "Bad Request: no valid session id");
}

const httpServer = http.createServer((req, res) => {
  handle(req, res).catch((e) => {
    process.stderr.write(`tasks_server.mjs: ${e && e.stack ? e.stack : e}\n`);
    if (!res.headersSent) reject(res, 500, "Internal error");
    else res.end();
  });
});

httpServer.listen(port, "127.0.0.1", () => {
  process.stdout.write(`READY ${httpServer.address().port}\n`);
});

for (const sig of ["SIGTERM", "SIGINT"]) {
  process.on(sig, () => {
    for (const t of sessions.values()) t.close().catch(() => {});
    httpServer.close();
    process.exit(0);
  });
}
