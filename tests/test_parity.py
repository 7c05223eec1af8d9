"""One loop, two drivers: a simulator run's observations replayed through the coordinator's
Control on a real store (SQLite, PostgreSQL) give the same snapshots, decisions, admissions,
refills, plans and memory, step by step (tests/parity.py does the replay)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from fawkes.mechanism import Memory, Role, Settings, controller, policy_names
from fawkes.mechanism.koala_mr import RUNNER_POLICIES, ResizeParams
from fawkes.presets import preset_names, read_preset
from fawkes.sim.costs import cost_model
from fawkes.sim.engine import Simulator
from fawkes.sim.record import Recorder
from fawkes.sim.workloads import GB, WorkloadCluster, Workload, ch2, make_job
from fawkes.store import Store
from tests.parity import Clock, replay

try:
    from store_fixtures import pg_server, store_url  # noqa: F401
except ImportError:
    from tests.store_fixtures import pg_server, store_url  # noqa: F401

SLOTS = 2  # task slots per node = a lab host's cores


def workload(seed: int, *, capacity: int = 10, clusters: int = 3, jobs: int = 12, horizon: float = 900.0,
             late: bool = True, estimates: bool = False) -> Workload:
    """A small random workload: clusters (some requested late, some loading a dataset) and jobs of
    WordCount/Sort in bursts, so that growth, shrinks (FP and DP), admissions with reclaim,
    inactivity and re-requests all happen."""
    rng = np.random.default_rng(seed)
    cost = cost_model((), map_slots=SLOTS, reduce_slots=1)
    specs = []
    for i in range(clusters):
        request = float(rng.uniform(0, horizon / 2)) if late and i else 0.0
        specs.append(WorkloadCluster(f"c{i}", request, int(rng.integers(1, 3)), float(rng.uniform(0, 2)) * GB,
                                 preloaded=bool(rng.integers(0, 2)) if request == 0 else False))
    if estimates:  # what the requests tell the admission disciplines: some no estimate, some a tight maxT
        specs = [replace(c, expected_duration_s=None if i == 1 else float(rng.uniform(60, 600)),
                         deadline_s=None if i == 2 else float(rng.uniform(100, 900))) for i, c in enumerate(specs)]
    out = []
    for j in range(jobs):
        c = specs[int(rng.integers(0, clusters))]
        maps = int(rng.integers(2, 40))
        out.append(make_job(cost, rng, j, c.name, ("wordcount", "sort")[int(rng.integers(0, 2))],
                            maps * 64 * 1024**2, maps, int(rng.integers(1, 4)),
                            c.request_s + float(rng.uniform(0, horizon))))
    out.sort(key=lambda j: j.submit_s)
    jobs_ = tuple(type(j)(**{**{f: getattr(j, f) for f in j.__slots__}, "id": k}) for k, j in enumerate(out))
    return Workload(f"parity-{seed}", tuple(specs), jobs_, capacity, period_s=60.0, cost=cost)


def fail_a_host(sim: Simulator, t: float) -> None:
    """Kill a transient node's host if there is one (draining or not), else a free host."""
    for c in sim.order:
        for n in c.nodes.values():
            if n.role is not Role.CORE:
                sim.fail_host(n.host, t)
                return
    if sim.free:
        sim.fail_host(sim.free[-1], t)


def run_both(wl: Workload, settings: Settings | None, url: str, runner: ResizeParams | None = None,
             failures: tuple[float, ...] = (), rec: Recorder | None = None,
             host_racks: dict[str, str] | None = None, make=Simulator, kinds=None) -> tuple[Simulator, int]:
    rec = Recorder() if rec is None else rec
    sim = make(wl, settings, recorder=rec, check_invariants=True, ch2=runner, host_racks=host_racks)
    for t in failures:
        sim.at(t, fail_a_host)
    sim.run()
    assert sim.stats.invariant_errors == []
    if runner is not None:  # the coordinator's loop for a runner policy: offers every offer period
        settings = Settings(policy="None", period_s=runner.offer_period_s)
    clock = Clock()
    store = Store(url, clock=clock)
    try:
        steps = replay(rec, store, clock, settings, wl.capacity, wl.cost.slots_per_node, runner, host_racks,
                       kinds=kinds)
    finally:
        store.close()
    assert steps == rec.steps
    return sim, steps


FAWKES = [p for p in policy_names()]
PRESETS = [n for n in preset_names() if read_preset(n).settings is not None]
RUNNER_PRESETS = [n for n in preset_names() if read_preset(n).resize is not None]


@pytest.mark.parametrize("policy", ["TD", "PU"])
def test_a_mixed_pool_decides_alike_in_both_drivers(policy, tmp_path):
    """Spark, Flink, Spark-on-shared-storage and Dask MR-clusters on one pool (issue 24): the coordinator's
    loop knows no kind, so a pool whose clusters are of four kinds decides as the simulator does; TR growth
    (Dask and Spark on shared storage have no TC nodes), policies every kind can feed (tasks, slots)."""
    from fawkes.frameworks.base import driver_class

    order = ["spark-hdfs", "flink-hdfs", "spark", "dask"]
    wl = workload(7)
    kinds = {c.name: order[i % len(order)] for i, c in enumerate(wl.clusters)}
    assert len(set(kinds.values())) == min(len(order), len(wl.clusters)) >= 3
    from fawkes.mechanism.policies import get_policy

    # the coordinator's check_kinds accepts it: every kind feeds what the policy weighs and has TR nodes
    assert all(set(group) & set(driver_class(k).signals) and Role.TR in driver_class(k).roles
               for k in kinds.values() for group in get_policy(policy).needs), policy
    s = Settings(policy=policy, period_s=60, sample_period_s=10, tau=1.0, grow_type=Role.TR)
    sim, steps = run_both(wl, s, f"sqlite:///{tmp_path / 'state.db'}", kinds=kinds.get)
    assert steps > 0 and sim.stats.reconfigurations > 0


def test_samples_go_through_the_daemons_documents(tmp_path, monkeypatch):
    """Every sample of a spark-hdfs cluster reaches the store through the daemons' documents and the live
    sampler's parsing (tests/daemon_documents.py): each one is sampled so, and a parser that misreads a
    stage's completed tasks is caught at the first sample with a completed task."""
    import tests.parity as parity
    from fawkes.frameworks import metrics as M

    counted = []
    real = parity.DaemonSampler.sample
    monkeypatch.setattr(parity.DaemonSampler, "sample", lambda self, *a: (counted.append(a[0]), real(self, *a))[1])
    s = Settings(policy="TT", period_s=60, sample_period_s=10, tau=1.0, grow_type=Role.TC)
    rec = Recorder()
    run_both(workload(7), s, f"sqlite:///{tmp_path / 'a.db'}", rec=rec)
    assert len(counted) == sum(ev.kind == "sample" for ev in rec.events) > 100

    parse = M.parse_stages
    monkeypatch.setattr(M, "parse_stages", lambda doc: replace(parse(doc), completed=0))
    with pytest.raises(parity.Mismatch, match=r"sample at .* from the daemons' documents.completed_tasks"):
        run_both(workload(7), s, f"sqlite:///{tmp_path / 'b.db'}")


@pytest.mark.parametrize("policy", FAWKES)
def test_every_policy_decides_alike_in_both_drivers(policy, tmp_path):
    s = Settings(policy=policy, period_s=60, sample_period_s=10, tau=1.0, grow_type=Role.TC)
    sim, steps = run_both(workload(7), s, f"sqlite:///{tmp_path / 'state.db'}")
    assert steps > 20 and sim.decisions > 5


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_decides_alike_in_both_drivers(preset, tmp_path):
    s = Settings(**(read_preset(preset).settings.model_dump() | {"period_s": 60.0, "sample_period_s": 10.0}))
    run_both(workload(11), s, f"sqlite:///{tmp_path / 'state.db'}")


@pytest.mark.parametrize("policy", list(RUNNER_POLICIES) + [f"preset:{n}" for n in RUNNER_PRESETS])
def test_chapter2_runner_policies_decide_alike_in_both_drivers(policy, tmp_path):
    """KOALA-MR's GS, GG, GGD (and static), by name and as the shipped presets: the thesis'
    chapter-2 workload, shortened; every offer round's plan is the coordinator's too."""
    params = (read_preset(policy.split(":", 1)[1]).resize if policy.startswith("preset:")
              else ResizeParams.for_policy(policy))
    wl = replace(ch2(1), jobs=ch2(1).jobs[:25])
    sim, steps = run_both(wl, None, f"sqlite:///{tmp_path / 'state.db'}", params)
    assert steps > 3 and (params.policy == "static" or sim.stats.reconfigurations > 0)


@pytest.mark.parametrize("extra", [
    {"cooldown_s": 120.0}, {"cap_to_demand": True}, {"min_change_nodes": 2}, {"shrink_after_ticks": 3},
    {"discrimination_window": "cumulative", "tau": 0.5}, {"grow_type": Role.TR, "fp_victim_order": "newest"},
    {"admission_reclaim": "surplus", "backfill": True}, {"inactivity": "weight_zero"},
    {"policy": "EQ", "eq_gated": True}, {"all_zero": "equal", "policy": "JD"},
    {"skip_unfittable": True}, {"skip_unfittable": True, "starvation_guard_s": 60.0},
    {"admission_order": "sjf", "starvation_guard_s": 120.0}, {"admission_order": "utility", "deadline_purge": True},
], ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
def test_settings_decide_alike_in_both_drivers(extra, tmp_path):
    s = Settings(**({"policy": "TD", "period_s": 60.0, "sample_period_s": 10.0, "tau": 1.0} | extra))
    run_both(workload(3, clusters=3, jobs=16), s, f"sqlite:///{tmp_path / 'state.db'}")


# --- BIG-C's preemption settings (issue 11): each variant must also exercise its setting
@pytest.mark.parametrize("extra", [
    {"regrow_delay_ticks": 2}, {"regrow_delay_ticks": 1, "shrink_after_ticks": 2},
    {"shrink_amount": "demand_capped"},
    {"shrink_amount": "demand_capped", "victim_order": "most_discriminated", "regrow_delay_ticks": 1},
    {"shrink_amount": "demand_capped", "victim_order": "longest_remaining"},
    {"latency_clusters": ("c1",)}, {"latency_clusters": ("c0", "c2"), "latency_share": 0.8, "tau": 1e9},
    {"latency_clusters": ("c1",), "reserve_fraction": 0.5},
], ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
def test_preemption_settings_decide_alike_in_both_drivers(extra, tmp_path):
    s = Settings(**({"policy": "TD", "period_s": 60.0, "sample_period_s": 10.0, "tau": 1.0} | extra))
    rec = Recorder()
    run_both(workload(4, clusters=3, jobs=16), s, f"sqlite:///{tmp_path / 'state.db'}", rec=rec)
    steps = [ev for ev in rec.events if ev.kind in ("tick", "between")]
    if s.regrow_delay_ticks:  # some victim waited
        assert any(any(ev.data[1].regrow_votes.values()) for ev in steps if ev.kind == "tick")
    if s.shrink_amount == "demand_capped":  # some tick took less than the whole surplus
        full = Settings(**(s.model_dump() | {"shrink_amount": "full", "victim_order": "largest_surplus"}))
        before = [Memory()] + [ev.data[2] for ev in steps[:-1]]
        assert any(controller.tick(m, ev.data[0], full)[0].targets != ev.data[1].targets
                   for m, ev in zip(before, steps) if ev.kind == "tick")
    if s.latency_clusters and s.tau > 1:  # some latency cluster opened the gate past tau
        assert any("tau bypassed" in ev.data[1].reason for ev in steps if ev.kind == "tick")


# --- UBIS U-7 (pu_signal: measured): the simulator's telemetry reaches the sample through sample_cluster's
# node_cpu, the stored sample is what the coordinator weighs; both drivers decide alike, and the signal was read
@pytest.mark.parametrize("policy", ["PU", "RU"])
def test_measured_pu_decides_alike_in_both_drivers(policy, tmp_path):
    s = Settings(policy=policy, period_s=60.0, sample_period_s=10.0, tau=1.0, pu_signal="measured")
    rec = Recorder()
    run_both(workload(5, clusters=3, jobs=16), s, f"sqlite:///{tmp_path / 'state.db'}", rec=rec)
    smp = [ev.data for ev in rec.events if ev.kind == "sample" and ev.data.running_tasks]
    assert smp and any(m.busy_slots < min(m.running_tasks, m.configured_slots) for m in smp)


# --- scheduled minima (issue 27, mechanism/schedules.py): both snapshot builders apply the same function
@pytest.mark.parametrize("sched", [
    [{"cluster": "c0", "cron": "*/5 * * * *", "min_core": 5, "for": "2m"}],
    [{"cluster": "c0", "cron": "*/10 * * * *", "min_core": 4, "for": "7m"},  # overlapping, and beyond the pool
     {"cluster": "c1", "cron": "*/5 * * * *", "min_core": 9, "for": "3m"},
     {"cluster": "c1", "cron": "0 * * * *", "min_core": 2, "for": "1h"}],
], ids=["one", "overlapping-beyond-the-pool"])
def test_schedules_decide_alike_in_both_drivers(sched, tmp_path):
    s = Settings(policy="TD", period_s=60.0, sample_period_s=10.0, tau=1.0, grow_type=Role.TC, schedules=sched)
    rec = Recorder()
    run_both(workload(3, clusters=3, jobs=16), s, f"sqlite:///{tmp_path / 'state.db'}", rec=rec)
    raised = [c for ev in rec.events if ev.kind in ("tick", "between") for c in ev.data[0].clusters
              if c.core_min is not None]
    assert raised and all(c.min_core > c.core_min for c in raised)
    assert all(sum(c.min_core for c in ev.data[0].clusters) <= ev.data[0].capacity
               for ev in rec.events if ev.kind in ("tick", "between"))


# --- CERES (issue 11, mechanism/ceres.py): neither the store nor the base simulator carries the usage
# windows or progress samples yet, so both drivers see none: with CERES on they must still decide alike,
# and as without it (the settings act on the signals only)
@pytest.mark.parametrize("extra", [
    {"swollen_threshold": 0.5}, {"straggler_factor": 2.0, "straggler_expand_nodes": 2},
    {"swollen_threshold": 0.9, "straggler_factor": 1.5, "shrink_amount": "demand_capped", "regrow_delay_ticks": 1},
], ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
def test_ceres_settings_decide_alike_in_both_drivers(extra, tmp_path):
    s = Settings(**({"policy": "TD", "period_s": 60.0, "sample_period_s": 10.0, "tau": 1.0} | extra))
    rec = Recorder()
    run_both(workload(4, clusters=3, jobs=16), s, f"sqlite:///{tmp_path / 'state.db'}", rec=rec)
    off = Settings(**(s.model_dump() | {"swollen_threshold": None, "straggler_factor": None}))
    plain = Recorder()
    Simulator(workload(4, clusters=3, jobs=16), off, recorder=plain).run()
    assert plain.steps == rec.steps
    assert [(ev.data[1].targets, ev.data[1].plan) for ev in plain.events if ev.kind == "tick"] == [
        (ev.data[1].targets, ev.data[1].plan) for ev in rec.events if ev.kind == "tick"]


# --- CERES with its signals: the simulator that measures node usage windows and job progress
# (fawkes/seeds/ceres.py) recorded, and the same usage and progress handed to the coordinator as its
# sampler hands them (tests/parity.py): the snapshots (usage on every measured node, progress per
# cluster), decisions, plans and memory agree, and each run exercises its signal
@pytest.mark.parametrize("arm", ["C-1", "C-2"])
def test_ceres_signals_decide_alike_in_both_drivers(arm, tmp_path):
    from functools import partial

    from fawkes.seeds import ceres as simc

    if arm == "C-1":  # SIM-C1's mix (a swollen batch cluster) under CERES on BIG-C-like, cut to 450 s
        wl, use = simc.mixed(1)
        extra = simc.BIGC_LIKE | simc.CERES_C1
        want = "C-1 reclaimed idle swollen nodes first"
    else:  # SIM-C2's stragglers with idle capacity waiting for the weights (tau 1000), cut to 450 s
        wl, use = simc.stragglers(1)
        extra = {"idle_timeout_s": 60.0, "tau": 1000.0} | simc.C2_ON
        want = "expanded from idle capacity"
    wl = replace(wl, jobs=tuple(j for j in wl.jobs if j.submit_s < 450.0))
    s = simc._settings(**extra)
    rec = Recorder()
    run_both(wl, s, f"sqlite:///{tmp_path / 'state.db'}", rec=rec, make=partial(simc.CeresSimulator, use=use))
    snaps = [ev.data[0] for ev in rec.events if ev.kind in ("tick", "between")]
    assert any(n.usage is not None for sn in snaps for c in sn.clusters for n in c.nodes)
    assert any(c.progress for sn in snaps for c in sn.clusters)
    assert any(want in ev.data[1].reason for ev in rec.events if ev.kind == "tick")


@pytest.mark.parametrize("extra", [
    {"admission_order": "sjf"}, {"admission_order": "utility", "skip_unfittable": True},
    {"deadline_purge": True, "backfill": True}, {"admission_order": "utility", "deadline_purge": True,
                                                 "starvation_guard_s": 200.0},
], ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
@pytest.mark.parametrize("seed", [4, 8])
def test_admission_disciplines_decide_alike_in_both_drivers(extra, seed, tmp_path):
    """Requests with expected durations and deadlines (stored by the coordinator, schema v6), more
    minima than capacity: the disciplines reorder the queue, skip and purge (each run differs from
    FIFO's), and both drivers still decide alike."""
    base = {"policy": "TD", "period_s": 60.0, "sample_period_s": 10.0, "tau": 1.0}
    wl = workload(seed, capacity=4, clusters=4, jobs=14, horizon=400.0, estimates=True)
    sim, _ = run_both(wl, Settings(**(base | extra)), f"sqlite:///{tmp_path / 'state.db'}")
    fifo = Simulator(wl, Settings(**base)).run()
    assert sim.stats.admission_latency != fifo.stats.admission_latency or sim.stats.purged
    assert bool(sim.stats.purged) == bool(extra.get("deadline_purge"))


@pytest.mark.parametrize("extra", [
    {"placement": "hard"}, {"placement": "soft"}, {"placement": "soft", "locality_penalty": 3.0},
    {"placement": "soft", "grow_type": Role.TR, "shrink_after_ticks": 2},
], ids=lambda d: ",".join(f"{k}={v}" for k, v in d.items()))
@pytest.mark.parametrize("seed", [3, 9])
def test_placement_decides_alike_in_both_drivers(extra, seed, tmp_path):
    """Hosts on 3 racks (inventory labels, stored with the hosts, schema v7): grows prefer the racks of
    a cluster's core nodes (hard: only those; soft: wait-or-go by the expected-free-time table), and
    both drivers still decide alike; each run places some grow differently from placement none."""
    base = {"policy": "TD", "period_s": 60.0, "sample_period_s": 10.0, "tau": 1.0}
    wl = workload(seed, capacity=9, clusters=3, jobs=16)
    racks = {f"h{i:05d}": f"r{i % 3}" for i in range(wl.capacity)}  # interleaved: placement order mixes racks
    rec = Recorder()
    run_both(wl, Settings(**(base | extra)), f"sqlite:///{tmp_path / 'state.db'}", rec=rec, host_racks=racks)
    plain = Recorder()
    Simulator(wl, Settings(**(base | {k: v for k, v in extra.items() if k not in ("placement", "locality_penalty")})),
              recorder=plain, host_racks=racks).run()

    def grows(r):
        return [(g.cluster, g.host) for ev in r.events if ev.kind in ("tick", "between")
                for g in _plans_of(ev.data[1])]
    assert grows(rec) != grows(plain)


def _plans_of(result):
    """The grows of a tick's decision or of a between-ticks step's admission and refill plans."""
    if hasattr(result, "plan"):
        return result.plan.grows
    return tuple(result.admission_plan.grows) + tuple(result.refill_plan.grows)


@pytest.mark.parametrize("policy", ["TD", "EQ", "td-damped"])
def test_host_failures_decide_alike_in_both_drivers(policy, tmp_path):
    """Hosts die during the run (transient nodes' hosts, else free ones): the pool shrinks, the
    clusters that lost a node refill, and both drivers still decide alike."""
    s = (Settings(**(read_preset(policy).settings.model_dump() | {"period_s": 60.0, "sample_period_s": 10.0}))
         if policy == "td-damped" else Settings(policy=policy, period_s=60, sample_period_s=10, tau=1.0))
    sim, _ = run_both(workload(7, capacity=12), s, f"sqlite:///{tmp_path / 'state.db'}",
                      failures=(95.0, 200.0, 333.0, 480.0))
    assert sim.capacity == 8


def test_decisions_alike_on_postgresql_too(store_url):
    s = Settings(policy="TD", period_s=60, sample_period_s=10, tau=1.0, shrink_after_ticks=2, cooldown_s=60)
    _, steps = run_both(workload(5, jobs=10), s, store_url)
    assert steps > 10


@st.composite
def scenarios(draw):
    policy = draw(st.sampled_from(FAWKES))
    s = Settings(
        policy=policy, period_s=float(draw(st.sampled_from([30, 60, 120]))),
        sample_period_s=float(draw(st.sampled_from([5, 10, 15]))),
        tau=draw(st.sampled_from([0.0, 1.0, 10.0, float("inf")])),
        grow_type=draw(st.sampled_from([Role.TR, Role.TC])),
        cooldown_s=draw(st.sampled_from([0.0, 0.0, 90.0])),
        cap_to_demand=draw(st.booleans()),
        min_change_nodes=draw(st.sampled_from([0, 0, 2])),
        shrink_after_ticks=draw(st.sampled_from([1, 1, 2, 3])),
        discrimination_window=draw(st.sampled_from(["interval", "cumulative"])),
        idle_timeout_s=draw(st.sampled_from([None, 30.0])),
        backfill=draw(st.booleans()),
        regrow_delay_ticks=draw(st.sampled_from([0, 0, 1, 3])),
        shrink_amount=draw(st.sampled_from(["full", "full", "demand_capped"])),
        latency_clusters=draw(st.sampled_from([(), (), ("c1",)])),
    )
    wl = workload(draw(st.integers(0, 10**6)), capacity=draw(st.integers(3, 12)),
                  clusters=draw(st.integers(1, 3)), jobs=draw(st.integers(1, 10)),
                  horizon=float(draw(st.sampled_from([300, 900]))))
    failures = tuple(sorted(draw(st.lists(st.floats(1, 900), max_size=min(2, wl.capacity - 3)))))
    return wl, s, failures


@given(scenarios())
@hsettings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
def test_generated_sequences_decide_alike_in_both_drivers(tmp_path_factory, scenario):
    wl, s, failures = scenario
    run_both(wl, s, f"sqlite:///{tmp_path_factory.mktemp('parity') / 'state.db'}", failures=failures)
