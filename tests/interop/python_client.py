#!/usr/bin/env python3
"""Drives planmux with the official MCP Python SDK (mcp==2.3.0) as the host.

Usage:
    python_client.py --planmux target/debug/planmux --config servers.toml --mode auto|legacy
                     [--stdio-chaos SERVER]... [--expect-protocol VERSION] [--wire-log FILE]

`--mode auto` is the SDK's default connect mode (`Client(..., mode="auto")`): it probes
with `server/discover` at the newest modern protocol (2026-07-28) and falls back to the
classic `initialize` handshake when the server rejects the probe
(mcp/client/_probe.py: negotiate_auto). `--mode legacy` forces `initialize`
(`Client(..., mode="legacy")`).

The config must export the built-in chaos demo as `chaos` and the weather demo as
`weather`. In each mode this lists the tools, calls `chaos__echo` (structuredContent and
`_meta`), `weather__get_weather` (outputSchema, validated by the SDK) and `chaos__fail`
(isError), and checks that each result parses in the SDK for the negotiated protocol
(on 2026-07-28 the SDK rejects a CallToolResult without `resultType`). It also checks
progress notifications (`chaos__sleep`), the echo of each `--stdio-chaos` child server, and
that an unknown tool is a JSON-RPC error after which the session still works.

With `--sandbox DIR` (the folder of a `files` demo server in the config) it also checks
plan approval in the same connect mode, each in a fresh session: a host with elicitation
that accepts (the plan runs) or declines (nothing runs, isError), and a host without it,
which gets `needs_approval` and runs the plan through `approve_plan` once.

Prints one JSON summary on stdout. Exits 0 when every check passed, 1 when one failed
(the summary's "failures" say which, and the last wire messages are printed on stderr),
2 on bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from collections import deque
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import types
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage
from mcp.shared.subscriptions import ResourceUpdated

MODES = {"auto": "auto", "default": "auto", "legacy": "legacy"}


class WireLog:
    """The JSON-RPC messages exchanged with planmux, as the SDK sent and parsed them."""

    def __init__(self, keep: int = 200) -> None:
        self.messages: deque[str] = deque(maxlen=keep)
        self.all: list[str] = []

    def add(self, direction: str, message: SessionMessage | Exception) -> None:
        if isinstance(message, Exception):
            line = f"{direction} !! {type(message).__name__}: {message}"
        else:
            line = f"{direction} {message.message.model_dump_json(by_alias=True, exclude_unset=True)}"
        self.messages.append(line)
        self.all.append(line)


@asynccontextmanager
async def tapped(params: StdioServerParameters, wire: WireLog):
    """`stdio_client(params)` with every message recorded in `wire`."""
    async with stdio_client(params) as (server_read, server_write):
        to_client_w, to_client_r = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        from_client_w, from_client_r = anyio.create_memory_object_stream[SessionMessage](0)

        async def inbound() -> None:
            async with to_client_w:
                async for message in server_read:
                    wire.add("<-", message)
                    try:
                        await to_client_w.send(message)
                    except anyio.BrokenResourceError:
                        # The client closed while a notification was on its way (a
                        # server's list_changed may come at any time): as the SDK's own
                        # stdio reader does, it is dropped.
                        return

        async def outbound() -> None:
            async with from_client_r:
                async for message in from_client_r:
                    wire.add("->", message)
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


def dump(model: Any) -> Any:
    """A pydantic model as wire JSON (aliases, unset fields left out)."""
    return json.loads(model.model_dump_json(by_alias=True, exclude_unset=True))


class Checks:
    def __init__(self) -> None:
        self.failures: list[str] = []

    def expect(self, ok: bool, message: str) -> bool:
        if not ok:
            self.failures.append(message)
        return ok


ECHO_ARGS = {"text": "hello from python", "n": 42, "nested": {"list": [1, 2.5, None, True], "s": "ü"}}


async def exercise(client: Client, checks: Checks, summary: dict[str, Any], stdio_chaos: list[str]) -> None:
    summary["protocol_version"] = client.protocol_version
    info = client.server_info
    summary["server_info"] = dump(info) if info is not None else None

    # tools/list
    listed = await client.list_tools()
    tools = {tool.name: tool for tool in listed.tools}
    summary["tools"] = sorted(tools)
    for name in ("chaos__echo", "chaos__fail", "weather__get_weather"):
        checks.expect(name in tools, f"tools/list lacks {name} (got {sorted(tools)})")
    weather = tools.get("weather__get_weather")
    if weather is not None:
        checks.expect(weather.output_schema is not None, "weather__get_weather has no outputSchema")
        checks.expect(
            "location" in (weather.input_schema or {}).get("properties", {}),
            f"weather__get_weather inputSchema lost its properties: {weather.input_schema}",
        )

    calls: dict[str, Any] = {}
    summary["calls"] = calls

    # chaos__echo: structuredContent and _meta carry the arguments back.
    echo = await client.call_tool("chaos__echo", ECHO_ARGS)
    calls["chaos__echo"] = dump(echo)
    checks.expect(not echo.is_error, f"chaos__echo failed: {dump(echo)}")
    checks.expect(echo.structured_content == ECHO_ARGS, f"chaos__echo structuredContent {echo.structured_content!r} != {ECHO_ARGS!r}")
    meta = dump(echo).get("_meta") or {}
    checks.expect(meta.get("planmux-demo/echo") == ECHO_ARGS, f"chaos__echo _meta lost the arguments: {meta!r}")
    texts = [c.text for c in echo.content if getattr(c, "type", None) == "text"]
    checks.expect(
        any(json.loads(t) == ECHO_ARGS for t in texts if t.startswith("{")),
        f"chaos__echo text content is not the arguments as JSON: {texts!r}",
    )

    # weather__get_weather: structured output with an outputSchema (the SDK validates it).
    report = await client.call_tool("weather__get_weather", {"location": "Tokyo"})
    calls["weather__get_weather"] = dump(report)
    checks.expect(not report.is_error, f"weather__get_weather failed: {dump(report)}")
    sc = report.structured_content or {}
    checks.expect(sc.get("location") == "Tokyo", f"weather__get_weather structuredContent: {sc!r}")
    for key in ("temperature_c", "condition", "humidity_pct", "wind_kph"):
        checks.expect(key in sc, f"weather__get_weather structuredContent lacks {key}: {sc!r}")

    # chaos__fail: a tool-level failure is a result with isError, not a JSON-RPC error.
    failed = await client.call_tool("chaos__fail", {"message": "boom"})
    calls["chaos__fail"] = dump(failed)
    checks.expect(failed.is_error is True, f"chaos__fail did not report isError: {dump(failed)}")
    fail_texts = [c.text for c in failed.content if getattr(c, "type", None) == "text"]
    checks.expect(any("boom" in t for t in fail_texts), f"chaos__fail text lacks 'boom': {fail_texts!r}")

    # The same tool twice more: results stay parseable after the first (caches, listings).
    again = await client.call_tool("weather__get_weather", {"location": "Tokyo"})
    checks.expect(dump(again) == dump(report), "a second weather__get_weather call answered differently")

    # Progress: chaos__sleep reports each step to the progress token the SDK sends.
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    slept = await client.call_tool("chaos__sleep", {"ms": 150, "steps": 3}, progress_callback=on_progress)
    calls["chaos__sleep"] = dump(slept)
    calls["chaos__sleep"]["progress_seen"] = seen
    checks.expect(not slept.is_error and (slept.structured_content or {}).get("slept_ms") == 150,
                  f"chaos__sleep failed: {dump(slept)}")
    # The demo sends all three before its response, and the SDK delivers a request's
    # progress in order before resolving it: all three must arrive.
    checks.expect([(p, t) for p, t, _ in seen] == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)],
                  f"chaos__sleep progress through planmux: expected 1, 2, 3 of 3, saw {seen!r}")

    # Each stdio chaos child named on the command line answers through planmux too.
    for server in stdio_chaos:
        name = f"{server}__echo"
        checks.expect(name in tools, f"tools/list lacks {name}")
        result = await client.call_tool(name, {"via": server})
        calls[name] = dump(result)
        checks.expect(result.structured_content == {"via": server} and not result.is_error,
                      f"{name} through a stdio child: {dump(result)}")

    # execute_plan: its structured result must satisfy its own outputSchema (the SDK checks),
    # and progress comes once per finished step.
    plan = {
        "steps": [
            {"id": "list", "tool": "metrics__list_metrics", "args": {"category": "compute"}},
            {"id": "cpu", "tool": "metrics__query_metric", "args": {"name": "$ref:list.metrics[0].name"}},
            {"id": "check", "tool": "metrics__check_threshold",
             "args": {"metric": "${cpu.name}", "value": "$ref:cpu.current", "threshold": 80, "op": "gt"}},
        ],
        "outputs": {"exceeded": "$ref:check.exceeded", "cpu": "cpu"},
    }
    plan_progress: list[tuple[float, float | None, str | None]] = []

    async def on_plan_progress(progress: float, total: float | None, message: str | None) -> None:
        plan_progress.append((progress, total, message))

    ran = await client.call_tool("execute_plan", plan, progress_callback=on_plan_progress)
    calls["execute_plan"] = dump(ran)
    result = ran.structured_content or {}
    checks.expect(not ran.is_error and result.get("status") == "succeeded", f"execute_plan failed: {dump(ran)}")
    checks.expect(result.get("outputs", {}).get("exceeded") is False, f"execute_plan outputs: {result!r}")
    checks.expect([(p, t) for p, t, _ in plan_progress] == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)],
                  f"execute_plan progress: expected 1, 2, 3 of 3, saw {plan_progress!r}")
    invalid = await client.call_tool("execute_plan", {"steps": [{"tool": "metrics__nope"}]})
    checks.expect(invalid.is_error is True, f"an invalid plan did not report isError: {dump(invalid)}")

    # An unknown tool is a JSON-RPC error (the SDK raises MCPError), and the session survives it.
    try:
        bogus = await client.call_tool("chaos__no_such_tool", {})
        checks.expect(False, f"calling an unknown tool did not raise: {dump(bogus)}")
    except MCPError as e:
        calls["chaos__no_such_tool"] = {"error": {"code": e.code, "message": e.message}}
        checks.expect(e.code == -32602, f"unknown tool: expected error -32602, got {e.code} {e.message!r}")
    after = await client.call_tool("chaos__echo", {"after": "error"})
    checks.expect(after.structured_content == {"after": "error"}, f"call after an error: {dump(after)}")


def writing_plan(name: str) -> dict[str, Any]:
    """A plan whose one write needs approval: the content is a reference, shown as written."""
    return {
        "goal": f"save {name}",
        "steps": [
            {"id": "list", "tool": "files__list_files"},
            {"id": "save", "tool": "files__write_file", "args": {"path": name, "content": "${list}"}},
        ],
    }


async def approvals(
    connect: Any, wire: WireLog, mode: str, sandbox: str, checks: Checks, summary: dict[str, Any]
) -> None:
    """Plan approval through this SDK in `mode`: elicitation accepted, declined, and the token path."""
    seen: dict[str, list[str]] = {"accept": [], "decline": []}
    results: dict[str, Any] = {}
    summary["approval"] = results

    def answer(action: str):
        async def callback(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            seen[action].append(getattr(params, "message", ""))
            return types.ElicitResult(action=action, content={} if action == "accept" else None)

        return callback

    for action in ("accept", "decline"):
        name = f"{action}.txt"
        async with Client(connect(), mode=mode, elicitation_callback=answer(action)) as client:
            result = await client.call_tool("execute_plan", writing_plan(name))
        results[action] = dump(result)
        asked = seen[action]
        checks.expect(len(asked) == 1, f"approval ({action}): expected one elicitation, saw {asked!r}")
        checks.expect(
            bool(asked) and "files__write_file" in asked[0] and "${list}" in asked[0],
            f"approval ({action}): the request does not show the write as written: {asked!r}",
        )
        written = os.path.isfile(os.path.join(sandbox, name))
        if action == "accept":
            checks.expect(
                not result.is_error and (result.structured_content or {}).get("status") == "succeeded" and written,
                f"approval accepted: the plan did not run: {dump(result)}",
            )
        else:
            texts = " ".join(c.text for c in result.content if getattr(c, "type", None) == "text")
            checks.expect(
                result.is_error is True and "declined" in texts and not written,
                f"approval declined: expected isError, 'declined' and no file: {dump(result)}, written={written}",
            )

    # A host without elicitation: the model relays a token.
    async with Client(connect(), mode=mode) as client:
        first = await client.call_tool("execute_plan", writing_plan("token.txt"))
        body = first.structured_content or {}
        results["needs_approval"] = dump(first)
        approval = body.get("approval") or {}
        checks.expect(
            not first.is_error and body.get("status") == "needs_approval" and bool(approval.get("token")),
            f"token path: expected needs_approval with a token: {dump(first)}",
        )
        checks.expect(not os.path.exists(os.path.join(sandbox, "token.txt")), "token path: the write ran before approval")
        ran = await client.call_tool("approve_plan", {"token": approval.get("token"), "steps": approval.get("steps")})
        results["approve_plan"] = dump(ran)
        checks.expect(
            not ran.is_error and (ran.structured_content or {}).get("status") == "succeeded"
            and os.path.isfile(os.path.join(sandbox, "token.txt")),
            f"token path: approve_plan did not run the plan: {dump(ran)}",
        )
        again = await client.call_tool("approve_plan", {"token": approval.get("token"), "steps": approval.get("steps")})
        checks.expect(again.is_error is True, f"token path: a token ran twice: {dump(again)}")
    # How planmux asked: an input-required result (2026-07-28) or an elicitation/create request.
    asked_with: set[str] = set()
    for line in wire.all:
        if not line.startswith("<- {"):
            continue
        message = json.loads(line[3:])
        if message.get("method") == "elicitation/create":
            asked_with.add("elicitation/create")
        if (message.get("result") or {}).get("resultType") == "input_required":
            asked_with.add("input_required")
    results["asked_with"] = sorted(asked_with)


async def front_door(client: Client, checks: Checks, summary: dict[str, Any]) -> None:
    """server-everything's prompts, resources and completions through planmux."""
    seen: dict[str, Any] = {}
    summary["front_door"] = seen
    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    seen["prompts"] = sorted(prompts)
    checks.expect("everything__args-prompt" in prompts, f"prompts/list lacks everything__args-prompt: {sorted(prompts)}")
    got = await client.get_prompt("everything__args-prompt", {"city": "Paris", "state": "IdF"})
    texts = json.dumps(dump(got))
    seen["get_prompt"] = dump(got)
    checks.expect("Paris" in texts, f"prompts/get through planmux: {texts[:500]}")
    resources = [r.uri for r in (await client.list_resources()).resources]
    seen["resources"] = len(resources)
    demo = [u for u in resources if u.startswith("demo://")]
    checks.expect(bool(demo), f"resources/list lacks server-everything's resources: {resources[:5]}")
    if demo:
        read = await client.read_resource(demo[0])
        seen["read"] = demo[0]
        checks.expect(bool(read.contents), f"resources/read {demo[0]} came back empty")
    templated = await client.read_resource("demo://resource/dynamic/text/2")
    checks.expect(bool(templated.contents), "resources/read by template came back empty")
    completion = await client.complete(
        types.PromptReference(type="ref/prompt", name="everything__completable-prompt"),
        {"name": "department", "value": "E"},
    )
    seen["completion"] = list(completion.completion.values)
    checks.expect("Engineering" in completion.completion.values, f"completion/complete: {completion}")

    # A 2026-07-28 host subscribes with subscriptions/listen; the server's update for the
    # URI reaches its stream (server-everything sends one when its updates are toggled on).
    if client.protocol_version == "2026-07-28" and demo:
        uri = demo[0]
        updated = False
        async with client.listen(resource_subscriptions=[uri]) as sub:
            await client.call_tool("everything__toggle-subscriber-updates", {})
            with anyio.move_on_after(10):
                async for event in sub:
                    if isinstance(event, ResourceUpdated) and event.uri == uri:
                        updated = True
                        break
        seen["listen_updated"] = updated
        checks.expect(updated, f"no resources/updated for {uri} on the listen stream")


async def compact(client: Client, checks: Checks, summary: dict[str, Any]) -> None:
    """A compact surface: only planmux's tools are listed; search_tools finds a tool,
    which then runs in a plan and directly, by its name."""
    listed = sorted(tool.name for tool in (await client.list_tools()).tools)
    checks.expect("search_tools" in listed and "execute_plan" in listed, f"compact tools/list: {listed}")
    checks.expect("weather__get_weather" not in listed, f"compact tools/list shows the catalog: {listed}")
    found = await client.call_tool("search_tools", {"query": "current weather in a city", "limit": 3})
    tools = (found.structured_content or {}).get("tools", [])
    names = [tool.get("name") for tool in tools]
    checks.expect(names[:1] == ["weather__get_weather"], f"search_tools found {names}: {dump(found)}")
    first = tools[0] if tools else {}
    checks.expect(first.get("tier") == "read" and "inputSchema" in first, f"search result: {first!r}")
    plan = {"steps": [{"id": "w", "tool": names[0] if names else "?", "args": {"location": "Oslo"}}],
            "outputs": {"where": "$ref:w.location"}}
    ran = await client.call_tool("execute_plan", plan)
    outputs = (ran.structured_content or {}).get("outputs", {})
    checks.expect(not ran.is_error and outputs.get("where") == "Oslo", f"plan over a found tool: {dump(ran)}")
    # The user's words and phrasings in the words tools use, as a list: fused into one
    # ranking, whose best tool then runs in a plan.
    phrased = await client.call_tool("search_tools", {
        "query": ["will it rain in Oslo today", "get current weather", "weather forecast for city"],
        "limit": 3})
    phrased_names = [t.get("name") for t in (phrased.structured_content or {}).get("tools", [])]
    checks.expect(not phrased.is_error and phrased_names[:1] == ["weather__get_weather"],
                  f"search_tools with phrasings found {phrased_names}: {dump(phrased)}")
    plan = {"steps": [{"id": "w", "tool": phrased_names[0] if phrased_names else "?",
                       "args": {"location": "Lima"}}], "outputs": {"where": "$ref:w.location"}}
    ran = await client.call_tool("execute_plan", plan)
    checks.expect(not ran.is_error and (ran.structured_content or {}).get("outputs", {}).get("where") == "Lima",
                  f"plan over a tool found with phrasings: {dump(ran)}")
    direct = await client.call_tool("weather__get_weather", {"location": "Oslo"})
    checks.expect(not direct.is_error, f"an unlisted tool called by name: {dump(direct)}")
    index = await client.call_tool("search_tools", {})
    servers = [s.get("name") for s in (index.structured_content or {}).get("servers", [])]
    checks.expect("weather" in servers, f"server index: {servers}")
    summary["compact"] = {"listed": listed, "found": names, "phrased": phrased_names, "plan": outputs,
                          "servers": servers}


async def main_async(args: argparse.Namespace) -> int:
    mode = MODES[args.mode]
    # The SDK passes only a safe list of variables to the server: hand RUST_LOG on explicitly.
    env = {"RUST_LOG": os.environ.get("RUST_LOG", "warn")}
    params = StdioServerParameters(command=args.planmux, args=["serve", "--config", args.config], env=env)
    wire = WireLog()
    checks = Checks()
    summary: dict[str, Any] = {"mode": args.mode, "sdk_mode": mode}
    started = time.monotonic()
    try:
        with anyio.fail_after(args.timeout):
            async with Client(tapped(params, wire), mode=mode, read_timeout_seconds=args.timeout) as client:
                summary["connect_ms"] = round((time.monotonic() - started) * 1000, 1)
                await exercise(client, checks, summary, args.stdio_chaos)
                if args.everything:
                    await front_door(client, checks, summary)
            if args.sandbox:
                await approvals(lambda: tapped(params, wire), wire, mode, args.sandbox, checks, summary)
            if args.compact_config:
                compact_params = StdioServerParameters(
                    command=args.planmux, args=["serve", "--config", args.compact_config], env=env
                )
                async with Client(tapped(compact_params, wire), mode=mode, read_timeout_seconds=args.timeout) as client:
                    await compact(client, checks, summary)
    except BaseException as exc:  # noqa: BLE001 - any failure is reported, with its cause
        if isinstance(exc, KeyboardInterrupt):
            raise
        text = "".join(traceback.format_exception_only(type(exc), exc)).strip()
        if isinstance(exc, BaseExceptionGroup):
            leaves = []

            def walk(group: BaseException) -> None:
                if isinstance(group, BaseExceptionGroup):
                    for inner in group.exceptions:
                        walk(inner)
                else:
                    leaves.append("".join(traceback.format_exception_only(type(group), group)).strip())

            walk(exc)
            text = " / ".join(leaves)
        checks.failures.append(f"{type(exc).__name__} in mode {args.mode}: {text}")
        if args.verbose:
            traceback.print_exc()

    summary["handshake"] = [m.split(" ", 1)[1][:300] for m in wire.all[:2]]
    if args.expect_protocol and summary.get("protocol_version") not in (None, args.expect_protocol):
        checks.failures.append(
            f"mode {args.mode} negotiated protocol {summary.get('protocol_version')}, expected {args.expect_protocol}"
        )
    summary["elapsed_ms"] = round((time.monotonic() - started) * 1000, 1)
    summary["messages"] = len(wire.all)
    summary["failures"] = checks.failures
    summary["ok"] = not checks.failures
    if args.wire_log:
        with open(args.wire_log, "w", encoding="utf-8") as f:
            f.write("\n".join(wire.all) + "\n")
    print(json.dumps(summary, indent=2, ensure_ascii=False))
    if checks.failures:
        print(f"python_client ({args.mode}): {len(checks.failures)} check(s) failed:", file=sys.stderr)
        for failure in checks.failures:
            print(f"  - {failure}", file=sys.stderr)
        print("last wire messages (-> to planmux, <- from planmux):", file=sys.stderr)
        for line in list(wire.messages)[-args.tail:]:
            print(f"  {line[:2000]}", file=sys.stderr)
        return 1
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--planmux", required=True, help="path of the planmux binary")
    parser.add_argument("--config", required=True, help="servers.toml with chaos and weather demos")
    parser.add_argument("--mode", required=True, choices=sorted(MODES), help="auto (= default) or legacy")
    parser.add_argument("--stdio-chaos", action="append", default=[], metavar="SERVER",
                        help="a server of the config that is a `planmux demo chaos` child: its echo is called too")
    parser.add_argument("--everything", action="store_true",
                        help="the config has server-everything as `everything`: check prompts, resources, completions")
    parser.add_argument("--sandbox", help="the files demo's folder: also check plan approval")
    parser.add_argument("--compact-config", help="servers.toml with surface = \"compact\" and the weather demo: "
                        "check search_tools and plans over found tools")
    parser.add_argument("--expect-protocol", help="fail unless this protocol version was negotiated")
    parser.add_argument("--wire-log", help="write every JSON-RPC message to this file")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds for the whole run")
    parser.add_argument("--tail", type=int, default=12, help="wire messages to print on failure")
    parser.add_argument("-v", "--verbose", action="store_true", help="print tracebacks")
    args = parser.parse_args()
    return anyio.run(main_async, args)


if __name__ == "__main__":
    sys.exit(main())
