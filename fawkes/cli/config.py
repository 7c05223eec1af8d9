"""``fawkes config``: the config reference, a commented example, and a check that creates nothing."""

from __future__ import annotations

import click


@click.group()
def config() -> None:
    """The coordinator config: reference, example, check (docs/config.md)."""


@config.command()
def reference() -> None:
    """Print the config reference as Markdown (docs/config.md is this output), from the schema."""
    from fawkes.config_doc import reference_markdown

    click.echo(reference_markdown(), nl=False)


@config.command()
def example() -> None:
    """Print a commented example config ('fawkes config check' accepts it with an inventory.yaml
    next to it)."""
    from fawkes.config_doc import EXAMPLE

    click.echo(EXAMPLE, nl=False)


@config.command()
@click.argument("file", metavar="FILE")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def check(file: str, as_json: bool) -> None:
    """Validate FILE exactly as 'fawkes coordinator run' does before it writes anything: its keys, the
    policy preset, the inventory it names, save_to, the state URL (an existing SQLite state: read
    only).  Prints OK, or the one-line error and exit code 2.  Creates nothing."""
    from fawkes.config_doc import check_config
    from fawkes.errors import FawkesError

    if not file or "\0" in file or "\n" in file or "\r" in file:
        raise FawkesError(f"config {file[:80]!r}: not a file name (empty, or a control character)")
    summary = check_config(file)
    if as_json:
        from fawkes.cli.status import emit_json

        emit_json(summary)
    else:
        click.echo(f"OK {summary['file']}: state {summary['state']}, inventory {summary['inventory']} "
                   f"({summary['hosts']} hosts), policy {summary['policy']}")
