#!/usr/bin/env node
/**
 * testserver_client.mjs URL — the official TypeScript SDK client (@modelcontextprotocol/sdk 1.x,
 * StreamableHTTPClientTransport, the `initialize` handshake) driving every tool, prompt and
 * resource of `mcpscope serve-test`, directly or through mcpscope.
 *
 * Answers sampling and elicitation requests with fixed values, subscribes to the counter resource
 * and waits for the update a `poke` announces on the GET stream. Prints one JSON object with what
 * each call gave back: the same server must give the same object directly and through a proxy.
 * Exit code 0 when the script ran; non-zero with a message on stderr when a call failed.
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CreateMessageRequestSchema,
  ElicitRequestSchema,
  ResourceUpdatedNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const COUNTER = "mcpscope://counter";
const url = process.argv[2];
if (!url) {
  console.error("usage: testserver_client.mjs URL");
  process.exit(2);
}

const textOf = (r) =>
  (r.content || []).map((c) => (c.type === "text" ? c.text : `<${c.type}>`)).join("|");

async function main() {
  const client = new Client(
    { name: "mcpscope-testserver-client", version: "1.0.0" },
    { capabilities: { sampling: {}, elicitation: {} } },
  );
  client.setRequestHandler(CreateMessageRequestSchema, async () => ({
    role: "assistant",
    content: { type: "text", text: "sampled" },
    model: "test-model",
    stopReason: "endTurn",
  }));
  client.setRequestHandler(ElicitRequestSchema, async () => ({
    action: "accept",
    content: { response: "Ada" },
  }));
  let updated = null;
  let onUpdate = () => {};
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
    updated = n.params.uri;
    onUpdate();
  });
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  const out = { protocol: transport.protocolVersion ?? null };

  const tools = await client.listTools();
  out.tools = tools.tools.map((t) => t.name).sort();
  const args = {
    echo: { text: "hello serve-test" },
    slow: { steps: 3, interval_ms: 20 },
    test_sampling: { prompt: "say something" },
    test_elicitation: { message: "your name?" },
    json_schema_2020_12_tool: { name: "n", address: { city: "c" } },
    measure: { value: 1 },
  };
  let progress = 0;
  const calls = {};
  for (const name of out.tools) {
    if (["peek", "poke", "test_reconnection"].includes(name)) continue;
    const r = await client.callTool({ name, arguments: args[name] ?? {} }, undefined, {
      onprogress: () => {
        progress += 1;
      },
    });
    let text = textOf(r);
    if (name === "test_tool_with_progress") text = text ? "<token>" : "";
    calls[name] = { text, is_error: r.isError === true };
  }
  out.progress = progress;

  const prompts = await client.listPrompts();
  out.prompts = prompts.prompts.map((p) => p.name).sort();
  const got = await client.getPrompt({
    name: "test_prompt_with_arguments",
    arguments: { arg1: "a", arg2: "b" },
  });
  out.prompt_text = got.messages[0].content.text;
  const resources = await client.listResources();
  out.resources = resources.resources.map((r) => r.uri).sort();
  out.static_text = (await client.readResource({ uri: "test://static-text" })).contents[0].text;
  out.template = JSON.parse(
    (await client.readResource({ uri: "test://template/7/data" })).contents[0].text,
  );

  // The counter resource: subscribe, poke, hear of it on the GET stream.
  await client.subscribeResource({ uri: COUNTER });
  const heard = new Promise((resolve) => {
    onUpdate = resolve;
  });
  const before = Number(textOf(await client.callTool({ name: "peek", arguments: {} })));
  const after = Number(textOf(await client.callTool({ name: "poke", arguments: {} })));
  calls.poke_moves_the_counter = after === before + 1;
  out.calls = calls;
  await Promise.race([heard, new Promise((resolve) => setTimeout(resolve, 5000))]);
  out.resource_updated = updated;
  await client.close();
  return out;
}

const deadline = setTimeout(() => {
  console.error("testserver_client.mjs: no result within 40 s");
  process.exit(3);
}, 40000);
main()
  .then((out) => {
    clearTimeout(deadline);
    console.log(JSON.stringify(out));
    process.exit(0);
  })
  .catch((e) => {
    console.error(e?.stack ?? String(e));
    process.exit(2);
  });
