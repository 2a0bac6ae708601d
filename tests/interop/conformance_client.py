#!/usr/bin/env python3
"""The "client under test" of the conformance suite's client scenarios: planmux's
downstream side, driven by the official MCP Python SDK as its host.

Usage (the suite appends the URL of its test server and sets MCP_CONFORMANCE_SCENARIO):
    conformance_client.py PLANMUX URL

Writes a servers.toml whose one server is URL (`namespace = false`, so the suite's tool
names pass unchanged), starts `planmux serve` on it over stdio, and does what a host
would for the scenario: list the tools (initialize), call `add_numbers` (tools_call),
call the tool that elicits and accept with the schema's defaults
(elicitation-sep1034-client-defaults), call `test_reconnection` (sse-retry). What the
suite checks is what planmux sent to its server. Exits 1 when planmux failed.
"""

from __future__ import annotations

import os
import sys
import tempfile
from typing import Any

import anyio
from mcp import types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

ARGUMENTS = {"add_numbers": {"a": 5, "b": 3}}
"""Arguments for the tools that take some."""


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
        with anyio.fail_after(30):
            async with Client(stdio_client(params), mode="legacy", elicitation_callback=accept_defaults) as client:
                tools = [t.name for t in (await client.list_tools()).tools]
                print(f"{scenario}: tools {tools}", file=sys.stderr)
                if scenario == "initialize":
                    return 0
                called = [name for name in tools if name not in ("execute_plan", "approve_plan")]
                for name in called:
                    result = await client.call_tool(name, ARGUMENTS.get(name, {}))
                    print(f"{name}: {result.model_dump(exclude_none=True)}", file=sys.stderr)
                    if result.is_error:
                        return 1
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    sys.exit(anyio.run(main, sys.argv[1], sys.argv[2]))
