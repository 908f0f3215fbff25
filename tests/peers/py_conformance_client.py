#!/usr/bin/env python3
"""py_conformance_client.py URL — a client for the official conformance suite's `client` mode,
built with the official Python SDK (mcp 2.x) and its OAuth support.

The suite names the scenario in MCP_CONFORMANCE_SCENARIO and, for some auth scenarios, gives
credentials in MCP_CONFORMANCE_CONTEXT (JSON). The client does what each scenario expects:
  initialize                            connect (initialize handshake), list tools
  tools_call                            ... and call add_numbers(a=5, b=3)
  sse-retry                             ... and call test_reconnection (the server drops the stream)
  elicitation-sep1034-client-defaults   ... and call test_client_elicitation_defaults, answering
                                        the elicitation with the schema's defaults
  auth/client-credentials-basic         client_credentials grant with client_secret_basic
  auth/client-credentials-jwt           client_credentials grant with private_key_jwt
  auth/*                                authorization code flow with PKCE: the authorization URL is
                                        fetched without following its redirect, and the code taken
                                        from its Location; then list tools and call the first one
Exit code 0 when the scenario ran to its end, 1 (with the error on stderr) otherwise.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any
from urllib.parse import parse_qs, urlparse

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from pydantic import AnyUrl

REDIRECT = "http://localhost:3000/callback"
CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"


class MemoryStorage(TokenStorage):
    """Tokens and the registration, kept for the run."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.info: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.info

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.info = client_info


class HeadlessBrowser:
    """Plays the user agent: follows nothing, takes the code from the authorization redirect."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None

    async def open(self, authorization_url: str) -> None:
        async with httpx2.AsyncClient() as http:
            response = await http.get(authorization_url, follow_redirects=False)
        location = response.headers.get("location")
        if not location:
            raise RuntimeError(f"no redirect from {authorization_url} ({response.status_code})")
        query = parse_qs(urlparse(location).query)
        if "code" not in query:
            raise RuntimeError(f"no code in the redirect {location}")
        first = lambda k: query[k][0] if k in query else None  # noqa: E731
        self.result = AuthorizationCodeResult(code=query["code"][0], state=first("state"), iss=first("iss"))

    async def callback(self) -> AuthorizationCodeResult:
        if self.result is None:
            raise RuntimeError("the authorization redirect was never seen")
        result, self.result = self.result, None
        return result


def context() -> dict[str, Any]:
    text = os.environ.get("MCP_CONFORMANCE_CONTEXT")
    return json.loads(text) if text else {}


async def defaults(_ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """Accepts an elicitation with the defaults its schema gives."""
    content: dict[str, Any] = {}
    schema = getattr(params, "requested_schema", None) or {}
    for name, prop in (schema.get("properties") or {}).items():
        if "default" in prop:
            content[name] = prop["default"]
    return types.ElicitResult(action="accept", content=content)


async def session(url: str, auth: httpx2.Auth | None, then: str | None, args: dict[str, Any]) -> None:
    http = httpx2.AsyncClient(auth=auth, timeout=30.0) if auth else None
    transport = streamable_http_client(url, http_client=http)
    async with Client(transport, mode="legacy", elicitation_callback=defaults) as client:
        tools = await client.list_tools()
        name = then
        if name == "*first*":
            name = tools.tools[0].name if tools.tools else None
        if name:
            try:
                await client.call_tool(name, args)
            except Exception as e:  # a tool error is the scenario's business, not the client's
                print(f"tool {name}: {e}", file=sys.stderr)


def auth_for(url: str, scenario: str) -> httpx2.Auth:
    ctx = context()
    storage = MemoryStorage()
    if scenario == "auth/client-credentials-basic":
        return ClientCredentialsOAuthProvider(
            server_url=url,
            storage=storage,
            client_id=ctx["client_id"],
            client_secret=ctx["client_secret"],
            token_endpoint_auth_method="client_secret_basic",
        )
    if scenario == "auth/client-credentials-jwt":
        jwt = SignedJWTParameters(
            issuer=ctx["client_id"],
            subject=ctx["client_id"],
            signing_algorithm=ctx.get("signing_algorithm", "ES256"),
            signing_key=ctx["private_key_pem"],
        )
        return PrivateKeyJWTOAuthProvider(
            server_url=url,
            storage=storage,
            client_id=ctx["client_id"],
            assertion_provider=jwt.create_assertion_provider(),
        )
    if ctx.get("client_id"):
        secret = ctx.get("client_secret")
        storage.info = OAuthClientInformationFull(
            client_id=ctx["client_id"],
            client_secret=secret,
            redirect_uris=[AnyUrl(REDIRECT)],
            token_endpoint_auth_method="client_secret_basic" if secret else "none",
        )
    browser = HeadlessBrowser()
    return OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="mcpscope-conformance-client",
            redirect_uris=[AnyUrl(REDIRECT)],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=browser.open,
        callback_handler=browser.callback,
        client_metadata_url=CLIENT_METADATA_URL,
    )


async def run(url: str, scenario: str) -> None:
    with anyio.fail_after(25):
        await scenario_run(url, scenario)


async def scenario_run(url: str, scenario: str) -> None:
    if scenario == "initialize":
        await session(url, None, None, {})
    elif scenario == "tools_call":
        await session(url, None, "add_numbers", {"a": 5, "b": 3})
    elif scenario == "sse-retry":
        await session(url, None, "test_reconnection", {})
    elif scenario == "elicitation-sep1034-client-defaults":
        await session(url, None, "test_client_elicitation_defaults", {})
    elif scenario.startswith("auth/"):
        await session(url, auth_for(url, scenario), "*first*", {})
    else:
        raise RuntimeError(f"unknown scenario {scenario!r}")


def main() -> int:
    if len(sys.argv) < 2:
        print("usage: py_conformance_client.py URL", file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")
    try:
        anyio.run(run, sys.argv[-1], scenario)
    except BaseException as e:  # noqa: BLE001 — reported, and the exit code says it
        print(f"py_conformance_client: {scenario}: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
