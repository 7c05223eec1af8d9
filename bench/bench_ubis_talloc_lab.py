"""Benchmark (pytest-run): UBIS U-6 live on the lab (issue 28): T_alloc climbed online against fixed values.

A lab of 2 hosts with a CPU quota each (0.6 cores, 3 GiB): cluster A holds h1 and refuses to borrow, B holds
h2 and accepts.  A's own load on h1 is a duty-cycle loop in h1's quota group: ``BASE`` of the host, with a
burst to ``BURST`` for ``BURST_S`` seconds every ``PERIOD_S`` (its own work coming and going).  B runs a
long CPU-bound job throughout (pending tasks: it always waits for slack), so h1 is lent to B whenever h1's
use leaves room.  A worker lent at T_alloc is capped at (T_alloc - use) x the host's cores: a burst of A's
pushes h1 to its quota, and the watchdog stops B's worker, once T_alloc + the burst's rise reaches the
preemption limit (0.99).  The Lender measures, per window of ``WINDOW_S`` (one burst each), the CPU seconds
B's workers used (work) and what the watchdog's stops threw away (lost): the gain (work - lost) per second.

Each repetition, in one lab session:

* **fixed**: T_alloc held at each of ``FIXED`` for ``SLOT_WINDOWS`` windows, in ABCCBA order (the worker is
  withdrawn at each change, so every slot starts from a fresh worker);
* **climb**: T_alloc climbed from ``CLIMB_FROM`` (one step of 0.05 a window, ``fawkes.mechanism.talloc``)
  for ``CLIMB_WINDOWS`` windows;

the second repetition runs the climb first.  Run by hand (root, network namespaces, cgroups, the lab dists
of scripts/setup), from a frozen worktree::

    FAWKES_BENCH_OUT=bench/results/ubis_talloc_lab_DATE.json python3 -m pytest -s -p no:cacheprovider \\
        bench/bench_ubis_talloc_lab.py

Lab hosts are CPU quotas of one 2-core machine: the figures are this machine's, under what else ran on it.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from fawkes.coordinator.ubis import Lender, TuneWindow
from fawkes.ssh.shell import Script
from tests.conftest import REPO, own_lab
from tests.ubis_coordinator import ubis_coordinator

try:
    from bench.results_meta import meta
except ImportError:  # pragma: no cover
    from results_meta import meta

pytestmark = [pytest.mark.lab, pytest.mark.spark]

BURN = REPO / "fawkes" / "apps" / "burn.py"
CPUS = 0.6  # each lab host's quota, cores
BASE, BURST, BURST_S, PERIOD_S = 0.1, 0.45, 10, 40  # A's load on h1: fractions of the host, seconds
WINDOW_S = 40  # the climb's window: one burst each
FIXED = (0.55, 0.7, 0.85)
SLOT_WINDOWS = 2
CLIMB_FROM, CLIMB_WINDOWS = 0.55, 12
REPS = int(os.environ.get("FAWKES_BENCH_REPS", "2"))
LOAD_PID = "/tmp/fawkes-talloc-owner-load"

# A's load: busy for the share of each 100-ms period that makes `frac` of the host's quota, in a burst
# `hi` for `burst_s` of every `period_s`; bounded by `for_s`
OWNER_LOAD = (
    "import time\n"
    "cpus, lo, hi, burst_s, period_s, for_s = {args}\n"
    "t0 = time.monotonic()\n"
    "while time.monotonic() - t0 < for_s:\n"
    "    now = time.monotonic()\n"
    "    frac = hi if (now - t0) % period_s < burst_s else lo\n"
    "    end = now + 0.1 * frac * cpus\n"
    "    while time.monotonic() < end:\n"
    "        pass\n"
    "    time.sleep(max(0.0, now + 0.1 - time.monotonic()))\n"
)


class PinnedLender(Lender):
    """The coordinator's Lender with its T_alloc pinned during the fixed slots (``pinned``: the value, None
    while the climb runs): after each window the climb's step is undone, the window's record kept."""

    pinned: float | None = None
    slot = 0  # each window's record carries the slot it closed in

    def _tune(self, now_m: float) -> None:
        before = len(self.windows)
        super()._tune(now_m)
        if len(self.windows) > before:
            self.windows[-1]["slot"] = self.slot
        if self.pinned is not None and self.climb is not None:
            self.climb = replace(self.climb, t_alloc=self.pinned, last_gain=None, direction=1)

    def _recap(self, moved: float) -> int:
        """A pinned slot's step is undone: the lent worker keeps its cap."""
        return 0 if self.pinned is not None else super()._recap(moved)

    def start(self, t_alloc: float, pinned: bool) -> None:
        """A new slot: every worker withdrawn, T_alloc set, a fresh window."""
        for h in list(self.sessions):
            self._withdraw(h, "the benchmark's next slot")
        self.slot += 1
        self.pinned = t_alloc if pinned else None
        self.climb = replace(self.climb, t_alloc=t_alloc, last_gain=None, direction=1)
        self.window = TuneWindow(time.monotonic())


@pytest.fixture(scope="module")
def talloc_lab(tmp_path_factory):
    lab = own_lab(tmp_path_factory, "t", 2, 226, "lab with CPU quotas", cpus=CPUS, memory="3G")
    try:
        yield lab
    finally:
        lab.down()


def test_talloc_climb_against_fixed_values(talloc_lab, tmp_path):
    t_test = time.monotonic()
    total_s = REPS * (len(FIXED) * 2 * SLOT_WINDOWS + CLIMB_WINDOWS) * WINDOW_S + 600
    with ubis_coordinator(talloc_lab, tmp_path, {"a": 1, "b": 1}, {"b": "accept", "a": "refuse"},
                          f"t_alloc_tune: true, tune_window_s: {WINDOW_S}", t_alloc=CLIMB_FROM) as run:
        coord, store, drive = run.coord, run.store, run.drive
        data = run.deployed({"a": ["h1"], "b": ["h2"]})
        ex = coord.fleet.ex
        args = ", ".join(str(x) for x in (CPUS, BASE, BURST, BURST_S, PERIOD_S, total_s))
        start = ex.run(["h1"], Script("nohup python3 -c {code} > /dev/null 2>&1 & echo $! > {p}",
                                      code=OWNER_LOAD.replace("{args}", args), p=LOAD_PID), timeout=30)["h1"]
        assert start.ok, start.error
        load_t0 = time.monotonic()  # A's cycle began within the SSH round trip before this

        def at_base() -> None:
            """Wait until 1 s after a burst of A's: the slot's withdrawal then, its loan at least 4 s later (the
            Lender's cool-down after a withdrawal), capped from A's base load (a loan's cap is set at the loan: a
            worker lent in a burst is capped low and outlives every burst after it, as in runs 2 and 3)."""
            phase = (time.monotonic() - load_t0) % PERIOD_S
            time.sleep((BURST_S + 1 - phase) % PERIOD_S)

        lender = PinnedLender(store, coord.fleet, coord.control, run.cfg.opportunistic, coord.settings,
                              clock=coord.clock, cooldown_s=10)
        coord.lender = lender
        job = store.submit_job("b", [str(BURN), f"file://{data}", "{output}", "4000", "0.5"]).id
        drive(lambda: store.get_job(job).state == "running", 240, "B's long job running")
        slots_run: dict[int, tuple[int, str]] = {}  # slot -> (repetition, phase)
        try:
            for rep in range(REPS):
                order = list(FIXED) + list(reversed(FIXED))
                phases = [("fixed", order), ("climb", None)]
                if rep % 2:
                    phases.reverse()
                for phase, values in phases:
                    slots = [(v, SLOT_WINDOWS, True) for v in values] if values else [(CLIMB_FROM, CLIMB_WINDOWS, False)]
                    for value, n, pinned in slots:
                        at_base()
                        lender.start(value, pinned)

                        def slot_windows(slot=lender.slot):
                            return [w for w in lender.windows if w.get("slot") == slot]

                        drive(lambda: len(slot_windows()) >= n or store.get_job(job).state != "running",
                              n * WINDOW_S + 120, f"{phase} slot at T_alloc {value}")
                        assert store.get_job(job).state == "running", "B's job ended: it must outlast the benchmark"
                        slots_run[lender.slot] = (rep, phase)
                        for w in slot_windows()[:n]:
                            print(f"rep {rep} {phase:5s} T_alloc {w['t_alloc']:.2f} -> {w['next']:.2f}: work "
                                  f"{w['work_s']:6.2f} lost {w['lost_s']:6.2f} gain {w['gain']:+.4f}/s "
                                  f"preemptions {w['preemptions']} waited {w['waited']}", flush=True)
        finally:
            lender_windows = list(lender.windows)  # every window the Lender closed, slot-tagged
            ubis_events = [e.message for e in store.events(limit=5000) if e.kind == "ubis"]
            caps = {"sent": sum(w.get("recapped", 0) for w in lender_windows),
                    "taken": sum("(T_alloc moved)" in m for m in ubis_events),
                    "refused": sum("kept its CPU cap" in m for m in ubis_events)}
            print(f"caps: {caps}", flush=True)
            ex.run(["h1"], Script("if [ -f {p} ]; then kill $(cat {p}); rm -f {p}; fi", p=LOAD_PID), timeout=30)
            store.cancel_jobs([job])

    # each slot's first n windows, from the Lender's own slot-tagged list
    n_of = {"fixed": SLOT_WINDOWS, "climb": CLIMB_WINDOWS}
    windows = [{"rep": rep, "phase": phase, **w} for slot, (rep, phase) in sorted(slots_run.items())
               for w in [x for x in lender_windows if x.get("slot") == slot][:n_of[phase]]]
    summary = {}
    for rep in range(REPS):
        fixed = {v: [w for w in windows if w["rep"] == rep and w["phase"] == "fixed" and w["t_alloc"] == v]
                 for v in FIXED}
        climb = [w for w in windows if w["rep"] == rep and w["phase"] == "climb"]
        summary[rep] = {
            "fixed_gain": {str(v): round(sum(w["gain"] for w in ws) / len(ws), 4) for v, ws in fixed.items()},
            "fixed_preemptions": {str(v): sum(w["preemptions"] for w in ws) for v, ws in fixed.items()},
            "climb_t_alloc": [w["t_alloc"] for w in climb] + [climb[-1]["next"]],
            "climb_last6_mean": round(sum(w["t_alloc"] for w in climb[-6:]) / 6, 4),
            "climb_last6_gain": round(sum(w["gain"] for w in climb[-6:]) / 6, 4),
            "climb_preemptions": sum(w["preemptions"] for w in climb),
        }
        print(f"rep {rep}: {json.dumps(summary[rep])}", flush=True)
    doc = {**meta(), "hosts": f"2 lab hosts, {CPUS} cores and 3 GiB each (cgroup quotas of one 2-core machine)",
           "owner_load": {"base": BASE, "burst": BURST, "burst_s": BURST_S, "period_s": PERIOD_S},
           "window_s": WINDOW_S, "fixed": FIXED, "slot_windows": SLOT_WINDOWS, "climb_from": CLIMB_FROM,
           "climb_windows": CLIMB_WINDOWS, "reps": REPS, "summary": summary, "windows": windows,
           "lender_windows": lender_windows, "caps": caps,
           "took_s": round(time.monotonic() - t_test)}
    out = os.environ.get("FAWKES_BENCH_OUT")
    if out:
        Path(out).write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {out}")
