"""``fawkes host list|restore|fail|drain``: the pool's hosts as the state sees them.

The sampler marks a host failed when it stops answering SSH (``host_grace``).  These
commands let an admin return a repaired host to the pool and take a free host out of
service (both refused for a host a live node holds), or drain a held one (its node leaves by its
removal mode first); each is recorded as an event.
The coordinator picks the change up on its next step (a restored host is free for
admission and growth; a failed one is no longer offered to the mechanism).
"""

from __future__ import annotations

import click

from fawkes.cli.status import emit_json, json_option, print_table, record, when
from fawkes.cli.audit import audited
from fawkes.config import open_store, state_option
from fawkes.store import HostState


@click.group()
def host() -> None:
    """List pool hosts, restore a repaired host, take a free host out of service."""


@host.command(name="list")
@click.option("--state-filter", "--status", "host_state", type=click.Choice([s.value for s in HostState]),
              default=None, help="Only hosts in this state (--state names the state database, as everywhere).")
@state_option
@json_option
def list_(host_state: str | None, state: str | None, as_json: bool) -> None:
    """Hosts in placement order, with the cluster holding each."""
    with open_store(state) as store:
        hosts = store.list_hosts(host_state)
        clusters = {c.id: c.name for c in store.list_clusters()}
        holder = {n.host: n for n in store.list_nodes()}
    if as_json:
        emit_json([record(h) | ({"cluster": clusters.get(holder[h.name].cluster_id), "node": holder[h.name].id,
                                 "node_state": holder[h.name].state} if h.name in holder else
                                {"cluster": None, "node": None, "node_state": None}) for h in hosts])
        return
    rows = []
    for h in hosts:
        n = holder.get(h.name)
        rows.append((h.name, h.address, h.state, h.cores, h.memory_mb, h.rack or "",
                     f"{clusters.get(n.cluster_id)} ({n.role}, {n.state})" if n else "", when(h.last_seen)))
    print_table(None, ["host", "address", "state", "cores", "memory MB", "rack", "held by", "last seen"], rows)


@host.command()
@click.argument("name")
@state_option
@json_option
def restore(name: str, state: str | None, as_json: bool) -> None:
    """Return failed host NAME to the pool (refused while a node still holds it)."""
    with open_store(state) as store, audited(store, "host.restore", name):
        h = store.restore_host(name, "by the admin")
    if as_json:
        emit_json(record(h))
    else:
        click.echo(f"host {h.name}: failed -> free; the coordinator may use it again")


@host.command()
@click.argument("name")
@click.option("--reason", "-r", required=True, help="Why (recorded in the event log).")
@state_option
@json_option
def fail(name: str, reason: str, state: str | None, as_json: bool) -> None:
    """Take free host NAME out of service (marked failed; refused for a held host)."""
    with open_store(state) as store, audited(store, "host.fail", name):
        h = store.fail_host(name, reason)
    if as_json:
        emit_json(record(h))
    else:
        click.echo(f"host {h.name}: free -> failed ({reason}); 'fawkes host restore {h.name}' brings it back")


@host.command()
@click.argument("name")
@click.option("--reason", "-r", default="by the admin", show_default=True, help="Why (recorded in the event log).")
@state_option
@json_option
def drain(name: str, reason: str, state: str | None, as_json: bool) -> None:
    """Take host NAME out of service, held or not: its node leaves as a shrink would (transient-core by
    DP, transient by FP), the next plan replaces it, and the host is never allocated again until
    'fawkes host restore NAME'.  A core node is refused (release its cluster)."""
    with open_store(state) as store, audited(store, "host.drain", name):
        h, n, cluster = store.drain_host(name, reason)
    if as_json:
        emit_json(record(h) | {"node": None if n is None else record(n) | {"cluster": cluster}})
    elif n is None:
        click.echo(f"host {h.name}: free -> failed (drained: {reason}); 'fawkes host restore {h.name}' brings it back")
    else:
        how = {"draining": "leaves by " + ("DP" if n.role == "transient-core" else "FP") + " (the coordinator removes it)",
               "released": "released (nothing ran there yet)"}.get(n.state, f"already {n.state}")
        click.echo(f"host {h.name}: drained ({reason}); node {n.id} of cluster {cluster} ({n.role}) {how}; "
                   f"the host stays out of service until 'fawkes host restore {h.name}'")


@host.command()
@click.argument("name")
@click.option("--off", is_flag=True, help="Let its node go again (no longer protected).")
@state_option
@json_option
def protect(name: str, off: bool, state: str | None, as_json: bool) -> None:
    """Keep the node on host NAME from being removed by a resize (it still counts for its cluster;
    releasing the cluster still releases it).  --off undoes it."""
    from fawkes.cli.node import report

    with open_store(state) as store, audited(store, "host.unprotect" if off else "host.protect", name):
        n = store.protect_node(host=name, protected=not off)
    report(n, as_json)
