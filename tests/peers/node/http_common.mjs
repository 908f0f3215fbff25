// What the SDK's HTTP test servers (http_server.mjs, tasks_server.mjs) share: a JSON-RPC error
// answer with no id, and a request body read whole as JSON.

/** Answers `status` with a JSON-RPC error (`-32000`, `message`, no id). */
export function reject(res, status, message) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify({ jsonrpc: "2.0", error: { code: -32000, message }, id: null }));
}

/** The request body parsed as JSON (`undefined` when empty). */
export async function readJson(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const raw = Buffer.concat(chunks).toString("utf8");
  return raw.length ? JSON.parse(raw) : undefined;
}
