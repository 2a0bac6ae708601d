#!/usr/bin/env python3
"""The "client under test" of the conformance suite's client scenarios: planmux's
downstream side, driven by the official MCP Python SDK as its host.

Usage (the suite appends the URL of its test server and sets MCP_CONFORMANCE_SCENARIO):
    conformance_client.py PLANMUX URL

Writes a servers.toml whose one server is URL (`namespace = false`, so the suite's tool
names pass unchanged), starts `planmux serve` on it over stdio, and does what a host
would for the scenario: list the tools (initialize), call `add_numbers` (tools_call),
call the tool that elicits and accept with the schema's defaults
(elicitation-sep1034-client-defaults), call `test_reconnection` (sse-retry), make the
calls the scenario's context lists (the 2026-07-28 header scenarios). The host speaks
2025-11-25 unless PLANMUX_HOST_MODE says otherwise. What the suite checks is what
planmux sent to its server. Exits 1 when planmux failed.

The `auth/*` scenarios (the suite's server wants an OAuth sign-in) are driven as a user
and a host would: servers.toml gets the sign-in keys the scenario is about (the
pre-registered client, the client metadata document, or client credentials from
MCP_CONFORMANCE_CONTEXT), planmux keeps its sign-in in a temporary data folder, and
`planmux login` signs in through headless_browser.py (the suite's authorization server
approves at once) before serving and again whenever a call answers that the server needs
a sign-in, at most three times in all. Then every tool the server lists is called.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

import anyio
from mcp import types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

ARGUMENTS = {"add_numbers": {"a": 5, "b": 3}}
"""Arguments for the tools that take some."""

OWN_TOOLS = ("execute_plan", "approve_plan")
"""planmux's own tools, listed beside the server's."""

LIST_ONLY = ("initialize", "json-schema-ref-no-deref")
"""Scenarios about what a client does with the list (its server has nothing to call)."""

HOST_MODE = os.environ.get("PLANMUX_HOST_MODE", "legacy")
"""The host's protocol era: "legacy" (initialize, 2025-11-25) or the Python SDK's default
(server/discover, 2026-07-28); planmux's own connection to the suite's server probes."""

SERVER = "suite"
"""The suite's server in servers.toml."""

HEADLESS_BROWSER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "headless_browser.py")

CIMD_URL = "https://conformance-test.local/client-metadata.json"
"""The client metadata document the suite's basic-cimd scenario expects as client_id."""

MAX_SIGN_INS = 3
"""Sign-ins a user makes before giving up (auth/scope-retry-limit allows three)."""

SUITE_TOOL = f"{SERVER}__test-tool"
"""The tool of the suite's auth scenarios (namespaced: planmux says why a server that never
started has no tools only for a name under its prefix), called when none is listed."""


async def accept_defaults(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    """A user who accepts the form as it is offered: every field at its default."""
    schema = getattr(params, "requested_schema", None) or {}
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    content = {name: field["default"] for name, field in properties.items() if "default" in field}
    return types.ElicitResult(action="accept", content=content)


async def main(planmux: str, url: str) -> int:
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    with tempfile.TemporaryDirectory() as folder:
        config = os.path.join(folder, "servers.toml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(f'[servers.suite]\nurl = "{url}"\nnamespace = false\n')
        params = StdioServerParameters(command=planmux, args=["serve", "--config", config])
        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
        with anyio.fail_after(30):
            async with Client(stdio_client(params), mode=HOST_MODE, elicitation_callback=accept_defaults) as client:
                tools = [t.name for t in (await client.list_tools()).tools]
                print(f"{scenario}: tools {tools}", file=sys.stderr)
                if scenario in LIST_ONLY:
                    return 0
                # The calls the scenario asks for, with their arguments; else every tool.
                calls = [(c["name"], c.get("arguments") or {}) for c in context.get("toolCalls", [])]
                if not calls:
                    calls = [(name, ARGUMENTS.get(name, {})) for name in tools if name not in OWN_TOOLS]
                for name, arguments in calls:
                    result = await client.call_tool(name, arguments)
                    print(f"{name}: {result.model_dump(exclude_none=True)}", file=sys.stderr)
                    if result.is_error:
                        return 1
    return 0


def sign_in_keys(scenario: str, context: dict[str, Any]) -> str:
    """The servers.toml keys of the suite's server that `scenario` is about."""
    if scenario == "auth/pre-registration":
        return f"client_id = {toml(context['client_id'])}\nclient_secret = {toml(context['client_secret'])}\n"
    if scenario == "auth/basic-cimd":
        return f"client_metadata_url = {toml(CIMD_URL)}\n"
    if scenario.startswith("auth/client-credentials"):
        credentials = f"client_id = {toml(context['client_id'])}, client_secret = {toml(context['client_secret'])}"
        return f"oauth = {{ client_credentials = {{ {credentials} }} }}\n"
    return ""


def toml(text: str) -> str:
    """A TOML basic string (JSON's escapes are TOML's)."""
    return json.dumps(text)


async def login(planmux: str, config: str, env: dict[str, str]) -> bool:
    """`planmux login` in a terminal beside the host, the headless browser approving:
    whether it signed in. What it says goes to stderr (the URL it opens has no secret)."""
    command = [planmux, "--config", config, "login", SERVER, "--timeout", "15"]
    done = await anyio.to_thread.run_sync(
        lambda: subprocess.run(command, env={**os.environ, **env}, stdin=subprocess.DEVNULL, stdout=sys.stderr)
    )
    print(f"planmux login {SERVER}: exit {done.returncode}", file=sys.stderr)
    return done.returncode == 0


async def first_error(client: Client, scenario: str) -> str | None:
    """Lists the server's tools and calls each (the suite's tool when none is listed): the
    first call's error, or None when every one answered."""
    tools = [t.name for t in (await client.list_tools()).tools if t.name not in OWN_TOOLS]
    print(f"{scenario}: tools {tools}", file=sys.stderr)
    for name in tools or [SUITE_TOOL]:
        result = await client.call_tool(name, ARGUMENTS.get(name, {}))
        print(f"{name}: {result.model_dump(exclude_none=True)}", file=sys.stderr)
        if result.is_error:
            return " ".join(getattr(block, "text", "") for block in result.content)
    return None


async def auth_main(planmux: str, url: str) -> int:
    scenario = os.environ["MCP_CONFORMANCE_SCENARIO"]
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory() as folder:
        config = os.path.join(folder, "servers.toml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(f"[servers.{SERVER}]\nurl = {toml(url)}\n{sign_in_keys(scenario, context)}")
        env = {
            "XDG_DATA_HOME": os.path.join(folder, "data"),
            "BROWSER": f"{sys.executable} {HEADLESS_BROWSER}",
            "RUST_LOG": os.environ.get("RUST_LOG", "warn"),
            # Sign-ins in the temporary folder, never in the desktop's keychain.
            "PLANMUX_KEYCHAIN": "off",
        }
        sign_ins = 0
        if not scenario.startswith("auth/client-credentials"):  # those sign in by themselves
            if not await login(planmux, config, env):
                return 1
            sign_ins += 1
        tools_changed = anyio.Event()

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ToolListChangedNotification):
                tools_changed.set()

        params = StdioServerParameters(command=planmux, args=["serve", "--config", config], env=env)
        with anyio.fail_after(28):
            async with Client(stdio_client(params), mode="legacy", message_handler=on_message) as client:
                while (error := await first_error(client, scenario)) is not None:
                    if "needs you to sign in" not in error:
                        return 1
                    if sign_ins >= MAX_SIGN_INS:
                        print(f"still refused after {sign_ins} sign-ins: giving up", file=sys.stderr)
                        return 1
                    tools_changed = anyio.Event()
                    if not await login(planmux, config, env):
                        return 1
                    sign_ins += 1
                    # planmux reconnects a signed-out server by itself and says its tools
                    # changed; a call reconnects it too, so the wait is bounded.
                    with anyio.move_on_after(2):
                        await tools_changed.wait()
                    print(f"tools/list_changed: {tools_changed.is_set()}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    auth = os.environ.get("MCP_CONFORMANCE_SCENARIO", "").startswith("auth/")
    sys.exit(anyio.run(auth_main if auth else main, sys.argv[1], sys.argv[2]))
