"""Reproduction of spec B.4 (S-2.x, S-3.x) with the B.5 corrections, over 5 seeds.

Directions are asserted strictly and magnitudes within the spec's bands; checks the model
does not reproduce are marked xfail with the measured reason (see docs/reproduction.md).
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

import pytest

from fawkes.sim import checks
from fawkes.sim.metrics import aggregate
from fawkes.sim.runner import parse_policy, run_matrix, run_one
from fawkes.sim.workloads import generate

SEEDS = [1, 2, 3, 4, 5]
DAMPED = ["min_change_nodes=10"]  # the anti-flap setting of docs/reproduction.md


@lru_cache(maxsize=None)
def d_results():
    specs = [parse_policy(p, "D") for p in ("None", "EQ", "JD", "DD", "TD", "PU", "DU", "RU", "JS", "JT", "TT")]
    specs.append(parse_policy("TD", "D", DAMPED))
    specs.append(parse_policy("td-damped", "D"))
    m = run_matrix("D", specs, SEEDS)
    return {s.label: aggregate(m[s.label]) for s in specs}, m


def _gain(a, b, cluster=None):
    if cluster:
        return 1 - a["cluster_mean_slowdown"][cluster] / b["cluster_mean_slowdown"][cluster]
    return 1 - a["mean_slowdown"] / b["mean_slowdown"]


# --- S-3.7 (workload D), revised by B.5 item 2 ----------------------------------------------------

def test_s37_td_vs_none_on_most_loaded_cluster():
    r, _ = d_results()
    assert 0.20 <= _gain(r["TD"], r["None"], "C2") <= 0.50
    assert r["TD"]["mean_slowdown"] <= r["None"]["mean_slowdown"]
    for c in ("C1", "C3"):
        assert r["TD"]["cluster_mean_slowdown"][c] <= 1.10 * r["None"]["cluster_mean_slowdown"][c]


def test_s37_td_within_5pct_of_every_policy_and_demand_order():
    r, _ = d_results()
    td = r["TD"]["cluster_mean_slowdown"]["C2"]
    for p in ("EQ", "JD", "DD", "PU", "DU", "RU", "JS", "JT", "TT"):  # spec: TD <= every other policy + 5 %
        assert td <= 1.05 * r[p]["cluster_mean_slowdown"]["C2"], p
    jd, dd = (r[p]["cluster_mean_slowdown"]["C2"] for p in ("JD", "DD"))
    assert jd >= 0.95 * dd and dd >= 0.95 * td  # granularity order, 5 % tie allowed
    assert r["PU"]["mean_slowdown"] < r["DU"]["mean_slowdown"]
    assert r["PU"]["mean_slowdown"] < r["RU"]["mean_slowdown"]


def test_s37_reconfigurations_literal_and_damped():
    r, m = d_results()
    assert r["TD"]["reconfigurations"] > 32  # literal reading: ~80-90 (B.5 item 3)
    damped = r["TD[min_change_nodes=10]"]
    assert 8 <= damped["reconfigurations"] <= 32
    assert all(8 <= x.reconfigurations <= 32 for x in m["TD[min_change_nodes=10]"])
    assert _gain(damped, r["None"], "C2") >= 0.20


def test_s37_td_damped_preset_keeps_the_gain_with_a_few_reconfigurations():
    """cap_to_demand + shrink_after_ticks=4: the nodes move only for C2's three bursts (grow, shrink)."""
    r, m = d_results()
    damped = r["td-damped"]
    assert all(x.reconfigurations <= 8 for x in m["td-damped"])
    assert damped["cluster_mean_slowdown"]["C2"] <= 1.02 * r["TD"]["cluster_mean_slowdown"]["C2"]
    assert _gain(damped, r["None"], "C2") >= 0.30


def test_s37_no_invariant_violations():
    r, _ = d_results()
    assert all(x["invariant_errors"] == 0 for x in r.values())


# --- S-3.5 (workload A timeline) ---------------------------------------------------------------------

def _at(tl, t):
    """The allocation a timeline [(time, nodes), ...] shows at time t (the last change at or before t)."""
    return [n for when, n in tl if when <= t][-1]


def _static_partition(wl, nodes):
    clusters = tuple(dataclasses.replace(c, min_core=nodes) for c in wl.clusters)
    return dataclasses.replace(wl, clusters=clusters)


@pytest.mark.parametrize("seed", SEEDS)
def test_s35_workload_a_timeline(seed):
    """JD, TR, C = 60, T = 60 s; requests at 0/100/200 s, 50 GB each (l^D = 150 s), 50 small jobs each."""
    wl = generate("A", seed)
    r = run_one(wl, parse_policy("JD", "A"), seed, timeline=True, check=True)
    assert r.invariant_errors == [] and r.jobs == 150
    al = r.timeline["allocation"]
    c1, c2, c3 = al["C1"], al["C2"], al["C3"]
    # no global queueing (sum of minima 30 <= 60): every cluster holds its minimum from its request on
    assert _at(c1, 0) == 10 and _at(c2, 100) == 10 and _at(c3, 200) + _at(c3, 200 + 60) >= 10
    # C2 gets 10 idle nodes at t = 100 s: C1 (alone, still loading) was not handed the pool at t = 60 s
    assert _at(c1, 99) == 10
    # C1's input is loaded at 30 + 150 = 180 s; C2 loads until 280 s: C1 reaches 50 at the tick at 180 s
    assert _at(c1, 179) == 10 and _at(c1, 180) == 50
    # C3 gets 10 nodes within T of its request, taken from C1 (C2 is at its minimum, the only donor is C1)
    assert _at(c3, 260) == 10 and _at(c1, 260) == 40 and _at(c2, 260) == 10
    # C1 never goes below its minimum while it holds nodes
    assert all(n >= 10 for _, n in c1 if n > 0)
    # later C3 holds every node not held by an active cluster
    end = max(t for t, _ in c3)
    assert _at(c1, end) == 0 and _at(c3, end) + _at(c2, end) == 60


@lru_cache(maxsize=None)
def a_makespans():
    out = {"JD": [], "static": []}
    for seed in SEEDS:
        wl = generate("A", seed)
        out["JD"].append(run_one(wl, parse_policy("JD", "A"), seed).makespan_s)
        out["static"].append(run_one(_static_partition(wl, 20), parse_policy("None", "A"), seed).makespan_s)
    return {k: sum(v) / len(v) for k, v in out.items()}


def test_s35_makespan_close_to_static_partition():
    """The makespan is bound by C3's input load (ready at 380 s whatever the policy): JD stays within 3 %."""
    m = a_makespans()
    assert abs(m["JD"] / m["static"] - 1) <= 0.03


@pytest.mark.xfail(reason="JD's makespan is 1.9 % above the static 20/20/20 partition (594 vs 583 s): the interval "
                          "mean of the samples (A-1) lags C2's and C3's demand by up to T; TD is 1.2 % below (576 s)",
                   strict=True)
def test_s35_makespan_below_static_partition():
    m = a_makespans()
    assert m["JD"] < m["static"]


def test_s35_literal_all_zero_hands_a_loading_cluster_the_pool():
    """With all_zero=equal (1/n when no cluster shows demand) C1, alone and loading, gets all 60 nodes
    at the first tick and C2 must reclaim by FP instead of finding idle nodes: the reason for the default."""
    r = run_one(generate("A", 1), parse_policy("JD", "A", ["all_zero=equal"]), 1, timeline=True)
    assert _at(r.timeline["allocation"]["C1"], 60) == 60


# --- S-2.x (chapter 2) ------------------------------------------------------------------------------

def test_s20_contention_model_exact():
    c = checks.s2_0()
    assert c["D_t_Gb"] == pytest.approx(921.6) and c["T_t_s"] == pytest.approx(92.16)
    assert c["T_w_s"] == pytest.approx(51.2)


@pytest.mark.xfail(reason="wave quantisation: 800 maps on 320 slots = 2.5 waves; speedup 2.5-3.0 at N = 40",
                   strict=True)
def test_s21_near_linear_speedup():
    sp = checks.s2_1(SEEDS)
    for app in sp:
        for n, s in sp[app].items():
            assert s >= 0.85 * n / 10


def test_s21_speedup_grows_with_nodes():
    sp = checks.s2_1(SEEDS)
    for app in sp:
        vals = [sp[app][n] for n in (10, 20, 30, 40)]
        assert vals == sorted(vals) and vals[-1] >= 2.4


def test_s22_s23_transient_nodes():
    wc, st = checks.s2_2(SEEDS), checks.s2_3(SEEDS)
    assert all(abs(v - 1) <= 0.10 for v in wc.values())
    seq = [st[n] for n in (0, 10, 20, 30)]
    assert seq == sorted(seq) and 2.0 <= st[30] <= 2.7


@lru_cache(maxsize=None)
def ch2_resp():
    specs = [parse_policy(p, "ch2") for p in ("static", "GG", "GS", "GGD")]
    m = run_matrix("ch2", specs, SEEDS)
    return {s.label: aggregate(m[s.label])["mean_response_s"] for s in specs}


def test_s24_chapter2_policies():
    resp = ch2_resp()
    assert resp["GS"] < resp["static"] and resp["GGD"] < resp["static"] and resp["GG"] < resp["static"]
    assert resp["GGD"] <= min(resp["GG"], resp["GS"])  # GGD best, as in the thesis
    assert 1.15 <= resp["static"] / resp["GS"] <= 2.3


@pytest.mark.xfail(reason="measured static/GS = 1.26 and GS ~ GG: the 50-job stream loads 20 nodes lightly, "
                          "so the fast GS growth has little to win", strict=True)
def test_s24_gs_band_and_order():
    resp = ch2_resp()
    assert 1.3 <= resp["static"] / resp["GS"] and resp["GS"] < resp["GG"]


# --- S-3.x micro checks -------------------------------------------------------------------------------

def test_s31_node_types():
    o = checks.s3_1(SEEDS)
    assert 0.30 <= o["sort"]["TR"] <= 0.50 and 0.15 <= o["sort"]["TC"] <= 0.31
    assert o["sort"]["TC"] < o["sort"]["TR"]
    for app in ("wordcount", "pagerank", "trackerovertime"):
        assert o[app]["TR"] <= 0.10 and o[app]["TC"] <= 0.10
    for app in ("kmeans", "activehashes"):
        assert o[app]["TC"] < o[app]["TR"]


def test_s33_growing():
    g = checks.s3_3(SEEDS[:3])
    for app, d in g.items():
        for x in (5, 10, 15, 20):
            assert d["TC"][x] >= d["TR"][x] - 1e-9, (app, x)
    assert g["sort"]["TR"][20] < g["sort"]["TC"][20]
    for kind in ("TR", "TC"):
        assert g["wordcount"][kind][20] >= 0.85 * 40 / 20


def test_s34a_dp_removal_time():
    a = checks.s3_4a()
    for n, per in a.items():
        ks = sorted(per)
        flat = [per[k] for k in ks if k <= n // 2]
        assert max(flat) <= 1.15 * min(flat)
        tail = [per[k] for k in ks if k >= n // 2]
        assert all(b > a_ for a_, b in zip(tail, tail[1:]))
        diffs = [b - a_ for a_, b in zip(tail, tail[1:])]
        assert all(d2 >= d1 - 1e-9 for d1, d2 in zip(diffs, diffs[1:]))  # convex


def test_s34b_dp_slowdown_linear_in_removed_nodes():
    b = checks.s3_4b(SEEDS[:3])
    ks = [0, 2, 5, 8, 10]
    for app, d in b.items():
        ys = [d[k] for k in ks]
        assert ys == sorted(ys)
        assert checks.linear_r2(ks, ys) >= 0.9, app


def test_calibration_large_jobs_within_10pct():
    rows = {(r["app"], r["maps"]): r for r in checks.calibration()}
    for key in (("sort", 200), ("wordcount", 600)):
        assert abs(rows[key]["model_err"]) <= 0.10


# --- S-3.6 (workloads B and C) and S-3.8 (E) ----------------------------------------------------------

def test_s36_tc_beats_tr_for_sort_and_balances_wordcount():
    specs = [parse_policy(p, "C") for p in ("None", "TD")]
    res = {}
    for exp in ("B", "C"):
        for grow in ("tr", "tc"):
            m = run_matrix(exp, specs, SEEDS[:3], grow=grow)
            res[exp, grow] = {s.label: aggregate(m[s.label]) for s in specs}

    def gain(exp, grow, c="C3"):
        r = res[exp, grow]
        return 1 - r["TD"]["cluster_makespan_s"][c] / r["None"]["cluster_makespan_s"][c]

    assert gain("B", "tr") >= 0.30 and gain("B", "tc") >= 0.30
    assert gain("C", "tc") - gain("C", "tr") >= 0.05
    for exp in ("B", "C"):
        for grow in ("tr", "tc"):
            r = res[exp, grow]
            assert r["TD"]["cluster_makespan_s"]["C1"] <= 1.10 * r["None"]["cluster_makespan_s"]["C1"]


SLOW_SHRINK = ["shrink_after_ticks=6"]


@lru_cache(maxsize=None)
def e_results():
    specs = [parse_policy("None", "E"), parse_policy("TD", "E"), parse_policy("td-damped", "E"),
             parse_policy("TD", "E", SLOW_SHRINK)]
    m = run_matrix("E", specs, SEEDS, timeline=True)
    return {s.label: aggregate(m[s.label]) for s in specs}, m


def _time_avg(tl, end):
    """Time-average of a piecewise-constant timeline [(time, value), ...] over [0, end]."""
    pts = [(t, n) for t, n in tl if t < end] + [(end, 0)]
    return sum(n * (pts[i + 1][0] - t) for i, (t, n) in enumerate(pts[:-1])) / end


def test_s38_workload_e_td_helps_heavy_cluster():
    r, _ = e_results()
    for label in ("TD", "td-damped", "TD[shrink_after_ticks=6]"):
        assert r[label]["makespan_s"] < r["None"]["makespan_s"], label
        assert r[label]["cluster_mean_slowdown"]["C1"] < 0.5 * r["None"]["cluster_mean_slowdown"]["C1"], label


def test_s38_fewer_reconfigurations_than_d():
    (rd, _), (re, _) = d_results(), e_results()
    assert re["TD"]["reconfigurations"] < rd["TD"]["reconfigurations"]  # literal: ~74 < ~88


def test_s38_c1_takes_the_movable_nodes_others_stay_at_their_minima():
    """td-damped: C1 holds >= 60 % of the 18 movable nodes on average; C2 and C3 at their minima."""
    _, m = e_results()
    for run in m["td-damped"]:
        al = run.timeline["allocation"]
        end = run.makespan_s
        assert _time_avg(al["C1"], end) - 10 >= 0.6 * 18
        assert _time_avg(al["C3"], end) <= 10.5
        assert _time_avg(al["C2"], end) <= 10.5  # the BTWorld chain, released between incarnations


def test_s38_reconfigurations_in_band_with_slow_shrink():
    """The thesis' 5 (band 2-12): shrinking only after 6 ticks (12 min) of surplus; literal TD gives ~74."""
    r, m = e_results()
    assert r["TD"]["reconfigurations"] > 12
    assert 2 <= r["TD[shrink_after_ticks=6]"]["reconfigurations"] <= 12
    assert all(x.reconfigurations <= 16 for x in m["TD[shrink_after_ticks=6]"])
