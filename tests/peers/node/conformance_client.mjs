#!/usr/bin/env node
/**
 * conformance_client.mjs URL — a client for the official conformance suite's `client` mode, built
 * with the official TypeScript SDK (@modelcontextprotocol/sdk 1.x: StreamableHTTPClientTransport
 * and its OAuth support, `authProvider`).
 *
 * The suite names the scenario in MCP_CONFORMANCE_SCENARIO and, for some auth scenarios, gives
 * credentials in MCP_CONFORMANCE_CONTEXT (JSON). What the client does:
 *   initialize                            connect, list tools
 *   tools_call                            ... and call add_numbers(a=5, b=3)
 *   sse-retry                             ... and call test_reconnection (the server drops the stream)
 *   elicitation-sep1034-client-defaults   ... and call test_client_elicitation_defaults, accepting
 *                                         the elicitation with the schema's defaults
 *   auth/client-credentials-basic         client_credentials grant (ClientCredentialsProvider)
 *   auth/client-credentials-jwt           client_credentials with private_key_jwt (PrivateKeyJwtProvider)
 *   auth/*                                authorization code flow with PKCE: the authorization URL is
 *                                         fetched without following the redirect and the code taken
 *                                         from its Location; the SDK's UnauthorizedError is answered
 *                                         with transport.finishAuth(code) and the step is done again;
 *                                         then list tools and call the first one
 * Exit code 0 when the scenario ran to its end, 1 (error on stderr) otherwise; bounded to 25 s.
 *
 * Install with scripts/setup-peers.sh (npm ci in this folder).
 */
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError } from "@modelcontextprotocol/sdk/client/auth.js";
import {
  ClientCredentialsProvider,
  PrivateKeyJwtProvider,
} from "@modelcontextprotocol/sdk/client/auth-extensions.js";
import { ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";

const REDIRECT = "http://localhost:3000/callback";
const CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json";
const DEADLINE_MS = 25_000;

/** Plays the user agent and keeps what an OAuth client keeps, in memory, for one run. */
class HeadlessProvider {
  constructor(preRegistered) {
    this._info = preRegistered;
    this._tokens = undefined;
    this._verifier = undefined;
    this.code = undefined;
  }
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata() {
    return { client_name: "mcpscope-conformance-client", redirect_uris: [REDIRECT] };
  }
  get clientMetadataUrl() {
    return CLIENT_METADATA_URL;
  }
  clientInformation() {
    return this._info;
  }
  saveClientInformation(info) {
    this._info = info;
  }
  tokens() {
    return this._tokens;
  }
  saveTokens(tokens) {
    this._tokens = tokens;
  }
  saveCodeVerifier(verifier) {
    this._verifier = verifier;
  }
  codeVerifier() {
    if (!this._verifier) throw new Error("no code verifier saved");
    return this._verifier;
  }
  invalidateCredentials(scope) {
    this._tokens = undefined;
    if (scope === "all") {
      this._info = undefined;
      this._verifier = undefined;
    }
  }
  /** Opens the authorization URL without following its redirect; keeps the code it carries. */
  async redirectToAuthorization(url) {
    const response = await fetch(url.toString(), { redirect: "manual" });
    const location = response.headers.get("location");
    if (!location) throw new Error(`no redirect from ${url} (${response.status})`);
    const code = new URL(location).searchParams.get("code");
    if (!code) throw new Error(`no code in the redirect ${location}`);
    this.code = code;
  }
  takeCode() {
    const code = this.code;
    this.code = undefined;
    return code;
  }
}

function context() {
  const text = process.env.MCP_CONFORMANCE_CONTEXT;
  return text ? JSON.parse(text) : {};
}

function providerFor(scenario) {
  const ctx = context();
  if (scenario === "auth/client-credentials-basic") {
    return new ClientCredentialsProvider({ clientId: ctx.client_id, clientSecret: ctx.client_secret });
  }
  if (scenario === "auth/client-credentials-jwt") {
    return new PrivateKeyJwtProvider({
      clientId: ctx.client_id,
      privateKey: ctx.private_key_pem,
      algorithm: ctx.signing_algorithm || "ES256",
    });
  }
  const pre = ctx.client_id ? { client_id: ctx.client_id, client_secret: ctx.client_secret } : undefined;
  return new HeadlessProvider(pre);
}

/** Runs `step`; an UnauthorizedError after a redirect is answered with the code, and the step
 * runs again (at most three times). */
async function authorised(transport, provider, step) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await step();
    } catch (e) {
      const code = provider?.takeCode?.();
      if (!(e instanceof UnauthorizedError) || !code || attempt >= 2) throw e;
      await transport.finishAuth(code);
    }
  }
}

function acceptDefaults(client) {
  client.setRequestHandler(ElicitRequestSchema, async (request) => {
    const content = {};
    const props = request.params?.requestedSchema?.properties || {};
    for (const [name, schema] of Object.entries(props)) {
      if (schema && "default" in schema) content[name] = schema.default;
    }
    return { action: "accept", content };
  });
}

function newClient() {
  const client = new Client(
    { name: "mcpscope-conformance-client", version: "1.0.0" },
    { capabilities: { elicitation: { form: {} } } },
  );
  acceptDefaults(client);
  return client;
}

/** Connects; when the first try ends in the OAuth redirect, finishes the flow with the code and
 * connects again with a new client and transport (a failed client is not reused). */
async function connect(url, provider) {
  const transportFor = () =>
    new StreamableHTTPClientTransport(new URL(url), provider ? { authProvider: provider } : {});
  let client = newClient();
  let transport = transportFor();
  try {
    await client.connect(transport);
  } catch (e) {
    const code = provider?.takeCode?.();
    if (!(e instanceof UnauthorizedError) || !code) throw e;
    await transport.finishAuth(code);
    await client.close().catch(() => {});
    client = newClient();
    transport = transportFor();
    await client.connect(transport);
  }
  return { client, transport };
}

async function session(url, provider, tool, args) {
  const { client, transport } = await connect(url, provider);
  try {
    const tools = await authorised(transport, provider, () => client.listTools());
    const name = tool === "*first*" ? tools.tools[0]?.name : tool;
    if (name) {
      try {
        await authorised(transport, provider, () => client.callTool({ name, arguments: args }));
      } catch (e) {
        if (e instanceof UnauthorizedError) throw e;
        console.error(`tool ${name}: ${e.message}`);
      }
    }
  } finally {
    await client.close();
  }
}

async function run(url, scenario) {
  switch (scenario) {
    case "initialize":
      return session(url, undefined, undefined, {});
    case "tools_call":
      return session(url, undefined, "add_numbers", { a: 5, b: 3 });
    case "sse-retry":
      return session(url, undefined, "test_reconnection", {});
    case "elicitation-sep1034-client-defaults":
      return session(url, undefined, "test_client_elicitation_defaults", {});
    default:
      if (scenario.startsWith("auth/")) return session(url, providerFor(scenario), "*first*", {});
      throw new Error(`unknown scenario ${scenario}`);
  }
}

const url = process.argv[process.argv.length - 1];
const scenario = process.env.MCP_CONFORMANCE_SCENARIO || "initialize";
const timer = setTimeout(() => {
  console.error(`conformance_client: ${scenario}: no end within ${DEADLINE_MS} ms`);
  process.exit(1);
}, DEADLINE_MS);
try {
  await run(url, scenario);
  clearTimeout(timer);
  process.exit(0);
} catch (e) {
  console.error(`conformance_client: ${scenario}: ${e?.stack || e}`);
  process.exit(1);
}
