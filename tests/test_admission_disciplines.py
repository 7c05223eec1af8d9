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
