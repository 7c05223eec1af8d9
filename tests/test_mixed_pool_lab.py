"""A mixed pool, live (issue 24, the short seeded version of bench/bench_mixed_pool.py): one coordinator,
one Spark (spark-hdfs), one Flink (flink-hdfs) and one Dask MR-cluster on the same 5 lab hosts of 0.33 CPU
and 2 GiB each, TD at T = 10 s growing by transient nodes.  One burst of CPU-bound Flink jobs (FlinkBurn):
TD grows the Flink cluster with hosts no other cluster holds, the Spark and Dask clusters stay at their
minimum, every job succeeds, no host is held by two clusters at once, and each cluster's output, saved
when it is released, holds the exact word counts of its input.  About 5 minutes.
"""

from __future__ import annotations

import collections
import json
import os

import pytest

from fawkes.demo import DemoPlan, Session, run_stream
from fawkes.errors import FawkesError
from fawkes.ssh.shell import Script
from tests.conftest import unavailable

pytestmark = [pytest.mark.lab, pytest.mark.spark]

PREFIX = os.environ.get("FAWKES_TEST_LAB_PREFIX", "fwt") + "mx"
PLAN = DemoPlan(hosts=5, cpus=0.33, memory="2G", clusters=("sp", "fl", "dk"),
                kinds=("spark-hdfs", "flink-hdfs", "dask"), grow_type="transient", partitions=8, core_s=1.0,
                stream=((0, "fl"), (5, "fl")))


def held_twice(store) -> list[str]:
    """Hosts held by two clusters over overlapping intervals (from the nodes' records)."""
    spans = collections.defaultdict(list)
    for c in store.list_clusters():
        for n in store.list_nodes(c.name, live=False):
            spans[n.host].append((n.requested_at, n.released_at or float("inf"), c.name))
    bad = []
    for host, ss in spans.items():
        ss.sort()
        for (a0, a1, ca), (b0, _, cb) in zip(ss, ss[1:]):
            if b0 < a1 and ca != cb:
                bad.append(f"{host}: {ca} until {a1}, {cb} from {b0}")
    return bad


def test_td_grows_the_loaded_cluster_of_another_kind_on_a_mixed_pool(tmp_path):
    try:
        s = Session(tmp_path, PLAN, prefix=PREFIX, say=lambda m: None)
    except FawkesError as exc:
        unavailable(f"lab with CPU quotas cannot start: {exc}")
    try:
        s.setup_clusters()
        out = run_stream(s, "TD", 60.0)
        peak = out.peak_nodes()
        s.release()
        saved = {c.name: json.loads(c.saved_output or "null") for c in s.store.list_clusters()}
        counts = saved_counts(s.lab, saved["fl"])  # on the master's host (its own node/): before the lab goes
        problems = held_twice(s.store)
    finally:
        s.close()
    assert all(j["state"] == "succeeded" for j in out.jobs), out.jobs
    assert peak["fl"] >= 2, f"the Flink cluster did not grow: {out.allocation}"
    assert peak["sp"] == 1 and peak["dk"] == 1, f"an idle cluster grew: {out.allocation}"
    assert not problems, problems
    for idle in ("sp", "dk"):  # no job ran there: nothing to save, or an empty output directory saved
        assert saved[idle] is not None and saved[idle].get("files", 0) == 0, saved
    want = collections.Counter((tmp_path / "fl.txt").read_text().split())
    assert saved["fl"] and len(counts) == len(PLAN.stream), (saved["fl"], counts)
    for job, got in counts.items():
        assert got == want, f"job {job}: the counts differ from the input"


def saved_counts(lab, saved: dict | None) -> dict[str, collections.Counter]:
    """Per job directory of a saved output (on its host, checked against its manifest), its word counts
    (``word<TAB>count`` lines of its part files)."""
    if not saved or "path" not in saved:
        return {}
    with lab.executor(command_timeout=60) as ex:
        r = ex.run([saved["host"]], Script("cd {d} && sha256sum -c --quiet MANIFEST.sha256 && "
                                           "for f in */part-*; do sed \"s|^|${{f%%/*}}\t|\" \"$f\"; done",
                                           d=saved["path"]))[saved["host"]]
    assert r.ok, r.stderr
    out: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for line in r.stdout.splitlines():
        job, w, c = line.split("\t")
        out[job][w] += int(c)
    return dict(out)
