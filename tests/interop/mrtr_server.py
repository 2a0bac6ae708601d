#!/usr/bin/env python3
"""A stdio MCP server on the official Python SDK (mcp==2.3.0) whose one tool asks for
input the 2026-07-28 way: a multi-round-trip request (MRTR, SEP-2322).

Usage:
    mrtr_server.py

`greet(greeting)` on its first round returns an `InputRequiredResult`: one
`elicitation/create` under the key "who" (a form with a required "name") and a
`requestState` of its own. On the retry it reads `ctx.input_responses["who"]` and
`ctx.request_state`, checks the state is the one it minted, and answers
"<greeting>, <name>!".

The SDK's `MCPServer` seals every outgoing `requestState` (AES-GCM, bound to the method,
the tool and a digest of its arguments) and unseals every echo before the tool runs, so a
state changed on the way, or a retry with other arguments, is refused with -32602
"Invalid or expired requestState" before `greet` sees it.

MRTR exists only at 2026-07-28: a client that connected with `initialize` gets an
error result saying so, which is how a test learns that its client (planmux) did not
connect the modern way.
"""

from __future__ import annotations

from typing import Any

from mcp import types
from mcp.server.mcpserver import Context, MCPServer

MODERN = "2026-07-28"
"""The protocol version that has MRTR."""

KEY = "who"
"""The key of the one input request."""

STATE = "greet:asked-who"
"""The requestState `greet` mints on its first round and expects back on the retry."""

ASK_NAME = types.ElicitRequest(
    params=types.ElicitRequestFormParams(
        message="Who is there?",
        requested_schema={
            "type": "object",
            "properties": {"name": {"type": "string", "title": "Name"}},
            "required": ["name"],
        },
    )
)

server = MCPServer("mrtr")


def field(value: Any, name: str) -> Any:
    """`name` of an input response, parsed into a model or left a dict."""
    return value.get(name) if isinstance(value, dict) else getattr(value, name, None)


def failed(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


@server.tool()
async def greet(greeting: str, ctx: Context) -> types.CallToolResult | types.InputRequiredResult:
    """Greets whoever the user says is there."""
    if ctx.protocol_version != MODERN:
        return failed(f"greet asks through MRTR, which needs {MODERN}; this client negotiated {ctx.protocol_version}")
    if ctx.request_state is None:
        return types.InputRequiredResult(input_requests={KEY: ASK_NAME}, request_state=STATE)
    if ctx.request_state != STATE:
        return failed(f"requestState came back changed: {ctx.request_state!r}, minted {STATE!r}")
    answer = (ctx.input_responses or {}).get(KEY)
    if answer is None:
        return failed(f"the retry has no input response {KEY!r}: {ctx.input_responses!r}")
    content = field(answer, "content") or {}
    if field(answer, "action") != "accept" or "name" not in content:
        return failed(f"the user did not give a name: {answer!r}")
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"{greeting}, {content['name']}!")])


if __name__ == "__main__":
    server.run("stdio")
