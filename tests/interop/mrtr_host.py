#!/usr/bin/env python3
"""The official MCP Python SDK (mcp==2.3.0) as the host of `planmux serve`, calling a tool
whose server asks for input through MRTR (mrtr_server.py).

Usage:
    mrtr_host.py --planmux target/debug/planmux --config servers.toml --mode auto|legacy
                 [--tool py__greet]

Starts `planmux serve --config CONFIG` over stdio as `Client(stdio_client(...),
mode=MODE, elicitation_callback=...)`, a user who answers every elicitation with
`{"name": "Ada"}`, and calls the tool with `{"greeting": "Hello"}`. In `legacy` mode
(initialize, 2025-11-25) the question arrives as an `elicitation/create` request that
planmux sends; in `auto` mode (server/discover, 2026-07-28) as an `input_required`
result, which `Client.call_tool` answers through the same callback and retries.

In `auto` mode it then drives one more call by hand (`client.session.call_tool(...,
allow_input_required=True)`) and retries it with the `requestState` changed, to see
that planmux refuses it.

Prints one JSON summary on stdout:
    {"protocol": ..., "text": ..., "is_error": ..., "elicitations": [message, ...],
     "tampered": {"code": ..., "message": ...} | {"answered": result} | null}
Exits 1 (with the traceback on stderr) when the session itself failed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import traceback
from typing import Any

import anyio
from mcp import types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

ARGUMENTS = {"greeting": "Hello"}
NAME = "Ada"


def forged(state: str) -> str:
    """`state` with one character changed in its middle (a sealed token is base64url)."""
    middle = len(state) // 2
    swapped = "B" if state[middle] == "A" else "A"
    return state[:middle] + swapped + state[middle + 1 :]


async def tampered_retry(client: Client, tool: str) -> dict[str, Any]:
    """Calls `tool` by hand and retries with the user's answer but a forged requestState:
    the error planmux answers, or the result if it did not refuse."""
    first = await client.session.call_tool(tool, ARGUMENTS, allow_input_required=True)
    if not isinstance(first, types.InputRequiredResult) or first.request_state is None:
        return {"unexpected_first_round": first.model_dump(mode="json", exclude_none=True)}
    answers = {key: types.ElicitResult(action="accept", content={"name": NAME}) for key in first.input_requests or {}}
    try:
        retry = await client.session.call_tool(
            tool,
            ARGUMENTS,
            input_responses=answers,
            request_state=forged(first.request_state),
            allow_input_required=True,
        )
    except MCPError as e:
        return {"code": e.error.code, "message": e.error.message}
    return {"answered": retry.model_dump(mode="json", exclude_none=True)}


async def run(planmux: str, config: str, mode: str, tool: str) -> dict[str, Any]:
    asked: list[str] = []

    async def user(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": NAME})

    # The SDK passes planmux only a few variables of its own; RUST_LOG is for reading its log.
    env = {"RUST_LOG": os.environ["RUST_LOG"]} if "RUST_LOG" in os.environ else None
    params = StdioServerParameters(command=planmux, args=["serve", "--config", config], env=env)
    with anyio.fail_after(30):
        async with Client(stdio_client(params), mode=mode, elicitation_callback=user) as client:
            result = await client.call_tool(tool, ARGUMENTS)
            summary: dict[str, Any] = {
                "protocol": client.protocol_version,
                "text": " ".join(getattr(block, "text", "") for block in result.content),
                "is_error": bool(result.is_error),
                "elicitations": list(asked),
                "tampered": None,
            }
            if mode == "auto":
                summary["tampered"] = await tampered_retry(client, tool)
            return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--planmux", required=True)
    parser.add_argument("--config", required=True)
    parser.add_argument("--mode", choices=["auto", "legacy"], required=True)
    parser.add_argument("--tool", default="py__greet")
    args = parser.parse_args()
    try:
        summary = anyio.run(run, args.planmux, args.config, args.mode, args.tool)
    except Exception:  # an ExceptionGroup from the SDK's task groups included
        traceback.print_exc()
        return 1
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
