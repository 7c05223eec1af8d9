"""Admission disciplines (issue 12; the YARN placement project's P-2, P-3): fifo, sjf, utility,
skip_unfittable, the deadline purge and its starvation guard.  Pure functions on snapshots."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fawkes.mechanism import ClusterRequest, Settings, Snapshot, admit, decide
from fawkes.mechanism.admission import admission_key, queue_order
from fawkes.mechanism.controller import between
from fawkes.mechanism.memory import Memory
from tests.mechanism_helpers import cluster


def _snap(queue, *, now=100.0, free=10, capacity=30, busy=(("a", 10), ("b", 10))):
    return Snapshot(now=now, capacity=capacity, free_hosts=tuple(f"f{i}" for i in range(free)),
                    clusters=tuple(cluster(n, k) for n, k in busy), queue=tuple(queue))


def req(name, m=2, at=0.0, dur=None, maxT=None):
    return ClusterRequest(name, m, at, dur, maxT)


QUEUE = (req("long", dur=300.0, maxT=1000.0), req("short", at=1.0, dur=60.0, maxT=500.0),
         req("unknown", at=2.0), req("mid", at=3.0, dur=120.0, maxT=2000.0))


def test_defaults_keep_request_order_and_purge_nothing():
    q = queue_order(_snap(QUEUE), Settings())
    assert [r.name for r in q.requests] == ["long", "short", "unknown", "mid"]
    assert q.purged == () and q.starving == frozenset()


def test_sjf_takes_the_shortest_expected_duration_first_unknown_last():
    q = queue_order(_snap(QUEUE), Settings(admission_order="sjf"))
    assert [r.name for r in q.requests] == ["short", "mid", "long", "unknown"]


def test_utility_takes_the_highest_slack_first_no_deadline_last():
    # U = maxT - dur - waited at now=100: long 600, short 341, mid 1783
    snap = _snap(QUEUE)
    assert [snap.queue[i].slack(100.0) for i in (0, 1, 3)] == [600.0, 341.0, 1783.0]
    q = queue_order(snap, Settings(admission_order="utility"))
    assert [r.name for r in q.requests] == ["mid", "long", "short", "unknown"]


def test_purge_drops_requests_that_would_miss_their_deadline_and_only_with_the_setting():
    # at now=450, short (maxT 500, 60 s of work, waited 449) can no longer finish in time
    snap = _snap(QUEUE, now=450.0)
    assert queue_order(snap, Settings()).purged == ()
    q = queue_order(snap, Settings(deadline_purge=True))
    assert q.purged == ("short",) and "short" not in [r.name for r in q.requests]
    adm = admit(snap, {}, Settings(deadline_purge=True))
    assert adm.purged == ("short",) and "short" not in adm.admitted + adm.waiting
    # exactly at the limit (waited = maxT - dur) it still can: purged only past it
    edge = _snap((req("x", at=0.0, dur=60.0, maxT=500.0),), now=440.0)
    assert queue_order(edge, Settings(deadline_purge=True)).purged == ()


def test_starvation_guard_puts_near_zero_slack_first():
    # utility order would take mid first; long's slack (1000-300-650=50) is below the guard of 60
    snap = _snap(QUEUE, now=650.0)
    q = queue_order(snap, Settings(admission_order="utility", starvation_guard_s=60.0))
    assert q.requests[0].name == "long" and "long" in q.starving
    # without maxT a request starves after waiting the guard's time
    q = queue_order(_snap((req("old", at=0.0), req("new", at=50.0, dur=1.0)), now=100.0),
                    Settings(admission_order="sjf", starvation_guard_s=100.0))
    assert [r.name for r in q.requests] == ["old", "new"] and q.starving == {"old"}


def test_skip_unfittable_admits_what_fits_the_free_hosts_instead_of_waiting_for_the_head():
    queue = (req("big", 12, 1.0), req("small", 5, 2.0))
    snap = _snap(queue, free=10, capacity=33)  # big fits the minima (20+12 <= 33) but not the 10 free hosts
    strict = admit(snap, {}, Settings())
    assert strict.admitted == ("big",)  # FIFO: the head goes first, reclaiming 2 nodes
    skip = admit(snap, {}, Settings(skip_unfittable=True))
    assert skip.admitted == ("small",) and skip.waiting == ("big",) and not skip.reclaim
    # the starvation guard stops the skipping: big has waited 99 s >= 90
    guarded = admit(snap, {}, Settings(skip_unfittable=True, starvation_guard_s=90.0))
    assert guarded.admitted == ("big",) and guarded.waiting == ("small",)


def test_requests_admitted_together_take_their_places_in_request_order():
    snap = _snap((req("late", 2, 5.0, dur=500.0), req("early", 2, 6.0, dur=10.0)), free=10)
    adm = admit(snap, {}, Settings(admission_order="sjf"))
    assert adm.admitted == ("late", "early")  # considered early-first, placed in request order
    assert admission_key(10.0, 1) < admission_key(10.0, 2) < admission_key(11.0, 0)


def test_a_tick_and_a_between_step_report_purges_and_remember_nothing_for_them():
    snap = _snap((req("doomed", 2, 0.0, dur=100.0, maxT=150.0), req("ok", 2, 10.0)), now=120.0, free=4)
    s = Settings(deadline_purge=True)
    d = decide(snap, s)
    assert d.admission.purged == ("doomed",) and d.admission.admitted == ("ok",)
    b = between(Memory(), snap, s)
    assert b.admission.purged == ("doomed",) and not b.empty
    assert "doomed" not in dict(b.memory.clusters)


@pytest.mark.parametrize("field,value", [
    ("admission_order", "lifo"), ("admission_order", 1), ("skip_unfittable", "yes"), ("skip_unfittable", 1),
    ("deadline_purge", None), ("starvation_guard_s", float("nan")), ("starvation_guard_s", float("inf")),
    ("starvation_guard_s", -1.0), ("starvation_guard_s", 10**30), ("starvation_guard_s", True),
])
def test_bad_values_are_refused(field, value):
    with pytest.raises(ValidationError):
        Settings(**{field: value})


# --- the inputs: preset fields and the request's estimates, refused in one line -------------------

def _fawkes(*args, state=None):
    from tests.test_cli_conventions import inproc  # FAWKES_* unset, the test's state only
    return inproc(*args, state=state)


@pytest.mark.parametrize("line,field", [
    ("starvation_guard_s: .nan", "starvation_guard_s"), ("starvation_guard_s: .inf", "starvation_guard_s"),
    ("starvation_guard_s: -5", "starvation_guard_s"), ("starvation_guard_s: 1000000000000000000000000000000",
                                                       "starvation_guard_s"),
    ("deadline_purge: 1", "deadline_purge"), ("skip_unfittable: yes please", "skip_unfittable"),
    ("admission_order: lifo", "admission_order"), ("admission_order: true", "admission_order"),
])
def test_a_bad_preset_field_is_one_line_naming_file_and_field(tmp_path, line, field):
    preset = tmp_path / "mine.yaml"
    preset.write_text(f"policy: TD\n{line}\n")
    r = _fawkes("policy", "show", str(preset))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and str(preset) in lines[0] and field in lines[0], r.stderr
    assert not r.stdout


def test_a_good_preset_sets_the_disciplines(tmp_path):
    from fawkes.presets import load_preset

    preset = tmp_path / "mine.yaml"
    preset.write_text("policy: TD\nadmission_order: utility\nskip_unfittable: true\ndeadline_purge: true\n"
                      "starvation_guard_s: 120\n")
    s = load_preset(str(preset))
    assert (s.admission_order, s.skip_unfittable, s.deadline_purge, s.starvation_guard_s) == ("utility", True, True, 120.0)


def test_request_estimates_are_stored_and_bad_ones_refused(tmp_path):
    import json

    from fawkes.store import Store

    url = f"sqlite:///{tmp_path / 'state.db'}"
    with Store(url) as s:
        s.register_framework("spark", "spark", spark_home="/opt/spark")
        s.sync_hosts([{"name": f"n{i}", "cores": 2} for i in range(3)])
    r = _fawkes("cluster", "request", "a", "-f", "spark", "-m", "1", "--expected-duration", "300", "--deadline",
                "1200", "--json", state=url)
    assert r.returncode == 0, r.stderr
    c = json.loads(r.stdout)
    assert (c["expected_duration_s"], c["deadline_s"]) == (300.0, 1200.0)
    for flag, value in (("--deadline", "nan"), ("--deadline", "inf"), ("--deadline", "-1"), ("--deadline", "0"),
                        ("--expected-duration", "1e30"), ("--expected-duration", "nan")):
        bad = _fawkes("cluster", "request", "b", "-f", "spark", "-m", "1", flag, value, state=url)
        lines = bad.stderr.strip().splitlines()
        assert bad.returncode == 2 and len(lines) == 1 and flag.strip("-").replace("-", "_") in lines[0], bad.stderr
    with Store(url) as s:
        assert [c.name for c in s.list_clusters()] == ["a"]  # nothing written by the refused ones


def test_the_clock_alone_makes_a_request_purgeable_or_starving_and_the_simulator_wakes_for_it():
    import math

    from fawkes.mechanism.admission import next_queue_change

    snap = _snap((req("d", 2, 0.0, dur=100.0, maxT=500.0), req("n", 2, 50.0)), now=10.0)
    assert next_queue_change(snap, Settings()) is None
    assert next_queue_change(snap, Settings(deadline_purge=True)) == math.nextafter(400.0, math.inf)
    assert next_queue_change(snap, Settings(starvation_guard_s=60.0)) == 110.0  # n has waited 60 s
    at = next_queue_change(snap, Settings(deadline_purge=True))
    later = Snapshot(at, snap.capacity, snap.free_hosts, snap.clusters, snap.queue)
    assert queue_order(later, Settings(deadline_purge=True)).purged == ("d",)
    assert queue_order(Snapshot(400.0, 30, (), (), snap.queue), Settings(deadline_purge=True)).purged == ()


def test_the_simulator_purges_at_the_moment_a_request_can_no_longer_make_it():
    """c0 holds the whole pool; c1 (maxT 100 s, 30 s of work) waits from t = 10 and is purged just
    after t = 80, between ticks (T = 60), its job dropped; without the purge it waits for c0."""
    import numpy as np

    from fawkes.sim.costs import cost_model
    from fawkes.sim.engine import Simulator
    from fawkes.sim.record import Recorder
    from fawkes.sim.workloads import GB, WorkloadCluster, Workload, make_job

    cost = cost_model((), map_slots=2, reduce_slots=1)
    rng = np.random.default_rng(0)
    specs = (WorkloadCluster("c0", 0.0, 4, 1 * GB), WorkloadCluster("c1", 10.0, 1, 1 * GB, preloaded=False,
                                                            expected_duration_s=30.0, deadline_s=100.0))
    jobs = (make_job(cost, rng, 0, "c0", "wordcount", 64 * 2**20 * 200, 200, 1, 0.0, map_s=20.0),
            make_job(cost, rng, 1, "c1", "wordcount", 64 * 2**20 * 4, 4, 1, 12.0, map_s=5.0))
    wl = Workload("purge", specs, jobs, 4, period_s=60.0, cost=cost)
    rec = Recorder()
    sim = Simulator(wl, Settings(policy="TD", period_s=60.0, sample_period_s=10.0, deadline_purge=True),
                    recorder=rec, check_invariants=True).run()
    assert sim.stats.purged == ["c1"] and sim.stats.purged_jobs == 1 and sim.stats.invariant_errors == []
    gone = [e.time for e in rec.events if e.kind == "state" and e.cluster == "c1" and e.data.value == "released"]
    assert len(gone) == 1 and 80.0 < gone[0] < 80.001
    keep = Simulator(wl, Settings(policy="TD", period_s=60.0, sample_period_s=10.0)).run()
    assert keep.stats.purged == [] and "c1" in keep.stats.admission_latency
