"""Ceilings and protection (issue 27, item 2): a cluster's max_nodes, a team's quota over its clusters,
protected nodes.  The mechanism as a pure function (targets, admission, the plan, explain), the
simulator driving the same controller, the config and the store's protection."""

from __future__ import annotations

import pytest

from fawkes.mechanism import ClusterRequest, Memory, NodeView, Role, Settings, Snapshot, controller
from fawkes.mechanism.ceilings import admissible, capped_targets, clamp
from fawkes.mechanism.model import ClusterView
from fawkes.mechanism.plan import shrink_victims
from tests.mechanism_helpers import cluster, demand

try:
    from store_fixtures import Clock, pg_server, store, store_url  # noqa: F401
except ImportError:  # tests/ became a package
    from tests.store_fixtures import Clock, pg_server, store, store_url  # noqa: F401

CEIL = Settings(max_nodes_by_cluster={"a": 6})
TEAM = Settings(team_quotas={"etl": {"clusters": ["a", "b"], "max_nodes": 10}})


def test_a_ceiling_caps_the_share_and_the_rest_goes_to_the_others():
    w = {"a": 0.8, "b": 0.1, "c": 0.1}
    assert capped_targets(20, ["a", "b", "c"], w, {"a": 1, "b": 1, "c": 1}, None, Settings()) == \
        {"a": 16, "b": 2, "c": 2}
    assert capped_targets(20, ["a", "b", "c"], w, {"a": 1, "b": 1, "c": 1}, None, CEIL) == {"a": 6, "b": 7, "c": 7}
    # a minimum above the ceiling still holds
    assert capped_targets(20, ["a", "b"], w, {"a": 8, "b": 1}, None, CEIL)["a"] == 8


def test_a_team_quota_caps_its_clusters_together_by_their_weights():
    w = {"a": 0.5, "b": 0.3, "c": 0.2}
    t = capped_targets(30, ["a", "b", "c"], w, {"a": 1, "b": 1, "c": 1}, None, TEAM)
    assert t["a"] + t["b"] == 10 and t["a"] > t["b"] and t["c"] == 20
    # clamp: kept targets over the quota lose in proportion, never below a minimum
    assert clamp({"a": 12, "b": 4, "c": 3}, {"a": 2, "b": 3, "c": 1}, TEAM) == {"a": 7, "b": 3, "c": 3}
    assert clamp({"a": 9, "b": 1}, {"a": 1, "b": 1}, CEIL) == {"a": 6, "b": 1}


def test_admission_waits_for_a_ceiling_or_quota_without_holding_others():
    assert admissible("a", 7, {}, CEIL) == "minimum 7 > its max_nodes 6"
    assert admissible("b", 4, {"a": 7}, TEAM) == "team etl's minima 7+4 > its quota 10"
    assert admissible("c", 4, {"a": 7}, TEAM) is None
    a = cluster("a", 7, samples=[demand(50, 10)])
    snap = Snapshot(now=60, capacity=30, free_hosts=tuple(f"h{i}" for i in range(23)), clusters=(a,),
                    queue=(ClusterRequest("b", 4, 10.0), ClusterRequest("c", 4, 20.0)))
    d, _ = controller.tick(Memory(), snap, TEAM)
    assert d.admission.admitted == ("c",) and d.admission.waiting == ("b",)
    assert "b waits: team etl's minima 7+4 > its quota 10" in d.reason


def test_the_tick_never_plans_past_a_ceiling_and_says_so():
    a = cluster("a", 2, tr=2, samples=[demand(t, 100) for t in (10, 30, 50)])
    b = cluster("b", 2, samples=[demand(t, 1) for t in (10, 30, 50)])
    free = tuple(f"h{i}" for i in range(16))
    snap = Snapshot(now=60, capacity=22, free_hosts=free, clusters=(a, b))
    d, _ = controller.tick(Memory(), snap, Settings(tau=0.0))
    assert d.targets["a"] > 6
    d, _ = controller.tick(Memory(), snap, Settings(tau=0.0, max_nodes_by_cluster={"a": 6}))
    assert d.targets == {"a": 6, "b": 16} and sum(g.cluster == "a" for g in d.plan.grows) == 2
    assert "ceilings: a at its max_nodes 6" in d.reason


def test_a_share_ceiling_is_a_fraction_of_the_pool_now_in_every_step():
    from fawkes.mechanism.ceilings import with_shares

    s = Settings(tau=0.0, max_share_by_cluster={"a": 0.3})
    assert with_shares(s, 22).max_nodes_of("a") == 6 and with_shares(s, 10).max_nodes_of("a") == 3
    assert with_shares(s, 2).max_nodes_of("a") == 1  # at least one node
    both = Settings(max_share_by_cluster={"a": 0.5}, max_nodes_by_cluster={"a": 4})
    assert with_shares(both, 22).max_nodes_of("a") == 4 and with_shares(both, 6).max_nodes_of("a") == 3
    assert with_shares(Settings(), 22) == Settings()  # nothing to fold
    a = cluster("a", 2, tr=2, samples=[demand(t, 100) for t in (10, 30, 50)])
    b = cluster("b", 2, samples=[demand(t, 1) for t in (10, 30, 50)])
    snap = Snapshot(now=60, capacity=22, free_hosts=tuple(f"h{i}" for i in range(16)), clusters=(a, b))
    d, _ = controller.tick(Memory(), snap, s)  # 0.3 of 22 nodes: 6, as max_nodes 6 above
    assert d.targets == {"a": 6, "b": 16} and "ceilings: a at its max_nodes 6" in d.reason
    # the pool shrinks (SLURM gave nodes back): the ceiling follows, and admission reads it too
    small = Snapshot(now=60, capacity=10, free_hosts=tuple(f"h{i}" for i in range(4)), clusters=(a, b))
    d, _ = controller.tick(Memory(), small, s)
    assert d.targets["a"] == 3
    q = Snapshot(now=60, capacity=10, free_hosts=tuple(f"h{i}" for i in range(4)), clusters=(b,),
                 queue=(ClusterRequest("a", 4, 10.0),))
    d, _ = controller.tick(Memory(), q, s)
    assert d.admission.waiting == ("a",) and "a waits: minimum 4 > its max_nodes 3" in d.reason


@pytest.mark.parametrize("share", [float("nan"), float("inf"), -0.5, 0, 1.5, 10**30, "0.5", True, None])
def test_a_bad_share_in_a_preset_is_refused_naming_it(share):
    with pytest.raises(ValueError, match="max_share"):
        Settings(max_share_by_cluster={"a": share})
    with pytest.raises(ValueError, match="cluster name"):
        Settings(max_share_by_cluster={"a\nb": 0.5})


def test_the_simulator_respects_a_share_ceiling_through_the_same_controller():
    from fawkes.sim.runner import PolicySpec, run_one
    from fawkes.sim.workloads import generate

    wl = generate("D", 1)
    capped = run_one(wl, PolicySpec("TD share", {"policy": "TD", "max_share_by_cluster": {"C1": 0.25}}), 1,
                     timeline=True, check=True)
    cap = max(1, int(0.25 * wl.capacity))
    assert max(n for _, n in capped.timeline["allocation"]["C1"]) <= cap and not capped.invariant_errors


def test_a_protected_node_is_never_a_victim_and_the_plan_says_why_it_stayed():
    nodes = (NodeView("a-c0", Role.CORE), NodeView("a-r0", Role.TR, protected=True),
             NodeView("a-r1", Role.TR, running_tasks=5), NodeView("a-t0", Role.TC, protected=True))
    a = ClusterView("a", cluster("a", 1).state, 1, nodes=nodes, samples=(demand(50, 1),), allocation=((0.0, 4),))
    assert [n.id for n in shrink_victims(a, 3, Settings())] == ["a-r1"]
    b = cluster("b", 1, samples=[demand(t, 100) for t in (10, 30, 50)])
    d, _ = controller.tick(Memory(), Snapshot(now=60, capacity=5, clusters=(a, b)), Settings(tau=0.0))
    assert [s.node for s in d.plan.shrinks] == ["a-r1"] and d.targets["a"] < 3
    assert "a: protected node(s) a-r0, a-t0 stayed (3 held, target" in d.reason


def test_the_simulator_respects_the_ceilings_through_the_same_controller():
    from fawkes.sim.runner import PolicySpec, parse_policy, run_one
    from fawkes.sim.workloads import generate

    wl = generate("D", 1)
    free = run_one(wl, parse_policy("TD"), 1, timeline=True).timeline["allocation"]
    capped = run_one(wl, PolicySpec("TD capped", {"policy": "TD", "max_nodes_by_cluster": {"C1": 12}}), 1,
                     timeline=True, check=True)
    assert max(n for _, n in free["C1"]) > 12  # without the ceiling it takes more
    assert max(n for _, n in capped.timeline["allocation"]["C1"]) <= 12 and not capped.invariant_errors


@pytest.mark.parametrize("yaml_text, msg", [
    ("clusters: {etl: {max_nodes: 0}}", "clusters.etl.max_nodes"),
    ("clusters: {etl: {max_nodes: .nan}}", "clusters.etl.max_nodes"),
    ("clusters: {etl: {max_nodes: 1000000000000000000000000000000}}", "clusters.etl.max_nodes"),
    ("clusters: {etl: {max_share: .nan}}", "clusters.etl.max_share"),
    ("clusters: {etl: {max_share: .inf}}", "clusters.etl.max_share"),
    ("clusters: {etl: {max_share: -0.5}}", "clusters.etl.max_share"),
    ("clusters: {etl: {max_share: 0}}", "clusters.etl.max_share"),
    ("clusters: {etl: {max_share: 1.5}}", "clusters.etl.max_share"),
    ("clusters: {etl: {max_share: 1000000000000000000000000000000}}", "clusters.etl.max_share"),
    ("clusters: {etl: {max_share: '0.5'}}", "clusters.etl.max_share"),
    ("clusters: {etl: {max_share: true}}", "clusters.etl.max_share"),
    ("teams: {t: {clusters: [etl], max_nodes: -1}}", "teams.t.max_nodes"),
    ("teams: {t: {clusters: [], max_nodes: 3}}", "teams.t.clusters"),
    ("teams: {t: {clusters: [\"e\\ntl\"], max_nodes: 3}}", "teams.t.clusters"),
    ("teams: {\"t\\0\": {clusters: [etl], max_nodes: 3}}", "teams"),
])
def test_bad_ceilings_in_the_config_are_one_line(tmp_path, yaml_text, msg):
    from fawkes.config import load_config
    from fawkes.errors import ConfigError

    p = tmp_path / "c.yaml"
    p.write_text(yaml_text + "\n")
    with pytest.raises(ConfigError) as e:
        load_config(p)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_the_config_reaches_the_mechanism(tmp_path):
    from fawkes.config import load_config
    from fawkes.config import mechanism_settings

    p = tmp_path / "c.yaml"
    p.write_text("clusters: {etl: {max_nodes: 4}, bi: {max_share: 0.5}}\n"
                 "teams: {data: {clusters: [etl, bi], max_nodes: 9}}\n")
    s = mechanism_settings(load_config(p))
    assert s.max_nodes_of("etl") == 4 and s.max_nodes_of("bi") is None
    assert s.max_share_by_cluster == (("bi", 0.5),)
    assert s.team_quotas == (("data", ("etl", "bi"), 9),)


def test_protection_is_stored_and_reaches_the_snapshot(store):
    from fawkes.coordinator.view import build_snapshot
    from fawkes.errors import FawkesError
    from fawkes.mechanism.model import ClusterState

    store.register_framework("lab", "spark", spark_home="/opt/spark")
    store.sync_hosts([{"name": f"h{i}", "address": f"10.0.0.{i}", "cores": 2} for i in (1, 2)])
    store.request_cluster("etl", framework="lab", min_core=1)
    store.transition_cluster("etl", ClusterState.DEPLOYING)
    store.allocate_node("etl", "h1", Role.CORE)
    tr = store.allocate_node("etl", "h2", Role.TR).id
    assert store.protect_node(host="h2").protected is True
    snap = build_snapshot(store, Settings(), store.clock())
    assert {n.id: n.protected for n in snap.cluster("etl").nodes} == {"h1": False, "h2": True}
    assert store.protect_node(tr, protected=False).protected is False
    for bad, why in (((None,), "host h9: holds no live node"), ((99,), "node 99: no such node")):
        with pytest.raises(FawkesError, match=why):
            store.protect_node(*bad, host="h9") if bad == (None,) else store.protect_node(*bad)
    with pytest.raises(FawkesError, match="host: invalid host name"):
        store.protect_node(host="h1\n")
