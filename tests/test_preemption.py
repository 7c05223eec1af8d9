"""BIG-C's preemption settings (issue 11, deliverable 3; fawkes/mechanism/preemption.py): regrow
hysteresis D (a victim: a cluster that lost nodes running tasks), the demand-capped shrink and the victim order, each with a default that changes nothing."""

from __future__ import annotations

import json
import math

from dataclasses import replace

import pytest

from fawkes.mechanism import ClusterMemory, Memory, Settings, Snapshot, controller, decide
from fawkes.mechanism.preemption import take_order
from tests.mechanism_helpers import cluster, demand, memory


def _busy(view, busy=True):
    return replace(view, nodes=tuple(replace(n, running_tasks=int(busy)) for n in view.nodes))


def _flip(now, a_tr, b_tr, a_demand, b_demand, busy=True):
    """Two clusters of minimum 5 on 20 nodes; a and b hold 5 core + ``*_tr`` transient nodes,
    each running a task (``busy``) or idle."""
    ts = (now - 40, now - 20, now)
    a = _busy(cluster("a", 5, tr=a_tr, samples=[demand(t, a_demand) for t in ts]), busy)
    b = _busy(cluster("b", 5, tr=b_tr, samples=[demand(t, b_demand) for t in ts]), busy)
    free = tuple(f"f{i}" for i in range(20 - 10 - a_tr - b_tr))
    return Snapshot(now=now, capacity=20, free_hosts=free, clusters=(a, b))


def _grown(d, name):
    return sum(1 for g in d.plan.grows if g.cluster == name)


@pytest.mark.parametrize("D", [0, 1, 2, 3])
def test_a_victim_regrows_only_after_D_consecutive_eligible_ticks(D):
    s = Settings(policy="TD", period_s=60, tau=0.0, regrow_delay_ticks=D)
    d, mem = controller.tick(Memory(), _flip(60, 5, 5, 500, 10), s)
    assert {x.cluster for x in d.plan.shrinks} == {"b"}  # b is shrunk: a victim
    assert mem.of("b", 0.0).victim_since == (60 if D else None)
    now, waited = 120, 0
    while True:  # b now has the demand: it must wait D ticks, a keeps its nodes meanwhile
        d, mem = controller.tick(mem, _flip(now, 10, 0, 10, 500), s)
        if _grown(d, "b") or d.plan.shrinks:
            break
        waited += 1
        assert d.targets == {"a": 15, "b": 5} and d.regrow_votes == {"b": waited}
        assert "regrow delayed" in d.reason and mem.of("b", 0.0).regrow_votes == waited
        now += 60
    assert waited == D
    assert {x.cluster for x in d.plan.shrinks} == {"a"} and d.targets["b"] > 5
    assert mem.of("b", 0.0).victim_since is None and mem.of("b", 0.0).regrow_votes == 0


def test_a_shrink_of_idle_nodes_preempts_nothing_and_makes_no_victim():
    s = Settings(policy="TD", period_s=60, tau=0.0, regrow_delay_ticks=3)
    d, mem = controller.tick(Memory(), _flip(60, 5, 5, 500, 10, busy=False), s)
    assert {x.cluster for x in d.plan.shrinks} == {"b"} and mem.of("b", 0.0).victim_since is None
    d, mem = controller.tick(mem, _flip(120, 10, 0, 10, 500), s)
    assert d.regrow_votes == {} and {x.cluster for x in d.plan.shrinks} == {"a"}  # b regrows at once


def test_a_tick_that_does_not_want_the_victim_bigger_restarts_its_count():
    s = Settings(policy="TD", period_s=60, tau=0.0, regrow_delay_ticks=2)
    _, mem = controller.tick(Memory(), _flip(60, 5, 5, 500, 10), s)
    d, mem = controller.tick(mem, _flip(120, 10, 0, 10, 500), s)
    assert d.regrow_votes == {"b": 1}
    d, mem = controller.tick(mem, _flip(180, 10, 0, 500, 10), s)  # a busy again: b not eligible
    assert d.regrow_votes == {"b": 0} and mem.of("b", 0.0).victim_since == 60
    d, mem = controller.tick(mem, _flip(240, 10, 0, 10, 500), s)
    assert d.regrow_votes == {"b": 1} and not d.plan.shrinks  # counted from 1 again


def test_regrow_delay_zero_and_the_other_defaults_change_nothing():
    snap = _flip(120, 10, 0, 10, 500)
    base = decide(snap, Settings(policy="TD", tau=0.0))
    for extra in ({"regrow_delay_ticks": 0}, {"shrink_amount": "full"}):
        d = decide(snap, Settings(policy="TD", tau=0.0, **extra))
        assert (d.targets, d.plan, d.regrow_votes) == (base.targets, base.plan, {})
    entry = ClusterMemory(since=0.0, weight=0.5, target=3)
    assert set(Memory((("a", entry),)).to_json()["clusters"]["a"]) == {
        "since", "weight", "target", "shrink_votes", "discrimination", "idle_since", "seen", "last_grow_at",
        "last_shrink_at"}  # what a coordinator stored before these fields: byte-for-byte the same


def test_memory_without_the_new_fields_reads_back_with_their_defaults():
    old = {"format": 1, "ticks": 3, "clusters": {"a": {"since": 0.0, "weight": 0.5, "target": 3, "shrink_votes": 0,
                                                        "discrimination": 0.0}}}
    assert Memory.from_json(old).of("a", 0.0) == ClusterMemory(since=0.0, weight=0.5, target=3)
    mem = memory(b=dict(victim_since=60.0, regrow_votes=2))
    assert Memory.from_json(json.loads(json.dumps(mem.to_json()))) == mem
    for bad in (None, "2", math.nan):
        with pytest.raises(ValueError, match="regrow_votes"):
            Memory.from_json({"format": 1, "clusters": {"b": {"since": 0, "regrow_votes": bad}}})


def _capped(free=0, **kw):
    """a holds 15 and has no demand; b holds its minimum 5 and has 64 pending tasks (8 nodes of 8 slots)."""
    a = cluster("a", 5, tr=10, samples=[demand(t, 0) for t in (20, 40, 60)])
    b = cluster("b", 5, samples=[demand(t, 64) for t in (20, 40, 60)])
    snap = Snapshot(now=60, capacity=20 + free, free_hosts=tuple(f"f{i}" for i in range(free)), clusters=(a, b))
    return decide(snap, Settings(policy="TD", tau=0.0, **kw))


def test_demand_capped_shrink_takes_only_what_the_under_share_cluster_needs():
    full = _capped()
    assert full.targets == {"a": 5, "b": 15} and len(full.plan.shrinks) == 10
    capped = _capped(shrink_amount="demand_capped")
    assert capped.targets == {"a": 12, "b": 8} and len(capped.plan.shrinks) == 3
    with_free = _capped(free=2, shrink_amount="demand_capped")  # free hosts serve first
    assert with_free.targets == {"a": 14, "b": 8} and len(with_free.plan.shrinks) == 1 and _grown(with_free, "b") == 2


def _donors():
    d1 = cluster("d1", 2, tr=6, samples=[demand(60, 8)])  # 8 tasks on 8 nodes
    d2 = cluster("d2", 2, tr=3, samples=[demand(60, 40)])  # 40 tasks on 5 nodes
    return d1, d2


@pytest.mark.parametrize("order, disc, expect", [
    ("largest_surplus", {}, {"d1": 3, "d2": 1}),  # one at a time from the largest remaining surplus
    ("most_discriminated", {"d1": 1.0, "d2": 5.0}, {"d2": 3, "d1": 1}),
    ("longest_remaining", {}, {"d2": 3, "d1": 1}),  # d2 has 8 tasks per node left, d1 one
])
def test_victim_order_decides_who_gives_first(order, disc, expect):
    s = Settings(shrink_amount="demand_capped", victim_order=order)
    assert take_order({"d1": 6, "d2": 3}, 4, _donors(), disc, s) == expect


def _simulate_exit(args, tmp_path):
    from tests.conftest import cli_in_process
    return cli_in_process(args, cwd=tmp_path)


@pytest.mark.parametrize("line, words", [
    ("regrow_delay_ticks: -1", "regrow_delay_ticks"), ("regrow_delay_ticks: .nan", "regrow_delay_ticks"),
    ("regrow_delay_ticks: .inf", "regrow_delay_ticks"), ("regrow_delay_ticks: true", "regrow_delay_ticks"),
    ("regrow_delay_ticks: 1000000000000000000000000000000", "regrow_delay_ticks"),
    ("regrow_delay_ticks: 2.5", "regrow_delay_ticks"),
    ("shrink_amount: some", "shrink_amount"), ("shrink_amount: 3", "shrink_amount"),
    ("victim_order: random", "victim_order"),
    ("victim_order: most_discriminated", "demand_capped"),  # meaningless with a full shrink
    ("latency_clusters: [a, a]", "latency_clusters"), ("latency_clusters: x", "latency_clusters"),
    ('latency_clusters: [""]', "latency_clusters"), ("latency_share: .nan", "latency_share"),
    ("latency_share: 1000000000000000000000000000000", "latency_share"), ("latency_share: true", "latency_share"),
    ("reserve_fraction: 0.6", "reserve_fraction"),  # no latency cluster to reserve for
])
def test_a_bad_preemption_setting_is_one_line_naming_file_and_field_exit_2(line, words, tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(f"policy: TD\n{line}\n")
    r = _simulate_exit(["policy", "show", str(f)], tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "bad.yaml" in err and words in err, err
    assert list(tmp_path.iterdir()) == [f]  # nothing written


def test_good_preemption_settings_load_from_a_preset(tmp_path):
    f = tmp_path / "bigc.yaml"
    f.write_text("policy: TD\nregrow_delay_ticks: 3\nshrink_amount: demand_capped\nvictim_order: longest_remaining\n"
                 "latency_clusters: [etl, bi]\nlatency_share: 0.9\nreserve_fraction: 0.5\n")
    r = _simulate_exit(["policy", "show", str(f)], tmp_path)
    assert r.returncode == 0 and "regrow_delay_ticks" in r.stdout and "longest_remaining" in r.stdout, r.stderr
    assert 'latency_clusters: ["etl", "bi"]' in r.stdout and "reserve_fraction: 0.5" in r.stdout


# --- B-7: priority classes and the reserve baseline (fawkes/mechanism/classes.py)

def _classes(now=60, l_tr=10, s_tr=0, l_demand=900, s_demand=100, capacity=20):
    ts = (now - 40, now - 20, now)
    lo = cluster("L", 5, tr=l_tr, samples=[demand(t, l_demand) for t in ts])
    sh = cluster("S", 5, tr=s_tr, samples=[demand(t, s_demand) for t in ts])
    free = tuple(f"f{i}" for i in range(capacity - 10 - l_tr - s_tr))
    return Snapshot(now=now, capacity=capacity, free_hosts=free, clusters=(lo, sh))


def test_the_latency_class_share_weighs_over_task_counts():
    plain = decide(_classes(), Settings(policy="TD", tau=0.0))
    assert plain.weights == {"L": 0.9, "S": pytest.approx(0.1)} and plain.targets == {"L": 15, "S": 5}
    d = decide(_classes(), Settings(policy="TD", tau=0.0, latency_clusters=["S"], latency_share=0.95))
    assert d.weights == pytest.approx({"L": 0.05, "S": 0.95}) and d.targets == {"L": 5, "S": 15}
    idle = decide(_classes(s_demand=0), Settings(policy="TD", tau=0.0, latency_clusters=["S"]))
    assert idle.weights == {"L": 1.0, "S": 0.0}  # a class without demand leaves its share to the other


def test_a_latency_cluster_that_wants_nodes_bypasses_tau():
    snap = _classes()
    assert not decide(snap, Settings(policy="TD", tau=math.inf)).gate_open
    d = decide(snap, Settings(policy="TD", tau=math.inf, latency_clusters=["S"]))
    assert d.gate_open and "tau bypassed" in d.reason and d.targets == {"L": 5, "S": 15}
    quiet = decide(_classes(l_tr=0, s_tr=10), Settings(policy="TD", tau=math.inf, latency_clusters=["S"]))
    assert not quiet.gate_open  # S holds its share: best-effort L alone does not bypass tau


def test_the_reserve_keeps_its_part_for_the_latency_class_even_idle():
    s = Settings(policy="TD", tau=0.0, latency_clusters=["S"], reserve_fraction=0.6)
    busy_l = decide(_classes(l_tr=10, s_demand=0), s)  # L wants everything, S is idle
    assert busy_l.targets == {"L": 8, "S": 12} and sum(1 for x in busy_l.plan.shrinks if x.cluster == "L") == 7
    assert decide(_classes(s_demand=900, l_demand=0, l_tr=0, s_tr=10), s).targets == {"L": 8, "S": 12}


@pytest.mark.parametrize("extra, words", [
    ({"latency_clusters": ["a", "a"]}, "twice"), ({"latency_clusters": [""]}, "not a cluster name"),
    ({"latency_clusters": ["a\nb"]}, "not a cluster name"), ({"latency_clusters": [3]}, "valid string"),
    ({"latency_share": 0.0}, "greater than 0"), ({"latency_share": 1.5}, "less than or equal"),
    ({"latency_share": math.nan}, "finite"), ({"latency_share": True}, "valid number"),
    ({"reserve_fraction": 0.6}, "needs latency_clusters"),
    ({"reserve_fraction": 1.0, "latency_clusters": ["a"]}, "less than 1"),
    ({"reserve_fraction": -0.1, "latency_clusters": ["a"]}, "greater than or equal to 0"),
    ({"reserve_fraction": 1e30, "latency_clusters": ["a"]}, "less than 1"),
])
def test_class_settings_refuse_bad_values(extra, words):
    with pytest.raises(ValueError, match=words):
        Settings(**extra)
