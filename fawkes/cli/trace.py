"""``fawkes trace``: make job traces for ``fawkes simulate --trace`` from real workloads."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from fawkes.errors import FawkesError

EPILOG = """\b
Examples:
  fawkes trace from-spark /var/log/spark-events -o etl.csv      # cluster name: spark-events
  fawkes trace from-spark etl=/logs/etl bi=/logs/bi -o week.csv  # one directory per deployment
  fawkes simulate --trace week.csv --capacity 48 --min-core 10 --period 120 --compare TD,EQ,None
"""


@click.group()
def trace() -> None:
    """Make job traces (traces/README.md) from real workloads."""


@trace.command("from-spark", epilog=EPILOG)
@click.argument("sources", nargs=-1, required=True, metavar="[CLUSTER=]PATH...")
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the trace here (default: stdout).")
@click.option("--app", default=None, help="Cost-model profile for every job (wordcount, sort, ...); default: "
              "sort for jobs writing at least half their input, else wordcount.")
@click.option("-q", "--quiet", is_flag=True, help="No progress or summary on stderr.")
def from_spark(sources, output, app, quiet) -> None:
    """One trace row per Spark application in the event logs under each PATH.

    PATH is a spark.eventLog.dir, one rolling log directory (eventlog_v2_*) or one log file,
    plain or zstd-compressed (Spark's default).  The MR-cluster of its applications is CLUSTER,
    or the name of the log directory.  Measured task counts and mean task times go into the
    trace, so the simulator replays them instead of its cost model.
    """
    from fawkes.sim.costs import CostModel, app_profile
    from fawkes.sim.spark_eventlog import to_trace
    from fawkes.sim.trace import write_trace
    from fawkes.store import validate

    if app is not None:
        try:
            app = app_profile(app, CostModel().apps).name
        except KeyError as exc:
            raise FawkesError(f"--app: {exc.args[0]}") from None
    pairs = []
    for s in sources:
        cluster, sep, path = s.partition("=")
        if not Path(path if sep else s).exists():
            raise FawkesError(f"{path if sep else s}: no such file or directory")
        if not sep:
            path = s
            p = Path(path).resolve()
            cluster = (p if p.is_dir() and not p.name.startswith("eventlog_v2_") else p.parent).name
            what = f"{s}: cluster name {cluster!r} taken from the directory; give one as CLUSTER={s}"
        else:
            what = s
        try:
            validate.name("cluster", cluster)
        except FawkesError as exc:
            raise FawkesError(f"{what}: {exc}") from None
        pairs.append((cluster, Path(path)))

    last = [0.0]

    def progress(done: int, total: int) -> None:
        now = time.monotonic()
        if not quiet and (done == total or now - last[0] >= 2.0):
            last[0] = now
            click.echo(f"read {done}/{total} application logs", err=True)

    conv = to_trace(pairs, app=app, progress=progress)
    if not conv.rows:
        raise FawkesError("no complete Spark application with tasks in " + ", ".join(sources))
    if output:
        tmp = Path(output).with_name(Path(output).name + ".tmp")
        try:
            with tmp.open("w", encoding="utf-8", newline="") as f:
                write_trace(conv.rows, f)
            tmp.replace(output)
        except OSError as exc:
            raise FawkesError(f"{output}: cannot write: {exc.strerror or exc}") from None
    else:
        write_trace(conv.rows, sys.stdout)
    if not quiet:
        per: dict[str, int] = {}
        for r in conv.rows:
            per[r.cluster] = per.get(r.cluster, 0) + 1
        span = conv.rows[-1].submit_s
        click.echo(f"{len(conv.rows)} jobs over {span:.0f} s: "
                   + ", ".join(f"{c} {n}" for c, n in per.items())
                   + (f" -> {output}" if output else ""), err=True)
        for what, ids in (("incomplete (no ApplicationEnd)", conv.skipped_incomplete),
                          ("without tasks", conv.skipped_no_tasks)):
            if ids:
                click.echo(f"skipped {len(ids)} application(s) {what}: {', '.join(ids[:5])}"
                           + (" ..." if len(ids) > 5 else ""), err=True)
