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

/** Import each agent's Markdown memory into that agent's scope; one summary per agent. */
export async function importMarkdown(client, config, { agent } = {}) {
  const summaries = [];
  for (const ws of agentWorkspaces(config)) {
    if (agent && ws.agent !== agent) continue;
    const files = await memoryFiles(ws.workspace);
    if (!files.length) {
      summaries.push({ agent: ws.agent, workspace: ws.workspace, files: 0, created: 0, duplicates: 0 });
      continue;
    }
    const answer = await client.request("/v1/import/markdown", {
      body: { files },
      identity: { agent: ws.agent },
      timeoutMs: 120000,
    });
    if (!answer) throw new Error(`import for agent ${ws.agent} failed (see the warning above)`);
    summaries.push({ agent: ws.agent, workspace: ws.workspace, ...answer });
  }
  return summaries;
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
    });
}

export function importLine(s) {
  if (!s.files) return `${s.agent}: no MEMORY.md, USER.md or memory/*.md in ${s.workspace}`;
  return `${s.agent}: ${s.files} file(s), ${s.sections} section(s): ${s.created} imported, ${s.duplicates} already there`;
}
