"""`clawrecall openclaw install`: put the OpenClaw plugin's entries into the user's `openclaw.json`.

The edit itself (JSON5, comments kept) is `clawrecall.openclaw.install`; this command finds the
files, prints what changed, and with `--dry-run` only prints.
"""

from __future__ import annotations

import os
import shutil
from importlib.resources import files
from pathlib import Path
from typing import Any

import click

from ..openclaw.install import MODES, Change, install_entries, record_provenance, roster
from . import output as out
from .commands import group_json_option, json_option


def default_openclaw_config() -> Path:
    """Where OpenClaw reads its config: $OPENCLAW_CONFIG_PATH, else openclaw.json in its state folder."""
    if os.environ.get("OPENCLAW_CONFIG_PATH"):
        return Path(os.environ["OPENCLAW_CONFIG_PATH"]).expanduser()
    state = os.environ.get("OPENCLAW_STATE_DIR") or "~/.openclaw"
    return Path(state).expanduser() / "openclaw.json"


def bundled_plugin_dir() -> Path:
    """The plugin's folder: shipped inside the package, or `integrations/openclaw` of a source checkout."""
    shipped = Path(str(files("clawrecall"))) / "_openclaw_plugin"
    if (shipped / "openclaw.plugin.json").exists():
        return shipped
    checkout = Path(__file__).resolve().parents[3] / "integrations" / "openclaw"
    if (checkout / "openclaw.plugin.json").exists():
        return checkout
    raise click.ClickException("the OpenClaw plugin's files are missing from this installation; give --plugin-dir")


@click.group("openclaw")
@group_json_option
def openclaw_group() -> None:
    """Connect OpenClaw agents to clawrecall (see docs/openclaw.md)."""


@openclaw_group.command("install")
@click.option("--mode", type=click.Choice(MODES), default="beside", show_default=True,
              help="beside: memory-core keeps running next to clawrecall; slot: clawrecall replaces it.")
@click.option("--dry-run", is_flag=True, help="Print what would change; write nothing.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False, path_type=Path),
              help="OpenClaw's config file. Default: $OPENCLAW_CONFIG_PATH or ~/.openclaw/openclaw.json.")
@click.option("--server-url", help="Where `clawrecall serve` listens (plugin default: http://127.0.0.1:8765).")
@click.option("--token", help="A service token (`clawrecall token create --service`); default: $CLAWRECALL_TOKEN "
                              "in OpenClaw's environment.")
@click.option("--user", "user_id", help="The user id for turns that name no sender (CLI and local turns).")
@click.option("--plugin-dir", type=click.Path(file_okay=False, exists=True, path_type=Path),
              help="The plugin's folder (default: the one shipped with clawrecall).")
@click.option("--openclaw", "openclaw_bin", help="The openclaw command that records where the plugin comes from "
                                                "(default: the one on PATH).")
@json_option
def install(mode: str, dry_run: bool, config_path: Path | None, server_url: str | None, token: str | None,
            user_id: str | None, plugin_dir: Path | None, openclaw_bin: str | None, as_json: bool) -> None:
    """Write the plugin's entries into openclaw.json, keeping its comments and everything else, and have
    OpenClaw record the plugin's folder (`openclaw plugins install --link`) so it loads without a warning."""
    target = config_path or default_openclaw_config()
    settings = {k: v for k, v in (("serverUrl", server_url), ("token", token), ("user", user_id)) if v}
    folder = plugin_dir or bundled_plugin_dir()
    changes = install_entries(target, mode=mode, plugin_dir=folder, plugin_config=settings, dry_run=dry_run)  # type: ignore[arg-type]
    data: dict[str, Any] = {
        "config": str(target), "mode": mode, "dryRun": dry_run, "pluginDir": str(folder),
        "changes": [
            {"path": c.path, "old": c.old, "new": c.new, "append": c.append} for c in map(Change.shown, changes)
        ],
    }
    verb = "would change" if dry_run else "changed"
    lines = [f"{target}: {verb} {len(changes)} setting(s)" if changes else f"{target}: already set up, nothing to change"]
    lines += [f"  {c.describe()}" for c in changes]
    data["agents"] = roster(target)  # each its own memories, all one master knowledge base per user
    lines.append(f"Agents: {', '.join(data['agents'])}; each recalls and writes as itself (docs/agents.md).")
    if not dry_run:
        if not as_json:
            click.echo("Recording the plugin's folder with OpenClaw (`openclaw plugins install --link`)…", err=True)
        trust = record_provenance(target, folder, openclaw_bin or shutil.which("openclaw"))
        data["provenance"] = {"recorded": trust.recorded, "command": trust.command, "detail": trust.detail}
        lines.append(f"OpenClaw recorded the plugin's folder: {trust.detail}" if trust.recorded
                     else f"OpenClaw did not record the plugin's folder ({trust.detail}); until it does, it warns "
                          f"\"can't verify where this plugin came from\" on every start:\n  {trust.command}")
    if changes and not dry_run:
        lines.append("Restart the OpenClaw gateway to load the plugin; check it with `openclaw clawrecall status`.")
    out.respond(as_json, data, "\n".join(lines))

