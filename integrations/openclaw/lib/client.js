// The one door to `clawrecall serve`: every request carries the service token and names the caller
// (agent, session, user) in headers taken from OpenClaw's trusted ctx, never from a tool argument.
//
// A server that is down or slow must not break a turn: every request has a time budget, a failure
// is reported to the caller as `null`, and the log gets ONE warning until the server answers again
// (one per turn would flood a busy gateway's log). An error answer is logged the same way: once per
// status until the server answers with another status or succeeds.

export const WARNING_PREFIX = "clawrecall: server unreachable";

// Whether each server is known to be down, and the status it last refused with, shared by every
// plugin instance of this process: OpenClaw may register a plugin more than once in one process
// (and load its module more than once).
const DOWN = (globalThis[Symbol.for("clawrecall.down")] ??= new Set());
const FAILING = (globalThis[Symbol.for("clawrecall.failing")] ??= new Map());

export class ClawrecallClient {
  /**
   * @param {{serverUrl: string, token?: string}} config
   * @param {{warn: Function, info: Function, debug?: Function}} logger
   */
  constructor(config, logger) {
    this.baseUrl = config.serverUrl.replace(/\/+$/, "");
    this.token = config.token || process.env.CLAWRECALL_TOKEN || "";
    this.logger = logger;
  }

  get down() {
    return DOWN.has(this.baseUrl);
  }

  /**
   * Headers naming the caller, percent-encoded (a header holds no other text: "山田" would make
   * fetch throw); absent ids are left out (the server then treats them as unknown).
   */
  headers(identity) {
    const headers = { "content-type": "application/json" };
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    if (identity?.user) headers["x-clawrecall-user"] = encodeURIComponent(identity.user);
    if (identity?.agent) headers["x-clawrecall-agent"] = encodeURIComponent(identity.agent);
    if (identity?.session) headers["x-clawrecall-session"] = encodeURIComponent(identity.session);
    return headers;
  }

  /**
   * POST (or GET when `body` is undefined) `path`; the parsed JSON answer, or null when the server
   * could not be reached or answered with an error (logged once, see above).
   */
  async request(path, options = {}) {
    const answer = await this.call(path, options);
    return answer.ok ? answer.data : null;
  }

  /**
   * Like `request`, with the outcome: `{ok, status, data}`; `status` is 0 when no answer came.
   * For callers that act on the status (the import halves a batch the server finds too large).
   */
  async call(path, { body, identity, timeoutMs, method } = {}) {
    const started = Date.now();
    let response;
    try {
      response = await fetch(this.baseUrl + path, {
        method: method ?? (body === undefined ? "GET" : "POST"),
        headers: this.headers(identity),
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs ?? 5000),
      });
    } catch (err) {
      this.#unreachable(err, Date.now() - started, timeoutMs);
      return { ok: false, status: 0, data: null };
    }
    this.#reachable();
    let data = null;
    try {
      data = await response.json();
    } catch {
      data = null;
    }
    if (!response.ok) {
      this.#refused(path, response.status, data?.error?.message);
      return { ok: false, status: response.status, data };
    }
    if (FAILING.delete(this.baseUrl)) this.logger.info(`clawrecall: server at ${this.baseUrl} accepts requests again`);
    return { ok: true, status: response.status, data };
  }

  #refused(path, status, message) {
    const said = message ? `: ${message}` : "";
    if (FAILING.get(this.baseUrl) === status) {
      this.logger.debug?.(`clawrecall: ${path} failed again (HTTP ${status}${said})`);
      return;
    }
    FAILING.set(this.baseUrl, status);
    this.logger.warn(`clawrecall: ${path} failed (HTTP ${status}${said}); ${meaning(status)}`);
  }

  #unreachable(err, ms, timeoutMs) {
    const reason = err?.name === "TimeoutError" ? `no answer within ${timeoutMs ?? 5000} ms` : describe(err);
    if (this.down) {
      this.logger.debug?.(`clawrecall: still unreachable (${reason})`);
      return;
    }
    DOWN.add(this.baseUrl);
    this.logger.warn(
      `${WARNING_PREFIX} at ${this.baseUrl} (${reason}); turns go on without long-term memory until it answers again ` +
        "(start it with `clawrecall serve`)",
    );
  }

  #reachable() {
    if (this.down) {
      DOWN.delete(this.baseUrl);
      this.logger.info(`clawrecall: server at ${this.baseUrl} is reachable again`);
    }
  }
}

/** What an error status means for the person reading the gateway's log, and what to do. */
export function meaning(status) {
  if (status === 401) return "the token was refused: check CLAWRECALL_TOKEN or the plugin's token setting";
  if (status === 403) {
    return "the token may not do this: the plugin needs a service token (`clawrecall token create --service`)";
  }
  if (status === 413) return "the request is larger than the server accepts (`clawrecall serve --max-body`)";
  if (status >= 500) return "the server failed; its log says why";
  return "the server refused the request";
}

function describe(err) {
  const cause = err?.cause;
  return cause?.code ?? cause?.message ?? err?.message ?? String(err);
}
