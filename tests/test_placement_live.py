"""Placement in the live loop (issue 12, P-1): rack labels from the inventory stored with the hosts
(schema v7), read into the snapshot, and the grow plan's hard/soft/none on them."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fawkes.coordinator.view import build_snapshot
from fawkes.errors import FawkesError
from fawkes.mechanism import Settings, Snapshot, plan_towards
from fawkes.mechanism.placement import grow_hosts
from fawkes.store import Store
try:
    from conftest import run_cli
except ImportError:  # tests/ became a package
    from tests.conftest import run_cli
from tests.mechanism_helpers import cluster, demand, memory

RACKS = {"a-c0": "r1", "f1": "r2", "f2": "r1", "f3": "r2", "f4": "r1", "b-c0": "r1", "b-t0": "r1", "b-t1": "r1"}


# --- grow_hosts: the elastic wait-or-go -----------------------------------------------------------

def test_none_and_unlabelled_take_the_free_hosts_in_placement_order():
    free = ["f1", "f2", "f3"]
    assert grow_hosts(2, free, RACKS, frozenset({"r1"}), "none").hosts == ("f1", "f2")
    assert grow_hosts(2, free, RACKS, frozenset(), "hard").hosts == ("f1", "f2")  # no preferred rack


def test_hard_takes_the_preferred_hosts_free_and_waits_for_the_rest():
    p = grow_hosts(2, ["f1", "f2", "f3", "f4"], RACKS, frozenset({"r1"}), "hard")
    assert (p.hosts, p.wait) == (("f2", "f4"), False)
    p = grow_hosts(3, ["f1", "f2", "f3", "f4"], RACKS, frozenset({"r1"}), "hard")
    assert (p.hosts, p.wait) == (("f2", "f4"), True)


@pytest.mark.parametrize("w,penalty,waits", [(50.0, 1.5, True), (50.0, 1.2, True), (50.0, 1.1, False),
                                             (0.0, 1.0, False), (None, 3.0, False)])
def test_soft_waits_iff_the_wait_is_shorter_than_the_penalty_on_the_work_left(w, penalty, waits):
    """dur_fast 400 s: elsewhere 400 x penalty; wait iff W + 400 < that (None: not foreseeable, go)."""
    asked = []

    def wait_for(n):
        asked.append(n)
        return w

    p = grow_hosts(2, ["f1", "f2", "f3"], RACKS, frozenset({"r1"}), "soft", dur_fast=400.0,
                   locality_penalty=penalty, wait_for=wait_for)
    assert asked == [1]  # W for the one host not free on a preferred rack
    assert p.wait is waits
    assert p.hosts == (("f2",) if waits else ("f2", "f1"))


# --- plan_towards on a snapshot with racks -------------------------------------------------------

def _snap(racks=RACKS, free=("f1", "f2", "f3")):
    a = cluster("a", 1, samples=(demand(40.0, 100, completed_tasks=0), demand(100.0, 80, completed_tasks=20)))
    b = cluster("b", 1, tc=2)
    return Snapshot(now=100.0, capacity=8, free_hosts=free, clusters=(a, b), host_racks=dict(racks))


def _grows(plan):
    return [(g.cluster, g.host, g.role.value) for g in plan.grows]


def test_default_placement_none_plans_as_without_racks():
    s = Settings()
    assert s.placement == "none"
    with_racks, without = _snap(), _snap(racks={})
    assert plan_towards(with_racks, {"a": 3, "b": 3}, s) == plan_towards(without, {"a": 3, "b": 3}, s)
    assert _grows(plan_towards(with_racks, {"a": 3}, s)) == [("a", "f1", "transient-core"), ("a", "f2", "transient-core")]


def test_hard_grows_only_on_the_racks_of_the_core_nodes():
    plan = plan_towards(_snap(), {"a": 3}, Settings(placement="hard"))
    assert _grows(plan) == [("a", "f2", "transient-core")]  # a's core is on r1; f1, f3 are on r2


def test_soft_goes_when_nothing_on_its_racks_frees_soon_and_waits_for_a_node_being_removed():
    # a: 80 tasks left at 20 per 60 s = 240 s of work. Nothing of b frees within the forecast (no rate): go
    snap = _snap()
    soft = Settings(placement="soft", locality_penalty=1.5)
    assert _grows(plan_towards(snap, {"a": 3}, soft, memory=memory())) == [
        ("a", "f2", "transient-core"), ("a", "f1", "transient-core")]
    # b shrinks by one in the same plan: its r1 node frees now, W = 0 < 240 x 0.5: a waits for it
    plan = plan_towards(snap, {"a": 3, "b": 2}, soft, memory=memory())
    assert [s.node for s in plan.shrinks] == ["b-t1"] and _grows(plan) == [("a", "f2", "transient-core")]
    # the default penalty 1.14: 0 + 240 < 274, still waits; a penalty of 1 (elsewhere costs nothing) goes
    plan = plan_towards(snap, {"a": 3, "b": 2}, Settings(placement="soft"), memory=memory())
    assert _grows(plan) == [("a", "f2", "transient-core")]
    plan = plan_towards(snap, {"a": 3, "b": 2}, Settings(placement="soft", locality_penalty=1.0), memory=memory())
    assert _grows(plan) == [("a", "f2", "transient-core"), ("a", "f1", "transient-core")]


def test_a_new_cluster_has_no_preferred_rack_and_its_cores_go_anywhere():
    snap = Snapshot(now=0.0, capacity=3, free_hosts=("f1", "f2", "f3"), host_racks=dict(RACKS))
    plan = plan_towards(snap, {"new": 2}, Settings(placement="hard"))
    assert _grows(plan) == [("new", "f1", "core"), ("new", "f2", "core")]


@pytest.mark.parametrize("field,value", [("placement", "diagonal"), ("placement", True), ("locality_penalty", 0.5),
                                         ("locality_penalty", float("nan")), ("locality_penalty", float("inf")),
                                         ("locality_penalty", 1e9), ("locality_penalty", "2")])
def test_bad_settings_are_refused(field, value):
    with pytest.raises(ValidationError):
        Settings(**{field: value})


def test_a_bad_preset_field_is_one_line_naming_file_and_field(tmp_path):
    for line, field in (("placement: diagonal", "placement"), ("locality_penalty: 0.5", "locality_penalty"),
                        ("locality_penalty: .nan", "locality_penalty")):
        preset = tmp_path / "mine.yaml"
        preset.write_text(f"policy: TD\n{line}\n")
        r = run_cli("policy", "show", str(preset))
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and str(preset) in lines[0] and field in lines[0], r.stderr


# --- the store and the coordinator's view ----------------------------------------------------------

def test_racks_are_stored_with_the_hosts_and_read_into_the_snapshot(tmp_path):
    with Store(f"sqlite:///{tmp_path / 'state.db'}") as s:
        s.sync_hosts([{"name": "n1", "cores": 2, "rack": "r1"}, {"name": "n2", "cores": 2, "rack": "r2"},
                      {"name": "n3", "cores": 2}])
        assert s.host_racks() == {"n1": "r1", "n2": "r2"}
        assert {h.name: h.rack for h in s.list_hosts()} == {"n1": "r1", "n2": "r2", "n3": None}
        out = s.sync_hosts([{"name": "n1", "cores": 2, "rack": "r2"}, {"name": "n2", "cores": 2, "rack": "r2"},
                            {"name": "n3", "cores": 2}])
        assert out["updated"] == ["n1"] and s.host_racks()["n1"] == "r2"
        assert build_snapshot(s, Settings(placement="soft"), 10.0).host_racks == {"n1": "r2", "n2": "r2"}
        assert build_snapshot(s, Settings(), 10.0).host_racks == {}  # read only when placement is on
        for bad in ("r 1", "", "-r", 7, "x" * 64):
            with pytest.raises(FawkesError, match=r"inventory\[0\]\.rack"):
                s.sync_hosts([{"name": "n1", "cores": 2, "rack": bad}])
        assert s.host_racks() == {"n1": "r2", "n2": "r2"}  # nothing written by the refused ones


def test_the_coordinator_stores_the_inventorys_racks(tmp_path):
    from fawkes.coordinator.service import Coordinator
    from fawkes.inventory import load_inventory

    inv = tmp_path / "inventory.yaml"
    inv.write_text("version: 1\nstrict_host_keys: false\ndefaults: {rack: r1}\nhosts:\n"
                   "  - {name: n1, address: 10.0.0.1}\n  - {name: n2, address: 10.0.0.2, rack: r2}\n")
    with Store(f"sqlite:///{tmp_path / 'state.db'}") as s:
        Coordinator._sync_inventory(type("C", (), {"store": s})(), load_inventory(inv))
        assert s.host_racks() == {"n1": "r1", "n2": "r2"}


def test_host_list_shows_the_rack(tmp_path):
    import json

    url = f"sqlite:///{tmp_path / 'state.db'}"
    with Store(url) as s:
        s.sync_hosts([{"name": "n1", "cores": 2, "rack": "r1"}, {"name": "n2", "cores": 2}])
    r = run_cli("host", "list", "--state", url, "--json")
    assert r.returncode == 0, r.stderr
    assert {h["name"]: h["rack"] for h in json.loads(r.stdout)} == {"n1": "r1", "n2": None}
    r = run_cli("host", "list", "--state", url)
    assert "rack" in r.stdout.splitlines()[1] and " r1 " in r.stdout


def test_the_decision_says_which_grows_a_rack_decided():
    from fawkes.mechanism import decide

    snap = _snap()
    s = Settings(policy="EQ", placement="hard", period_s=60.0, sample_period_s=10.0)
    d = decide(snap, s, memory(a=dict(target=3), b=dict(target=3)))
    # EQ: 4 each of 8; a (core on r1) takes f2, the one free r1 host, and waits for 2; b (r1) for 1
    assert "a +1; placement a: hard: 1 on preferred racks, 2 wait for them; " \
           "placement b: hard: 0 on preferred racks, 1 wait for them" in d.reason, d.reason
    assert [g.host for g in d.plan.grows if g.cluster == "a"] == ["f2"]
    assert "placement" not in decide(snap, Settings(policy="EQ", period_s=60.0, sample_period_s=10.0),
                                     memory(a=dict(target=3), b=dict(target=3))).reason
