// Start-up warnings for the configurations that make a memory plugin silently do nothing, and
// the host version check. Each returns messages; the caller logs them once.

export const PLUGIN_ID = "clawrecall";
export const MIN_HOST_VERSION = "2026.9.6";

/** Compare OpenClaw's calendar versions (`2026.9.6`, `2026.10.1-beta.2`): <0, 0 or >0. */
export function compareVersions(a, b) {
  const parts = (v) => String(v).split(/[-+]/)[0].split(".").map((n) => Number.parseInt(n, 10) || 0);
  const [x, y] = [parts(a), parts(b)];
  for (let i = 0; i < Math.max(x.length, y.length); i++) {
    const d = (x[i] ?? 0) - (y[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** The problem with this host's version, or null when it is supported (or says no version). */
export function versionProblem(hostVersion) {
  if (!hostVersion || compareVersions(hostVersion, MIN_HOST_VERSION) >= 0) return null;
  return (
    `clawrecall needs OpenClaw ${MIN_HOST_VERSION} or newer; this is ${hostVersion}. ` +
    "The plugin is not active: update OpenClaw (npm install -g openclaw@latest)."
  );
}

/** Warnings about `config` (the whole openclaw.json) for a plugin configured as `pluginConfig`. */
export function configWarnings(config, pluginConfig, toolNames) {
  const warnings = [];
  const plugins = config?.plugins ?? {};
  const entry = plugins.entries?.[PLUGIN_ID] ?? {};
  if (entry.hooks?.allowConversationAccess !== true) {
    warnings.push(
      `clawrecall: plugins.entries.${PLUGIN_ID}.hooks.allowConversationAccess is not true, so OpenClaw drops the ` +
        "capture hook (agent_end) of non-bundled plugins: nothing will be remembered. Set it to true " +
        "(`clawrecall openclaw install` does).",
    );
  }
  if (entry.hooks?.allowPromptInjection === false) {
    warnings.push("clawrecall: hooks.allowPromptInjection is false, so recalled memories are never added to a turn.");
  }
  const tools = config?.tools ?? {};
  const mentions = (list) =>
    Array.isArray(list) && list.some((n) => n === PLUGIN_ID || n === "group:plugins" || toolNames.includes(n));
  if (Array.isArray(tools.allow) && tools.allow.length && !mentions(tools.allow)) {
    warnings.push(
      "clawrecall: tools.allow lists none of our tools, so the model cannot call them; add " +
        `"${PLUGIN_ID}" to tools.alsoAllow.`,
    );
  } else if (tools.profile === "minimal" && !mentions(tools.alsoAllow)) {
    warnings.push(
      `clawrecall: the "minimal" tool profile hides our tools; add "${PLUGIN_ID}" to tools.alsoAllow.`,
    );
  }
  if (tools.toolSearch !== false) {
    warnings.push(
      "clawrecall: tool search is on (tools.toolSearch), so the model sees our tools only through tool_search; " +
        "set tools.toolSearch to false to offer them directly.",
    );
  }
  // OpenClaw loads a "memory" plugin only while it holds the memory slot, in both install modes.
  const slot = plugins.slots?.memory ?? "memory-core";
  if (slot !== PLUGIN_ID) {
    warnings.push(
      `clawrecall: plugins.slots.memory is "${slot}", so OpenClaw does not load clawrecall; set it to ` +
        `"${PLUGIN_ID}" (\`clawrecall openclaw install\` does).`,
    );
  }
  if (pluginConfig.mode === "slot" && plugins.entries?.["memory-core"]?.enabled !== false) {
    warnings.push(
      "clawrecall: mode is \"slot\" but memory-core is still enabled, so memory_search/memory_get stay memory-core's " +
        "(Markdown files only); set plugins.entries.memory-core.enabled to false, or use mode \"beside\".",
    );
  }
  return warnings;
}
