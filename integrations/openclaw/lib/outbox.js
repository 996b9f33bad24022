// What a turn said while the server could not take it, kept on disk until it can.
//
// Each `agent_end` request the server did not answer (down, timed out, or failing with a 5xx) is
// one file in `<OpenClaw state folder>/clawrecall/outbox/` (folder 0700, files 0600: they hold what
// the user said), named so that names sort in the order the turns ended. Before a turn's own request
// the older ones are sent, oldest first, and a file is removed once the server answered it; so they
// arrive in order, and one sent twice (a process that stopped between the answer and the removal,
// two processes sending at once) is stored once: the server records each message once.
//
// Bounded: at most MAX_ITEMS requests, MAX_BYTES in all, none older than MAX_AGE_MS; past a bound the
// oldest are dropped, and the log says how many and why.

import { randomBytes } from "node:crypto";
import { chmod, mkdir, open, readdir, readFile, rename, stat, unlink } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";

export const MAX_ITEMS = 1000;
export const MAX_BYTES = 5 * 1024 * 1024;
export const MAX_AGE_MS = 7 * 24 * 3600 * 1000;

/** OpenClaw's state folder: $OPENCLAW_STATE_DIR, else ~/.openclaw. */
export function stateDir() {
  return process.env.OPENCLAW_STATE_DIR || join(process.env.HOME || homedir(), ".openclaw");
}

let counter = 0;
// the drain running on each folder, shared by every plugin instance of this process (OpenClaw may
// register a plugin more than once in one process)
const DRAINING = (globalThis[Symbol.for("clawrecall.draining")] ??= new Map());

export class Outbox {
  /**
   * @param {{dir?: string, logger: {warn: Function, info: Function}, now?: () => number,
   *          limits?: {items: number, bytes: number, ageMs: number}}} options
   */
  constructor({ dir, logger, now, limits } = {}) {
    this.dir = dir ?? join(stateDir(), "clawrecall", "outbox");
    this.logger = logger;
    this.now = now ?? Date.now;
    this.limits = limits ?? { items: MAX_ITEMS, bytes: MAX_BYTES, ageMs: MAX_AGE_MS };
  }

  /** Keep one request (`{path, body, identity}`) to send later; then drop what is past the bounds. */
  async add(request) {
    await mkdir(this.dir, { recursive: true, mode: 0o700 });
    await chmod(this.dir, 0o700);
    const at = this.now();
    const name = `${String(at).padStart(15, "0")}-${String(process.pid).padStart(7, "0")}-` +
      `${String(counter++).padStart(6, "0")}-${randomBytes(3).toString("hex")}.json`;
    const data = JSON.stringify({ at, ...request });
    const tmp = join(this.dir, `.${name}.tmp`);
    const file = await open(tmp, "w", 0o600);
    try {
      await file.writeFile(data);
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(tmp, join(this.dir, name)); // whole or not at all: a reader never sees half a request
    await this.#bound();
  }

  /** The names of the kept requests, oldest first. */
  async names() {
    try {
      return (await readdir(this.dir)).filter((n) => n.endsWith(".json") && !n.startsWith(".")).sort();
    } catch (err) {
      if (err?.code === "ENOENT") return [];
      throw err;
    }
  }

  /**
   * Send the kept requests in order with `send(request) -> Promise<"sent"|"retry"|"refused">` until one
   * must wait ("retry": the server is still away) or `deadline` (ms since the epoch) passes. A request
   * the server refuses for good (4xx) is dropped, said in the log. One drain at a time per outbox: a
   * second caller (of any instance) waits for the running one. Resolves to the number still kept.
   */
  drain(send, deadline = Infinity) {
    if (!DRAINING.has(this.dir)) {
      DRAINING.set(this.dir, this.#drain(send, deadline).finally(() => DRAINING.delete(this.dir)));
    }
    return DRAINING.get(this.dir);
  }

  async #drain(send, deadline) {
    let names = await this.names();
    while (names.length && Date.now() < deadline) {
      const path = join(this.dir, names[0]);
      let request;
      try {
        request = JSON.parse(await readFile(path, "utf8"));
      } catch (err) {
        if (err?.code !== "ENOENT") {
          this.logger.warn(`clawrecall: dropped an unreadable kept turn (${names[0]}): ${err?.message ?? err}`);
          await remove(path);
        }
        names = names.slice(1); // gone: another process sent it
        continue;
      }
      if (this.now() - request.at > this.limits.ageMs) {
        this.logger.warn(`clawrecall: dropped a kept turn older than ${days(this.limits.ageMs)}, never sent`);
      } else {
        const outcome = await send(request);
        if (outcome === "retry") break;
        if (outcome === "refused") this.logger.warn("clawrecall: the server refused a kept turn; it was dropped");
      }
      await remove(path);
      names = names.slice(1);
    }
    return names.length;
  }

  async #bound() {
    const names = await this.names();
    const sizes = [];
    for (const name of names) {
      try {
        sizes.push((await stat(join(this.dir, name))).size);
      } catch {
        sizes.push(0);
      }
    }
    let total = sizes.reduce((a, b) => a + b, 0);
    let drop = 0;
    const { items, bytes } = this.limits;
    while (drop < names.length - 1 && (names.length - drop > items || total > bytes)) total -= sizes[drop++];
    if (!drop) return;
    for (const name of names.slice(0, drop)) await remove(join(this.dir, name));
    this.logger.warn(
      `clawrecall: the server has been away for ${names.length} turn(s); dropped the ${drop} oldest kept ` +
        `(at most ${items} turns and ${bytes} bytes are kept)`,
    );
  }
}

function days(ms) {
  return `${ms / 86_400_000} days`;
}

async function remove(path) {
  try {
    await unlink(path);
  } catch (err) {
    if (err?.code !== "ENOENT") throw err;
  }
}
