// `openclaw clawrecall status|search|stats|import`, and the Markdown import they share with the
// first-start offer. The server does the work; this file finds the files and prints answers.

import { readFile, readdir } from "node:fs/promises";
import { homedir } from "node:os";
import { join, relative } from "node:path";

import { configWarnings, PLUGIN_ID } from "./checks.js";

/**
 * Every configured agent with its workspace folder, by OpenClaw's rules: the agent's own
 * `workspace`, else (default agent) `agents.defaults.workspace` or <stateDir>/workspace, else
 * (other agents) <agents.defaults.workspace>/<id> or <stateDir>/workspace-<id>.
 */
export function agentWorkspaces(config, env = process.env) {
  const stateDir = env.OPENCLAW_STATE_DIR || join(env.HOME || homedir(), ".openclaw");
  const agents = config?.agents ?? {};
  const entries = Object.entries(agents.entries ?? {}).map(([id, a]) => ({ ...a, id }));
  if (!entries.length && Array.isArray(agents.list)) entries.push(...agents.list); // older configs
  if (!entries.length) entries.push({ id: "main" });
  const defaultId = (entries.find((a) => a?.default) ?? entries.find((a) => a?.id === "main") ?? entries[0]).id;
  const shared = agents.defaults?.workspace;
  return entries
    .filter((a) => typeof a?.id === "string" && a.id)
    .map((a) => {
      const fallback =
        a.id === defaultId
          ? shared ?? env.OPENCLAW_WORKSPACE_DIR ?? join(stateDir, "workspace")
          : shared
            ? join(shared, a.id)
            : join(stateDir, `workspace-${a.id}`);
      return { agent: a.id, workspace: expand(a.workspace ?? fallback, env) };
    });
}

function expand(path, env) {
  return path.startsWith("~") ? join(env.HOME || homedir(), path.slice(1)) : path;
}

/** MEMORY.md, USER.md and memory/*.md of one workspace: [{path (relative), content}]. */
export async function memoryFiles(workspace) {
  const names = ["MEMORY.md", "USER.md"];
  try {
    for (const name of (await readdir(join(workspace, "memory"))).sort()) {
      if (name.endsWith(".md")) names.push(join("memory", name));
    }
  } catch {
    // no memory/ folder
  }
  const files = [];
  for (const name of names) {
    try {
      files.push({ path: relative(workspace, join(workspace, name)), content: await readFile(join(workspace, name), "utf8") });
    } catch {
      // not there
    }
  }
  return files;
}

// One import request stays under the server's limits: at most 1,000 files (the route's) and well
// under its default body limit of 1 MiB (`clawrecall serve --max-body`). A batch the server still
// finds too large (413, a lower limit) is halved; a single file over the limit is reported, not sent.
export const BATCH_FILES = 200;
export const BATCH_BYTES = 512 * 1024;
const COUNTS = ["files", "sections", "created", "duplicates", "templates"];

/** `files` in batches of at most `maxFiles` files and about `maxBytes` of JSON. */
export function batches(files, { maxFiles = BATCH_FILES, maxBytes = BATCH_BYTES } = {}) {
  const out = [];
  let batch = [];
  let bytes = 0;
  for (const file of files) {
    const size = Buffer.byteLength(JSON.stringify(file));
    if (batch.length && (batch.length >= maxFiles || bytes + size > maxBytes)) {
      out.push(batch);
      batch = [];
      bytes = 0;
    }
    batch.push(file);
    bytes += size;
  }
  if (batch.length) out.push(batch);
  return out;
}

/**
 * Import each agent's Markdown memory into that agent's scope; one summary per agent, with the
 * counts summed over its batches. An agent whose import fails gets `error` (and `skipped`, the
 * files the server would not take) and the others still run.
 */
export async function importMarkdown(client, config, { agent, limits } = {}) {
  const summaries = [];
  for (const ws of agentWorkspaces(config)) {
    if (agent && ws.agent !== agent) continue;
    const summary = { agent: ws.agent, workspace: ws.workspace, files: 0, sections: 0, created: 0, duplicates: 0,
      templates: 0, templateFiles: [] };
    summaries.push(summary);
    try {
      await importAgent(client, ws.agent, await memoryFiles(ws.workspace), summary, limits);
    } catch (err) {
      summary.error = err?.message ?? String(err);
    }
  }
  return summaries;
}

async function importAgent(client, agent, files, summary, limits) {
  const pending = batches(files, limits);
  const skipped = [];
  while (pending.length) {
    const batch = pending.shift();
    const answer = await client.call("/v1/import/markdown", {
      body: { files: batch },
      identity: { agent },
      timeoutMs: 120000,
    });
    if (answer.ok) {
      for (const key of COUNTS) summary[key] += answer.data?.[key] ?? 0;
      summary.templateFiles.push(...(answer.data?.template_files ?? []));
      summary.scope = answer.data?.scope;
    } else if (answer.status === 413 && batch.length > 1) {
      const half = Math.ceil(batch.length / 2);
      pending.unshift(batch.slice(0, half), batch.slice(half));
    } else if (answer.status === 413) {
      skipped.push(batch[0].path);
    } else {
      const said = answer.data?.error?.message;
      throw new Error(answer.status ? `HTTP ${answer.status}${said ? `: ${said}` : ""}` : "the server did not answer");
    }
  }
  if (skipped.length) {
    summary.skipped = skipped;
    summary.error = `${skipped.length} file(s) larger than the server accepts: ${skipped.join(", ")}`;
  }
}

export function registerCommands({ program, client, config, pluginConfig, toolNames }) {
  const root = program.command(PLUGIN_ID).description("clawrecall memory: status, search, stats, import");
  // process.stdout itself: OpenClaw sends console output of plugin commands to stderr.
  const print = (json, value, text) => process.stdout.write((json ? JSON.stringify(value, null, 2) : text) + "\n");
  const showTool = async (tool, body, opts) => {
    const answer = await client.request(`/v1/tools/${tool}`, {
      body,
      identity: { agent: opts.agent, user: opts.user },
      timeoutMs: 30000,
    });
    if (!answer) return void (process.exitCode = 1);
    print(opts.json, answer.details, answer.content?.[0]?.text ?? "");
  };

  root
    .command("status")
    .description("Server health and the configuration warnings")
    .option("--json", "JSON output")
    .action(async (opts) => {
      const health = await client.request("/health", { timeoutMs: 5000 });
      const warnings = configWarnings(config, pluginConfig, toolNames);
      const status = { server: client.baseUrl, mode: pluginConfig.mode, health, warnings };
      print(opts.json, status, [
        `server: ${client.baseUrl} — ${health ? `${health.status} (${health.model}, ${health.store?.backend})` : "unreachable"}`,
        `mode: ${pluginConfig.mode}`,
        ...(warnings.length ? warnings : ["no configuration warnings"]),
      ].join("\n"));
      if (!health) process.exitCode = 1;
    });

  root
    .command("search")
    .description("Search an agent's memories")
    .argument("<query>")
    .option("--agent <id>", "agent", "main")
    .option("--user <id>", "user", pluginConfig.user)
    .option("--limit <n>", "most results", "8")
    .option("--json", "JSON output")
    .action((query, opts) =>
      showTool("memory_search", { query, maxResults: Number.parseInt(opts.limit, 10) || 8 }, opts),
    );

  root
    .command("stats")
    .description("Memory counts an agent can read")
    .option("--agent <id>", "agent", "main")
    .option("--user <id>", "user", pluginConfig.user)
    .option("--json", "JSON output")
    .action((opts) => showTool("memory_stats", {}, opts));

  root
    .command("import")
    .description("Import MEMORY.md, USER.md and memory/*.md of each agent's workspace into that agent's scope")
    .option("--agent <id>", "only this agent")
    .option("--json", "JSON output")
    .action(async (opts) => {
      const summaries = await importMarkdown(client, config, { agent: opts.agent });
      print(opts.json, summaries, summaries.map(importLine).join("\n") || "no agents configured");
      if (summaries.some((s) => s.error)) process.exitCode = 1;
    });
}

export function importLine(s) {
  const left = s.templates
    ? `, ${s.templates} left out as OpenClaw template text` +
      (s.templateFiles?.length ? ` (untouched: ${s.templateFiles.join(", ")})` : "")
    : "";
  const counts = `${s.files} file(s), ${s.sections} section(s): ${s.created} imported, ${s.duplicates} already there${left}`;
  if (s.error) return `${s.agent}: FAILED (${s.error})${s.files ? `; before that ${counts}` : ""}`;
  if (!s.files) return `${s.agent}: no MEMORY.md, USER.md or memory/*.md in ${s.workspace}`;
  return `${s.agent}: ${counts}`;
}
