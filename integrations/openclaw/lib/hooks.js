// Recall, startup identity and capture, as OpenClaw hooks over the server's /v1/hooks routes.
// The rules (what to recall, how it is wrapped as untrusted data, what is worth keeping) live in
// the server; the plugin only picks what to send and never lets a failure reach the turn. What a turn
// said while the server was away is kept on disk and sent once it answers (lib/outbox.js).

import { Outbox } from "./outbox.js";

/**
 * Who a hook or tool call belongs to, from OpenClaw's trusted ctx (never from an event body).
 * A sender id is only unique within its channel (telegram 123 and discord 123 are two people), so
 * it is named `<channel>:<id>` when the ctx names the channel, unless `senderIds` is "bare" (the
 * ids of plugin versions before this rule, for memories already stored under them).
 */
export function identityOf(ctx, config) {
  const sender = text(ctx?.senderId ?? ctx?.channelContext?.sender?.id ?? ctx?.requesterSenderId);
  const channel = config.senderIds === "bare" ? undefined : channelOf(ctx);
  return {
    // OpenClaw's default agent: a call that named no one would be the administrator's with a service token
    agent: text(ctx?.agentId) ?? "main",
    session: text(ctx?.sessionKey ?? ctx?.sessionId),
    user: (sender && channel ? `${channel}:${sender}` : sender) ?? config.user,
  };
}

/**
 * The messaging channel of a turn ("telegram", "discord"): hooks carry it as `messageProvider`,
 * tool factories as `messageChannel`; `channelId` holds it too when it is a plain name (OpenClaw's
 * own rule: a value with ":" or "/" is a conversation id, not a channel).
 */
function channelOf(ctx) {
  for (const value of [ctx?.messageProvider, ctx?.messageChannel, ctx?.channelId]) {
    const name = text(value)?.toLowerCase();
    if (name && !name.includes(":") && !name.includes("/")) return name;
  }
  return undefined;
}

function text(value) {
  if (value === undefined || value === null) return undefined;
  const s = String(value).trim();
  return s ? s : undefined;
}

const OVERLAP = 2; // messages sent again after the last acknowledged ones (the server skips them)
const MAX_PART_CHARS = 20_000; // a tool result that dumps a file is cut, not sent whole every turn
const MAX_SENT = 400; // messages in one agent_end body

/**
 * A transcript as the record keeps it: role, text, thinking and tool-call parts, timestamp, id,
 * model and token usage of each message; images and other binary parts are left out.
 */
export function transcriptMessages(messages) {
  const out = [];
  for (const m of messages ?? []) {
    if (!m || typeof m.role !== "string") continue;
    const parts = [];
    for (const p of typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content ?? []) {
      if (p?.type === "text" && typeof p.text === "string") parts.push({ type: "text", text: cut(p.text) });
      else if (p?.type === "thinking" && typeof p.thinking === "string") parts.push({ type: "thinking", thinking: cut(p.thinking) });
      else if (p?.type === "toolCall") parts.push({ type: "toolCall", name: String(p.name ?? "tool"), arguments: p.arguments ?? {} });
    }
    if (!parts.length) continue;
    const entry = { role: m.role, content: parts };
    if (typeof m.timestamp === "number" || typeof m.timestamp === "string") entry.timestamp = m.timestamp;
    if (typeof m.id === "string") entry.id = m.id;
    if (typeof m.model === "string") entry.model = m.model;
    if (m.usage && typeof m.usage === "object") entry.usage = { input: m.usage.input, output: m.usage.output };
    out.push(entry);
  }
  return out.slice(-MAX_SENT);
}

function cut(s) {
  return s.length > MAX_PART_CHARS ? s.slice(0, MAX_PART_CHARS) : s;
}

/** Messages reduced to what the server reads (role and text), so a long transcript stays small. */
export function plainMessages(messages) {
  const out = [];
  for (const m of messages ?? []) {
    if (!m || (m.role !== "user" && m.role !== "assistant")) continue;
    const content =
      typeof m.content === "string"
        ? m.content
        : Array.isArray(m.content)
          ? m.content.filter((p) => p?.type === "text" && typeof p.text === "string").map((p) => p.text).join("\n")
          : "";
    if (content) out.push({ role: m.role, content });
  }
  return out;
}

const RETRY_MS = 30_000; // how often a process with kept turns asks whether the server is back
// statuses worth sending again: the server away or failing, or refusing a token the user may fix
const RETRY_STATUSES = new Set([0, 401, 403, 408, 429]);

const MAX_TRACKED_RUNS = 512; // runs and sessions remembered by a long-running gateway

/** A message as the plugin remembers it was acknowledged: its role and its stamp, which OpenClaw keeps. */
function stampOf(message) {
  return `${message?.role}@${message?.timestamp}`;
}

/**
 * How many messages of `all` the server has acknowledged: up to the last one acknowledged, found by its
 * stamp (a compaction shortens the transcript, so its position may have moved); all of them are sent
 * when it is not found (a gateway restarted, or a compaction summarised it away).
 */
function acknowledged(all, last) {
  if (!last) return 0;
  for (let i = all.length - 1; i >= 0; i--) if (stampOf(all[i]) === last) return i + 1;
  return 0;
}

/**
 * The hooks of one plugin instance; `historyAt` remembers where each run's own messages start.
 * Whether a turn gets the startup identity is the server's call (its `hooks.startup.mode`: every
 * turn, once per session, or again when it changed or aged); the plugin asks on every turn.
 */
export function createHooks({ client, config, outbox, retryMs = RETRY_MS }) {
  const kept = outbox ?? new Outbox({ logger: client.logger });
  let retrying = null;
  const historyAt = new Map(); // runId or session -> number of messages before the turn
  const recorded = new Map(); // session -> the last message the server has acknowledged (role and stamp)

  function remember(key, length) {
    if (!key) return;
    historyAt.set(key, length);
    if (historyAt.size > MAX_TRACKED_RUNS) historyAt.delete(historyAt.keys().next().value);
  }

  async function beforePromptBuild(event, ctx) {
    const identity = identityOf(ctx, config);
    const history = Array.isArray(event?.messages) ? event.messages : [];
    remember(ctx?.runId ?? identity.session, history.length);
    // The server resets a session's state on an empty history (a new, /new or /reset session);
    // otherwise the last two messages are enough for it (it reads the prompt, not the history).
    // A history with no text in them is left out rather than sent empty, which would reset it.
    const recent = plainMessages(history.slice(-2));
    const messages = history.length === 0 ? [] : recent.length ? recent : undefined;
    const calls = [];
    if (config.startup.enabled && identity.session) {
      calls.push(
        client.request("/v1/hooks/startup", {
          body: { model: ctx?.modelId, messages },
          identity,
          timeoutMs: config.recall.timeoutMs,
        }),
      );
    }
    if (config.recall.enabled && typeof event?.prompt === "string" && event.prompt.trim()) {
      calls.push(
        client.request("/v1/hooks/before_prompt_build", {
          body: { prompt: event.prompt, messages },
          identity,
          timeoutMs: config.recall.timeoutMs,
        }),
      );
    }
    if (calls.length === 0) return undefined;
    const answers = await Promise.all(calls);
    const blocks = answers.map((a) => a?.prependContext).filter((b) => typeof b === "string" && b);
    return blocks.length ? { prependContext: blocks.join("\n\n") } : undefined;
  }

  async function agentEnd(event, ctx) {
    if (!config.capture.enabled || event?.success === false) return;
    const identity = identityOf(ctx, config);
    const all = Array.isArray(event?.messages) ? event.messages : [];
    historyAt.delete(ctx?.runId ?? identity.session);
    // The server records every message it has not seen (by provider id, stamp, or role and words) and
    // captures from this turn's. What it acknowledged before is not sent again, but for a small overlap;
    // after a gateway restart or a compaction the whole transcript goes once.
    const from = Math.max(0, acknowledged(all, recorded.get(identity.session)) - OVERLAP);
    const messages = transcriptMessages(all.slice(from));
    if (!messages.some((m) => m.role === "user")) return;
    // The server answers once the messages are in its database and the capture is queued; embedding
    // happens after, so a gateway turn never waits for it. Turns kept while it was away go first.
    const request = {
      path: "/v1/hooks/agent_end",
      body: { messages, success: event?.success ?? true, channel: channelOf(ctx) },
      identity,
    };
    const waiting = await guarded(() => kept.drain(deliver, Date.now() + config.capture.timeoutMs), 0);
    const outcome = waiting ? "retry" : await deliver(request);
    if (outcome === "retry") {
      await guarded(() => kept.add(request));
      retryLater();
    } else if (outcome === "sent" && identity.session) {
      recorded.set(identity.session, stampOf(all[all.length - 1]));
      if (recorded.size > MAX_TRACKED_RUNS) recorded.delete(recorded.keys().next().value);
    }
  }

  /** Send one agent_end request: "sent", "retry" (keep it) or "refused" (the request itself is wrong). */
  async function deliver(request) {
    const answer = await client.call(request.path, {
      body: request.body,
      identity: request.identity,
      timeoutMs: config.capture.timeoutMs,
    });
    if (answer.ok) return "sent";
    return RETRY_STATUSES.has(answer.status) || answer.status >= 500 ? "retry" : "refused";
  }

  /** Send the kept turns now (at start, and on a timer while any are kept); the number still kept. */
  async function retry() {
    const left = await guarded(() => kept.drain(deliver), 1);
    if (left === 0 && retrying) {
      clearInterval(retrying);
      retrying = null;
    }
    return left;
  }

  function retryLater() {
    if (retrying) return;
    retrying = setInterval(() => void retry(), retryMs);
    retrying.unref?.(); // a `--local` turn's process exits when its turn is done; the next one sends them
  }

  /** The outbox's work, never failing a turn: a full disk or a folder it may not write is logged. */
  async function guarded(work, fallback) {
    try {
      return await work();
    } catch (err) {
      client.logger.warn(`clawrecall: could not keep or send turns kept on disk: ${err?.message ?? err}`);
      return fallback;
    }
  }

  return { beforePromptBuild, agentEnd, retry, retryLater };
}
