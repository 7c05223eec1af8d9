"""The control loop as a value (fawkes.mechanism.controller): memory in, plan and next memory out.

Regression tests for issue 13's list (3a-3f): each pins one disagreement the two drivers had
when each kept the loop's memory its own way.
"""

from __future__ import annotations

import json
import math

import pytest

from fawkes.mechanism import (
    ClusterMemory, ClusterMetrics, ClusterRequest, ClusterState, ClusterView, Memory, Role, Settings, Snapshot, controller,
    weighted_targets,
)
from fawkes.mechanism.admission import reclaim_from
from fawkes.mechanism.targets import remainder_order
from tests.mechanism_helpers import cluster, demand, memory


# --- 3f: largest remainder without float noise -------------------------------------------------

def test_exact_share_ties_go_to_admission_order_not_to_float_noise():
    # 34 * .6 / .8 = 25.4999... in floats: the tie .5/.5 used to go to b (25/9/14)
    assert weighted_targets(48, ["a", "b", "c"], {"a": .6, "b": .2, "c": .2}, {"a": 13, "b": 8, "c": 14}) == \
        {"a": 26, "b": 8, "c": 14}
    # the one tie rule: admission order, whatever the names
    assert weighted_targets(48, ["z", "b", "c"], {"z": .6, "b": .2, "c": .2}, {"z": 13, "b": 8, "c": 14}) == \
        {"z": 26, "b": 8, "c": 14}
    assert remainder_order({"x": 0.1 + 0.2 - 0.3, "y": 0.0}, ["y", "x"]) == ["y", "x"]


def test_reclaim_ties_follow_admission_order():
    s = Settings(admission_reclaim="weights")
    assert reclaim_from(1, {"b": 3, "a": 3}, {"a": 0.5, "b": 0.5}, s) == {"b": 1}
    assert reclaim_from(1, {"a": 3, "b": 3}, {"a": 0.5, "b": 0.5}, s) == {"a": 1}


# --- 3d: EQ and clusters without a sample ----------------------------------------------------

def test_eq_gives_an_unsampled_cluster_its_equal_share():
    a = cluster("a", 5, tr=5, samples=[demand(50, 10)])
    b = cluster("b", 5, tr=5)  # admitted less than a sample period ago: no sample yet
    snap = Snapshot(now=60, capacity=20, clusters=(a, b))
    d, _ = controller.tick(Memory(), snap, Settings(policy="EQ"))
    assert d.weights == {"a": 0.5, "b": 0.5} and d.targets == {"a": 10, "b": 10}


def test_eq_rebalances_even_when_no_cluster_has_a_sample():
    a = cluster("a", 5, tr=9)
    b = cluster("b", 5, tr=1)
    d, _ = controller.tick(Memory(), Snapshot(now=60, capacity=20, clusters=(a, b)), Settings(policy="EQ"))
    assert d.gate_open and d.targets == {"a": 10, "b": 10} and len(d.plan.shrinks) == 4


# --- 3e: cooldown never holds a cluster below its minimum --------------------------------------

def test_cooldown_keeps_at_least_the_minimum():
    below = cluster("a", 2, min_core=3, samples=[demand(t, 10) for t in (20, 40, 60)])  # a core node was lost
    snap = Snapshot(now=60, capacity=4, free_hosts=("f1", "f2"), clusters=(below,))
    s = Settings(policy="TD", tau=0, cooldown_s=60)
    d, _ = controller.tick(memory(a=dict(last_shrink_at=50.0)), snap, s)
    assert d.targets["a"] >= 3 and [(g.host, g.role) for g in d.plan.grows] == [("f1", Role.CORE)]


# --- 3c: the cooldown clock starts on tick plans only -----------------------------------------

def test_cooldown_clock_starts_on_tick_plans_not_on_refill_or_admission():
    s = Settings(policy="TD", tau=0, grow_type=Role.TR, cooldown_s=300)
    a = cluster("a", 2, samples=[demand(t, 50) for t in (20, 40, 60)])
    b = cluster("b", 2, samples=[demand(t, 0) for t in (20, 40, 60)])
    free = tuple(f"f{i}" for i in range(4))
    d, mem = controller.tick(Memory(), Snapshot(now=60, capacity=8, free_hosts=free, clusters=(a, b)), s)
    assert len(d.plan.grows) == 4 and mem.of("a", 0.0).last_grow_at == 60 and mem.of("b", 0.0).last_grow_at is None
    # refill: a is below its standing target (say 2 of its grows failed); growing again starts no clock
    stand = memory(a=dict(target=6, last_grow_at=60.0), b=dict(target=2))
    snap = Snapshot(now=90, capacity=8, free_hosts=("f2", "f3"), clusters=(cluster("a", 2, tr=2), b))
    step = controller.between(stand, snap, s)
    assert len(step.refill_plan.grows) == 2 and step.memory == stand
    # admission reclaims from a: no shrink clock either, but a's standing target drops
    q = Snapshot(now=95, capacity=8, clusters=(cluster("a", 2, tr=4), b), queue=(ClusterRequest("c", 2, 94.0),))
    step = controller.between(memory(a=dict(target=6, weight=1.0), b=dict(target=2)), q, s)
    assert step.admission.admitted == ("c",) and len(step.admission_plan.shrinks) == 2
    assert step.memory.of("a", 0.0).last_shrink_at is None and step.memory.of("a", 0.0).target == 4
    assert step.memory.of("c", 94.0).target == 2


# --- 3a (pure half): an admission's reclaim is remembered, so refill does not undo it ---------

def test_freed_hosts_go_to_the_admitted_cluster_not_back_to_the_donor():
    s = Settings(policy="TD", tau=0, grow_type=Role.TC, period_s=60)
    a, b = cluster("a", 2, tc=4), cluster("b", 2)
    q = Snapshot(now=100, capacity=8, clusters=(a, b), queue=(ClusterRequest("c", 4, 99.0),))
    mem = memory(a=dict(target=6, weight=1.0), b=dict(target=2))
    step = controller.between(mem, q, s)
    assert step.admission.reclaim == {"a": 4} and {x.node for x in step.admission_plan.shrinks} == \
        {"a-t0", "a-t1", "a-t2", "a-t3"}
    # the four are released; c is DEPLOYING without nodes; the next between grows c, not a
    c = ClusterView("c", ClusterState.DEPLOYING, 4, since=99.0)
    later = Snapshot(now=130, capacity=8, free_hosts=("f1", "f2", "f3", "f4"), clusters=(cluster("a", 2), b, c))
    nxt = controller.between(step.memory, later, s)
    assert [(g.cluster, g.role) for g in nxt.refill_plan.grows] == [("c", Role.CORE)] * 4


# --- 3b: cumulative discrimination is carried --------------------------------------------------

def test_cumulative_discrimination_is_carried_by_the_memory():
    def snap(now):
        a = cluster("a", 4, samples=[demand(now - 10, 30)], allocation=((0.0, 4),))
        b = cluster("b", 4, samples=[demand(now - 10, 10)], allocation=((0.0, 4),))
        return Snapshot(now=now, capacity=8, clusters=(a, b))

    inter = Settings(policy="TD", tau=math.inf, discrimination_window="interval")
    cumul = Settings(policy="TD", tau=math.inf, discrimination_window="cumulative")
    m_i, m_c = Memory(), Memory()
    total = 0.0
    for now in (60, 120, 180):
        d_i, m_i = controller.tick(m_i, snap(now), inter)
        d_c, m_c = controller.tick(m_c, snap(now), cumul)
        total += d_i.discrimination["a"]
        assert d_c.discrimination["a"] == pytest.approx(total)
    assert m_c.of("a", 0.0).discrimination == pytest.approx(total) == m_i.of("a", 0.0).discrimination
    assert total == pytest.approx(3 * 60 * (0.5 - 0.75))


# --- the memory itself ---------------------------------------------------------------------------

def test_idle_clock_folds_each_sample_once_and_a_new_incarnation_starts_fresh():
    s = Settings(policy="TD", period_s=60, tau=math.inf)
    idle = [ClusterMetrics(time=t) for t in (20, 40, 60)]
    a = cluster("a", 2, samples=idle)
    _, mem = controller.tick(Memory(), Snapshot(now=60, capacity=2, clusters=(a,)), s)
    assert mem.of("a", 0.0).idle_since == 20 and mem.of("a", 0.0).seen == 60
    d, mem = controller.tick(mem, Snapshot(now=120, capacity=2, clusters=(cluster("a", 2, samples=(idle[-1],)),)), s)
    assert d.deactivate == ("a",)  # idle since 20 >= T_idle = 60 s: leaves (the stand-in sample is not re-folded)
    assert mem.as_dict() == {}  # a leaves: its entry goes
    again = ClusterView("a", ClusterState.ACTIVE, 2, nodes=cluster("a", 2).nodes, since=500.0)
    assert mem.of("a", 500.0) == ClusterMemory(since=500.0)
    _, mem = controller.tick(memory(a=dict(target=9)), Snapshot(now=560, capacity=2, clusters=(again,)), s)
    assert mem.of("a", 500.0).target == 2  # the old incarnation's target 9 is not this one's


def test_memory_round_trips_through_json_and_refuses_malformed_values():
    mem = memory(a=dict(weight=0.25, target=7, shrink_votes=2, discrimination=-1.5, idle_since=10.0, seen=55.0,
                        last_grow_at=3.0))
    doc = json.loads(json.dumps(mem.to_json()))
    assert Memory.from_json(doc) == mem and Memory.from_json(None) == Memory()
    for bad in ({"format": 2}, {"format": 1, "ticks": -1},
                {"format": 1, "clusters": {"a": {"since": 0, "weight": float("nan")}}},
                {"format": 1, "clusters": {"a": {"since": 0, "target": "9"}}},
                {"format": 1, "clusters": {"a": {"weight": 1}}},
                {"format": 1, "clusters": {"a": {"since": 0, "bogus": 1}}}):
        with pytest.raises(ValueError, match="controller memory"):
            Memory.from_json(bad)
