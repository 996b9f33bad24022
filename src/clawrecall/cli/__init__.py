"""The `clawrecall` command line: the group, its global options, and the one place errors are reported.

Every deliberate failure (a `ClawrecallError`, a usage error) becomes one `Error: …` line on
stderr and a non-zero exit, plus `{"error": {...}}` on stdout under `--json`; never a traceback.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Sequence

import click

from .. import __version__
from ..errors import ClawrecallError
from ..insight.door import at_door
from .backup import COMMANDS as BACKUP_COMMANDS
from .commands import AGENT_COMMANDS, COMMANDS, State
from .config import config_group
from .conversations import conversations_group
from .erasure import COMMANDS as ERASURE_COMMANDS
from .files import files_group
from .insight import insight_group
from .jobs import COMMANDS as JOB_COMMANDS
from .migrate import migrate
from .openclaw import openclaw_group
from .secrets import secrets_group
from .startup import startup_group
from .output import report_error


def wants_json(args: Sequence[str]) -> bool:
    """Whether `--json` was given, read from argv so even errors raised while parsing can answer in JSON."""
    options = args[: args.index("--")] if "--" in args else args
    return "--json" in options


class ClawrecallGroup(click.Group):
    """A group that reports errors itself, as one line, in the format the command asked for."""

    def main(self, args: Sequence[str] | None = None, prog_name: str | None = None, complete_var: str | None = None,
             standalone_mode: bool = True, **extra: Any) -> Any:
        args = list(sys.argv[1:] if args is None else args)
        try:
            code = super().main(args, prog_name or "clawrecall", complete_var, standalone_mode=False, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:
            code = show_help(exc.ctx, wants_json(args))
        except ClawrecallError as exc:
            report_error(str(exc), exc.code, wants_json(args))
            code = 1
        except click.ClickException as exc:
            report_error(usage_message(exc), "usage_error" if isinstance(exc, click.UsageError) else "error", wants_json(args))
            code = exc.exit_code
        except click.Abort as exc:
            report_error(str(exc) or "aborted", "aborted", wants_json(args))
            code = 1
        if not standalone_mode:
            return code
        sys.exit(code if isinstance(code, int) else 0)


def show_help(ctx: click.Context, as_json: bool) -> int:
    """A group named without a subcommand asks what it can do: its help, on stdout, and success.

    Under --json stdout is for JSON, so there it is a usage error pointing at the help."""
    if as_json:
        report_error(f"no command given (see '{ctx.command_path} --help')", "usage_error", True)
        return 2
    click.echo(ctx.get_help())
    return 0


def usage_message(exc: click.ClickException) -> str:
    """Click's message, with the help hint on the same line instead of a usage block."""
    message = exc.format_message()
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        message += f" (see '{ctx.command_path} --help')"
    return message


@click.group("clawrecall", cls=ClawrecallGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--db", envvar="CLAWRECALL_DB", metavar="PATH|URL",
              help="The store: a SQLite file, sqlite:///path or postgresql://…. Default: memory.db in the data directory.")
@click.option("--config", "config_path", envvar="CLAWRECALL_CONFIG", metavar="FILE",
              help="Config file (TOML or JSON). Default: config.toml in the data directory.")
@click.option("--json", "as_json", is_flag=True, help="Answer in JSON, as if every command got --json.")
@click.version_option(__version__, prog_name="clawrecall")
@click.pass_context
def cli(ctx: click.Context, db: str | None, config_path: str | None, as_json: bool) -> None:
    """Long-term memory for AI agents: embedded SQLite, a local embedding model, hybrid search."""
    # The model loader's own progress bars would clutter stderr, which belongs to our messages.
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    ctx.obj = State(db=db, config=config_path, json=as_json)
    ctx.with_resource(at_door("cli"))  # the search log names the door


def _store_option(name: str, attribute: str) -> click.Option:
    """`clawrecall count --db X` means `clawrecall --db X count`: the global option, given after the command."""

    def remember(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        state = ctx.find_object(State)
        if value is not None and state is not None:
            setattr(state, attribute, value)

    return click.Option([name], expose_value=False, callback=remember, metavar="PATH|URL" if name == "--db" else "FILE",
                        help=f"The same as the global {name}, given after the command.")


def _accept_store_options(command: click.Command) -> None:
    """Every command (and subcommand) takes --db and --config after its name too, unless it has its own."""
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _accept_store_options(sub)
        return
    taken = {opt for p in command.params for opt in getattr(p, "opts", [])}
    command.params += [_store_option(name, attr) for name, attr in (("--db", "db"), ("--config", "config")) if name not in taken]


for _command in [*COMMANDS, *ERASURE_COMMANDS, startup_group, *AGENT_COMMANDS, migrate, openclaw_group,
                 conversations_group, files_group, config_group, *JOB_COMMANDS, insight_group, *BACKUP_COMMANDS,
                 secrets_group]:
    _accept_store_options(_command)
    cli.add_command(_command)


def main(argv: Sequence[str] | None = None) -> None:
    """The `clawrecall` console script."""
    cli.main(argv)


__all__ = ["cli", "main"]
