// The official MCP TypeScript SDK's task client (2025-11-25, SEP-1686) as a remote host
// of planmux's HTTP front, with server-everything over HTTP behind it as `remote`: lists
// the tools, runs the research tool (which runs only as a task) as a task of planmux's,
// once plainly and once with the clarifying question it asks, runs echo as a task, lists
// and cancels tasks, runs a plan with a `task` (planmux's own tools run at once), and asks
// for a task planmux never gave; prints a JSON summary.
//   node ts_tasks.mjs URL
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ElicitRequestSchema,
  TaskStatusNotificationSchema,
} from "@modelcontextprotocol/sdk/types.js";

const [url] = process.argv.slice(2);
const transport = new StreamableHTTPClientTransport(new URL(url));
const client = new Client(
  { name: "planmux-ts-tasks", version: "0.0.0" },
  { capabilities: { elicitation: { form: {} } } },
);
const asked = [];
client.setRequestHandler(ElicitRequestSchema, async (request) => {
  asked.push(request.params.message);
  const choices = request.params.requestedSchema?.properties?.interpretation?.oneOf ?? [];
  return { action: "accept", content: { interpretation: choices[0]?.const ?? "the first" } };
});

const told = [];
client.setNotificationHandler(TaskStatusNotificationSchema, (notification) => {
  told.push([notification.params.taskId, notification.params.status]);
});

// Every message of one task-augmented call, and the result's text.
async function asTask(name, args) {
  const seen = [];
  let text = null;
  let taskId = null;
  const stream = client.experimental.tasks.callToolStream(
    { name, arguments: args },
    CallToolResultSchema,
    { task: { ttl: 60000 } },
  );
  for await (const message of stream) {
    seen.push(message.type === "taskStatus" ? `status:${message.task.status}` : message.type);
    if (message.type === "taskCreated") taskId = message.task.taskId;
    if (message.type === "result") {
      text = message.result.content.filter((c) => c.type === "text").map((c) => c.text).join("");
    }
    if (message.type === "error") text = `error: ${message.error}`;
  }
  return { seen, text, taskId };
}

try {
  await client.connect(transport);
  const { tools } = await client.listTools();
  const research = tools.find((t) => t.name === "remote__simulate-research-query");
  const plain = await asTask("remote__simulate-research-query", { topic: "rust" });
  const clarified = await asTask("remote__simulate-research-query", { topic: "python", ambiguous: true });
  const echo = await asTask("remote__echo", { message: "as a task" });
  const listed = await client.experimental.tasks.listTasks();
  // A research task (four stages of a second each) cancelled at once.
  const created = await client.request(
    { method: "tools/call", params: { name: "remote__simulate-research-query", arguments: { topic: "go" }, task: { ttl: 60000 } } },
    CreateTaskResultSchema,
  );
  const cancelled = await client.experimental.tasks.cancelTask(created.task.taskId);
  // planmux's own tools run as they would without the `task`: the result at once.
  const plan = await client.request(
    { method: "tools/call", params: { name: "execute_plan", task: { ttl: 60000 }, arguments: {
      steps: [{ id: "e", tool: "remote__echo", args: { message: "in a plan" } }],
    } } },
    CallToolResultSchema,
  );
  // The cancelled task's end is told within a poll (50 ms).
  await new Promise((resolve) => setTimeout(resolve, 300));
  let unknown = null;
  try {
    await client.experimental.tasks.getTask("no-such-task");
  } catch (error) {
    unknown = String(error);
  }
  console.log(JSON.stringify({
    protocol: transport.protocolVersion ?? null,
    tasks: client.getServerCapabilities()?.tasks ?? null,
    execution: research?.execution ?? null,
    plain,
    clarified,
    asked,
    echo,
    listed: listed.tasks.map((t) => t.taskId),
    cancelled: cancelled.status,
    cancelledId: created.task.taskId,
    told,
    plan: plan.structuredContent ?? null,
    unknown,
  }));
  await client.close();
} catch (error) {
  console.log(JSON.stringify({ error: String(error), asked }));
  process.exit(1);
}
