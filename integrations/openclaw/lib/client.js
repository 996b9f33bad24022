// The one door to `clawrecall serve`: every request carries the service token and names the caller
// (agent, session, user) in headers taken from OpenClaw's trusted ctx, never from a tool argument.
//
// A server that is down or slow must not break a turn: every request has a time budget, a failure
// is reported to the caller as `null`, and the log gets ONE warning until the server answers again
// (one per turn would flood a busy gateway's log).

export const WARNING_PREFIX = "clawrecall: server unreachable";

// Whether each server is known to be down, shared by every plugin instance of this process:
// OpenClaw may register a plugin more than once in one process (and load its module more than once).
const DOWN = (globalThis[Symbol.for("clawrecall.down")] ??= new Set());

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
   * could not be reached or answered with an error (logged, once while it stays down).
   */
  async request(path, { body, identity, timeoutMs, method } = {}) {
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
      return null;
    }
    this.#reachable();
    let data = null;
    try {
      data = await response.json();
    } catch {
      data = null;
    }
    if (!response.ok) {
      const message = data?.error?.message ?? `HTTP ${response.status}`;
      this.logger.warn(`clawrecall: ${path} failed: ${message}`);
      return null;
    }
    return data;
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

function describe(err) {
  const cause = err?.cause;
  return cause?.code ?? cause?.message ?? err?.message ?? String(err);
}
