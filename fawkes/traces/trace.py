"""Job traces: CSV import (format in traces/README.md) and an optional cluster file.

Trace: a header and one row per job, columns ``submit_s,cluster,app,input_bytes,maps,reduces``
plus optional ``ref_runtime_s``, ``map_s``, ``reduce_s`` (measured mean task seconds, which replace
the cost model's), ``job`` (a label, e.g. the Spark application id; not used by the simulator) and
``startup_s`` (the job's own measured start-up, dispatch to its first task, which replaces the cost
model's ``job_startup_s`` for this job when the dispatcher's gate is on) and ``model`` (``mr`` or
``spark``: how the job runs, ``fawkes/sim/stages.py``; empty: its cluster's).
``input_bytes`` is a number of bytes, optionally with a unit (``KB MB GB TB``, powers of 1024).
Lines starting with ``#`` and blank lines are ignored.  :func:`write_trace` writes this format.

Cluster file (optional): ``cluster,request_s`` plus optional ``min_core,dataset_bytes,tasks_known,job_model``
(``job_model``: ``mr``, the default, or ``spark``, how the cluster's jobs run; ``tasks_known``: the tasks of a job of the cluster that the live sampler knew before the trace's
first job; the simulator's sampler counts a job it has not seen running as that many, as the live
one does).
Clusters are the distinct names in the trace; without a cluster file each is requested at
time 0 and ready at once (pre-loaded).  A cluster requested later, or with a dataset, is
deployed (w^D) and loads its dataset (l^D) first.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from fawkes.errors import ConfigError, FawkesError
from fawkes.mechanism.model import Role
from fawkes.sim.costs import CostModel
from fawkes.sim.stages import JOB_MODELS
from fawkes.sim.workloads import WorkloadCluster, Workload, reseed

REQUIRED = ("submit_s", "cluster", "app", "input_bytes", "maps", "reduces")
OPTIONAL = ("ref_runtime_s", "map_s", "reduce_s", "job", "startup_s", "model")
CLUSTER_REQUIRED = ("cluster", "request_s")
CLUSTER_OPTIONAL = ("min_core", "dataset_bytes", "tasks_known", "job_model")
_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2, "g": 1024**3, "gb": 1024**3,
          "t": 1024**4, "tb": 1024**4, "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4}
#: bounds of a trace (docs/input-limits.md): what a simulation can finish in seconds to minutes, where
#: 1e15 seconds, 1e30 bytes or 1e8 tasks made it run for ever or run out of memory
MAX_TRACE_S = 10 * 365 * 86400.0  # submit_s, request_s: ten years
MAX_BYTES = float(2**50)  # input_bytes, dataset_bytes: 1 PiB
MAX_TASKS = 100_000  # maps, reduces of one job
MAX_TASK_S = 86400.0  # map_s, reduce_s: a day per task
MAX_REF_S = 365 * 86400.0  # ref_runtime_s: a year
MAX_TRACE_FILE_BYTES = 256 * 1024 * 1024
_BYTES = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*$")


@dataclass(frozen=True, slots=True)
class TraceRow:
    """One job of a trace (the columns, in order; the optional ones may be None/empty)."""

    submit_s: float
    cluster: str
    app: str
    input_bytes: float
    maps: int
    reduces: int
    ref_runtime_s: float | None = None
    map_s: float | None = None
    reduce_s: float | None = None
    job: str = ""
    startup_s: float | None = None
    model: str = ""


def write_trace(rows: Iterable[TraceRow], out) -> int:
    """Write ``rows`` as a trace CSV (header included) to the text stream ``out``; returns the row count."""
    w = csv.writer(out, lineterminator="\n")
    w.writerow([f.name for f in fields(TraceRow)])
    n = 0
    for r in rows:
        w.writerow(["" if v is None else (_num(v) if isinstance(v, float) else v) for v in astuple(r)])
        n += 1
    return n


def _num(v: float) -> str:
    return f"{v:.3f}".rstrip("0").rstrip(".") if v != int(v) else str(int(v))


def parse_bytes(text: str) -> float:
    m = _BYTES.match(text)
    if not m or m.group(2).lower() not in _UNITS:
        raise ValueError(f"not a byte count: {text!r} (e.g. 1073741824, 1GB, 512MB)")
    return float(m.group(1)) * _UNITS[m.group(2).lower()]


def _rows(path: Path, required: tuple[str, ...], optional: tuple[str, ...]):
    from fawkes.yamlfile import read_regular

    try:  # a FIFO or device is refused without blocking; a spreadsheet's BOM is no part of the header
        text = read_regular(path, MAX_TRACE_FILE_BYTES).decode("utf-8-sig")
    except FileNotFoundError:
        raise ConfigError(str(path), "file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(str(path), f"cannot read: {exc}") from None
    lines = [(i + 1, ln) for i, ln in enumerate(text.splitlines()) if ln.strip() and not ln.lstrip().startswith("#")]
    if not lines:
        raise ConfigError(str(path), "empty file: expected a header " + ",".join(required))
    header_line, header = lines[0]
    cols = [c.strip() for c in next(csv.reader([header]))]
    for k, c in enumerate(cols):
        if c not in required + optional:
            raise ConfigError(str(path), f"unknown column {c!r} (column {k + 1}); expected {', '.join(required)}"
                              f" and optionally {', '.join(optional)}", line=header_line, field=c)
    missing = [c for c in required if c not in cols]
    if missing:
        raise ConfigError(str(path), f"header lacks column(s) {', '.join(missing)}", line=header_line)
    if len(set(cols)) != len(cols):
        raise ConfigError(str(path), "duplicate column in header", line=header_line)
    for lineno, ln in lines[1:]:
        vals = next(csv.reader([ln]))
        if len(vals) != len(cols):
            raise ConfigError(str(path), f"expected {len(cols)} values, found {len(vals)}", line=lineno)
        yield lineno, {c: v.strip() for c, v in zip(cols, vals)}, cols


def _field(path: Path, lineno: int, cols: list[str], col: str, text: str, conv, check, what: str):
    try:
        v = conv(text)
    except (ValueError, TypeError):
        v = None
    if v is None or not check(v):
        raise ConfigError(str(path), f"column {cols.index(col) + 1} ({col}): {what}, got {text!r}",
                          line=lineno, field=col)
    return v


def load_trace(path: str | Path, *, capacity: int, min_core: int, period_s: float,
               clusters_file: str | Path | None = None, grow: str = "tc", cost: CostModel | None = None,
               idle_timeout_s: float | None = None) -> Workload:
    """Read a trace (and a cluster file) into a :class:`Workload` (durations for seed 0)."""
    from fawkes.sim.costs import app_profile

    path = Path(path)
    cost = cost or CostModel()
    rows = []
    for lineno, r, cols in _rows(path, REQUIRED, OPTIONAL):
        submit = _field(path, lineno, cols, "submit_s", r["submit_s"], float, lambda v: 0 <= v <= MAX_TRACE_S,
                        f"expected seconds 0..{MAX_TRACE_S:.0f} (ten years)")
        cluster = r["cluster"]
        if not cluster:
            raise ConfigError(str(path), f"column {cols.index('cluster') + 1} (cluster): empty cluster name",
                              line=lineno, field="cluster")
        try:
            app = app_profile(r["app"], cost.apps).name
        except KeyError as exc:
            raise ConfigError(str(path), f"column {cols.index('app') + 1} (app): {exc.args[0]}", line=lineno,
                              field="app") from None
        size = _field(path, lineno, cols, "input_bytes", r["input_bytes"], parse_bytes, lambda v: 0 <= v <= MAX_BYTES,
                      "expected a byte count 0..1PB (e.g. 1073741824 or 1GB)")
        maps = _field(path, lineno, cols, "maps", r["maps"], int, lambda v: 1 <= v <= MAX_TASKS,
                      f"expected an integer 1..{MAX_TASKS}")
        reduces = _field(path, lineno, cols, "reduces", r["reduces"], int, lambda v: 0 <= v <= MAX_TASKS,
                         f"expected an integer 0..{MAX_TASKS}")
        opt = {}
        for col, most in (("ref_runtime_s", MAX_REF_S), ("map_s", MAX_TASK_S), ("reduce_s", MAX_TASK_S)):
            if r.get(col):
                opt[col] = _field(path, lineno, cols, col, r[col], float, lambda v, most=most: 0 < v <= most,
                                  f"expected seconds > 0 and <= {most:.0f} (or empty)")
        if r.get("startup_s"):
            opt["startup_s"] = _field(path, lineno, cols, "startup_s", r["startup_s"], float,
                                      lambda v: 0 <= v <= MAX_TASK_S,
                                      f"expected seconds >= 0 and <= {MAX_TASK_S:.0f} (or empty)")
        if r.get("model"):
            opt["model"] = _field(path, lineno, cols, "model", r["model"], str, lambda v: v in JOB_MODELS,
                                  "expected " + " or ".join(JOB_MODELS) + " (or empty)")
        rows.append(TraceRow(submit, cluster, app, size, maps, reduces, job=r.get("job", ""), **opt))
    if not rows:
        raise ConfigError(str(path), "no jobs in the trace")
    names = list(dict.fromkeys(r.cluster for r in sorted(rows, key=lambda r: r.submit_s)))
    stray = [n for n in cost.clusters if n not in names]
    if stray:  # a per-cluster cost (a cost file's clusters:) for a cluster the trace does not run
        raise FawkesError(f"cost clusters.{stray[0]}: no job of cluster {stray[0]!r} in the trace {path}")
    specs = {n: WorkloadCluster(n, 0.0, min_core, 0.0, preloaded=True) for n in names}
    if clusters_file is not None:
        cpath = Path(clusters_file)
        seen = set()
        for lineno, r, cols in _rows(cpath, CLUSTER_REQUIRED, CLUSTER_OPTIONAL):
            n = r["cluster"]
            if n not in specs:
                raise ConfigError(str(cpath), f"column {cols.index('cluster') + 1} (cluster): {n!r} has no jobs "
                                  "in the trace", line=lineno, field="cluster")
            if n in seen:
                raise ConfigError(str(cpath), f"cluster {n!r} listed twice", line=lineno, field="cluster")
            seen.add(n)
            t = _field(cpath, lineno, cols, "request_s", r["request_s"], float, lambda v: 0 <= v <= MAX_TRACE_S,
                       f"expected seconds 0..{MAX_TRACE_S:.0f} (ten years)")
            m = min_core
            if r.get("min_core"):
                m = _field(cpath, lineno, cols, "min_core", r["min_core"], int, lambda v: 1 <= v <= capacity,
                           f"expected an integer 1..{capacity} (--capacity)")
            ds = 0.0
            if r.get("dataset_bytes"):
                ds = _field(cpath, lineno, cols, "dataset_bytes", r["dataset_bytes"], parse_bytes,
                            lambda v: 0 <= v <= MAX_BYTES, "expected a byte count 0..1PB")
            known = 0
            if r.get("tasks_known"):
                known = _field(cpath, lineno, cols, "tasks_known", r["tasks_known"], int,
                               lambda v: 0 <= v <= MAX_TASKS, f"expected an integer 0..{MAX_TASKS} (or empty)")
            model = "mr"
            if r.get("job_model"):
                model = _field(cpath, lineno, cols, "job_model", r["job_model"], str, lambda v: v in JOB_MODELS,
                               "expected " + " or ".join(JOB_MODELS) + " (or empty)")
            specs[n] = WorkloadCluster(n, t, m, ds, preloaded=(t == 0 and ds == 0), tasks_known=known,
                                       job_model=model)
    total_min = sum(s.min_core for s in specs.values())
    if min_core > capacity:  # the option's fault, not the trace's (the cluster file's are checked per line)
        raise FawkesError(f"--min-core {min_core} exceeds --capacity {capacity}")
    rows.sort(key=lambda r: r.submit_s)
    wl = Workload(f"trace:{path.name}", tuple(specs.values()), (), capacity, period_s=period_s,
                  grow_type=Role.TR if grow.lower() in ("tr", "transient") else Role.TC, cost=cost,
                  settings={} if idle_timeout_s is None else {"idle_timeout_s": idle_timeout_s},
                  note=f"{len(rows)} jobs, {len(names)} clusters, sum of minima {total_min} of {capacity}")
    object.__setattr__(wl, "_rows", tuple(rows))
    return reseed(wl, 0)

