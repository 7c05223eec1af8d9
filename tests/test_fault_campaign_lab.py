"""A short seeded fault campaign (bench/fault_campaign.py) on the session lab: kill -9 at named points.

The real coordinator runs 2 MR-clusters (1 core node each) on 4 of the lab's hosts with a stream of
real word counts (the long campaign in bench/ runs 3 on 6); it is killed with SIGKILL 4 times (at named steps of grows, DP shrinks and dispatches,
through the fault hook ``FAWKES_FAULT_POINT``, and at seeded random times), restarted each time, and
after every kill: no host held twice or leaked (store and the daemons on the hosts), no core node
removed, no job lost; after every restart HDFS fsck HEALTHY and checksums unchanged; at the end every
job succeeded once with exact output and nothing is left after release.  Meanwhile the coordinator
balanced: every cluster grew, the one under a burst beyond an equal split, and nodes left by DP.
This is the suite's end-to-end run of the coordinator (it replaced a separate 3-cluster test with
two kills).  The long run (100+ kills) is ``python3 bench/fault_campaign.py`` (docs/reliability.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import yaml

from bench.fault_campaign import RANDOM, Campaign, print_table, schedule
from fawkes import faults
from fawkes.frameworks import dists
from tests.conftest import REPO, cluster_dirs_marker, pids_with_cmdline

pytestmark = [pytest.mark.lab, pytest.mark.spark]


def test_fault_hook_refuses_a_malformed_point(tmp_path):
    for bad, why in (("nope", "unknown point 'nope'"), ("job-dispatched:0", "N must be a whole number"),
                     ("job-dispatched:1e3", "N must be a whole number"), ("job-dispatched:\n2", "not '\\n2'")):
        r = subprocess.run([sys.executable, "-m", "fawkes", "coordinator", "run", "--config",
                            str(tmp_path / "none.yaml")], capture_output=True, text=True, cwd=REPO,
                           env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "FAWKES_FAULT_POINT": bad})
        assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and why in r.stderr, (bad, r.stderr)
    assert not list(tmp_path.iterdir())
    assert faults.parse("node-released:3") == ("node-released", 3) and faults.parse("") is None


def test_short_seeded_campaign(lab, tmp_path):
    d = dists.ensure_lab_dists()
    inv = yaml.safe_load(lab.inventory_path.read_text())
    inv["hosts"] = inv["hosts"][:4]
    kept = {h["name"] for h in inv["hosts"]}
    inv["groups"] = {g: [h for h in members if h in kept] for g, members in (inv.get("groups") or {}).items()}
    inventory = lab.inventory_path.parent / "inventory-campaign.yaml"  # its relative key paths stay valid
    inventory.write_text(yaml.safe_dump(inv))
    # The kills' seed changes with every run (the clock's) unless FAWKES_CAMPAIGN_SEED names one; it is
    # printed first, so a failing run can be repeated.  The job stream (which cluster gets each burst) keeps
    # seed 3, so the balancing checks below hold whatever the kills: with the stream of seed 37729 cluster c
    # got one burst, late, and never grew beyond its first share.
    seed = int(os.environ.get("FAWKES_CAMPAIGN_SEED") or time.time()) % 100000
    print(f"fault campaign seed {seed} (FAWKES_CAMPAIGN_SEED={seed} repeats it), job stream seed 3", flush=True)
    # 4 kills, one of them (a share of 0.25) at a seeded random time, three at named points.  The kills could end before the stream reached a
    # cluster (c got no job in the clean-clone CIs of 6a936b7 and 7730e92): the bursts now go to one cluster
    # after the other, and Campaign.finish sends a cluster still without one its burst after the last kill,
    # so every cluster has had jobs and a chance to grow (8 kills and a late burst took 559 s in the CI of
    # efe1a98, beside the rest of the suite)
    plan = schedule(4, seed=seed, random_share=0.25)
    assert plan == schedule(4, seed=seed, random_share=0.25) and [p for p, _ in plan].count(RANDOM) == 1
    lines: list[str] = [f"seed {seed}"]
    camp = Campaign(inventory, lab.node_dir, (str(d.spark_home), str(d.hdfs_home)), tmp_path, seed=seed,
                    point_timeout=60, lines=200, log=lines.append, stream_seed=3, clusters=("a", "b"))
    try:
        camp.setup()
        for point, delay in plan:
            camp.kill(point, delay)
        exact = camp.finish()
    finally:
        camp.close()
        inventory.unlink(missing_ok=True)
    rows = camp.table(exact)
    print_table(rows, lines.append)
    print("\n".join(lines))
    assert not camp.violations, camp.violations
    named = [r for r in rows if r["point"] not in (RANDOM, "final")]
    assert sum(r["killed_at_point"] for r in named) >= 2, "named points must be reached"
    assert len(camp.jobs) >= 4 and all(exact.values()) and len(exact) == len(camp.jobs)
    # HDFS checked after the setup, after every kill (with the coordinator down when it died within 3 s: the
    # CI of d4dba4a killed twice under 2 s and checked 4 times, not 5) and at the end
    assert camp.hdfs_checks == len(plan) + 2, (camp.hdfs_checks, len(plan))
    assert camp.checksums and camp.checksums_compared > 0  # files compared again after restarts, not an empty check
    # released at the end, killed once between a recorded save and its teardown: every job's saved output exact
    assert camp.saved_checked == len(camp.jobs), (camp.saved_checked, len(camp.jobs))
    # the coordinator balanced meanwhile: the idle clusters got the free hosts, the cluster under a burst
    # grew beyond an equal split (2 of 4 hosts), and nodes left by DP when the burst moved on
    print("moves per cluster", camp.moves)
    assert all(m["grown"] >= 1 for m in camp.moves.values()), camp.moves
    assert max(m["peak"] for m in camp.moves.values()) >= 3, camp.moves
    assert sum(m["dp"] for m in camp.moves.values()) >= 2, camp.moves
    assert not pids_with_cmdline(cluster_dirs_marker(lab)), "daemons left running"
