"""UBIS U-6 live (issue 28): the coordinator's Lender climbs T_alloc on what its opportunistic workers did.

The agent reports each worker's CPU seconds (``worker_cpu_s``, tests/test_watchdog.py on real cgroups); here
the Lender's accounting of them, fed the agent's own event lines: work is the CPU a worker used, a stop for load
throws away what the worker did since its last idle check, and every ``tune_window_s`` one step of the pure
climb (fawkes/mechanism/talloc.py, the simulator's SIM-U3 uses the same) moves the T_alloc the lending decision
reads.  On the lab: tests/test_ubis_short_lab.py."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from fawkes.coordinator.ubis import AgentSession, Lender
from fawkes.mechanism import opportunistic as opp
from fawkes.mechanism.model import ClusterMetrics, ClusterState, ClusterView, HostUse, NodeView, Role, Snapshot


class Events:
    def __init__(self):
        self.got = []

    def record_event(self, kind, message, **kw):
        self.got.append((kind, message, kw))


def lender(**cfg) -> Lender:
    c = opp.OpportunisticConfig(clusters={"b": "accept"}, t_alloc_tune=True, t_alloc=0.7, tune_window_s=60, **cfg)
    return Lender(Events(), None, None, c, None)


def session(cpus=0.5) -> AgentSession:
    return AgentSession("h1", "b", "a", cpus, None, None, 0.0)


def feed(lend: Lender, s: AgentSession, cum: list[float], t0: float = 1000.0, host_cpu: float = 0.5):
    for i, used in enumerate(cum):
        lend._on_event(s, {"event": "check", "time": t0 + i, "cpu": host_cpu, "mem": 0.2, "streak": 0,
                           "worker_cpu_s": used})


def test_the_tuning_is_off_by_default_and_its_bounds_are_checked():
    assert opp.OpportunisticConfig().climb_start() is None
    c = opp.OpportunisticConfig(t_alloc_tune=True, t_alloc=0.6).climb_start()
    assert (c.t_alloc, c.lo, c.hi, c.step) == (0.6, 0.5, 0.95, 0.05)
    for bad, word in [({"t_alloc": 0.4}, "t_alloc_min"), ({"t_alloc_max": 0.99}, "t_alloc_max"),
                      ({"t_alloc_step": 0}, "t_alloc_step"), ({"t_alloc_step": float("nan")}, "t_alloc_step"),
                      ({"tune_window_s": 1}, "tune_window_s"), ({"tune_window_s": 10**30}, "tune_window_s"),
                      ({"t_alloc_tune": "yes"}, "t_alloc_tune")]:
        with pytest.raises(ValidationError) as exc:
            opp.OpportunisticConfig(**{"t_alloc_tune": True, "t_alloc": 0.7, **bad})
        assert word in str(exc.value), (bad, exc.value)


def test_work_is_the_workers_cpu_and_a_stop_for_load_throws_away_what_followed_its_last_idle_check():
    lend, s = lender(), session(cpus=0.5)
    # busy 0.5 core-s a second, then idle (0.01 < 0.1 x 0.5 x 1 s), then busy again, then the stop
    feed(lend, s, [0.0, 0.5, 1.0, 1.01, 1.51, 2.01])
    assert lend.window.work_s == pytest.approx(2.01) and lend.window.lost_s == 0
    lend._on_event(s, {"event": "stopped", "reason": "load", "time": 1006.2, "worker_cpu_s": 2.2, "checks": []})
    assert lend.window.work_s == pytest.approx(2.2)
    assert lend.window.lost_s == pytest.approx(2.2 - 1.01)
    assert lend.preemptions == 1 and lend.window.preemptions == 1
    # a withdrawal (coordinator's choice) or a worker that ended loses nothing
    s2 = session()
    feed(lend, s2, [0.0, 0.5, 1.0])
    lend._on_event(s2, {"event": "stopped", "reason": "coordinator gone: stdin closed", "time": 1003.0,
                        "worker_cpu_s": 1.1})
    assert lend.window.lost_s == pytest.approx(1.19) and lend.window.work_s == pytest.approx(3.3)


def test_a_worker_starved_by_the_owners_load_is_not_idle():
    """Under the load that fires the watchdog the worker gets little CPU (nice 19, the lowest weight): that is
    starvation, not an idle worker, and the stop still throws away its work (the clean-clone CI of 6efaa01
    counted it idle and lost nothing)."""
    lend, s = lender(), session(cpus=0.5)
    feed(lend, s, [0.0, 0.5, 1.0, 1.5])
    feed(lend, s, [1.51, 1.52, 1.53], t0=1004.0, host_cpu=1.0)  # the owner's loop: h1 at its quota
    lend._on_event(s, {"event": "stopped", "reason": "load", "time": 1007.5, "worker_cpu_s": 1.53})
    assert lend.window.lost_s == pytest.approx(1.53) and s.idle_cpu_s == 0.0


@pytest.mark.parametrize("junk", [float("nan"), float("inf"), -1.0, 10**30, True, "12", None])
def test_a_junk_reading_is_ignored(junk):
    lend, s = lender(), session()
    feed(lend, s, [0.0, 0.5])
    lend._on_event(s, {"event": "check", "time": 1002.0, "worker_cpu_s": junk})
    assert lend.window.work_s == pytest.approx(0.5) and s.cpu_s == 0.5


def test_each_window_moves_t_alloc_one_step_on_its_gain_and_the_decision_reads_it():
    lend, s = lender(), session()
    t0 = lend.window.started
    lend._tune(t0 + 30)  # the window is not over: nothing moves
    assert lend.live_cfg.t_alloc == 0.7 and lend.windows == []

    def window(work, lost, waited=True):
        lend.window.work_s, lend.window.lost_s, lend.window.waited = work, lost, waited
        lend._tune(lend.window.started + 60)

    window(12.0, 0.0)  # the first window: up one step
    assert lend.live_cfg.t_alloc == 0.75 and lend.cfg.t_alloc == 0.7
    window(18.0, 0.0)  # gained more: on up
    assert lend.live_cfg.t_alloc == 0.8
    window(18.0, 9.0)  # preemptions threw away half: gained less, turn round
    assert lend.live_cfg.t_alloc == 0.75
    window(0.0, 0.0, waited=False)  # nothing waited for slack: nothing learnt, no event
    assert lend.live_cfg.t_alloc == 0.75 and len(lend.windows) == 4
    msgs = [m for k, m, _ in lend.store.got if k == "ubis"]
    assert len(msgs) == 3 and msgs[0].startswith("T_alloc 0.7 -> 0.75") and "12.0 CPU s" in msgs[0]
    assert "0 preemption(s) threw away 9.0" in msgs[2] and msgs[2].startswith("T_alloc 0.8 -> 0.75")
    assert lend.windows[-1] == {"span_s": 60.0, "work_s": 0.0, "lost_s": 0.0, "gain": 0.0, "waited": False,
                                "preemptions": 0, "t_alloc": 0.75, "next": 0.75}
    # the grant's cap follows the climbed T_alloc: (T_alloc - use) x the host's cores
    a = ClusterView("a", ClusterState.ACTIVE, 1, (NodeView("h1", Role.CORE),), slots_per_node=2)
    b = ClusterView("b", ClusterState.ACTIVE, 1, (NodeView("h3", Role.CORE),),
                    samples=(ClusterMetrics(0.0, pending_tasks=4),), slots_per_node=2)
    snap = Snapshot(now=0.0, capacity=2, free_hosts=(), clusters=(a, b), host_use=(HostUse("h1", 0.2, 0.1, cpus=0.6),))
    plan = opp.decide(snap, lend.live_cfg)
    assert plan.wanted and plan.grants[0].cpus == pytest.approx((0.75 - 0.2) * 0.6, abs=1e-4)
    assert not opp.decide(snap, lend.live_cfg.model_copy(update={"clusters": {}})).wanted


def test_without_tuning_the_lender_keeps_the_configured_t_alloc_and_counts_nothing():
    c = opp.OpportunisticConfig(clusters={"b": "accept"}, t_alloc=0.8)
    lend = Lender(Events(), None, None, c, None)
    feed(lend, session(), [0.0, 0.5, 1.0])
    lend._tune(lend.window.started + 10**6)
    assert lend.live_cfg.t_alloc == 0.8 and lend.live_cfg is c and lend.window.work_s == 0 and lend.windows == []


def test_a_withdrawn_hosts_readings_wait_out_the_workers_last_seconds():
    """The host's use over the last 3 s still holds the withdrawn worker: the host is not lent again before
    those readings have passed (a loan from them would cap the next worker by this one's use)."""
    import time

    from fawkes.coordinator.ubis import WINDOW_S

    lend, s = lender(), session()
    s.ended.set()  # the agent has exited
    lend.sessions["h1"] = s
    t = time.monotonic()
    lend._withdraw("h1", "the borrower is no longer active")
    assert "h1" not in lend.sessions and t + WINDOW_S < lend.cool["h1"] <= time.monotonic() + WINDOW_S + 1
    assert any("withdrawn" in m for _, m, _ in lend.store.got)


class Chan:
    """The agent's end of a session: what the Lender wrote to it."""

    def __init__(self):
        self.sent = []

    def sendall(self, data):
        self.sent.append(data)


def test_a_climb_step_moves_every_lent_workers_cap_with_t_alloc():
    """A worker keeps its cap (T_alloc x Cap - Util at its loan) unless told: at each step that moves T_alloc
    the Lender sends each lent worker its cap moved by the step x its host's cores; the agent's ``cap``
    event makes it the session's cap, a ``cap-refused`` one is a warning and changes nothing."""
    lend = lender()
    s1, s2, s3 = (AgentSession(h, "b", "a", cpus, None, Chan(), 0.0) for h, cpus in
                  (("h1", 0.3), ("h2", 0.012), ("h3", 0.4)))
    lend.sessions.update({"h1": s1, "h2": s2, "h3": s3})
    lend.last_use = {"h1": {"cpu": 0.5, "mem": 0.1, "cpus": 0.6}, "h2": {"cpu": 0.9, "mem": 0.1, "cpus": 0.6}}
    lend.window.work_s, lend.window.waited = 12.0, True
    lend._tune(lend.window.started + 60)  # 0.7 -> 0.75: + 0.05 x 0.6 cores
    assert s1.chan.sent == [b"cap 0.3300\n"] and s2.chan.sent == [b"cap 0.0420\n"]
    assert s3.chan.sent == [] and lend.windows[-1]["recapped"] == 2  # h3 unmeasured: its cap stays
    assert s1.cpus == 0.3  # not before the agent says so
    lend._on_event(s1, {"event": "cap", "cpus": 0.33})
    assert s1.cpus == 0.33 and any("CPU cap 0.300 -> 0.330" in m for _, m, _ in lend.store.got)
    for junk in (True, float("nan"), float("inf"), -1, 10**30, "0.5", None):  # an agent's junk changes nothing
        lend._on_event(s1, {"event": "cap", "cpus": junk})
        assert s1.cpus == 0.33, junk
    lend._on_event(s2, {"event": "cap-refused", "reason": "the worker has no cpu group of its own"})
    assert s2.cpus == 0.012 and lend.store.got[-1][2].get("level") == "warning"
    # down again: never under 0.01 cores
    lend.window.work_s, lend.window.lost_s, lend.window.waited = 12.0, 11.0, True
    lend._tune(lend.window.started + 60)  # gained less: 0.75 -> 0.7
    assert lend.live_cfg.t_alloc == pytest.approx(0.7)
    assert s1.chan.sent[-1] == b"cap 0.3000\n" and s2.chan.sent[-1] == b"cap 0.0100\n"
    # a window in which nothing waited moves nothing and sends nothing
    lend.window.work_s, lend.window.waited = 0.0, False
    lend._tune(lend.window.started + 60)
    assert len(s1.chan.sent) == 2
