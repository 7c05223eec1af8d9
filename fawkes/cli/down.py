"""``fawkes down``: release every MR-cluster (each saves its output first), after a confirmation."""

from __future__ import annotations

import click

from fawkes.cli.audit import audited
from fawkes.cli.status import emit_json, json_option
from fawkes.config import open_store, state_option


@click.command()
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@state_option
@json_option
def down(yes: bool, state: str | None, as_json: bool) -> None:
    """Release every live MR-cluster: queued requests are withdrawn at once; the coordinator saves each
    deployed cluster's output (to save_to, checked, recorded) before it tears it down and hands its hosts
    back.  Asks for confirmation unless --yes (no terminal and no --yes: refused)."""
    from fawkes.errors import FawkesError

    with open_store(state) as store:
        live = [c for c in store.list_clusters(include_released=False)]
        if not live:
            if as_json:
                emit_json({"released": [], "requested": []})
            else:
                click.echo("no live cluster")
            return
        names = ", ".join(c.name for c in live)
        if not yes:
            if not click.get_text_stream("stdin").isatty():
                raise FawkesError(f"down: would release {len(live)} cluster(s) ({names}); pass --yes to confirm")
            click.confirm(f"release {len(live)} cluster(s) ({names}), saving their outputs?", abort=True, err=True)
        withdrawn, requested = [], []
        with audited(store, "down", names):
            for c in live:
                done = store.request_release(c.name)
                (withdrawn if done.state == "released" else requested).append(c.name)
    if as_json:
        emit_json({"released": withdrawn, "requested": requested})
        return
    for n in withdrawn:
        click.echo(f"cluster {n} withdrawn from the queue (released)")
    for n in requested:
        click.echo(f"cluster {n}: release requested; the coordinator will save its output and release it")
