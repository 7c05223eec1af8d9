"""``fawkes cluster request|list|show|release|wake``: MR-cluster requests in the global FIFO queue.

These commands only change the stored state; the coordinator admits, deploys, resizes
and releases clusters.
"""

from __future__ import annotations

import click

from fawkes.cli.audit import audited
from fawkes.cli.remote import cluster_path, remote, remote_options
from fawkes.cli.status import emit_json, json_option, print_table, record, when
from fawkes.config import open_store, state_option


@click.group()
def cluster() -> None:
    """Request, inspect, release and wake MR-clusters."""


@cluster.command()
@click.argument("name")
@click.option("--framework", "-f", required=True, help="Registered framework to deploy.")
@click.option("--min-core", "-m", type=int, required=True, help="Minimum number of core nodes (m_i >= 1).")
@click.option("--input", "input_path", default=None, help="Input dataset to load into HDFS.")
@click.option("--expected-duration", "expected", type=float, default=None, metavar="SECONDS",
              help="How long its workload runs once admitted (admission_order sjf/utility).")
@click.option("--deadline", type=float, default=None, metavar="SECONDS",
              help="maxT: its deadline, seconds from now (admission_order utility, deadline_purge).")
@state_option
@remote_options
@json_option
def request(name: str, framework: str, min_core: int, input_path: str | None, expected: float | None,
            deadline: float | None, state: str | None, url: str | None, token_file: str | None,
            as_json: bool) -> None:
    """Queue a request for a new MR-cluster NAME (global queue; FIFO unless the preset sets another
    admission_order)."""
    api = remote(url, token_file)
    if api is not None:
        out = api.call("POST", "/api/v1/clusters", {"name": name, "framework": framework, "min_core": min_core,
                                                    "input": input_path, "expected_duration": expected,
                                                    "deadline": deadline})
        emit_json(out["cluster"]) if as_json else click.echo(out["message"])
        return
    with open_store(state) as store, audited(store, "cluster.request", name):
        c = store.request_cluster(name, framework=framework, min_core=min_core, input_path=input_path,
                                  expected_duration_s=expected, deadline_s=deadline)
        pos = len(store.queue())
    if as_json:
        emit_json(record(c))
    else:
        click.echo(f"cluster {c.name} requested (min_core {c.min_core}); {pos} request(s) in the global queue")


@cluster.command(name="list")
@click.option("--all", "-a", "show_all", is_flag=True, help="Include released clusters.")
@state_option
@json_option
def list_(show_all: bool, state: str | None, as_json: bool) -> None:
    """Clusters in admission (FIFO) order."""
    with open_store(state) as store:
        cs = store.list_clusters(include_released=show_all)
        held = {}
        for n in store.list_nodes():
            held[n.cluster_id] = held.get(n.cluster_id, 0) + 1
        queued = store.queue_lengths()
    if as_json:
        emit_json([record(c) | {"nodes": held.get(c.id, 0)} for c in cs])
        return
    print_table(None, ["cluster", "state", "framework", "min", "nodes", "queued jobs", "requested", "input"],
                [(c.name, c.state + (" (release requested)" if c.release_requested_at else ""), c.framework,
                  c.min_core, held.get(c.id, 0), queued.get(c.name, "") if c.live_name else "",
                  when(c.requested_at), c.input_path) for c in cs])


@cluster.command()
@click.argument("name")
@state_option
@json_option
def show(name: str, state: str | None, as_json: bool) -> None:
    """One cluster: its record, nodes, lifecycle history and job counts."""
    with open_store(state) as store:
        c = store.get_cluster(name)
        nodes = store.list_nodes(name, live=False)
        history = store.cluster_history(name)
        jobs = store.list_jobs(name)
    counts: dict[str, int] = {}
    for j in jobs:
        if j.cluster_id == c.id:
            counts[j.state] = counts.get(j.state, 0) + 1
    if as_json:
        emit_json(record(c) | {"nodes": [record(n) for n in nodes], "history": [record(h) for h in history],
                               "jobs": counts})
        return
    fields = [("state", c.state), ("framework", c.framework), ("min_core", c.min_core), ("input", c.input_path),
              ("requested", when(c.requested_at)), ("admitted", when(c.admitted_at)),
              ("active", when(c.active_at)), ("release requested", when(c.release_requested_at)),
              ("released", when(c.released_at)),
              ("jobs", ", ".join(f"{n} {s}" for s, n in sorted(counts.items())) or "none")]
    print_table(f"cluster {c.name}", ["field", "value"], fields)
    if nodes:
        print_table("nodes", ["id", "host", "role", "state", "since", "stored bytes", "tasks", "protected"],
                    [(n.id, n.host, n.role, n.state, when(n.state_since), n.stored_bytes, n.running_tasks,
                      "yes" if n.protected else "") for n in nodes])
    print_table("history", ["time", "from", "to", "detail"],
                [(when(h.time), h.from_state, h.to_state, h.detail) for h in history])


@cluster.command()
@click.argument("name")
@state_option
@remote_options
@json_option
def release(name: str, state: str | None, url: str | None, token_file: str | None, as_json: bool) -> None:
    """Ask for cluster NAME to be released (a queued request is withdrawn at once)."""
    api = remote(url, token_file)
    if api is not None:
        out = api.call("POST", f"/api/v1/clusters/{cluster_path(name)}/release")
        emit_json(out["cluster"]) if as_json else click.echo(out["message"])
        return
    with open_store(state) as store, audited(store, "cluster.release", name):
        c = store.request_release(name)
    if as_json:
        emit_json(record(c))
    elif c.state == "released":
        click.echo(f"cluster {c.name} withdrawn from the queue (released)")
    else:
        click.echo(f"cluster {c.name}: release requested; the coordinator will save and release it")


@cluster.command()
@click.argument("name")
@state_option
@remote_options
@json_option
def wake(name: str, state: str | None, url: str | None, token_file: str | None, as_json: bool) -> None:
    """Wake hibernating cluster NAME without a job: requested again at its minimum, its saved output
    restored (docs/scale-to-zero.md; a job submitted to it wakes it too)."""
    api = remote(url, token_file)
    if api is not None:
        out = api.call("POST", f"/api/v1/clusters/{cluster_path(name)}/wake")
        emit_json(out["cluster"]) if as_json else click.echo(out["message"])
        return
    with open_store(state) as store, audited(store, "cluster.wake", name):
        c = store.wake_cluster(name)
    if as_json:
        emit_json(record(c))
    else:
        click.echo(f"cluster {c.name}: woken, requested again (min_core {c.min_core}); the coordinator will "
                   "deploy it and restore its saved output")
