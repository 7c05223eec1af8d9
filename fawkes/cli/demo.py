"""``fawkes demo``: the main job on an embedded default (a local lab, SQLite)."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import click


@click.command()
@click.option("--policy", default="TD", show_default=True, help="policy for the job stream")
@click.option("--hosts", type=click.IntRange(7, 16), default=8, show_default=True, help="lab hosts")
@click.option("--dir", "workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="work dir (default: a new temp dir); keeps the state, logs, report and plot")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
def demo(policy: str, hosts: int, workdir: Path | None, as_json: bool) -> None:
    """Three MR-clusters on a local SSH lab, an imbalanced stream of real Spark jobs, balanced by TD.

    Needs root (network namespaces).  Takes 5 to 10 minutes on 2 cores.  Ends with a report
    (mean slowdown per cluster, reconfigurations) and a plot of the allocations over time.
    """
    from rich.console import Console
    from rich.live import Live
    from rich.table import Table

    from fawkes.demo import CLUSTERS, Session, calibrate, plot, report, run_stream
    from fawkes.presets import settings_for

    settings_for(policy)  # a bad policy name fails now, in one line
    console = Console(stderr=True)
    workdir = workdir or Path(tempfile.mkdtemp(prefix="fawkes-demo-"))
    t0 = time.time()

    def table() -> Table:
        st = session.store.status()
        t = Table(title=f"fawkes demo ({time.time() - t0:.0f} s) — tick {st['tick'] or '-'}, "
                        f"G={st['global_factor'] if st['global_factor'] is not None else '-'}")
        for col in ("cluster", "state", "core", "TR", "TC", "weight", "target", "queued", "running"):
            t.add_column(col)
        for c in st["clusters"]:
            t.add_row(c["name"], str(c["state"]), str(c["nodes"].get("core", 0)), str(c["nodes"].get("transient", 0)),
                      str(c["nodes"].get("transient-core", 0)),
                      "-" if c["weight"] is None else f"{c['weight']:.2f}", str(c["target"] or "-"),
                      str(c["queued_jobs"]), str(c["running_jobs"]))
        return t

    console.print(f"[bold]fawkes demo[/]: work dir {workdir}")
    session = Session(workdir, hosts, say=lambda m: console.print(m))
    try:
        session.setup_clusters()
        with Live(table(), console=console, refresh_per_second=1) as live:
            show = lambda: live.update(table())  # noqa: E731
            console.print("calibrating: one job alone on a minimum-size cluster (policy None)")
            ref = calibrate(session, show)
            console.print(f"reference runtime R = {ref:.1f} s; now the imbalanced stream under {policy}")
            out = run_stream(session, policy, ref, show)
            for name in CLUSTERS:
                session.store.request_release(name)
            session.wait("the clusters' release", lambda: all(
                session.store.get_cluster(n).state == "released" for n in CLUSTERS), 300, show)
    finally:
        session.close()
    png = plot(out, workdir / "allocations.png")
    (workdir / "report.json").write_text(json.dumps(out.__dict__, indent=2, default=str))
    if as_json:
        click.echo(json.dumps({"policy": out.policy, "reference_s": out.reference_s,
                               "cluster_mean_slowdown": out.slowdowns(), "mean_slowdown": out.mean_slowdown(),
                               "reconfigurations": out.reconfigurations, "plot": str(png)}, indent=2))
    else:
        click.echo(report(out))
        click.echo(f"plot: {png}\nstate, logs and report: {workdir}")
