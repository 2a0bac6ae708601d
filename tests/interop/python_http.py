"""The official MCP Python SDK as a remote host of planmux's HTTP front.

Connects to --url with `Authorization: Bearer --token` in the SDK's --mode (auto: the
2026-07-28 probe, legacy: initialize and a session), lists the tools, runs a plan with
execute_plan and calls a tool directly, and prints a JSON summary on stdout.
"""

import argparse
import asyncio
import json
import sys

from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


async def run(args: argparse.Namespace) -> dict:
    headers = {"Authorization": f"Bearer {args.token}"} if args.token else {}
    http = create_mcp_http_client(headers=headers)
    async with http:
        async with Client(streamable_http_client(args.url, http_client=http), mode=args.mode) as client:
            tools = await client.list_tools()
            names = [tool.name for tool in tools.tools]
            plan = {
                "steps": [
                    {"id": "w", "foreach": ["Oslo", "Lima"], "tool": "weather__get_weather",
                     "args": {"location": "$ref:item"}},
                    {"id": "names", "foreach": "$ref:w", "value": "$ref:item.location"},
                ],
                "outputs": ["names"],
            }
            result = await client.call_tool("execute_plan", plan)
            echo = await client.call_tool("chaos__echo", {"said": "over http"})
            return {
                "tools": names,
                "plan": result.structured_content,
                "echo": [block.text for block in echo.content if getattr(block, "text", None)],
            }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", default="")
    parser.add_argument("--mode", default="auto", choices=["auto", "legacy"])
    args = parser.parse_args()
    try:
        summary = asyncio.run(run(args))
    except BaseException as error:  # the summary says what broke
        print(json.dumps({"error": repr(error)}))
        return 1
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
