"""The ``fawkes`` command line.

Each sub-command lives in its own module and is imported only when used, so
``fawkes --help`` and quick commands start fast.  To add a command, add one entry
to ``COMMANDS``: ``name -> "module:attribute"`` (a click command or group).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import click

from fawkes import __version__
from fawkes.errors import FawkesError
from fawkes.lazy import import_frozen

COMMANDS: dict[str, str] = {
    "demo": "fawkes.cli.demo:demo",
    "policy": "fawkes.cli.policy:policy",
    "simulate": "fawkes.cli.simulate:simulate",
    "trace": "fawkes.cli.trace:trace",
    "lab": "fawkes.cli.lab:lab",
    "inventory": "fawkes.cli.inventory:inventory",
    "framework": "fawkes.cli.framework:framework",
    "render": "fawkes.cli.render:render",
    "coordinator": "fawkes.cli.coordinator:coordinator",
    "cluster": "fawkes.cli.cluster:cluster",
    "submit": "fawkes.cli.jobs:submit",
    "jobs": "fawkes.cli.jobs:jobs",
    "status": "fawkes.cli.status:status",
    "plan": "fawkes.cli.plan:plan",
    "explain": "fawkes.cli.status:explain",
    "events": "fawkes.cli.status:events",
    "host": "fawkes.cli.host:host",
    "prune": "fawkes.cli.prune:prune",
    "down": "fawkes.cli.down:down",
    "config": "fawkes.cli.config:config",
    "migrate": "fawkes.cli.migrate:migrate",
    "backup": "fawkes.cli.backup:backup",
    "token": "fawkes.cli.token:token",
    "audit": "fawkes.cli.audit:audit",
    "node": "fawkes.cli.node:node",
}


class LazyGroup(click.Group):
    """A click group whose sub-commands are imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n in COMMANDS if _available(n))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None or not _available(name):
            return None
        module, attr = target.split(":")
        return getattr(import_frozen(module), attr)


def _available(name: str) -> bool:
    module = COMMANDS[name].split(":")[0]
    return importlib.util.find_spec(module) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="fawkes")
def cli() -> None:
    """fawkes: balance several Hadoop/Spark MR-clusters on one SSH-reachable pool."""


def main(argv: list[str] | None = None) -> int:
    """Console entry point: bad input ends in one line on stderr and exit code 2."""
    try:
        cli.main(args=argv, prog_name="fawkes", standalone_mode=False)
    except FawkesError as exc:
        click.echo(f"fawkes: error: {one_line(str(exc))}", err=True)
        return exc.exit_code
    except click.exceptions.Abort:
        click.echo("fawkes: aborted", err=True)
        return 130
    except click.ClickException as exc:  # usage errors too: one line (click's own is three)
        click.echo(f"fawkes: error: {one_line(_usage_line(exc))}", err=True)
        return exc.exit_code
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:
        click.echo("fawkes: interrupted", err=True)
        return 130
    return 0


def one_line(message: str) -> str:
    """``message`` on one line: a newline, carriage return or NUL from the input (a cluster name, a
    path) is shown escaped, never starting a second line."""
    return message.replace("\n", "\\n").replace("\r", "\\r").replace("\0", "\\0")


def _usage_line(exc: click.ClickException) -> str:
    """Click's error as one line: the command, the message, where help is."""
    message = " ".join(exc.format_message().split())
    ctx = getattr(exc, "ctx", None)
    if isinstance(exc, click.UsageError) and ctx is not None:
        return f"{ctx.command_path}: {message} (see '{ctx.command_path} --help')"
    return message


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
