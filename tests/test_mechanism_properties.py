"""Property-based tests of the spec's invariants (§A.13) over random snapshots."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from fawkes.mechanism import (
    ClusterMetrics, ClusterRequest, ClusterState, ClusterView, NodeView, Role, Settings, ShrinkMode, Snapshot,
    decide, get_policy, policy_names,
)

POLICIES = policy_names()
T = 60.0


@st.composite
def metrics(draw, t):
    return ClusterMetrics(
        time=t,
        unfinished_jobs=draw(st.integers(0, 20)),
        unfinished_input_bytes=draw(st.floats(0, 1e12)),
        pending_tasks=draw(st.integers(0, 500)),
        running_tasks=draw(st.integers(0, 100)),
        busy_slots=draw(st.floats(0, 80)),
        configured_slots=draw(st.sampled_from([0.0, 80.0, 160.0])),
        output_bytes=draw(st.floats(0, 1e12)),
        storage_capacity=draw(st.sampled_from([0.0, 1e12, 4e12])),
        mean_job_slowdown=draw(st.floats(0, 50)),
        completed_jobs=draw(st.integers(0, 100)),
        completed_tasks=draw(st.integers(0, 5000)),
        loading=draw(st.booleans()) and draw(st.booleans()),
    )


@st.composite
def snapshots(draw):
    n = draw(st.integers(1, 6))
    clusters, used = [], 0
    for i in range(n):
        m = draw(st.integers(1, 6))
        extra = draw(st.lists(st.tuples(st.sampled_from([Role.TR, Role.TC]), st.integers(0, 8),
                                         st.integers(0, 10**9), st.booleans()), max_size=8))
        nodes = [NodeView(f"k{i}-c{j}", Role.CORE) for j in range(m)]
        nodes += [NodeView(f"k{i}-x{j}", r, running_tasks=rt, stored_bytes=sb, added_at=float(j),
                           draining=dr and draw(st.booleans()))
                  for j, (r, rt, sb, dr) in enumerate(extra)]
        held = len(nodes)
        used += held
        change = draw(st.floats(0, T))
        before = draw(st.integers(m, held + 3))
        samples = tuple(draw(metrics(t)) for t in (15.0, 30.0, 45.0, 60.0)[: draw(st.integers(0, 4))])
        clusters.append(ClusterView(
            name=f"k{i}", state=draw(st.sampled_from([ClusterState.ACTIVE] * 4 + [ClusterState.LOADING])),
            min_core=m, nodes=tuple(nodes), samples=samples, allocation=((0.0, before), (change, held)),
            slots_per_node=8,
        ))
    free = draw(st.integers(0, 12))
    queue = tuple(ClusterRequest(f"q{j}", draw(st.integers(1, 8)), float(j)) for j in range(draw(st.integers(0, 3))))
    return Snapshot(now=T, capacity=used + free, free_hosts=tuple(f"free{j}" for j in range(free)),
                    clusters=tuple(clusters), queue=queue)


@st.composite
def configs(draw):
    return Settings(
        policy=draw(st.sampled_from(POLICIES)),
        period_s=T,
        tau=draw(st.sampled_from([0.0, 10.0, 1e3, math.inf])),
        grow_type=draw(st.sampled_from([Role.TR, Role.TC])),
        lam=draw(st.floats(0, 1)),
        cap_to_demand=draw(st.booleans()) and draw(st.booleans()),
        shrink_after_ticks=draw(st.sampled_from([1, 1, 2, 4])),
        all_zero=draw(st.sampled_from(["hold", "equal"])),
    )


PROPS = hsettings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPS
@given(snapshots(), configs())
def test_weights_sum_to_one_over_the_allocated_clusters(snap, cfg):
    d = decide(snap, cfg)
    assert set(d.weights) == {c.name for c in snap.allocated}
    assert sum(d.weights.values()) == pytest.approx(1.0)
    assert all(w >= 0 for w in d.weights.values())


@PROPS
@given(snapshots(), configs())
def test_minima_kept_and_no_core_node_ever_removed(snap, cfg):
    d = decide(snap, cfg)
    for name, target in d.targets.items():
        minimum = snap.cluster(name).min_core if name not in d.admission.minima else d.admission.minima[name]
        assert target >= minimum
    removed: dict[str, int] = {}
    for s in d.plan.shrinks:
        view = snap.cluster(s.cluster)
        node = next(n for n in view.nodes if n.id == s.node)
        assert node.role is not Role.CORE and s.role is node.role
        assert not node.draining
        assert s.mode is (ShrinkMode.FP if node.role is Role.TR else ShrinkMode.DP)
        removed[s.cluster] = removed.get(s.cluster, 0) + 1
    for name, k in removed.items():
        view = snap.cluster(name)
        assert view.settled - k >= view.min_core


@PROPS
@given(snapshots(), configs())
def test_work_conservation_except_none(snap, cfg):
    d = decide(snap, cfg)
    if not d.gate_open or cfg.cap_to_demand:
        return
    pool = snap.capacity - sum(c.held for c in snap.clusters if c.name in d.deactivate)
    minima = sum(d.admission.minima.values()) + sum(c.min_core for c in snap.allocated if c.name not in d.deactivate)
    if minima <= pool:
        assert sum(d.targets.values()) == pool
    if cfg.policy == "None":
        raise AssertionError("None never opens the gate")


@PROPS
@given(snapshots(), configs())
def test_dp_removes_tc_nodes_in_non_decreasing_stored_bytes_after_all_tr(snap, cfg):
    d = decide(snap, cfg)
    for view in snap.clusters:
        mine = [s for s in d.plan.shrinks if s.cluster == view.name]
        if not mine:
            continue
        gone = {s.node for s in mine}
        nodes = {n.id: n for n in view.nodes}
        dp = [nodes[s.node].stored_bytes for s in mine if s.mode is ShrinkMode.DP]
        assert dp == sorted(dp)
        if dp:  # every live TR node went first
            assert all(n.id in gone for n in view.nodes if n.role is Role.TR and not n.draining)
            kept_tc = [n.stored_bytes for n in view.nodes if n.role is Role.TC and not n.draining and n.id not in gone]
            assert not kept_tc or max(dp) <= min(kept_tc)


@PROPS
@given(snapshots(), configs())
def test_grows_use_distinct_free_hosts_only(snap, cfg):
    d = decide(snap, cfg)
    hosts = [g.host for g in d.plan.grows]
    assert len(hosts) == len(set(hosts)) and set(hosts) <= set(snap.free_hosts)
    for g in d.plan.grows:
        assert g.role in (Role.CORE, cfg.grow_type)


@PROPS
@given(snapshots(), configs())
def test_infinite_tau_changes_nothing_but_admissions(snap, cfg):
    cfg = Settings(**(cfg.model_dump() | {"tau": math.inf}))
    d = decide(snap, cfg)
    if get_policy(cfg.policy).ungated or cfg.policy == "None":
        return
    admitted = set(d.admission.admitted)
    assert sum(1 for s in d.plan.shrinks) == sum(d.admission.reclaim.values()) or not d.admission.reclaim
    assert not any(s.cluster not in d.admission.reclaim for s in d.plan.shrinks)
    for g in d.plan.grows:  # only clusters below their minimum or just admitted grow
        assert g.cluster in admitted or snap.cluster(g.cluster).settled < snap.cluster(g.cluster).min_core


@PROPS
@given(snapshots(), configs())
def test_strict_fifo_admission(snap, cfg):
    d = decide(snap, cfg)
    order = [r.name for r in snap.queue]
    admitted = list(d.admission.admitted)
    assert admitted == order[: len(admitted)]  # a prefix of the queue, in order


@PROPS
@given(st.integers(0, 1000), st.integers(1, 1000), st.integers(0, 1000), st.floats(1.01, 10))
def test_throughput_weights_stay_in_one_over_a_to_one(completed, unfinished, tasks_done, a):
    cfg = Settings(a=a)
    for name in ("JT", "TT"):
        m = ClusterMetrics(time=0, completed_jobs=completed, unfinished_jobs=unfinished,
                           completed_tasks=tasks_done, pending_tasks=unfinished)
        y = get_policy(name).sample(m, cfg)
        assert 1 / a - 1e-12 <= y <= 1 + 1e-12
