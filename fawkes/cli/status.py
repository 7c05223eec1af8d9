"""``fawkes status``, ``explain``, ``events`` (and the ``plan`` placeholder): views of the state.

Also the small output helpers the other state commands share: :func:`emit_json`,
:func:`print_table`, :func:`when`.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any

import click
from rich.console import Console
from rich.table import Table

from fawkes.config import open_store, state_option

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def record(obj: Any) -> dict[str, Any]:
    """A stored record (SQLModel) as a JSON-ready dict."""
    return obj.model_dump(mode="json")


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=True, default=str))


def console() -> Console:
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else 160)


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    table = Table(title=title, title_justify="left")
    for c in columns:
        table.add_column(c, overflow="fold")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    console().print(table)


def when(t: float | None) -> str:
    """A stored time as local ``YYYY-mm-dd HH:MM:SS`` (empty for None)."""
    return "" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def num(v: float | None, fmt: str = ".3f") -> str:
    return "" if v is None else format(v, fmt)


@click.command()
@state_option
@json_option
def status(state: str | None, as_json: bool) -> None:
    """Clusters, nodes by role, weight, discrimination and queue lengths (latest decision)."""
    with open_store(state) as store:
        st = store.status()
    if as_json:
        emit_json(st)
        return
    hosts = ", ".join(f"{n} {s}" for s, n in sorted(st["hosts"].items())) or "no hosts"
    if st["tick"] is None:
        head = "no decision yet"
    else:
        head = (f"tick {st['tick']} at {when(st['decided_at'])}, policy {st['policy']}, "
                f"Var(D) {num(st['global_factor'])}, gate {'open' if st['gate_open'] else 'closed'}")
    click.echo(f"state {st['state']}: hosts {hosts}; {head}")
    rows = []
    for c in st["clusters"]:
        n = c["nodes"]
        cstate = c["state"] + (" (release requested)" if c["release_requested"] else "")
        if c["queue_position"] is not None:
            cstate += f" #{c['queue_position']} in queue"
        rows.append((c["name"], cstate, c["min_core"], n.get("core", 0), n.get("transient-core", 0),
                     n.get("transient", 0), c["draining"] or "", c["target"], num(c["weight"]),
                     num(c["discrimination"]), c["queued_jobs"], c["running_jobs"]))
    print_table(None, ["cluster", "state", "min", "core", "TC", "TR", "draining", "target", "weight",
                       "discrimination", "queued", "running"], rows)


@click.command()
@click.argument("tick", type=int, required=False)
@state_option
@json_option
def explain(tick: int | None, state: str | None, as_json: bool) -> None:
    """Show the stored decision of TICK (default: the latest): inputs, weights, gate, plan, reason."""
    with open_store(state) as store:
        d = store.decision(tick)
    if as_json:
        emit_json(record(d))
        return
    click.echo(f"tick {d.id} at {when(d.time)}  policy {d.policy}")
    click.echo(f"global discrimination factor {num(d.global_factor)}: gate {'open' if d.gate_open else 'closed'}")
    click.echo(f"reason: {d.reason}")
    names = sorted(set(d.weights) | set(d.discriminations) | set(d.targets))
    print_table("per cluster", ["cluster", "weight", "discrimination", "target"],
                [(n, num(d.weights.get(n)), num(d.discriminations.get(n)), d.targets.get(n, "")) for n in names])
    grows = d.plan.get("grows", []) if isinstance(d.plan, dict) else []
    shrinks = d.plan.get("shrinks", []) if isinstance(d.plan, dict) else []
    if grows or shrinks:
        print_table("plan", ["action", "cluster", "host/node", "role", "mode"],
                    [("grow", g.get("cluster"), g.get("host"), g.get("role"), "") for g in grows]
                    + [("shrink", s.get("cluster"), s.get("node"), s.get("role"), s.get("mode")) for s in shrinks])
    else:
        click.echo("plan: no change")
    click.echo("inputs:")
    click.echo(json.dumps(d.inputs, indent=2, sort_keys=True, default=str))


@click.command()
@click.option("--cluster", "-c", default=None, help="Only events of this cluster.")
@click.option("--limit", "-n", type=click.IntRange(min=1), default=50, show_default=True, help="How many (newest).")
@state_option
@json_option
def events(cluster: str | None, limit: int, state: str | None, as_json: bool) -> None:
    """The latest events, oldest first."""
    with open_store(state) as store:
        evs = store.events(cluster=cluster, limit=limit)
    if as_json:
        emit_json([record(e) for e in evs])
        return
    print_table(None, ["time", "level", "kind", "cluster", "node", "message"],
                [(when(e.time), e.level, e.kind, e.cluster, e.node, e.message) for e in evs])

