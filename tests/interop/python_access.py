"""The official MCP Python SDK as one caller of planmux's team front.

Connects to --url with `Authorization: Bearer --token`, lists the tools, then calls each
--call tool directly and as a one-step plan, and prints a JSON summary on stdout: the
tool names, and for each call whether it was an error and what it said.
"""

import argparse
import asyncio
import json
import sys

from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def said(result) -> dict:
    texts = [block.text for block in result.content if getattr(block, "text", None)]
    return {"error": bool(result.is_error), "text": " ".join(texts)}


async def attempt(call) -> dict:
    try:
        return said(await call)
    except Exception as error:  # a JSON-RPC error: what the caller is told
        return {"error": True, "text": str(error)}


async def run(args: argparse.Namespace) -> dict:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {args.token}"})
    async with http:
        async with Client(streamable_http_client(args.url, http_client=http), mode="legacy") as client:
            tools = await client.list_tools()
            calls = {}
            for name in args.call:
                arguments = {"location": "Oslo", "said": "hi"}
                plan = {"steps": [{"id": "s", "tool": name, "args": arguments}]}
                calls[name] = {
                    "direct": await attempt(client.call_tool(name, arguments)),
                    "plan": await attempt(client.call_tool("execute_plan", plan)),
                }
            return {"tools": [tool.name for tool in tools.tools], "calls": calls}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--call", action="append", default=[])
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
