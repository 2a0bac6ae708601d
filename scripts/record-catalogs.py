#!/usr/bin/env python3
"""Records the tools/list of one MCP server, for scripts/record-catalogs.

Usage:
    record-catalogs.py --server NAME --package LABEL --out FILE [--env KEY=VALUE]...
                       [--timeout SECONDS] -- COMMAND [ARG]...

Launches COMMAND over stdio with the official MCP Python SDK (tests/interop/.venv),
does the classic `initialize` handshake, lists every tool (following `nextCursor`) and
writes FILE as pretty JSON:

    {"server": NAME, "package": LABEL, "recorded": "YYYY-MM-DD", "tools": [...]}

The tools are kept exactly as the server sent them: they are taken from the raw JSON-RPC
responses on the wire, not from the SDK's parsed models. The server's stderr goes to ours.
Exits 0 on success, 1 when the server could not be started or listed, 2 on bad usage.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.message import SessionMessage

MAX_PAGES = 100


class Tap:
    """The raw results of the tools/list requests seen on the wire, by request id."""

    def __init__(self) -> None:
        self.pending: set[Any] = set()
        self.results: list[dict[str, Any]] = []

    def outbound(self, message: SessionMessage) -> None:
        raw = message.message.model_dump(by_alias=True, exclude_unset=True)
        if raw.get("method") == "tools/list" and "id" in raw:
            self.pending.add(raw["id"])

    def inbound(self, message: SessionMessage | Exception) -> None:
        if isinstance(message, Exception):
            return
        raw = message.message.model_dump(by_alias=True, exclude_unset=True)
        if raw.get("id") in self.pending and isinstance(raw.get("result"), dict):
            self.pending.discard(raw["id"])
            self.results.append(raw["result"])


@asynccontextmanager
async def tapped(params: StdioServerParameters, tap: Tap):
    """`stdio_client(params)`, with the tools/list responses recorded in `tap`."""
    async with stdio_client(params) as (server_read, server_write):
        to_client_w, to_client_r = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        from_client_w, from_client_r = anyio.create_memory_object_stream[SessionMessage](0)

        async def inbound() -> None:
            async with to_client_w:
                async for message in server_read:
                    tap.inbound(message)
                    await to_client_w.send(message)

        async def outbound() -> None:
            async with from_client_r:
                async for message in from_client_r:
                    tap.outbound(message)
                    await server_write.send(message)
            await server_write.aclose()

        async with anyio.create_task_group() as tg:
            tg.start_soon(inbound)
            tg.start_soon(outbound)
            try:
                yield to_client_r, from_client_w
            finally:
                await from_client_w.aclose()
                await to_client_r.aclose()
                tg.cancel_scope.cancel()


def first_line(exc: BaseException) -> str:
    lines = str(exc).splitlines()
    return lines[0] if lines else type(exc).__name__


async def record(params: StdioServerParameters, timeout: float) -> tuple[list[dict[str, Any]], str]:
    tap = Tap()
    tools: list[dict[str, Any]] = []
    with anyio.fail_after(timeout):
        async with Client(tapped(params, tap), mode="legacy", cache=None, read_timeout_seconds=timeout) as client:
            info = client.server_info
            who = f"{info.name} {info.version}" if info is not None else "(no serverInfo)"
            cursor: str | None = None
            for _ in range(MAX_PAGES):
                before = len(tap.results)
                try:
                    await client.list_tools(cursor=cursor)
                except Exception as exc:  # the SDK may reject a page it cannot parse
                    if len(tap.results) == before:
                        raise
                    print(f"  note: the SDK did not accept the tools/list page ({first_line(exc)}); kept the raw page",
                          file=sys.stderr)
                if len(tap.results) != before + 1:
                    raise RuntimeError("no tools/list response was seen on the wire")
                page = tap.results[-1]
                tools.extend(page.get("tools") or [])
                cursor = page.get("nextCursor")
                if not cursor:
                    break
            else:
                raise RuntimeError(f"more than {MAX_PAGES} tools/list pages")
    return tools, who


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--server", required=True, help="short name, [a-z0-9]+")
    parser.add_argument("--package", required=True, help="npm:<pkg>@<version> or pypi:<pkg>==<version>")
    parser.add_argument("--out", required=True, help="the JSON file to write")
    parser.add_argument("--env", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--cwd", default=None)
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("no server command given (after --)")
    if not args.server.isalnum() or args.server != args.server.lower() or not args.server.isascii():
        parser.error(f"--server must be lowercase [a-z0-9]+, got {args.server!r}")
    env: dict[str, str] = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error(f"--env wants KEY=VALUE, got {item!r}")
        env[key] = value

    params = StdioServerParameters(command=command[0], args=command[1:], env=env, cwd=args.cwd)
    try:
        tools, who = anyio.run(record, params, args.timeout)
    except BaseException as exc:  # noqa: BLE001 - report anything, including timeouts and groups
        if isinstance(exc, KeyboardInterrupt):
            raise
        detail = exc
        while isinstance(detail, BaseExceptionGroup) and len(detail.exceptions) == 1:
            detail = detail.exceptions[0]
        print(f"  error: {args.server}: {type(detail).__name__}: {detail}", file=sys.stderr)
        return 1
    if not tools:
        print(f"  error: {args.server}: the server listed no tools", file=sys.stderr)
        return 1

    names = [tool.get("name") for tool in tools]
    if len(set(names)) != len(names):
        print(f"  warning: {args.server}: duplicate tool names in the listing", file=sys.stderr)
    catalog = {
        "server": args.server,
        "package": args.package,
        "recorded": datetime.date.today().isoformat(),
        "tools": tools,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(catalog, f, indent=2, ensure_ascii=False)
        f.write("\n")
    os.replace(tmp, args.out)
    print(f"  {args.server}: {len(tools)} tools from {who} -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
