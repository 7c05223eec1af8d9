"""``fawkes node protect ID [--off]``: keep a node from being removed by a resize (issue 27); ``fawkes
host protect NAME`` does the same by host.  The plan then says why a protected node stayed."""

from __future__ import annotations

import click

from fawkes.cli.audit import audited
from fawkes.cli.params import count
from fawkes.cli.status import emit_json, json_option, record
from fawkes.config import open_store, state_option


@click.group()
def node() -> None:
    """Nodes of MR-clusters: protection from resizes."""


def report(n, as_json: bool) -> None:
    if as_json:
        emit_json(record(n))
    else:
        click.echo(f"node {n.id} on {n.host}: " + ("protected: no resize removes it" if n.protected
                                                   else "not protected"))


@node.command()
@click.argument("node_id", metavar="ID", type=count(1))
@click.option("--off", is_flag=True, help="Let it go again (no longer protected).")
@state_option
@json_option
def protect(node_id: int, off: bool, state: str | None, as_json: bool) -> None:
    """Keep node ID from being removed by a resize (it still counts for its cluster; releasing the
    cluster still releases it).  --off undoes it.  Node ids: fawkes cluster show NAME."""
    with open_store(state) as store, audited(store, "node.unprotect" if off else "node.protect", f"node {node_id}"):
        n = store.protect_node(node_id, protected=not off)
    report(n, as_json)
