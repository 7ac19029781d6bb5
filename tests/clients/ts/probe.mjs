// The TypeScript MCP SDK against a guidepost server: the same calls as the Python
// probes (tests/clients/probes/steps.py), one JSON report on the last line.
//
//   node probe.mjs MCP_URL sdk1|sdk2      (agent key in GUIDEPOST_KEY)
//
// sdk1 is @modelcontextprotocol/sdk 1.x; sdk2 is @modelcontextprotocol/client 2.x.
// Both send extra headers through the transport's `requestInit.headers`.
import { readFileSync } from "node:fs";

const FLOW = "refund_request";
const RESOURCE = "guidepost://flows/refund_request";
const UNKNOWN_RUN = "r_AAAAAAAAAAAAAAAAAAAAAA";
const START_ARGS = { flow_id: FLOW, values: { order_number: "A20931" }, ref: "client-probe" };

const [url, flavour] = process.argv.slice(2);
if (!url || !["sdk1", "sdk2"].includes(flavour)) {
  console.error("usage: node probe.mjs MCP_URL sdk1|sdk2");
  process.exit(2);
}

async function load() {
  if (flavour === "sdk1") {
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { StreamableHTTPClientTransport } = await import(
      "@modelcontextprotocol/sdk/client/streamableHttp.js"
    );
    return { Client, StreamableHTTPClientTransport, pkg: "@modelcontextprotocol/sdk" };
  }
  const { Client, StreamableHTTPClientTransport } = await import("@modelcontextprotocol/client");
  return { Client, StreamableHTTPClientTransport, pkg: "@modelcontextprotocol/client" };
}

function installed(pkg) {
  const manifest = new URL(`./node_modules/${pkg}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(manifest, "utf8")).version;
}

function parsed(text) {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

function sameJson(a, b) {
  return JSON.stringify(a) === JSON.stringify(b);
}

async function call(client, name, args) {
  const result = await client.callTool({ name, arguments: args });
  const text = result.content.filter((b) => b.type === "text").map((b) => b.text).join("");
  const payload = parsed(text);
  const structured = result.structuredContent;
  return {
    payload,
    is_error: Boolean(result.isError),
    surfaced: "isError",
    structured: structured === undefined ? null : sameJson(structured, payload),
  };
}

async function step(report, name, action) {
  try {
    report[name] = await action();
  } catch (error) {
    report[name] = { failed: `${error?.name ?? "Error"}: ${error?.message ?? error}`.slice(0, 2000) };
  }
  return report[name];
}

const { Client, StreamableHTTPClientTransport, pkg } = await load();
const key = process.env.GUIDEPOST_KEY;
const headers = key ? { Authorization: `Bearer ${key}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "guidepost-client-probe", version: "1.0.0" });
await client.connect(transport);

const report = {};
await step(report, "tools", async () => (await client.listTools()).tools.map((t) => t.name).sort());
const started = await step(report, "start", () => call(client, "guide_start", START_ARGS));
const runId = started?.payload?.run_id ?? "r_missing";
await step(report, "answer", () =>
  call(client, "guide_answer", { run_id: runId, choice: "damaged", at: "n_reason" }),
);
await step(report, "error", () => call(client, "guide_status", { run_id: UNKNOWN_RUN }));
await step(report, "resources", async () => (await client.listResources()).resources.map((r) => r.uri));
await step(report, "templates", async () =>
  (await client.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate),
);
await step(report, "read", async () => {
  const { contents } = await client.readResource({ uri: RESOURCE });
  return contents.map((c) => c.text ?? "").join("");
});
await client.close();
// What the library hands its user when the server refuses the key (401 `invalid key`).
report.refused_key = await refusedKey();
report.versions = { [pkg]: installed(pkg), node: process.versions.node };
console.log(JSON.stringify(report));

async function refusedKey() {
  const wrong = { Authorization: "Bearer gpk_not_a_key_this_server_issued" };
  const refused = new Client({ name: "guidepost-client-probe", version: "1.0.0" });
  try {
    await refused.connect(
      new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: wrong } }),
    );
    return { listed: (await refused.listTools()).tools.map((t) => t.name).sort() };
  } catch (error) {
    return { raised: error?.name ?? "Error", says: `${error?.message ?? error}`.slice(0, 500) };
  } finally {
    await refused.close().catch(() => {});
  }
}
