"""`clawrecall secrets`: the key that seals secret memories (docs/agents.md): its status, a rotation,
a new key to give through `CLAWRECALL_SECRETS__KEY`."""

from __future__ import annotations

import click

from ..sealing import new_key
from . import output as out
from .commands import State, group_json_option, json_option, pass_state


@click.group("secrets")
@group_json_option
def secrets_group() -> None:
    """The key that seals secret memories: status, rotate, new-key."""


@secrets_group.command("status")
@json_option
@pass_state
def secrets_status(state: State, as_json: bool) -> None:
    """Where the key comes from (never the key: its fingerprint) and how many secrets it seals."""
    status = state.open(embeds=False).secrets.status()
    where = status.source or "no key yet"
    rotating = f"; {status.keys} keys: a rotation is under way (run `clawrecall secrets rotate`)" if status.keys > 1 else ""
    waiting = f"; {status.unsealed} stored before encryption, sealed once a key is given" if status.unsealed else ""
    out.respond(as_json, status, f"Key {status.key or '-'} from {where}: {out.plural(status.sealed, 'secret')} sealed"
                                 f"{waiting}{rotating}.")


@secrets_group.command("rotate")
@click.option("--keep-old", is_flag=True, help="Keep the old keys in the key file after the rotation (older backups need them).")
@json_option
@pass_state
def secrets_rotate(state: State, keep_old: bool, as_json: bool) -> None:
    """Seal every secret again under a new key: a key file gets a new first key, the rows move to it in
    batches, then the old keys leave the file. Interrupted, every secret still opens; run it again to finish."""
    mem = state.open(embeds=False)
    with out.progress_bar("Sealing again") as progress:
        result = mem.secrets.rotate(progress, keep_old=keep_old)
    dropped = f"; {out.plural(result.dropped_keys, 'old key')} removed from the key file" if result.dropped_keys else ""
    out.respond(as_json, result, f"Sealed {result.resealed} of {out.plural(result.total, 'secret')} again under key "
                                 f"{result.key}{dropped}.")


@secrets_group.command("new-key")
@json_option
def secrets_new_key(as_json: bool) -> None:
    """Print a new key, for CLAWRECALL_SECRETS__KEY (put it first, before the old one, then rotate)."""
    key = new_key().decode()
    out.respond(as_json, {"key": key}, key)
