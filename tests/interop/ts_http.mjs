// The official MCP TypeScript SDK as a remote host of planmux's HTTP front: connects to
// the URL with `Authorization: Bearer TOKEN`, lists the tools, runs a plan with
// execute_plan and calls a tool directly; prints a JSON summary (with everything__echo's
// `execution`, a tool field rmcp does not model).
//   node ts_http.mjs URL [TOKEN]
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, token] = process.argv.slice(2);
const headers = token ? { Authorization: `Bearer ${token}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "planmux-ts-interop", version: "0.0.0" });
try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const plan = await client.callTool({
    name: "execute_plan",
    arguments: {
      steps: [
        { id: "w", foreach: ["Oslo", "Lima"], tool: "weather__get_weather", args: { location: "$ref:item" } },
        { id: "names", foreach: "$ref:w", value: "$ref:item.location" },
      ],
      outputs: ["names"],
    },
  });
  const echo = await client.callTool({ name: "chaos__echo", arguments: { said: "over http" } });
  console.log(JSON.stringify({
    tools: tools.map((t) => t.name),
    execution: tools.find((t) => t.name === "everything__echo")?.execution ?? null,
    plan: plan.structuredContent,
    echo: echo.content.filter((c) => c.type === "text").map((c) => c.text),
    protocol: transport.protocolVersion ?? null,
  }));
  await client.close();
} catch (error) {
  console.log(JSON.stringify({ error: String(error) }));
  process.exit(1);
}
