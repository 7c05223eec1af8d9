"""What Spark event logs say about stages: the facts the simulator's Spark-like job model
(``fawkes/sim/stages.py``) is calibrated on, measured before the model was run on any check.

For every application it reads the stages (their parents and their successful tasks: launch and
finish time, executor) and measures, at each boundary between a stage and a stage that reads its
shuffle output:

* ``overlap_violations``: tasks of the child launched before the parent's last task finished (a
  barrier means none);
* ``gap_s``: the child's first launch minus the parent's last finish (the scheduler's delay
  between stages);
* ``same_executors``: whether the child's tasks ran on the executors the parent's ran on (one pool
  of cores, not map and reduce slots);

and per stage ``tail_idle``: the share of the executors' core-seconds between the stage's first
launch and last finish that no task used (the idle siblings waiting at the barrier), with the
cores the executors registered (ExecutorAdded), or the most tasks seen running at once where the
log has no such event.  Spark 1.x logs name no
parents: there a stage that fetched shuffle blocks is the child of the stage completed last before
its first task.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

from fawkes.traces.spark_eventlog import _SHUFFLE_READ, _lines, find_apps


@dataclass
class StageTimes:
    parents: tuple[int, ...] = ()
    shuffle_read: bool = False
    tasks: list[tuple[int, int, str]] = field(default_factory=list)  # (launch ms, finish ms, executor)

    @property
    def first(self) -> int:
        return min(t[0] for t in self.tasks)

    @property
    def last(self) -> int:
        return max(t[1] for t in self.tasks)


_READ = (b'"Event":"SparkListenerTaskEnd"', b'"Event":"SparkListenerStageSubmitted"',
         b'"Event":"SparkListenerExecutorAdded"')


def read_stages(files: list[Path]) -> tuple[dict[int, StageTimes], int]:
    """The stages of one application with their successful tasks (a stage's retries merged), and the
    cores of its executors (ExecutorAdded's Total Cores; 0 when the log has none)."""
    stages: dict[int, StageTimes] = {}
    cores = 0
    for path in files:
        for _, line in _lines(path):
            if not any(k in line for k in _READ):
                continue
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e["Event"].endswith("ExecutorAdded"):
                cores += int((e.get("Executor Info") or {}).get("Total Cores", 0) or 0)
                continue
            if e["Event"].endswith("StageSubmitted"):
                si = e.get("Stage Info") or {}
                st = stages.setdefault(int(si.get("Stage ID", -1)), StageTimes())
                st.parents = tuple(int(p) for p in si.get("Parent IDs") or ())
                continue
            if (e.get("Task End Reason") or {}).get("Reason") != "Success":
                continue
            info = e.get("Task Info") or {}
            st = stages.setdefault(int(e.get("Stage ID", -1)), StageTimes())
            st.tasks.append((int(info.get("Launch Time", 0)), int(info.get("Finish Time", 0)),
                             str(info.get("Executor ID", ""))))
            sr = (e.get("Task Metrics") or {}).get("Shuffle Read Metrics") or {}
            st.shuffle_read = st.shuffle_read or any(int(sr.get(k, 0) or 0) > 0 for k in _SHUFFLE_READ)
    return {k: s for k, s in stages.items() if s.tasks}, cores


def _boundaries(stages: dict[int, StageTimes]) -> list[tuple[int, int]]:
    """(parent, child) pairs of stages that both ran tasks."""
    out = []
    for sid, st in sorted(stages.items()):
        if st.parents:
            out += [(p, sid) for p in st.parents if p in stages]
        elif st.shuffle_read:  # Spark 1.x: the stage completed last before this one started
            before = [(s.last, k) for k, s in stages.items() if k != sid and s.last <= st.first]
            if before:
                out.append((max(before)[1], sid))
    return out


def _cores(stages: dict[int, StageTimes]) -> int:
    """The most tasks running at once in the application."""
    ev = sorted([(t[0], 1) for s in stages.values() for t in s.tasks] + [(t[1], -1) for s in stages.values()
                                                                        for t in s.tasks], key=lambda x: (x[0], x[1]))
    run = most = 0
    for _, d in ev:
        run += d
        most = max(most, run)
    return most


def measure(files: list[Path]) -> dict:
    """One application's stage facts (module docstring)."""
    stages, cores = read_stages(files)
    cores = cores or _cores(stages)
    bounds = []
    for p, c in _boundaries(stages):
        ps, cs = stages[p], stages[c]
        bounds.append({"parent": p, "child": c, "gap_s": (cs.first - ps.last) / 1000,
                       "overlap_violations": sum(1 for t in cs.tasks if t[0] < ps.last),
                       "same_executors": {t[2] for t in cs.tasks} <= {t[2] for t in ps.tasks}})
    tails = []
    for sid, st in sorted(stages.items()):
        span = (st.last - st.first) / 1000
        busy = sum(t[1] - t[0] for t in st.tasks) / 1000
        if span > 0 and cores:
            tails.append({"stage": sid, "tasks": len(st.tasks), "tail_idle": max(0.0, 1 - busy / (span * cores))})
    return {"stages": len(stages), "cores": cores, "boundaries": bounds, "tails": tails}


def calibrate(paths: list[Path]) -> dict:
    """Every application under ``paths``, and the figures the Spark-like model takes from them."""
    apps = {}
    for p in paths:
        for files in find_apps(p):
            apps[files[0].parent.name if files[0].name.startswith("events_") else files[0].name] = measure(files)
    bounds = [b for a in apps.values() for b in a["boundaries"]]
    gaps = [b["gap_s"] for b in bounds]
    return {
        "apps": apps,
        "boundaries": len(bounds),
        "overlap_violations": sum(b["overlap_violations"] for b in bounds),
        "same_executors": sum(b["same_executors"] for b in bounds),
        "gap_s_median": statistics.median(gaps) if gaps else None,
        "gap_s_mean": statistics.fmean(gaps) if gaps else None,
        "gap_s_max": max(gaps) if gaps else None,
        "tail_idle_median": statistics.median(t["tail_idle"] for a in apps.values() for t in a["tails"]),
    }
