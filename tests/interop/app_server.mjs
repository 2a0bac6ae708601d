// An MCP App's server on the official TypeScript SDK, over stdio: a tool whose `_meta`
// names its UI (`ui.resourceUri`), the `ui://` resource holding that UI (HTML, the MCP
// Apps MIME type), and a second tool the UI calls by its own name, as an app's iframe
// does (tests/it/interop/apps.rs runs it behind planmux).
//   node app_server.mjs
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const UI = "ui://weather-app/forecast.html";
const server = new McpServer({ name: "weather-app", version: "1.0.0" });

server.registerTool(
  "show_forecast",
  {
    description: "Show the forecast of a city in an interactive view.",
    inputSchema: { city: z.string() },
    _meta: { ui: { resourceUri: UI, visibility: ["model", "app"] }, "ui/resourceUri": UI },
  },
  async ({ city }) => ({
    content: [{ type: "text", text: `Forecast for ${city}: sunny` }],
    structuredContent: { city, sky: "sunny" },
  }),
);

server.registerTool(
  "refresh_forecast",
  {
    description: "Fetch the forecast again (called by the app's view).",
    inputSchema: { city: z.string() },
    _meta: { ui: { visibility: ["app"] } },
  },
  async ({ city }) => ({ content: [{ type: "text", text: `Refreshed ${city}: cloudy` }] }),
);

server.registerResource(
  "forecast-view",
  UI,
  { mimeType: "text/html;profile=mcp-app", _meta: { ui: { prefersBorder: true } } },
  async (uri) => ({
    contents: [{ uri: uri.href, mimeType: "text/html;profile=mcp-app", text: "<!doctype html><title>Forecast</title><div id=app></div>" }],
  }),
);

await server.connect(new StdioServerTransport());
