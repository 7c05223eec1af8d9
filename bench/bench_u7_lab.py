"""Benchmark (pytest-run): UBIS U-7 on the lab (issue 28): PU from the nodes' measured CPU (``pu_signal:
measured``) tells a CPU-bound cluster from one whose tasks hold their slots idle.

A lab of 2 hosts with a CPU quota each (0.6 cores, 3 GiB): cluster A holds h1 and runs a CPU-bound job
(``fawkes/apps/burn.py``), cluster B holds h2 and runs a job whose tasks sleep (``bench/apps/sleep_tasks.py``:
the shape of an I/O-bound job, every slot occupied, the CPU idle).  The coordinator's sampler runs with the
preset's ``pu_signal: measured`` (its usage collector reads each running node's CPU over SSH, as the
service does without lending).  While both jobs hold all their slots, every sample step records each
cluster's busy slots as the sampler stores them (measured) and as the framework reports them (occupied).

Run by hand (root, network namespaces, cgroups, the lab dists of scripts/setup), from a frozen worktree::

    FAWKES_BENCH_OUT=bench/results/u7_lab_DATE.json python3 -m pytest -s -p no:cacheprovider bench/bench_u7_lab.py

Lab hosts are CPU quotas of one 2-core machine: the figures are this machine's, under what else ran on it.
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

import pytest

from tests.conftest import REPO, own_lab
from tests.ubis_coordinator import ubis_coordinator

try:
    from bench.results_meta import meta
except ImportError:  # pragma: no cover
    from results_meta import meta

pytestmark = [pytest.mark.lab, pytest.mark.spark]

BURN = REPO / "fawkes" / "apps" / "burn.py"
SLEEP = REPO / "bench" / "apps" / "sleep_tasks.py"
CPUS = 0.6
MEASURE_S = 60  # sample steps recorded while both jobs hold all their slots


@pytest.fixture(scope="module")
def u7_lab(tmp_path_factory):
    lab = own_lab(tmp_path_factory, "m", 2, 230, "lab with CPU quotas", cpus=CPUS, memory="3G")
    try:
        yield lab
    finally:
        lab.down()


def test_measured_pu_tells_a_cpu_bound_cluster_from_an_idle_slotted_one(u7_lab, tmp_path):
    t_test = time.monotonic()
    with ubis_coordinator(u7_lab, tmp_path, {"a": 1, "b": 1}, {"a": "refuse", "b": "refuse"},
                          preset_lines="pu_signal: measured\nusage_window_s: 5") as run:
        coord, store, drive = run.coord, run.store, run.drive
        assert coord.sampler.measure_pu and coord.lender is None
        data = run.deployed({"a": ["h1"], "b": ["h2"]})
        ja = store.submit_job("a", [str(BURN), f"file://{data}", "{output}", "200", "1.0"]).id
        jb = store.submit_job("b", [str(SLEEP), "{output}", "200", "4"]).id

        def framework(name):
            spec, driver = coord.fleet.spec(name)
            fs = driver.metrics(spec)
            return fs.busy_slots, fs.slots

        def full():
            return all(store.get_job(j).state == "running" for j in (ja, jb)) and all(
                (f := framework(n))[1] > 0 and f[0] >= f[1] for n in "ab")

        drive(full, 240, "both jobs holding all their slots")
        rows = []
        end = time.monotonic() + MEASURE_S
        while time.monotonic() < end:
            coord.sample()
            row = {"t": round(time.monotonic() - t_test, 1)}
            for n in "ab":
                s = store.samples(n)[-1]
                busy, slots = framework(n)
                row[n] = {"measured_busy": round(s.busy_slots, 3), "slots": s.configured_slots,
                          "occupied": busy, "framework_slots": slots}
            rows.append(row)
            time.sleep(1.0)
        states = {j: store.get_job(j).state for j in (ja, jb)}
        store.cancel_jobs([ja, jb])

    def share(n, key):
        return [r[n][key] / r[n]["slots"] for r in rows if r[n]["slots"]]

    summary = {n: {"measured_median": round(statistics.median(share(n, "measured_busy")), 3),
                   "occupied_median": round(statistics.median(share(n, "occupied")), 3),
                   "samples": len(share(n, "measured_busy"))} for n in "ab"}
    print(f"\nU-7 lab: {json.dumps(summary)}; jobs {states}", flush=True)
    doc = {**meta(), "hosts": f"2 lab hosts, {CPUS} cores and 3 GiB each (cgroup quotas of one 2-core machine)",
           "jobs": {"a": "burn.py 200 partitions x 1.0 core-s", "b": "sleep_tasks.py 200 tasks x 4 s"},
           "summary": summary, "rows": rows, "took_s": round(time.monotonic() - t_test)}
    out = os.environ.get("FAWKES_BENCH_OUT")
    if out:
        Path(out).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {out}")
    assert all(v == "running" for v in states.values()), states  # both held their slots throughout
    assert summary["a"]["occupied_median"] >= 0.99 and summary["b"]["occupied_median"] >= 0.99, summary
