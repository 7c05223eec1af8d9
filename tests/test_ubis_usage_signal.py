"""UBIS U-7: the per-node utilisation telemetry feeds PU (and RU's PU part) with ``pu_signal: measured``.

The pure reading (fawkes.mechanism.sampling), the simulator's telemetry (Simulator.node_cpu), the
coordinator's collectors (NodeWindows.cpu_now, Lender.cpu_use, Sampler.node_cpu), bad values, and SIM-U7's
directions (fawkes/seeds/usage_signal.py; docs/reproduction.md)."""

from __future__ import annotations

import math
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from fawkes.coordinator.sampler import Sampler
from fawkes.coordinator.ubis import WINDOW_S, Lender
from fawkes.coordinator.usage import UsageWindow
from fawkes.mechanism import JobFacts, Settings, get_policy, sample_cluster
from fawkes.mechanism.sampling import measured_busy_slots
from fawkes.seeds import usage_signal
from fawkes.sim.costs import cost_model
from fawkes.sim.engine import Simulator
from fawkes.sim.runner import PolicySpec, run_one
from tests.conftest import cli_in_process

SLOTS = Settings(policy="PU")
MEASURED = Settings(policy="PU", pu_signal="measured")
JOBS = [JobFacts(0.0, pending_tasks=5, running_tasks=8)]


# --- the pure reading --------------------------------------------------------------------------------

def test_slots_ignore_the_telemetry_and_measured_reads_it():
    kw = {"busy_slots": 8.0, "configured_slots": 8.0, "node_cpu": (0.5, 0.25)}
    assert sample_cluster(10.0, JOBS, SLOTS, **kw).busy_slots == 8.0
    assert sample_cluster(10.0, JOBS, MEASURED, **kw).busy_slots == 8.0 * 0.375
    # nothing measured: the occupied slots stand (a cluster is not idle because nobody looked)
    assert sample_cluster(10.0, JOBS, MEASURED, busy_slots=6.0, configured_slots=8.0).busy_slots == 6.0


@pytest.mark.parametrize("cpu, want", [
    ((1.7,), 1.0), ((-0.3,), 0.0), ((10**30,), 1.0), ((math.nan, 0.5), 0.5), ((math.inf, 0.2), 0.2),
    ((-math.inf, 0.4), 0.4),
])
def test_readings_are_clamped_and_non_finite_ones_left_out(cpu, want):
    assert measured_busy_slots(10.0, cpu) == pytest.approx(10.0 * want)


def test_no_finite_reading_is_no_reading():
    assert measured_busy_slots(10.0, (math.nan, math.inf)) is None
    assert sample_cluster(0.0, JOBS, MEASURED, busy_slots=3.0, configured_slots=8.0,
                          node_cpu=(math.nan,)).busy_slots == 3.0


def test_two_saturated_clusters_share_equally_by_slots_and_by_use_when_measured():
    def samples(s, cpu):
        return [sample_cluster(t, JOBS, s, busy_slots=16.0, configured_slots=16.0, node_cpu=cpu) for t in (5.0, 10.0)]

    for s, want in ((SLOTS, (0.5, 0.5)), (MEASURED, (0.75, 0.25))):
        _, w = get_policy("PU").weights({"wc": samples(s, (0.9, 0.9)), "sort": samples(s, (0.3, 0.3))}, s)
        assert (w["wc"], w["sort"]) == pytest.approx(want)
    # RU = lam * PU + (1 - lam) * DU: the measured PU part moves it too (DU equal here)
    ru = Settings(policy="RU", lam=0.5, pu_signal="measured")
    du = {"output_bytes": 1.0, "storage_capacity": 10.0}
    smp = {c: [sample_cluster(5.0, JOBS, ru, busy_slots=16.0, configured_slots=16.0, node_cpu=cpu, **du)]
           for c, cpu in (("wc", (0.9,)), ("sort", (0.3,)))}
    _, w = get_policy("RU").weights(smp, ru)
    assert w["wc"] == pytest.approx(0.5 * 0.75 + 0.5 * 0.5)


@pytest.mark.parametrize("bad", ["cpu", "", "Measured", None, 1, True, "measured\n", "slots\x00"])
def test_a_bad_pu_signal_is_refused(bad):
    with pytest.raises(ValueError, match="pu_signal"):
        Settings(pu_signal=bad)


@pytest.mark.parametrize("line", ["pu_signal: cpu", "pu_signal: .nan", "pu_signal: 1000000000000000000000000000000",
                                  "pu_signal: [measured]", "pu_signal: -1"])
def test_a_bad_pu_signal_in_a_preset_is_one_line_naming_file_and_field_exit_2(line, tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text(f"policy: PU\n{line}\n")
    r = cli_in_process(["policy", "show", str(f)], cwd=tmp_path)
    assert r.returncode == 2, r.stdout + r.stderr
    err = r.stderr.strip()
    assert len(err.splitlines()) == 1 and "bad.yaml" in err and "pu_signal" in err, err
    assert list(tmp_path.iterdir()) == [f]


def test_a_good_pu_signal_loads_from_a_preset(tmp_path):
    f = tmp_path / "pu.yaml"
    f.write_text("policy: PU\npu_signal: measured\n")
    r = cli_in_process(["policy", "show", str(f)], cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "pu_signal: \"measured\"" in r.stdout


# --- the simulator's telemetry -------------------------------------------------------------------------

@pytest.mark.parametrize("value", [2, -0.1, math.nan, math.inf, 10**30, "x", "0.5 x"])
def test_a_bad_task_cpu_fraction_is_refused_naming_the_field(value):
    for field in ("map_cpu", "red_cpu"):
        with pytest.raises(ValueError, match=f"apps.wc.{field}"):
            cost_model(((f"apps.wc.{field}", value),))


def test_tasks_that_use_their_whole_slot_measure_as_their_slots():
    """With every application's tasks at 1.0 of a slot, the measured signal is the slot signal: the
    same runs, decision for decision."""
    full = tuple((f"apps.{a}.{f}", 1.0) for a in ("wordcount", "sort") for f in ("map_cpu", "red_cpu"))
    wl = usage_signal.mix(1)
    wl = replace(wl, cost=cost_model(full), jobs=wl.jobs[:60])
    a = run_one(wl, PolicySpec("PU", {"policy": "PU"}), 1)
    b = run_one(wl, PolicySpec("PUm", {"policy": "PU", "pu_signal": "measured"}), 1)
    assert (a.mean_slowdown, a.reconfigurations, a.cluster_mean_slowdown) == (
        b.mean_slowdown, b.reconfigurations, b.cluster_mean_slowdown)


def test_a_nodes_measured_cpu_is_its_tasks_fractions_over_its_slots():
    wl = usage_signal.mix(1)
    sim = Simulator(wl, Settings(policy="PU", pu_signal="measured", period_s=120.0))
    seen = []

    def look(s, at):
        for c in s.clusters.values():
            per = c.slots_per_node
            for n, cpu in zip([n for n in c.nodes.values() if n.ready and not n.draining], s.node_cpu(c)):
                apps = [s.cost.apps[t.job.spec.app] for t in n.tasks]
                want = sum(a.map_cpu if t.is_map else a.red_cpu for a, t in zip(apps, n.tasks)) / per
                seen.append((cpu, want, len(n.tasks)))

    for t in range(300, 7200, 300):
        sim.at(float(t), look)
    sim.run()
    assert seen and any(k for *_, k in seen)
    assert all(cpu == pytest.approx(want) for cpu, want, _ in seen)
    assert all(0.0 <= cpu <= 1.0 for cpu, *_ in seen)


# --- the coordinator's collectors -----------------------------------------------------------------------

def test_usage_window_cpu_now_is_the_last_interval():
    from fawkes.coordinator.usage import Reading

    w = UsageWindow(60.0)
    w.add(Reading(100.0, 2.0, 10.0, 100, 50, "host", "host"))
    assert w.cpu_now() is None  # one reading: no CPU yet
    w.add(Reading(110.0, 2.0, 20.0, 100, 50, "host", "host"))  # 10 CPU-s over 10 s x 2 cores
    assert w.cpu_now() == pytest.approx(0.5)
    w.add(Reading(120.0, 2.0, 22.0, 100, 50, "host", "host"))
    assert w.cpu_now() == pytest.approx(0.1)


def test_sampler_reads_the_ubis_agent_when_handed_over_else_its_windows():
    def node(i, h):
        return SimpleNamespace(id=i, host=h)

    s = Sampler(None, None, None, MEASURED)
    assert s.windows is not None  # U-7 alone starts the per-node windows
    s.windows = SimpleNamespace(cpu_now=lambda: {1: 0.4})
    assert s.node_cpu([node(1, "h1"), node(2, "h2")]) == [0.4]
    s.use_host_cpu(lambda: {"h2": 0.7, "h9": 0.1})
    assert s.windows is None  # one collector per host: CERES is off
    assert s.node_cpu([node(1, "h1"), node(2, "h2")]) == [0.7]

    def broken():
        raise OSError("monitor gone")

    s.use_host_cpu(broken)
    assert s.node_cpu([node(2, "h2")]) == []  # unmeasured, the sampler goes on
    ceres = Sampler(None, None, None, Settings(policy="PU", pu_signal="measured", swollen_threshold=0.5))
    ceres.use_host_cpu(dict)
    assert ceres.windows is not None  # C-1 still needs its windows
    assert Sampler(None, None, None, SLOTS).windows is None


def test_lender_cpu_use_is_the_recent_mean_of_unlent_hosts():
    lender = Lender.__new__(Lender)
    now = time.monotonic()
    lender.sessions = {"lent": object()}
    lender.samples = {"a": [(now - WINDOW_S - 5, 1.0, 0.1, 2.0), (now - 1, 0.2, 0.1, 2.0), (now, 0.4, 0.1, 2.0)],
                      "stale": [(now - WINDOW_S - 1, 0.9, 0.1, 2.0)], "lent": [(now, 0.9, 0.1, 2.0)]}
    assert lender.cpu_use() == {"a": pytest.approx(0.3)}


# --- SIM-U7 -------------------------------------------------------------------------------------------

def test_sim_u7_directions_on_seeds_1_to_5():
    """Measured PU moves node-hours to the CPU-bound cluster, whose slowdown falls, and the overall mean
    falls; the I/O-bound cluster stays within +10 % (bench/results/sim_u7_pu_signal_*.json)."""
    r = usage_signal.sim_u7([1, 2, 3, 4, 5])
    rows = {row["signal"]: row for row in r["rows"]}
    assert rows["PU"]["pu_saturated"] == 1.0 and rows["PU[measured]"]["pu_saturated"] < 1.0
    for statement, holds in r["expect"]:
        assert holds, statement


# --- the live sampler end to end: a real store, a kind's neutral sample, the measured CPU ----------------

def test_the_sampler_records_pu_from_the_measured_cpu_of_the_running_nodes(tmp_path):
    from fawkes.frameworks.sample import FrameworkSample
    from fawkes.mechanism import ClusterState, Role
    from fawkes.store import Store
    from fawkes.store.lifecycle import NodeState

    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        store.register_framework("spark", "spark")
        store.sync_hosts([{"name": h, "cores": 2} for h in ("h1", "h2", "h3")])
        store.request_cluster("etl", framework="spark", min_core=1)
        store.transition_cluster("etl", ClusterState.DEPLOYING)
        store.transition_cluster("etl", ClusterState.ACTIVE)
        ids = store.allocate_nodes([("etl", h, Role.CORE if h == "h1" else Role.TR, "") for h in ("h1", "h2", "h3")])
        for i in ids[:2]:  # h3's node is still starting: not RUNNING, not measured
            store.transition_node(i, NodeState.PROVISIONING)
            store.transition_node(i, NodeState.RUNNING)
        fs = FrameworkSample(time=0.0, slots=12.0, busy_slots=12.0)  # every slot occupied
        driver = SimpleNamespace(web_ui=lambda spec: None, metrics=lambda spec, jobs: fs)
        fleet = SimpleNamespace(spec=lambda name, states=None: (None, driver))
        clock = iter(range(100, 200)).__next__
        for settings, host_cpu, want in ((SLOTS, None, 12.0), (MEASURED, {"h1": 0.5, "h2": 0.25, "h3": 1.0}, 4.5),
                                         (MEASURED, {}, 12.0)):
            s = Sampler(store, fleet, None, settings, clock=lambda: float(clock()))
            if host_cpu is not None:
                s.use_host_cpu(lambda h=host_cpu: h)
            s.sample("etl")
            assert store.samples("etl")[-1].busy_slots == pytest.approx(want)
    finally:
        store.close()
