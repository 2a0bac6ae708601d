// The console in a real browser: headless Chromium (Debian's), driven over the Chrome
// DevTools protocol (Node 22's own WebSocket: no driver package), beside an MCP host (the
// official TypeScript SDK) working on the same planmux. Run by tests/it/interop/console.rs.
//
// Environment: CONSOLE (http://127.0.0.1:PORT), TOKEN (one of [http] tokens), CHROMIUM
// (its binary), SHOTS (a folder for the screenshots), QUARANTINED (an exported tool name
// servers.lock holds back), SANDBOX (the files demo's folder).
//
// Prints one JSON summary line on stdout; exits 1 on the first thing that does not hold.

import { spawn } from "node:child_process";
import { mkdtempSync, writeFileSync, existsSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const { CONSOLE, TOKEN, CHROMIUM, SHOTS, QUARANTINED, SANDBOX } = process.env;
const summary = {};
const say = (line) => process.stderr.write(`console_browser: ${line}\n`);
const fail = (why) => {
  throw new Error(why);
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function freePort() {
  return new Promise((resolve) => {
    const server = createServer();
    server.listen(0, "127.0.0.1", () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

/** Headless Chromium with its DevTools port; one page to drive. */
async function browser() {
  const port = await freePort();
  const profile = mkdtempSync(join(tmpdir(), "planmux-chromium-"));
  const child = spawn(CHROMIUM, [
    "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
    "--disable-dev-shm-usage", `--remote-debugging-port=${port}`,
    `--user-data-dir=${profile}`, "--window-size=1280,900", "about:blank",
  ], { stdio: ["ignore", "ignore", "pipe"] });
  child.stderr.on("data", () => {});
  let pageUrl;
  for (let i = 0; i < 100 && !pageUrl; i++) {
    try {
      const targets = await (await fetch(`http://127.0.0.1:${port}/json/list`)).json();
      pageUrl = targets.find((t) => t.type === "page")?.webSocketDebuggerUrl;
    } catch { /* not up yet */ }
    if (!pageUrl) await sleep(100);
  }
  if (!pageUrl) fail("Chromium did not open its DevTools port");
  const socket = new WebSocket(pageUrl);
  await new Promise((resolve, reject) => {
    socket.onopen = resolve;
    socket.onerror = reject;
  });
  let next = 0;
  const waiting = new Map();
  socket.onmessage = (event) => {
    const message = JSON.parse(event.data);
    if (message.id && waiting.has(message.id)) {
      const { resolve, reject } = waiting.get(message.id);
      waiting.delete(message.id);
      message.error ? reject(new Error(JSON.stringify(message.error))) : resolve(message.result);
    }
  };
  const send = (method, params = {}) =>
    new Promise((resolve, reject) => {
      const id = ++next;
      waiting.set(id, { resolve, reject });
      socket.send(JSON.stringify({ id, method, params }));
    });
  await send("Page.enable");
  await send("Runtime.enable");
  const page = {
    send,
    async eval(expression) {
      const { result, exceptionDetails } = await send("Runtime.evaluate", {
        expression, returnByValue: true, awaitPromise: true,
      });
      if (exceptionDetails) fail(`in the page: ${exceptionDetails.exception?.description ?? exceptionDetails.text}`);
      return result.value;
    },
    async until(what, expression, ms = 15000) {
      const end = Date.now() + ms;
      while (Date.now() < end) {
        try {
          const value = await page.eval(expression);
          if (value) return value;
        } catch { /* navigating */ }
        await sleep(100);
      }
      fail(`timed out waiting for ${what}`);
    },
    async go(path) {
      await send("Page.navigate", { url: CONSOLE + path });
      await page.until(`${path} to load`, `document.readyState === "complete" && location.pathname === ${JSON.stringify(path.split("?")[0])}`);
    },
    async shot(name) {
      const { data } = await send("Page.captureScreenshot", { format: "png", captureBeyondViewport: true });
      writeFileSync(join(SHOTS, `console-${name}.png`), Buffer.from(data, "base64"));
    },
    close() {
      socket.close();
      child.kill("SIGKILL");
    },
  };
  return page;
}

/** An MCP host with the token: no elicitation, so approval takes the token path. */
async function host() {
  const client = new Client({ name: "console-test-host", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${CONSOLE}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } },
  });
  await client.connect(transport);
  return client;
}

const plan = (steps, goal) => ({ name: "execute_plan", arguments: { goal, steps } });
const structured = (result) =>
  result.structuredContent ?? JSON.parse(result.content.find((c) => c.type === "text").text);

async function main() {
  // Refused without a token, and from another origin.
  summary.unsigned = (await fetch(`${CONSOLE}/console`)).status;
  summary.other_origin = (await fetch(`${CONSOLE}/console/servers/accept`, {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}`, Origin: "http://evil.example", "Content-Type": "application/x-www-form-urlencoded" },
    body: `tool=${QUARANTINED}`,
  })).status;
  summary.bad_csrf = (await fetch(`${CONSOLE}/console/servers/accept`, {
    method: "POST",
    headers: { Authorization: `Bearer ${TOKEN}`, Origin: CONSOLE, "Content-Type": "application/x-www-form-urlencoded" },
    body: `tool=${QUARANTINED}&csrf=0123`,
  })).status;

  const page = await browser();
  const mcp = await host();
  try {
    // Sign in.
    await page.go("/console");
    summary.sign_in_page = await page.eval(`!!document.querySelector('input[name=token]')`);
    await page.shot("sign-in");
    await page.eval(`document.querySelector('input[name=token]').value = ${JSON.stringify(TOKEN)}; document.querySelector('form').submit(); true`);
    await page.until("the servers page", `location.pathname === "/console" && !!document.querySelector('tr[id=server-chaos]')`);
    summary.servers = await page.eval(`[...document.querySelectorAll('tr[id^=server-]')].map(r => r.id.slice(7) + ":" + r.querySelector('.badge').textContent)`);

    // A quarantined tool: shown, not listed to the host; accepted, it is callable.
    const listed = async () => (await mcp.listTools()).tools.map((t) => t.name);
    summary.quarantined_shown = await page.eval(`!!document.querySelector('tr.quarantined[data-tool=${JSON.stringify(QUARANTINED)}]')`);
    summary.quarantined_listed_before = (await listed()).includes(QUARANTINED);
    // One whose description changed since the lock: the diff against what it pinned.
    summary.changed_shown = await page.eval(`!!document.querySelector('tr.quarantined[data-tool=chaos__log]')`);
    summary.diff_removed = await page.eval(`[...document.querySelectorAll('tr.quarantined[data-tool=chaos__log] .diff .del')].map(l => l.textContent)`);
    summary.diff_added = await page.eval(`[...document.querySelectorAll('tr.quarantined[data-tool=chaos__log] .diff .ins')].map(l => l.textContent)`);
    await page.shot("servers");
    await page.eval(`document.querySelector('tr.quarantined[data-tool=${JSON.stringify(QUARANTINED)}] form').submit(); true`);
    await page.until("the accepted tool among the tools", `!document.querySelector('tr.quarantined[data-tool=${JSON.stringify(QUARANTINED)}]') && !!document.querySelector('tr.tool[data-tool=${JSON.stringify(QUARANTINED)}]')`);
    summary.quarantined_listed_after = (await listed()).includes(QUARANTINED);
    summary.accepted_call_ok = !(await mcp.callTool({ name: QUARANTINED, arguments: {} })).isError;

    // A plan run by the host appears on the runs page while it is open (live).
    await page.go("/console/runs");
    const before = await page.eval(`document.querySelectorAll('tr.run').length`);
    const running = mcp.callTool(plan([
      { id: "a", tool: "chaos__echo", args: { text: "one" } },
      { id: "b", tool: "chaos__sleep", args: { ms: 4000 } },
      { id: "c", tool: "chaos__echo", args: { first: "${a.text}", slept: "${b.slept_ms}" } },
    ], "watch me on the console"));
    // While it runs: a done, b running, c waiting.
    await page.until("the plan running, step by step", `!!document.querySelector('section.running tr.live-step[data-step=b] .badge.running') && !!document.querySelector('section.running tr.live-step[data-step=a] .badge.succeeded') && !!document.querySelector('section.running tr.live-step[data-step=c] .badge.waiting')`);
    summary.seen_running = true;
    await page.shot("running");
    const run = structured(await running);
    summary.plan_status = run.status;
    summary.run_id = run.run_id;
    await page.until("the run on the runs page, without reloading", `document.querySelectorAll('tr.run').length > ${before} && !!document.querySelector('tr.run[data-run="${run.run_id}"][data-status=succeeded]')`);
    summary.live_without_reload = await page.eval(`!!document.body.dataset.updated`);
    await page.shot("runs");
    await page.go(`/console/runs/${run.run_id}`);
    summary.graph_nodes = await page.eval(`document.querySelectorAll('svg.graph g.node').length`);
    summary.graph_edges = await page.eval(`document.querySelectorAll('svg.graph line').length`);
    summary.timeline_bars = await page.eval(`document.querySelectorAll('svg.timeline rect.bar').length`);
    summary.steps_succeeded = await page.eval(`document.querySelectorAll('tr.step[data-status=succeeded]').length`);
    await page.shot("run");

    // A lazy plan runs nothing: the console shows what would run.
    const lazy = structured(await mcp.callTool({ name: "execute_plan", arguments: {
      goal: "only a plan", mode: "lazy", steps: [
        { id: "x", tool: "chaos__echo", args: { n: 1 } },
        { id: "y", tool: "fs__write_file", args: { path: "never.txt", content: "${x.n}" } },
      ] } }));
    summary.lazy_status = lazy.status;
    await page.go("/console/runs");
    await page.until("the lazy plan listed", `!!document.querySelector('tr.planned a')`);
    await page.eval(`location.href = document.querySelector('tr.planned a').href; true`);
    await page.until("the lazy plan's page", `location.pathname.startsWith('/console/planned/') && document.readyState === 'complete'`);
    summary.lazy_nodes = await page.eval(`document.querySelectorAll('svg.graph g.node').length`);
    summary.lazy_edges = await page.eval(`document.querySelectorAll('svg.graph line').length`);
    summary.lazy_schedule_names_approval = await page.eval(`document.querySelector('main pre').textContent.includes('needs approval: y')`);
    summary.lazy_wrote = existsSync(join(SANDBOX, "never.txt"));

    // A plan that writes waits for approval; approved on the page, it runs.
    const write = (name) => plan([{ id: "w", tool: "fs__write_file", args: { path: name, content: "from the console test" } }], `write ${name}`);
    const asked = structured(await mcp.callTool(write("approved.txt")));
    summary.asked_status = asked.status;
    const token = asked.approval?.token ?? fail(`no approval token: ${JSON.stringify(asked)}`);
    await page.go("/console/approvals");
    await page.until("the plan waiting", `!!document.querySelector('section.approval[data-token="${token}"]')`);
    summary.approval_shows_step = await page.eval(`document.querySelector('section.approval[data-token="${token}"]').textContent.includes('fs__write_file')`);
    await page.shot("approvals");
    await page.eval(`document.querySelector('section.approval[data-token="${token}"] form[action$=approve]').submit(); true`);
    await page.until("the approved run's page", `location.pathname.startsWith('/console/runs/') && !!document.querySelector('tr.step[data-step=w]')`);
    summary.approved_step_status = await page.eval(`document.querySelector('tr.step[data-step=w]').dataset.status`);
    summary.approved_file = existsSync(join(SANDBOX, "approved.txt"));
    const again = await mcp.callTool({ name: "approve_plan", arguments: { token, steps: asked.approval.steps } });
    summary.token_after_console = again.content.map((c) => c.text).join(" ");

    // Declined on the page: nothing runs.
    const declined = structured(await mcp.callTool(write("declined.txt")));
    const token2 = declined.approval?.token ?? fail("no second approval token");
    await page.go("/console/approvals");
    await page.until("the second plan", `!!document.querySelector('section.approval[data-token="${token2}"]')`);
    await page.eval(`document.querySelector('section.approval[data-token="${token2}"] form[action$=decline]').submit(); true`);
    await page.until("the approvals page without it", `location.pathname === '/console/approvals' && !document.querySelector('section.approval[data-token="${token2}"]')`);
    await sleep(300);
    summary.declined_file = existsSync(join(SANDBOX, "declined.txt"));

    // The audit trail, filtered by tool.
    await page.go("/console/audit?tool=fs__write_file");
    summary.audit_decisions = await page.eval(`[...document.querySelectorAll('main table tr')].slice(1).map(r => r.children[4].textContent + "/" + r.children[8].textContent)`);
    summary.audit_callers = await page.eval(`[...document.querySelectorAll('main table tr')].slice(1).map(r => r.children[4].textContent + "/" + r.children[5].textContent)`);
    await page.shot("audit");
    await page.go(`/console/audit?tool=${QUARANTINED}`);
    summary.audit_accepted = await page.eval(`[...document.querySelectorAll('main table tr')].slice(1).map(r => r.children[4].textContent + "/" + r.children[5].textContent + "/" + r.children[8].textContent)`);
  } finally {
    page.close();
    await mcp.close();
  }
  console.log(JSON.stringify(summary));
}

main().catch((error) => {
  say(String(error?.stack ?? error));
  console.log(JSON.stringify({ ...summary, error: String(error?.message ?? error) }));
  process.exit(1);
});
