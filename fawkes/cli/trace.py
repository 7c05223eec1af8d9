"""``fawkes trace``: make job traces for ``fawkes simulate --trace`` from real workloads."""

from __future__ import annotations

import io
import math
import re
import sys
import time
from pathlib import Path

import click

from fawkes.atomicfile import write_atomic
from fawkes.config import state_option
from fawkes.errors import FawkesError

EPILOG = """\b
Examples:
  fawkes trace from-spark /var/log/spark-events -o etl.csv      # cluster name: spark-events
  fawkes trace from-spark etl=/logs/etl bi=/logs/bi -o week.csv  # one directory per deployment
  fawkes simulate --trace week.csv --capacity 48 --min-core 10 --period 120 --compare TD,EQ,None
"""

STATE_EPILOG = """\b
Examples:
  fawkes trace from-state -o live.csv --costs live-costs.yaml --clusters live-clusters.csv
  fawkes trace from-state --since 7d -o week.csv --costs costs.yaml      # the last week
  fawkes trace from-state --since 2026-11-16 --until 2026-11-23T12:00Z -o week.csv
  fawkes simulate --trace week.csv --cost-file costs.yaml --clusters live-clusters.csv \\
      --capacity 8 --min-core 1 --period 10 --compare None,EQ,TD,td-damped
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
    from fawkes.traces.spark_eventlog import to_trace
    from fawkes.traces.trace import write_trace
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
        out = io.StringIO()
        write_trace(conv.rows, out)
        write_atomic(output, out.getvalue())
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
        if conv.reread:  # input_bytes counts each input once: say which applications read theirs again
            click.echo(f"{len(conv.reread)} application(s) read their input more than once (input_bytes counts "
                       "it once; see traces/README.md): "
                       + ", ".join(f"{a} {x:.1f}x" for a, x in conv.reread[:5])
                       + (" ..." if len(conv.reread) > 5 else ""), err=True)


@trace.command("from-state", epilog=STATE_EPILOG)
@state_option
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the trace here (default: stdout).")
@click.option("--costs", "costs_out", type=click.Path(dir_okay=False),
              help="Also write the measured cost file (YAML of cost-model fields, for simulate --cost-file).")
@click.option("--clusters", "clusters_out", type=click.Path(dir_okay=False),
              help="Also write the cluster file (cluster,request_s,min_core: each cluster's minimum).")
@click.option("--since", default=None, metavar="WHEN", help="Jobs submitted at or after WHEN: an ISO date/time "
              "(UTC unless it says), seconds since the epoch, or a span back from now (7d, 12h, 30m).")
@click.option("--until", default=None, metavar="WHEN", help="Jobs submitted at or before WHEN (same forms).")
@click.option("--master-factor", is_flag=True, help="Apply the measured master_task_factor (a task on a cluster's "
              "master node against its other nodes; jobs' task_time): the cost field, and each job's task seconds as "
              "on a node other than the master. Off by default: measured and shown, not applied (docs/live.md).")
@click.option("-q", "--quiet", is_flag=True, help="No summary on stderr.")
def from_state(state, output, costs_out, clusters_out, since, until, master_factor, quiet) -> None:
    """The coordinator's job history as a trace, and its measured node costs as a cost file.

    One row per job that succeeded: submission time, cluster, input bytes, the reference runtime
    it was submitted with, and its tasks as the sampler saw them (count and mean slot seconds).
    The cost file holds what the reconciler measured (node start and stop times per role), the
    slots per node (the hosts' cores) and the per-job overhead; in a pool of clusters of several
    kinds (Spark, Flink, Dask), also each cluster's own kind's start-up, overhead and node times
    (its clusters: section); docs/live.md says how each is read.
    Prints the `fawkes simulate` command that replays it.
    """
    from fawkes.traces.costfile import parse_cost_text
    from fawkes.traces.from_state import export
    from fawkes.traces.trace import write_trace

    now = time.time()
    lo = parse_when("--since", since, now)
    hi = parse_when("--until", until, now)
    if lo is not None and hi is not None and hi < lo:
        raise FawkesError(f"--until ({until}) is before --since ({since})")
    outs = [(o, p) for o, p in (("-o", output), ("--costs", costs_out), ("--clusters", clusters_out)) if p]
    seen: dict[str, str] = {}
    for opt, p in outs:
        check_output(opt, p)
        key = str(Path(p).resolve())
        if key in seen:
            raise FawkesError(f"{opt} {p}: the same file as {seen[key]}")
        seen[key] = opt
    with open_existing_store(state) as store:
        ex = export(store, since=lo, until=hi, master_factor=master_factor)
    if not ex.rows:
        window = "" if lo is None and hi is None else " in the given window"
        raise FawkesError(f"no finished job with task samples{window} in the state")
    import io

    texts: list[tuple[str, str]] = []
    buf = io.StringIO()
    write_trace(ex.rows, buf)
    if costs_out:
        text = ex.cost_text()
        # what simulate --cost-file will read, checked as it reads it (a measured figure out of range,
        # a kind name that cannot be one) before anything is written
        parse_cost_text(text, f"--costs {costs_out} (measured from the state)")
        texts.append((costs_out, text))
    if clusters_out:
        texts.append((clusters_out, ex.clusters_csv()))
    if output:
        texts.insert(0, (output, buf.getvalue()))
    for path, text in texts:
        write_atomic(path, text)
    if not output:
        sys.stdout.write(buf.getvalue())
    if not quiet:
        per: dict[str, int] = {}
        for r in ex.rows:
            per[r.cluster] = per.get(r.cluster, 0) + 1
        click.echo(f"{len(ex.rows)} jobs over {ex.rows[-1].submit_s:.0f} s: "
                   + ", ".join(f"{c} {n}" for c, n in per.items()) + (f" -> {output}" if output else ""), err=True)
        if ex.costs:
            click.echo("measured: " + ", ".join(f"{k}={v}" for k, v in ex.costs.items()), err=True)
        if ex.master_factor is not None and not ex.master_factor_applied:
            click.echo(f"measured, not applied: master_task_factor={ex.master_factor[0]} over {ex.master_factor[1]} "
                       "jobs (--master-factor applies it)", err=True)
        for c, fields in ex.cluster_costs.items():
            click.echo(f"measured for {c} (its kind's): " + ", ".join(f"{k}={v}" for k, v in fields.items()), err=True)
        for what, n in ex.skipped.items():
            click.echo(f"skipped {n} job(s) {what}", err=True)
        m = min(ex.minima.values())
        pol = ",".join(p.split(" ")[0] for p in ex.policies) or "TD"
        cmd = (f"fawkes simulate --trace {output or 'TRACE'} --capacity {ex.capacity} --min-core {m} "
               f"--period {ex.period_s or 60:g}" + (f" --clusters {clusters_out}" if clusters_out else "")
               + (f" --cost-file {costs_out}" if costs_out else "")
               + (f" --set sample_period_s={ex.sample_period_s:.3g}" if ex.sample_period_s else "")
               + (f" --compare None,{pol}" if "None" not in pol.split(",") else f" --compare {pol}"))
        click.echo(f"policies that decided: {', '.join(ex.policies) or '-'}\nreplay: {cmd}", err=True)


_SPAN = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([smhdw])\s*$", re.IGNORECASE)
_SPAN_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_when(opt: str, text: str | None, now: float) -> float | None:
    """``--since``/``--until``: ISO date/time (UTC unless given), epoch seconds, or a span back from now."""
    import datetime as dt

    if text is None:
        return None
    bad = f"{opt}: expected an ISO date/time (2026-11-23, 2026-11-23T12:00Z), epoch seconds or a span such " \
          f"as 7d / 12h / 30m, not {text[:60]!r}"
    if "\0" in text or not text.strip():
        raise FawkesError(bad)
    m = _SPAN.match(text)
    if m:
        span = float(m.group(1)) * _SPAN_S[m.group(2).lower()]
        if span > 100 * 365 * 86400:
            raise FawkesError(f"{opt}: {text!r} reaches back more than 100 years")
        return now - span
    try:
        v = float(text)
    except ValueError:
        v = None
    if v is not None:
        if not math.isfinite(v) or v < 0 or v > 253402300799:  # 9999-12-31
            raise FawkesError(f"{opt}: {text!r} is not a time (epoch seconds between 0 and year 9999)")
        return v
    try:
        d = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise FawkesError(bad) from None
    if d.tzinfo is None:
        d = d.replace(tzinfo=dt.timezone.utc)
    return d.timestamp()


def check_output(opt: str, path: str) -> None:
    """An output file may be new or a regular file, in an existing directory."""
    p = Path(path)
    if "\0" in path:
        raise FawkesError(f"{opt}: a file name cannot hold a NUL byte")
    if p.exists() and not p.is_file():
        raise FawkesError(f"{opt} {path}: exists and is not a regular file")
    if not p.parent.is_dir():
        raise FawkesError(f"{opt} {path}: no such directory {p.parent}")


class open_existing_store:
    """The state store, which must exist already (an export never creates one)."""

    def __init__(self, state: str | None):
        self.state = state

    def __enter__(self):
        from fawkes.config import resolve_state_url
        from fawkes.store import Store

        url = resolve_state_url(self.state)
        if url.startswith("sqlite:///"):
            p = Path(url[len("sqlite:///"):])
            if not p.exists():
                raise FawkesError(f"state {p}: no such file (nothing to export)")
            if not p.is_file():
                raise FawkesError(f"state {p}: not a regular file")
            with p.open("rb") as f:
                if f.read(16) != b"SQLite format 3\x00":
                    raise FawkesError(f"state {p}: not an SQLite database")
        self.store = Store(url, create=False)
        return self.store

    def __exit__(self, *exc) -> None:
        self.store.close()
