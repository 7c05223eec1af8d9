"""The FAWKES mechanism against the thesis' numbers and the spec's worked examples."""

from __future__ import annotations

import math

import pytest

from fawkes.mechanism import (
    ClusterMetrics, ClusterRequest, ClusterState, JobFacts, NodeView, Role, Settings, ShrinkMode, Snapshot,
    admit, admit_now, decide, get_policy, is_inactive, next_idle_since, refill, sample_cluster, weighted_targets,
)
from fawkes.mechanism.contention import transient_write_contention
from fawkes.mechanism.discrimination import global_factor, held_integral, interval_discrimination
from fawkes.mechanism.koala_mr import ResizeParams, on_offer, resizing_ratio
from fawkes.mechanism.policies import normalise
from tests.mechanism_helpers import cluster, demand, memory


# --- weights (eq. 3.4) ------------------------------------------------------------------

def test_normalisation_sums_to_one_and_all_zero_gives_equal_weights():
    assert normalise({"a": 1.0, "b": 3.0}) == {"a": 0.25, "b": 0.75}
    assert normalise({"a": 0.0, "b": 0.0, "c": 0.0}) == pytest.approx({"a": 1 / 3, "b": 1 / 3, "c": 1 / 3})


def test_weight_is_the_mean_of_the_interval_samples():
    s = Settings(policy="TD")
    samples = {"a": [demand(5, 10), demand(10, 30)], "b": [demand(5, 20), demand(10, 20)]}
    y, w = get_policy("TD").weights(samples, s)
    assert y == {"a": 20.0, "b": 20.0}
    assert w == {"a": 0.5, "b": 0.5}


def test_td_counts_running_tasks_only_when_configured():
    m = demand(0, pending=4, running=6)
    assert get_policy("TD").sample(m, Settings()) == 10
    assert get_policy("TD").sample(m, Settings(count_running_in_demand=False)) == 4


def test_loading_clusters_weigh_zero():
    m = ClusterMetrics(time=0, pending_tasks=50, unfinished_jobs=3, loading=True)
    for name in ("JD", "DD", "TD", "PU", "DU", "JS", "JT", "TT"):
        assert get_policy(name).sample(m, Settings()) == 0.0


@pytest.mark.parametrize("completed,unfinished,expected", [(0, 5, 1.0), (5, 5, 2 ** -0.5), (99, 1, 2 ** -0.99), (3, 0, 0.0)])
def test_jt_weight_is_a_to_the_minus_phi(completed, unfinished, expected):
    m = ClusterMetrics(time=0, completed_jobs=completed, unfinished_jobs=unfinished)
    assert get_policy("JT").sample(m, Settings(a=2)) == pytest.approx(expected)


def test_ru_lambda_one_is_pu_and_lambda_zero_is_du():
    samples = {
        "a": [ClusterMetrics(0, busy_slots=8, configured_slots=10, output_bytes=1, storage_capacity=100)],
        "b": [ClusterMetrics(0, busy_slots=2, configured_slots=10, output_bytes=30, storage_capacity=100)],
    }
    _, w_pu = get_policy("PU").weights(samples, Settings())
    _, w_du = get_policy("DU").weights(samples, Settings())
    assert get_policy("RU").weights(samples, Settings(policy="RU", lam=1.0))[1] == pytest.approx(w_pu)
    assert get_policy("RU").weights(samples, Settings(policy="RU", lam=0.0))[1] == pytest.approx(w_du)
    mixed = get_policy("RU").weights(samples, Settings(policy="RU", lam=0.5))[1]
    assert mixed["a"] == pytest.approx(0.5 * w_pu["a"] + 0.5 * w_du["a"])
    assert sum(mixed.values()) == pytest.approx(1.0)


def test_sample_cluster_applies_the_demand_readings():
    jobs = [
        JobFacts(submit_time=0, input_bytes=100, pending_tasks=4, running_tasks=2, started_at=10, ref_runtime=50),
        JobFacts(submit_time=40, input_bytes=300, pending_tasks=6, ref_runtime=20),
    ]
    m = sample_cluster(100, jobs, Settings(), completed_jobs=3)
    assert (m.unfinished_jobs, m.pending_tasks, m.running_tasks, m.unfinished_input_bytes) == (2, 10, 2, 400)
    assert m.mean_job_slowdown == pytest.approx((100 / 50 + 60 / 20) / 2)
    queued = sample_cluster(100, jobs, Settings(demand_jobs="queued"))
    assert (queued.unfinished_jobs, queued.unfinished_input_bytes) == (1, 300)


# --- discrimination (eqs. 3.2, 3.3) -----------------------------------------------------

def test_held_integral_is_exact_for_a_piecewise_constant_allocation():
    alloc = ((0.0, 10), (30.0, 20), (45.0, 15))
    assert held_integral(alloc, 0, 60) == (10 * 30 + 20 * 15 + 15 * 15, 60)
    assert held_integral(alloc, 40, 60) == (20 * 5 + 15 * 15, 20)
    assert held_integral(((50.0, 10),), 0, 60) == (100, 10)  # admitted mid-interval


def test_discrimination_in_fraction_seconds_and_node_seconds():
    alloc = ((0.0, 30),)
    s = Settings()
    assert interval_discrimination(alloc, 0.25, 0, 60, 60, s) == pytest.approx(60 * (0.5 - 0.25))
    s_ns = Settings(discrimination_units="node_seconds")
    assert interval_discrimination(alloc, 0.25, 0, 60, 60, s_ns) == pytest.approx(60 * (30 - 15))


def test_global_factor_is_the_mean_square():
    assert global_factor([3.0, -3.0, 0.0], Settings()) == pytest.approx(6.0)
    assert global_factor([2.0, 2.0], Settings(global_factor="variance")) == pytest.approx(0.0)


def test_matching_shares_give_zero_discrimination_and_no_resize():
    # held shares 20/60 and 40/60 and weights 1/3, 2/3 (TD demand 10 : 20)
    a = cluster("a", 10, tc=10, samples=[demand(30, 10)])
    b = cluster("b", 10, tc=30, samples=[demand(30, 20)])
    snap = Snapshot(now=60, capacity=60, clusters=(a, b))
    d = decide(snap, Settings(policy="TD", tau=0.0))
    assert d.discrimination == pytest.approx({"a": 0.0, "b": 0.0})
    assert d.global_discrimination == pytest.approx(0.0)
    assert not d.gate_open and d.plan.empty


# --- targets (A-7) ------------------------------------------------------------------------

def test_water_filling_reproduces_the_s36_steady_state():
    # TD ratio 720 : 2000 : 4000 maps on 60 nodes: C1 clamped to 10, C2 ~ 17, C3 ~ 33
    t = weighted_targets(60, ["c1", "c2", "c3"], {"c1": 720, "c2": 2000, "c3": 4000}, {"c1": 10, "c2": 10, "c3": 10})
    assert t == {"c1": 10, "c2": 17, "c3": 33}


def test_water_filling_largest_remainder_ties_go_to_the_earlier_cluster():
    t = weighted_targets(10, ["a", "b", "c"], {"a": 1, "b": 1, "c": 1}, {"a": 1, "b": 1, "c": 1})
    assert t == {"a": 4, "b": 3, "c": 3}


# --- admission (A-8 .. A-10) --------------------------------------------------------------

def test_fourth_ten_node_cluster_on_thirty_nodes_waits_strict_fifo():
    snap = Snapshot(now=0, capacity=30, free_hosts=tuple(f"h{i}" for i in range(30)),
                    queue=tuple(ClusterRequest(f"c{i}", 10, float(i)) for i in range(1, 5)))
    adm = admit(snap, {}, Settings())
    assert adm.admitted == ("c1", "c2", "c3") and adm.waiting == ("c4",)
    _, plan = admit_now(snap, Settings())
    hosts = [g.host for g in plan.grows]
    assert len(hosts) == 30 == len(set(hosts))
    assert all(g.role is Role.CORE for g in plan.grows)
    assert {g.cluster for g in plan.grows} == {"c1", "c2", "c3"}


def test_a_later_request_that_fits_never_overtakes_the_head():
    busy = (cluster("a", 10), cluster("b", 10))
    queue = (ClusterRequest("big", 15, 1.0), ClusterRequest("small", 5, 2.0))
    snap = Snapshot(now=0, capacity=30, free_hosts=tuple(f"f{i}" for i in range(10)), clusters=busy, queue=queue)
    strict = admit(snap, {}, Settings())
    assert strict.admitted == () and strict.waiting == ("big", "small")
    assert admit(snap, {}, Settings(backfill=True)).admitted == ("small",)


def test_admission_reclaims_in_proportion_to_weights_capped_at_surplus():
    a = cluster("a", 10, tr=30)  # surplus 30
    b = cluster("b", 10, tr=2)  # surplus 2
    snap = Snapshot(now=0, capacity=52, free_hosts=(), clusters=(a, b), queue=(ClusterRequest("c", 10),))
    adm = admit(snap, {"a": 0.75, "b": 0.25}, Settings())
    assert adm.admitted == ("c",)
    assert adm.reclaim == {"a": 8, "b": 2}  # 7.5 : 2.5, b capped at its surplus of 2, residue to a
    _, plan = admit_now(snap, Settings(), memory(a=dict(weight=0.75), b=dict(weight=0.25)))
    assert all(s.mode is ShrinkMode.FP for s in plan.shrinks) and len(plan.shrinks) == 10
    assert not plan.grows  # the new cluster's core nodes come when the hosts are free


# --- plan (A-18, A-19) ---------------------------------------------------------------------

def test_shrink_takes_transient_nodes_first_then_tc_by_stored_bytes():
    nodes = (
        [NodeView(f"c{i}", Role.CORE) for i in range(2)]
        + [NodeView("tr-busy", Role.TR, running_tasks=5), NodeView("tr-idle", Role.TR, running_tasks=0)]
        + [NodeView("tc-big", Role.TC, stored_bytes=900), NodeView("tc-small", Role.TC, stored_bytes=10),
           NodeView("tc-mid", Role.TC, stored_bytes=100)]
    )
    from fawkes.mechanism import ClusterView, plan_towards

    v = ClusterView("x", ClusterState.ACTIVE, 2, tuple(nodes))
    snap = Snapshot(now=0, capacity=7, clusters=(v,))
    plan = plan_towards(snap, {"x": 2}, Settings())
    assert [s.node for s in plan.shrinks] == ["tr-idle", "tr-busy", "tc-small", "tc-mid", "tc-big"]
    assert [s.mode for s in plan.shrinks] == [ShrinkMode.FP] * 2 + [ShrinkMode.DP] * 3
    # a target below the minimum never removes core nodes
    assert {s.node for s in plan_towards(snap, {"x": 0}, Settings()).shrinks} == {
        "tr-idle", "tr-busy", "tc-small", "tc-mid", "tc-big"}


def test_draining_nodes_count_until_released_and_are_not_removed_twice():
    c = cluster("a", 10, tc=4)
    drained = c.nodes[:10] + tuple(
        NodeView(n.id, n.role, stored_bytes=n.stored_bytes, draining=(i < 2)) for i, n in enumerate(c.nodes[10:])
    )
    from dataclasses import replace

    c = replace(c, nodes=drained)
    assert c.held == 14 and c.settled == 12
    from fawkes.mechanism import plan_towards

    plan = plan_towards(Snapshot(now=0, capacity=14, clusters=(c,)), {"a": 11}, Settings())
    assert len(plan.shrinks) == 1 and plan.shrinks[0].node not in {n.id for n in drained if n.draining}


def test_decide_grows_the_loaded_cluster_from_free_hosts_with_the_grow_type():
    loaded = cluster("busy", 10, samples=[demand(t, 300) for t in (10, 20, 30)])
    idle = cluster("idle", 10, samples=[demand(t, 0) for t in (10, 20, 30)])
    free = tuple(f"f{i}" for i in range(28))
    snap = Snapshot(now=60, capacity=48, free_hosts=free, clusters=(loaded, idle))
    for grow in (Role.TC, Role.TR):
        d = decide(snap, Settings(policy="TD", grow_type=grow))
        assert d.gate_open
        assert d.targets == {"busy": 38, "idle": 10}
        assert len(d.plan.grows) == 28 and {g.role for g in d.plan.grows} == {grow}
        assert {g.cluster for g in d.plan.grows} == {"busy"}


def test_none_never_grows_and_eq_is_applied_every_tick():
    a = cluster("a", 10, samples=[demand(10, 100)])
    b = cluster("b", 10, samples=[demand(10, 0)])
    snap = Snapshot(now=60, capacity=40, free_hosts=tuple(f"f{i}" for i in range(20)), clusters=(a, b))
    assert decide(snap, Settings(policy="None", tau=0)).plan.empty
    eq = decide(snap, Settings(policy="EQ", tau=math.inf))
    assert eq.gate_open and eq.targets == {"a": 20, "b": 20}


def test_infinite_tau_keeps_allocations():
    a = cluster("a", 10, tr=5, samples=[demand(10, 0)])
    b = cluster("b", 10, samples=[demand(10, 500)])
    snap = Snapshot(now=60, capacity=40, free_hosts=tuple(f"f{i}" for i in range(15)), clusters=(a, b))
    d = decide(snap, Settings(policy="TD", tau=math.inf))
    assert not d.gate_open and d.plan.empty
    assert decide(snap, Settings(policy="TD", tau=0)).plan.changed_clusters() == {"a", "b"}


def test_standing_target_is_refilled_when_hosts_free_up():
    a = cluster("a", 10)
    snap = Snapshot(now=5, capacity=20, free_hosts=("x", "y"), clusters=(a,))
    plan = refill(snap, Settings(grow_type=Role.TR), memory(a=dict(target=14)))
    assert [(g.host, g.role) for g in plan.grows] == [("x", Role.TR), ("y", Role.TR)]


def test_all_zero_hold_keeps_a_lone_loading_cluster_at_its_minimum():
    """A-1 / S-3.5: no cluster shows demand; the weights are 1/n either way, but only `equal` rebalances."""
    loading = cluster("c1", 10, samples=[ClusterMetrics(time=t, loading=True) for t in (20, 40, 60)])
    snap = Snapshot(now=60, capacity=60, free_hosts=tuple(f"f{i}" for i in range(50)), clusters=(loading,))
    held = decide(snap, Settings(policy="JD", period_s=60))
    assert held.weights == {"c1": 1.0} and not held.gate_open and held.plan.empty
    assert held.targets == {"c1": 10} and "no cluster shows demand" in held.reason
    literal = decide(snap, Settings(policy="JD", period_s=60, all_zero="equal"))
    assert literal.gate_open and literal.targets == {"c1": 60} and len(literal.plan.grows) == 50


def _surplus_snapshot(votes):
    quiet = cluster("quiet", 10, tr=10, samples=[demand(t, 0) for t in (20, 40, 60)])
    busy = cluster("busy", 10, samples=[demand(t, 500) for t in (20, 40, 60)])
    snap = Snapshot(now=60, capacity=34, free_hosts=tuple(f"f{i}" for i in range(4)), clusters=(quiet, busy))
    return snap, memory(quiet=dict(shrink_votes=votes))


def _decide_surplus(votes, settings):
    snap, mem = _surplus_snapshot(votes)
    return decide(snap, settings, mem)


def test_shrink_after_ticks_defers_a_shrink_until_enough_consecutive_ticks_want_it():
    s = Settings(policy="TD", shrink_after_ticks=3)
    first = _decide_surplus(0, s)
    assert first.targets == {"quiet": 20, "busy": 14}  # quiet keeps its 20, busy gets only the free hosts
    assert not first.plan.shrinks and len(first.plan.grows) == 4
    assert first.shrink_votes == {"quiet": 1} and "shrink deferred" in first.reason
    assert _decide_surplus(1, s).shrink_votes == {"quiet": 2}
    third = _decide_surplus(2, s)
    assert third.targets == {"quiet": 10, "busy": 24} and third.shrink_votes == {}
    assert len(third.plan.shrinks) == 10 and all(x.cluster == "quiet" for x in third.plan.shrinks)
    assert _decide_surplus(0, Settings(policy="TD")).targets == third.targets  # 1 = at once


def test_holding_a_voting_cluster_shrinks_no_other_without_its_votes():
    """ml wants to shrink (vote 1 of 4) and keeps its 2 nodes; the rest shared anew would take etl from
    3 to 2 at once although etl never voted (seen in a replay of td-damped, 2026-11-26): etl votes too."""
    ts = (20, 40, 60)
    snap = Snapshot(now=60, capacity=6, free_hosts=(), clusters=(
        cluster("etl", 1, tc=2, samples=[demand(t, 12, 4) for t in ts]),
        cluster("ml", 1, tc=1, samples=[demand(t, 1, 2) for t in ts]),
        cluster("bi", 1, samples=[demand(t, 14, 1) for t in ts])))
    waits = decide(snap, Settings(policy="TD", tau=0, shrink_after_ticks=4), memory())
    assert waits.targets == {"etl": 3, "ml": 2, "bi": 1} and not waits.plan.shrinks
    assert waits.shrink_votes == {"etl": 1, "ml": 1} and "etl 1/4, ml 1/4" in waits.reason
    # with enough votes each shrinks; at once (1) only ml, which the weights want smaller
    assert decide(snap, Settings(policy="TD", tau=0, shrink_after_ticks=4),
                  memory(etl=dict(shrink_votes=3), ml=dict(shrink_votes=3))).targets == {"etl": 3, "ml": 1, "bi": 2}
    at_once = decide(snap, Settings(policy="TD", tau=0), memory())
    assert at_once.targets == {"etl": 3, "ml": 1, "bi": 2} and [x.cluster for x in at_once.plan.shrinks] == ["ml"]


def test_shrink_wait_never_delays_an_admission():
    quiet = cluster("quiet", 10, tr=10, samples=[demand(t, 0) for t in (20, 40, 60)])
    snap = Snapshot(now=60, capacity=20, free_hosts=(), clusters=(quiet,), queue=(ClusterRequest("new", 10, 1.0),))
    d = decide(snap, Settings(policy="TD", shrink_after_ticks=4))
    assert d.admission.admitted == ("new",) and d.targets == {"quiet": 10, "new": 10}
    assert len(d.plan.shrinks) == 10 and d.shrink_votes == {}


def test_min_change_and_cooldown_keep_small_or_recent_changes():
    a = cluster("a", 10, tr=2, samples=[demand(t, 10) for t in (20, 40, 60)])
    b = cluster("b", 10, samples=[demand(t, 10) for t in (20, 40, 60)])
    snap = Snapshot(now=60, capacity=22, free_hosts=(), clusters=(a, b))
    literal = decide(snap, Settings(policy="TD", tau=0))
    assert literal.targets == {"a": 11, "b": 11} and len(literal.plan.shrinks) == 1  # a gives b one node
    assert not decide(snap, Settings(policy="TD", tau=0, min_change_nodes=2)).plan.shrinks
    grew = memory(a=dict(last_grow_at=30.0))
    assert not decide(snap, Settings(policy="TD", tau=0, cooldown_s=60), grew).plan.shrinks  # a grew 30 s ago
    assert decide(snap, Settings(policy="TD", tau=0, cooldown_s=20), grew).plan.shrinks


# --- inactivity (A-12) ---------------------------------------------------------------------

def test_inactive_only_after_idle_timeout_and_never_while_loading():
    s = Settings(period_s=60)
    idle = next_idle_since(None, ClusterMetrics(time=100))
    assert idle == 100 and next_idle_since(idle, ClusterMetrics(time=130)) == 100
    assert next_idle_since(idle, demand(140, 0, running=1)) is None
    assert not is_inactive(cluster("a", 10), 100.0, 159, s)
    assert is_inactive(cluster("a", 10), 100.0, 160, s)
    assert not is_inactive(cluster("a", 10, state=ClusterState.LOADING), 100.0, 500, s)
    assert next_idle_since(None, ClusterMetrics(time=5, loading=True)) is None


def test_inactive_cluster_is_released_and_its_nodes_are_not_shared():
    done = cluster("done", 10, tc=10, samples=[demand(50, 0)])
    busy = cluster("busy", 10, samples=[demand(50, 100)])
    snap = Snapshot(now=120, capacity=30, clusters=(done, busy))
    d = decide(snap, Settings(period_s=60), memory(done=dict(idle_since=0.0)))
    assert d.deactivate == ("done",)
    assert d.targets == {"busy": 10}
    assert not d.plan.shrinks  # the leaving cluster releases everything itself, after saving


# --- chapter 2 ----------------------------------------------------------------------------

def test_chapter2_contention_model_reproduces_the_thesis_numbers():
    c = transient_write_contention(10, 30, 50)
    assert c.output_on_transient_gb == pytest.approx(921.6)
    assert round(c.transfer_s, 1) == 92.2
    assert round(c.write_s, 1) == 51.2


def test_gs_grows_and_shrinks_by_the_thresholds():
    p = ResizeParams.for_policy("GS")
    assert resizing_ratio(100, 60, 80, p) == 2.0
    assert on_offer(p, pending=100, running=60, slots=80, pool_free=3, n_transient=0).delta == 3
    assert on_offer(p, pending=100, running=60, slots=80, pool_free=20, n_transient=0).delta == 5
    assert on_offer(p, pending=0, running=10, slots=80, pool_free=20, n_transient=7).delta == -2
    assert on_offer(p, pending=0, running=10, slots=80, pool_free=20, n_transient=1).delta == -1
    assert on_offer(p, pending=0, running=10, slots=80, pool_free=20, n_transient=0).delta == 0  # never below core
    assert on_offer(p, pending=40, running=40, slots=80, pool_free=20, n_transient=4).delta == 0


def test_gg_and_ggd_take_every_offer_and_only_gg_releases_at_the_end():
    gg, ggd = ResizeParams.for_policy("GG"), ResizeParams.for_policy("GGD")
    assert gg.offer_period_s == ggd.offer_period_s == 120
    r = on_offer(gg, pending=0, running=0, slots=80, pool_free=9, n_transient=0)
    assert (r.delta, r.role) == (2, Role.TR)
    assert on_offer(ggd, pending=0, running=0, slots=80, pool_free=9, n_transient=0).role is Role.TC
    assert on_offer(gg, pending=0, running=0, slots=80, pool_free=9, n_transient=6, workload_done=True).delta == -6
    assert on_offer(ggd, pending=0, running=0, slots=80, pool_free=9, n_transient=6, workload_done=True).delta == 0


@pytest.mark.parametrize("field, value, words", [
    ("tau", True, "valid number"), ("period_s", math.inf, "finite"), ("period_s", 1e-9, "greater than or equal to 1"),
    ("idle_timeout_s", -5.0, r"-5.0: seconds \(> 0"), ("idle_timeout_s", math.nan, r"nan: seconds \(> 0"),
    ("admission_deadline_s", -1.0, "greater than or equal to 0"), ("admission_deadline_s", math.nan, "finite"),
    ("a", math.inf, "finite"), ("cooldown_s", 1e300, "less than or equal"), ("shrink_after_ticks", True, "valid integer"),
    ("sample_period_s", 500.0, "must not exceed period_s"),
])
def test_settings_refuse_out_of_range_values(field, value, words):
    """Issue 16, 5g: bounded, finite, typed (a YAML `true` is no tau); tau alone may be .inf."""
    with pytest.raises(ValueError, match=words):
        Settings(**{field: value})
    assert Settings(tau=math.inf).tau == math.inf and Settings(grow_type="transient").grow_type is Role.TR
