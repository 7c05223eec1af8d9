"""The simulator as a twin of the service, on the lab: a short live session under TD (real coordinator,
real CPU-bound Spark jobs on CPU-limited hosts), exported with ``fawkes trace from-state`` and
replayed with ``fawkes simulate --trace --cost-file``: each cluster's mean slowdown within the band.

4 hosts of 0.5 CPU and 2 GiB, two MR-clusters of 1 core node, TD with TC growth at T = 10 s; three
jobs (two on etl, one on bi).  About 3-4 minutes.  The slowdowns are against a fixed R (the same
for live and replay: it is stored with each job), so the check compares response times.
"""

from __future__ import annotations

import json
import os

import pytest

from fawkes.demo import DemoPlan, Session, preset_for, run_stream
from fawkes.errors import FawkesError
from tests.conftest import run_cli, unavailable

pytestmark = [pytest.mark.lab, pytest.mark.spark]

PREFIX = os.environ.get("FAWKES_TEST_LAB_PREFIX", "fwt") + "tw"
PLAN = DemoPlan(hosts=4, cpus=0.5, memory="2G", clusters=("etl", "bi"), partitions=6, core_s=1.5,
            stream=((0, "etl"), (5, "etl"), (10, "bi")))
R = 60.0
BAND = 0.25  # per cluster |replay - live| / live; docs/live.md gives the measured figures


def test_replay_of_a_live_session_lands_in_the_band(tmp_path):
    import yaml

    try:
        s = Session(tmp_path, PLAN, prefix=PREFIX, say=lambda m: None)
    except FawkesError as exc:
        unavailable(f"lab with CPU quotas cannot start: {exc}")
    try:
        s.setup_clusters()
        out = run_stream(s, "TD", R)
        s.stop()
    finally:
        s.close()
    assert max(out.peak_nodes().values()) >= 2, f"nothing grew: {out.allocation}"
    trace, costs, clusters = tmp_path / "t.csv", tmp_path / "c.yaml", tmp_path / "cl.csv"
    r = run_cli("trace", "from-state", "--state", s.url, "--since", str(out.start - 1), "-o", str(trace),
                "--costs", str(costs), "--clusters", str(clusters))
    assert r.returncode == 0, r.stderr
    assert len(trace.read_text().splitlines()) == 1 + len(PLAN.stream), trace.read_text()
    measured = yaml.safe_load(costs.read_text())
    assert measured["map_slots"] == 1 and measured["tc_ready_s"] > 0, measured
    from fawkes.store import Store

    with Store(s.url) as st:  # where each job's tasks ended, from its driver (jobs.task_time)
        where = {j.id: j.task_time for j in st.list_jobs()}
    assert len(where) == len(PLAN.stream) and all(w and w["master"][0] > 0 for w in where.values()), where
    print("task_time", where, "master_task_factor", measured.get("master_task_factor"))
    preset = tmp_path / "TD.yaml"
    preset.write_text(yaml.safe_dump(preset_for("TD", PLAN)))
    r = run_cli("simulate", "--trace", str(trace), "--cost-file", str(costs), "--clusters", str(clusters),
                "--capacity", str(PLAN.hosts), "--min-core", "1", "--period", str(PLAN.period_s),
                "--policy", str(preset), "--seeds", "3", "--json", "-q", "--workers", "1")
    assert r.returncode == 0, r.stderr
    sim = json.loads(r.stdout)["cluster_mean_slowdown"]
    live = out.slowdowns()
    off = {c: abs(sim[c] - live[c]) / live[c] for c in live}
    print("live", live, "replay", sim, "off", off)
    assert all(v <= BAND for v in off.values()), (live, sim)
