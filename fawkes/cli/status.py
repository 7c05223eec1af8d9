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

from fawkes.cli.params import count
from fawkes.cli.remote import remote, remote_options
from fawkes.config import open_store, state_option

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")


def record(obj: Any) -> dict[str, Any]:
    """A stored record (SQLModel) as a JSON-ready dict."""
    return obj.model_dump(mode="json")


def emit_json(data: Any) -> None:
    """``data`` as JSON: a NaN or an infinity (a value stored before it was refused) is ``null``,
    never ``NaN``/``Infinity``, which are not JSON."""
    click.echo(json.dumps(finite_json(data), indent=2, sort_keys=True, default=str, allow_nan=False))


def finite_json(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by None (in dicts, lists and tuples)."""
    if isinstance(obj, float):
        return obj if obj - obj == 0 else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite_json(v) for v in obj]
    return obj


def console() -> Console:
    return Console(soft_wrap=False, width=None if sys.stdout.isatty() else 160)


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    """A rich table (written directly when it is a plain grid: :mod:`fawkes.cli.table`)."""
    from fawkes.cli.table import print_table as print_rich

    print_rich(console(), title, columns, [["" if v is None else str(v) for v in row] for row in rows])


def when(t: float | None) -> str:
    """A stored time as local ``YYYY-mm-dd HH:MM:SS`` (empty for None)."""
    return "" if t is None else time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t))


def num(v: float | None, fmt: str = ".3f") -> str:
    return "" if v is None else format(v, fmt)


@click.command()
@state_option
@remote_options
@json_option
def status(state: str | None, url: str | None, token_file: str | None, as_json: bool) -> None:
    """Clusters, nodes by role, weight, discrimination and queue lengths (latest decision), and a
    forecast of when hosts free up (the expected-free-time table; not through --url)."""
    api = remote(url, token_file)
    if api is not None:
        st = api.call("GET", "/api/v1/status")
        emit_json(st) if as_json else print_status(st)
        return
    settings = _loop_settings()  # a bad config is refused before the store is opened
    with open_store(state) as store:
        st = store.status()
        st["forecast"] = forecast(store, settings, time.time())
    if as_json:
        emit_json(st)
        return
    print_status(st)
    print_forecast(st["forecast"], time.time())


def print_status(st: dict[str, Any]) -> None:
    """The text of ``fawkes status`` without the forecast."""
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
        rows.append((c["name"], c.get("kind") or "?", cstate, c["min_core"], n.get("core", 0), n.get("transient-core", 0),
                     n.get("transient", 0), c["draining"] or "", c["suspended"] or "", c["target"], num(c["weight"]),
                     num(c["discrimination"]), c["queued_jobs"], c["running_jobs"]))
    print_table(None, ["cluster", "kind", "state", "min", "core", "TC", "TR", "draining", "suspended", "target", "weight",
                       "discrimination", "queued", "running"], rows)


def _loop_settings():
    from fawkes.config import load_config, mechanism_settings

    return mechanism_settings(load_config())


def forecast(store, settings, now: float) -> list[dict[str, Any]]:
    """The expected-free-time table (``fawkes.mechanism.forecast``) on the store's snapshot."""
    from fawkes.lazy import import_frozen

    build_snapshot = import_frozen("fawkes.coordinator.view").build_snapshot
    from fawkes.errors import FawkesError
    from fawkes.mechanism.forecast import free_times
    from fawkes.mechanism.memory import Memory

    try:
        memory = Memory.from_json(store.load_memory())
    except ValueError as exc:
        raise FawkesError(f"state: {exc}") from None
    snap = build_snapshot(store, settings, now)
    return [{"host": r.host, "cluster": r.cluster, "at": r.at, "why": r.why} for r in free_times(snap, settings, memory)]


def print_forecast(rows: list[dict[str, Any]], now: float) -> None:
    """Hosts grouped by cluster, expected free time and reason, soonest first."""
    groups: dict[tuple, int] = {}
    for r in rows:
        key = (r["at"] is None, r["at"] or 0.0, r["cluster"], r["why"])
        groups[key] = groups.get(key, 0) + 1
    out = []
    for (_, at, cluster, why), n in sorted(groups.items()):
        eta = "unknown" if _ else ("now" if at <= now else f"in {at - now:.0f} s ({when(at)})")
        out.append((eta, n, cluster or "(free)", why))
    print_table("forecast: when hosts free up", ["free", "hosts", "held by", "why"], out)


@click.command()
@click.argument("tick", type=count(1), required=False)
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
@click.option("--limit", "-n", type=count(1), default=50, show_default=True, help="How many (newest).")
@click.option("--oldest-first", is_flag=True, help="Oldest first (default: newest first).")
@click.option("--follow", is_flag=True,
              help="Print the latest events oldest first, then each new one as it is recorded (one line, or "
                   "one JSON object, per event) until interrupted.")
@state_option
@json_option
def events(cluster: str | None, limit: int, oldest_first: bool, follow: bool, state: str | None,
           as_json: bool) -> None:
    """The latest events, newest first (``--oldest-first``, ``--follow``)."""
    with open_store(state) as store:
        if cluster is not None:
            store.get_cluster(cluster)  # "no such cluster": exit 2, as every command naming a cluster
        evs = store.events(cluster=cluster, limit=limit)
        if follow:
            _follow(store, evs, cluster, as_json)
            return
    if not oldest_first:
        evs.reverse()
    if as_json:
        emit_json([record(e) for e in evs])
        return
    print_table(None, ["time", "level", "kind", "cluster", "node", "message"],
                [(when(e.time), e.level, e.kind, e.cluster, e.node, e.message) for e in evs])


def _follow(store, evs: list, cluster: str | None, as_json: bool, every_s: float = 1.0) -> None:
    """``events --follow``: print ``evs`` (oldest first), then poll for newer ones every ``every_s``."""
    last = 0
    try:
        while True:
            for e in evs:
                if as_json:
                    click.echo(json.dumps(record(e), sort_keys=True, default=str))
                else:
                    text = " ".join(str(e.message).split())
                    click.echo(f"{when(e.time)}  {e.level:<7} {e.kind:<11} {e.cluster or '-'} {e.node or '-'}  {text}")
                last = e.id
            sys.stdout.flush()
            time.sleep(every_s)
            evs = store.events(cluster=cluster, limit=1000, after=last)
    except KeyboardInterrupt:  # the normal end of a follow
        return

