#!/usr/bin/env node
/**
 * tasks_client.mjs URL [--ms N] [--wait-timeout MS] — a task-aware MCP client built with the
 * official TypeScript SDK (@modelcontextprotocol/sdk 1.x experimental tasks). It calls `slow_task`
 * as a task-augmented `tools/call` (ttl 60 s), polls `tasks/get` once, then waits for the result
 * with `tasks/result`. When a `tasks/result` wait fails (its stream dies, or it times out after
 * --wait-timeout ms, default 2000), it asks again, as a correct client does: the task lives on the
 * server. At most 4 attempts. Prints one JSON object:
 *   {"taskId": "...", "created": "working", "polled": "...", "attempts": N,
 *    "errors": ["..."], "result": "done after N ms" | null, "elapsed_ms": N}
 *
 * Part of mcpscope's interop tests; install with scripts/setup-peers.sh (npm ci in this folder).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CallToolResultSchema, CreateTaskResultSchema } from "@modelcontextprotocol/sdk/types.js";

const args = { url: null, ms: 1500, waitTimeout: 2000 };
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--ms") args.ms = Number(argv[++i]);
  else if (argv[i] === "--wait-timeout") args.waitTimeout = Number(argv[++i]);
  else if (!args.url) args.url = argv[i];
  else throw new Error(`unexpected argument ${argv[i]}`);
}
if (!args.url) throw new Error("usage: tasks_client.mjs URL [--ms N] [--wait-timeout MS]");

const textOf = (r) => (r.content || []).filter((c) => c.type === "text").map((c) => c.text).join("");

const client = new Client({ name: "mcpscope-tasks-client", version: "1.0.0" });
const transport = new StreamableHTTPClientTransport(new URL(args.url));
client.onerror = () => {};
await client.connect(transport);
const start = performance.now();
const out = { errors: [], attempts: 0, result: null };
const created = await client.request(
  { method: "tools/call", params: { name: "slow_task", arguments: { ms: args.ms } } },
  CreateTaskResultSchema,
  { task: { ttl: 60000 } },
);
out.taskId = created.task.taskId;
out.created = created.task.status;
out.polled = (await client.experimental.tasks.getTask(out.taskId)).status;
while (out.attempts < 4 && out.result === null) {
  out.attempts += 1;
  try {
    const result = await client.experimental.tasks.getTaskResult(out.taskId, CallToolResultSchema, {
      timeout: args.waitTimeout,
    });
    out.result = textOf(result);
  } catch (e) {
    out.errors.push(String(e && e.message ? e.message : e));
  }
}
out.elapsed_ms = Math.round(performance.now() - start);
process.stdout.write(JSON.stringify(out) + "\n");
await client.close().catch(() => {});
process.exit(0);
