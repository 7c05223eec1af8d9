"""``fawkes demo``: the main job on an embedded default (a local lab of CPU-limited hosts, SQLite)."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

import click

from fawkes.cli.params import seconds
from fawkes.errors import FawkesError


@click.command()
@click.option("--policy", default="TD", show_default=True, help="policy (or preset) for the job stream")
@click.option("--measure-none", is_flag=True,
              help="also run the stream under None on the lab (about twice as long); by default the twin "
                   "calibrated on this run predicts None")
@click.option("--dir", "workdir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="work dir (default: a new temp dir); keeps the state, logs, trace, costs, report and plot")
@click.option("--prefix", default="fwdemo", show_default=True, help="lab prefix (network namespaces, cgroups)")
@click.option("--reference", "reference_s", type=seconds(1, 86400), default=None, metavar="SECONDS",
              help="the reference runtime R from an earlier demo on this machine (its report's reference_s): "
                   "skips the calibration job, about 3 minutes")
@click.option("--recalibrate", is_flag=True,
              help="measure R again even if an earlier demo on this machine measured it (R is kept in "
                   "~/.cache/fawkes/demo-reference.json per machine, host quota and job)")
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@click.option("--mixed", is_flag=True,
              help="the mixed pool: one Spark (spark-hdfs), one Flink (flink-hdfs) and one Dask MR-cluster on the "
                   "same hosts, a burst of each one's CPU-bound jobs in turn, growth by transient nodes; R is "
                   "measured per kind (three calibration jobs); the twin replays each cluster with its own kind's "
                   "measured costs to predict None (--measure-none measures it on the lab as well)")
def demo(policy: str, measure_none: bool, workdir: Path | None, prefix: str, reference_s: float | None,
         recalibrate: bool, as_json: bool, mixed: bool) -> None:
    """Three MR-clusters on a local SSH lab of CPU-limited hosts and two bursts of real CPU-bound
    Spark jobs on different clusters: the loaded cluster grows, the idle ones stay at their
    minimum, and the nodes move when the burst moves.

    Needs root (network namespaces, cgroups).  The first run on a machine measures the reference
    runtime R (one job alone on a 1-node cluster, about 3 minutes) and keeps it; later runs reuse it
    (--recalibrate measures it again).  A first run took 9.1-11.0 minutes on this 2-core machine
    (docs/live.md: the runs and their files), later ones less (about twice as long with --measure-none).  Ends with a report (mean slowdown per cluster under the policy, and under
    None: measured, or predicted by the simulator replaying this run with its measured costs)
    and a plot of the allocations over time.
    """
    from rich.console import Console, Group
    from rich.live import Live
    from rich.table import Table

    from fawkes.demo import (MIXED_PLAN, REFERENCE_CACHE, DemoPlan, Session, cached_reference, calibrate,
                             calibrate_kinds, plot, remember_reference, report, run_stream)
    from fawkes.frameworks.dists import cache_root
    from fawkes.presets import settings_for

    settings_for(policy)  # a bad policy name fails now, in one line
    if reference_s is not None and recalibrate:
        raise click.UsageError("--reference and --recalibrate exclude each other")
    if mixed and reference_s is not None:
        raise click.UsageError("--reference is one R; with --mixed R is measured per kind")
    plan = MIXED_PLAN if mixed else DemoPlan()
    ref_cache = cache_root() / REFERENCE_CACHE
    source = "given"
    if reference_s is None and not recalibrate and not mixed:
        hit = cached_reference(plan, ref_cache)
        if hit:
            reference_s, source = hit[0], f"cached: measured by the demo of {hit[1]} on this machine"
    console = Console(stderr=True)
    workdir = workdir or Path(tempfile.mkdtemp(prefix="fawkes-demo-"))
    t0 = time.time()
    phase = ["starting"]
    took: dict[str, float] = {}  # seconds per phase, for the report

    def lap(name: str) -> None:
        took[name] = round(time.time() - t0 - sum(took.values()), 1)

    def table():
        st = session.store.status()
        t = Table(title=f"fawkes demo ({time.time() - t0:.0f} s, {phase[0]}): policy {st['policy'] or '-'}, "
                        f"tick {st['tick'] or '-'}, free hosts {st['hosts'].get('free', 0)}")
        for col in ("cluster", "state", "core", "TC", "TR", "draining", "target", "queued", "running", "hosts"):
            t.add_column(col)
        for c in st["clusters"]:
            nodes = session.store.list_nodes(c["name"])
            hosts = " ".join(f"{n.host}{'' if n.role == 'core' else '+' if n.state == 'running' else '~'}"
                             for n in nodes)
            t.add_row(c["name"], str(c["state"]), str(c["nodes"].get("core", 0)),
                      str(c["nodes"].get("transient-core", 0)), str(c["nodes"].get("transient", 0)),
                      str(c["draining"]), str(c["target"] or "-"), str(c["queued_jobs"]), str(c["running_jobs"]),
                      hosts)
        return Group(t, "hosts: name = core node, + = grown node running, ~ = starting or draining")

    console.print(f"[bold]fawkes demo[/]: work dir {workdir}")
    session = Session(workdir, plan, say=lambda m: console.print(m), prefix=prefix)
    lap("lab up")
    base = None
    try:
        session.setup_clusters()
        with Live(table(), console=console, refresh_per_second=2) as live:
            show = lambda: live.update(table())  # noqa: E731
            if mixed:
                phase[0] = "calibrating"
                console.print("calibrating: one job alone on each kind's 1-node cluster (policy None)")
                ref, source = calibrate_kinds(session, show), "measured"
                console.print("reference runtimes R: " + ", ".join(f"{c} {r:.1f} s" for c, r in ref.items()))
                lap("deploy and calibration")
            elif reference_s is None:
                phase[0] = "calibrating"
                console.print("calibrating: one job alone on a 1-node cluster (policy None)")
                ref, source = calibrate(session, show), "measured"
                try:
                    remember_reference(plan, ref, ref_cache)
                except OSError as exc:
                    console.print(f"[yellow]could not keep R in {ref_cache}: {exc}[/]")
                console.print(f"reference runtime R = {ref:.1f} s (measured, kept in {ref_cache}); now the stream "
                              f"under {policy}")
                lap("deploy and calibration")
            else:
                ref = reference_s
                why = "given by --reference" if source == "given" else f"{source}; --recalibrate measures it again"
                console.print(f"reference runtime R = {ref:.1f} s ({why}); now the stream under {policy}")
            phase[0] = f"stream under {policy}"
            out = run_stream(session, policy, ref, show)
            lap(f"stream under {policy}" + ("" if source == "measured" else " (with the deploy)"))
            if measure_none:
                phase[0] = "stream under None"
                console.print("now the same stream under None")
                base = run_stream(session, "None", ref, show)
                lap("stream under None")
            phase[0] = "releasing"
            session.stop()
    finally:
        session.close()
    # a mixed run's export carries each cluster's own kind's costs (the cost file's clusters:)
    predicted = twin(workdir, session, out, policy, console)
    png = plot(out, workdir / "allocations.png", plan.clusters,
               {c: plan.kind_of(c) for c in plan.clusters} if plan.kinds else None)
    lap("lab down, twin and plot")
    result = {"policy": out.policy, "reference_s": out.reference_s,
              "reference_source": source, "cluster_mean_slowdown": out.slowdowns(),
              "mean_slowdown": out.mean_slowdown(), "reconfigurations": out.reconfigurations,
              "peak_nodes": out.peak_nodes(), "makespan_s": out.makespan_s, "plot": str(png),
              "none": ({"source": "measured", "cluster_mean_slowdown": base.slowdowns(),
                        "mean_slowdown": base.mean_slowdown()} if base else
                       {"source": "twin", **{k: predicted["None"][k] for k in ("cluster_mean_slowdown", "mean_slowdown")}}
                       if predicted else None),
              "twin": {k: {"cluster_mean_slowdown": v["cluster_mean_slowdown"], "mean_slowdown": v["mean_slowdown"]}
                       for k, v in (predicted or {}).items()},
              "took_s": {**took, "total": round(time.time() - t0, 1)}}
    (workdir / "report.json").write_text(json.dumps({**result, "outcome": out.__dict__}, indent=2, default=str))
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    click.echo(report(out, {f"{k}": v for k, v in (predicted or {}).items()}))
    if base is not None:
        click.echo("\nNone, measured on the lab in the same run:")
        click.echo(report(base))
    elif predicted:
        click.echo("None (twin) = predicted by the simulator replaying this run's jobs with the costs it measured "
                   f"(trace and costs in {workdir}); {policy} (twin) is the same replay under {policy}, "
                   f"against the live column")
    click.echo(f"took {(time.time() - t0) / 60:.1f} min: " + ", ".join(f"{k} {v:.0f} s" for k, v in took.items()))
    click.echo(f"plot: {png}\nstate, logs and report: {workdir}")


def twin(workdir: Path, session, out, policy: str, console) -> dict | None:
    """Export the stream from the state and replay it under None and ``policy`` (None on failure)."""
    from fawkes.demo import replay_window

    try:
        return replay_window(session.url, session.plan, out.start - 1, out.end, ("None", policy), workdir)
    except (FawkesError, OSError, ValueError) as exc:
        console.print(f"[yellow]twin: could not replay the run: {exc}[/]")
        return None
