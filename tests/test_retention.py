"""Retention on real state: what is deleted, what the mechanism still needs is never deleted,
and the running coordinator prunes on its own schedule."""

from __future__ import annotations

import time

import pytest

from fawkes.config import CoordinatorConfig, RetentionConfig, load_config
from fawkes.coordinator.control import Control
from fawkes.coordinator.retention import prune
from fawkes.coordinator.view import build_snapshot, sample_window
from fawkes.mechanism import ClusterMetrics, ClusterState, Role, Settings
from fawkes.store import NodeState, Store

try:
    from store_fixtures import Clock, pg_server, store, store_url  # noqa: F401
except ImportError:
    from tests.store_fixtures import Clock, pg_server, store, store_url  # noqa: F401

DAY = 86400.0


def active_cluster(store: Store, name: str, hosts: list[str]) -> None:
    store.request_cluster(name, framework="spark", min_core=1)
    store.transition_cluster(name, ClusterState.DEPLOYING)
    for i, h in enumerate(hosts):
        n = store.allocate_node(name, h, Role.CORE if i == 0 else Role.TC)
        store.transition_node(n.id, NodeState.PROVISIONING)
        store.transition_node(n.id, NodeState.RUNNING)
    store.transition_cluster(name, ClusterState.ACTIVE)


@pytest.fixture
def world(store: Store):
    store.register_framework("spark", "spark-hdfs", spark_home="/opt/spark")
    store.sync_hosts([{"name": f"h{i}", "cores": 2} for i in range(6)])
    active_cluster(store, "busy", ["h0", "h1"])
    active_cluster(store, "idle", ["h2", "h3"])
    return store


def seed(store: Store, now: float, span: float, step: float) -> None:
    """Samples every ``step`` s over the last ``span`` s (busy demands, idle does not)."""
    t = now - span
    while t <= now:
        store.record_sample("busy", ClusterMetrics(time=t, unfinished_jobs=1, pending_tasks=20, running_tasks=2))
        store.record_sample("idle", ClusterMetrics(time=t))
        t += step


def test_prune_never_deletes_what_the_mechanism_reads(world: Store):
    """samples_s far below the mechanism's window (T = 60 s, T_idle = 600 s, plus one T of look-back
    for an interval without samples): only samples older than 660 s go, and the snapshot and the
    decision are exactly the same afterwards."""
    settings = Settings(policy="TD", period_s=60, sample_period_s=5, idle_timeout_s=600, tau=0.0)
    now = world.clock.advance(3 * DAY)
    seed(world, now, span=1200, step=5)
    assert sample_window(settings) == 660
    before_snap = build_snapshot(world, settings, now)
    before_decision = Control(world, settings, lambda: now).preview()
    total = len(world.samples("busy")) + len(world.samples("idle"))
    r = prune(world, RetentionConfig(samples_s=10, events_s=None, decisions_keep=None), settings, now)
    assert r.samples_kept_s == 660 and r.samples_before == now - 660
    left = world.samples("busy") + world.samples("idle")
    assert r.samples == total - len(left) > 0 and min(m.time for m in left) >= now - 660
    assert build_snapshot(world, settings, now) == before_snap
    after_decision = Control(world, settings, lambda: now).preview()
    assert after_decision.targets == before_decision.targets and after_decision.weights == before_decision.weights
    assert after_decision.plan == before_decision.plan


def test_prune_applies_each_retention_and_dry_run_changes_nothing(world: Store):
    settings = Settings(policy="TD", period_s=60)
    setup = len(world.events(limit=1000))  # the fixture's own events: 40 days old below
    now = world.clock.advance(40 * DAY)
    for age_days in (35, 20, 8, 6, 1):
        world.record_sample("busy", ClusterMetrics(time=now - age_days * DAY, pending_tasks=age_days))
        world.record_event("test", f"{age_days} days old", time=now - age_days * DAY)
    for k in range(12):
        world.record_decision(policy="TD", inputs={}, weights={}, discriminations={}, global_factor=0.0,
                              gate_open=False, targets={}, plan={}, reason=f"tick {k}", time=now - 100 + k)
    retention = RetentionConfig(decisions_keep=5)  # defaults: samples 7 days, events 30 days
    dry = prune(world, retention, settings, now, dry_run=True)
    assert (dry.dry_run, dry.samples, dry.events, dry.decisions) == (True, 3, setup + 1, 7)
    assert len(world.samples("busy")) == 5 and world.count_decisions_beyond(5) == 7
    r = prune(world, retention, settings, now)
    assert (r.samples, r.events, r.decisions) == (3, setup + 1, 7) and r.summary() == \
        f"retention deleted 3 sample(s), {setup + 1} event(s), 7 decision(s)"
    assert [m.pending_tasks for m in world.samples("busy")] == [6, 1]
    assert [e.message for e in world.events(limit=1000)] == ["20 days old", "8 days old", "6 days old", "1 days old"]
    assert world.decision().reason == "tick 11" and world.count_decisions_beyond(5) == 0
    keep_all = prune(world, RetentionConfig(samples_s=None, events_s=None, decisions_keep=None), settings,
                     now + 100 * DAY)
    assert (keep_all.samples, keep_all.events, keep_all.decisions, keep_all.samples_before) == (0, 0, 0, None)
    assert len(world.samples("busy")) == 2


def test_running_coordinator_prunes_on_its_schedule(tmp_path):
    """The real service loop (APScheduler) with retention every 1 s: old rows go while it runs."""
    from fawkes.coordinator.service import build

    (tmp_path / "known_hosts").write_text("")
    (tmp_path / "inventory.yaml").write_text(
        "known_hosts: known_hosts\nhosts:\n  - {name: x1, address: 192.0.2.1, cores: 1}\n")
    (tmp_path / "config.yaml").write_text(
        "state: state.db\ninventory: inventory.yaml\npolicy: td-tc\nperiod: 2\nsample_period: 1\n"
        "retention: {samples_s: 3600, events_s: 7200, decisions_keep: 2, every_s: 1}\n")
    cfg = load_config(tmp_path / "config.yaml")
    now = time.time()
    with Store(cfg.state_url()) as s:
        s.register_framework("spark", "spark-hdfs", spark_home="/opt/spark")
        s.sync_hosts([{"name": "x1", "cores": 1}])
        s.request_cluster("old", framework="spark", min_core=1)
        for age in (9000, 5000, 10):
            s.record_sample("old", ClusterMetrics(time=now - age))
            s.record_event("test", f"age {age}", time=now - age)
        for k in range(6):
            s.record_decision(policy="TD", inputs={}, weights={}, discriminations={}, global_factor=0.0,
                              gate_open=False, targets={}, plan={}, reason=f"old {k}", time=now - 9000 + k)
        s.request_release("old")  # withdrawn: the coordinator has nothing to deploy
    coord = build(cfg)
    assert coord.retention == cfg.retention and cfg.retention != CoordinatorConfig().retention
    try:
        coord.run(duration_s=5.5)  # ticks at 2 s and 4 s, prunes every second from 1 s
        # a step the scheduler's worker had queued when it stopped does nothing once run() returned
        # (it used to sample and tick on a closed executor after "coordinator stopped")
        last = coord.store.latest_decision().id
        coord.tick(), coord.sample(), coord.fast()
        assert coord.store.latest_decision().id == last
    finally:
        coord.store.close()
    with Store(cfg.state_url()) as s:
        assert [round(now - m.time) for m in s.samples("old")] == [10]
        assert [e.message for e in s.events(limit=1000) if e.kind == "test"] == ["age 5000", "age 10"]
        reasons = [s.decision(t).reason for t in range(1, 12) if _exists(s, t)]
        assert not [r for r in reasons if r.startswith("old")]  # the ticks' own decisions replaced them
        assert 1 <= len(reasons) <= 3


def _exists(store: Store, tick: int) -> bool:
    from fawkes.errors import FawkesError

    try:
        store.decision(tick)
        return True
    except FawkesError:
        return False
