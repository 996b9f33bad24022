"""`clawrecall config import FILE --from SYSTEM`: another memory system's configuration, translated.

The translation table is `clawrecall.importers.systems`; this command reads the file, prints the
result (TOML, or JSON with `--json`) and writes it with `--write`.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..importers.config import import_file
from ..importers.systems import SYSTEMS
from ..errors import ValidationError
from ..openclaw.install import write_atomically
from . import output as out
from .commands import group_json_option, json_option


@click.group("config")
@group_json_option
def config_group() -> None:
    """clawrecall's configuration (see docs/configuration.md)."""


@config_group.command("import")
@click.argument("file", type=click.Path(dir_okay=False, exists=True, path_type=Path))
@click.option("--from", "system", required=True, type=click.Choice(list(SYSTEMS)),
              help="The system FILE configures: its openclaw.json, its plugin's config object, or "
                   "(ShadowDB) ~/.shadowdb.json, (nova-memory) ~/.openclaw/postgres.json.")
@click.option("--write", "target", type=click.Path(dir_okay=False, path_type=Path), metavar="PATH",
              help="Write the translation to PATH (JSON if it ends in .json, else TOML with the notes as comments).")
@click.option("--force", is_flag=True, help="With --write: replace PATH if it exists.")
@json_option
def import_config(file: Path, system: str, target: Path | None, force: bool, as_json: bool) -> None:
    """Translate FILE, another system's configuration, into clawrecall's: print it, and every key of
    theirs with no equivalent and why."""
    translation = import_file(file, system)
    data = {"file": str(file), **translation.as_dict(), "written": None}
    if target is not None:
        if target.exists() and not force:
            raise ValidationError(f"{target} exists: pass --force to replace it")
        json_file = target.suffix.lower() == ".json"
        text = json.dumps(translation.config, indent=2, ensure_ascii=False) + "\n" if json_file else translation.toml()
        try:
            write_atomically(target, text)  # 0600: it may hold passwords and keys
        except OSError as exc:
            raise ValidationError(f"cannot write {target}: {exc.strerror or exc}") from None
        data["written"] = str(target)
    if as_json:
        out.emit_json(data)
    elif target is None:
        click.echo(translation.toml(), nl=False)
    else:
        missing = translation.untranslated
        summary = f"Wrote {target}: {len(translation.translated)} of {SYSTEMS[system].title}'s settings translated"
        lines = [summary + (f", {len(missing)} not (or not quite):" if missing else ".")]
        lines += [f"  {u.key}: {u.reason}" for u in missing]
        lines.append(f"Use it with `clawrecall --config {target} …` or $CLAWRECALL_CONFIG.")
        click.echo("\n".join(lines))
