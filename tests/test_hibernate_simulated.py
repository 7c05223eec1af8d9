"""Scale to zero, the coordinator's part (issue 27, item 4), on the SIMULATED fleet (kind ``simulated``):
the real coordinator (``service.build`` from a config with ``on_idle: hibernate``) stepped in this
process.  A cluster runs a job, idles for T_idle, hibernates (its output saved as a release saves it,
every node released, the name kept); the next job wakes it: admitted again at its minimum, deployed,
its saved output restored through the kind's driver before the job is dispatched.  Crashes (the
reconciler stopped dead at a fault point, a new coordinator started on the same state and fleet)
between the save and the release, after the release, and between the deployment and the restore lose
nothing.  The same on real Spark + HDFS: tests/test_hibernate_lab.py."""

from __future__ import annotations

import json
import subprocess
import time
from concurrent.futures import wait
from pathlib import Path

import pytest

from fawkes import faults
from fawkes.coordinator.service import build
from fawkes.frameworks.base import SavedOutput
from fawkes.frameworks.control import check_saved_script, save_shared_script
from fawkes.mechanism import ClusterState
from fawkes.store import JobState
from fawkes.store.lifecycle import NodeState

SAVE_TO = "/shared/saved"
JOB = ["tasks=4", "task_s=1", "startup_s=0", "output_bytes=1000000"]


class Crash(BaseException):
    """The coordinator killed at a fault point (not an Exception: no operation's guard catches it)."""


def config(tmp_path: Path, extra: str = "") -> Path:
    (tmp_path / "inv.yaml").write_text("simulated: {hosts: 3, speedup: 100, seed: 5}\n")
    p = tmp_path / "cfg.yaml"
    p.write_text("state: state.db\ninventory: inv.yaml\npolicy: td-damped\nperiod: 1\nsample_period: 0.2\n"
                 f"idle_timeout_s: 2\nsave_to: {SAVE_TO}\nclusters:\n  etl: {{on_idle: hibernate}}\n" + extra)
    return p


class Run:
    """A coordinator built from the config, its scheduled steps called by hand (sample, tick, fast)."""

    def __init__(self, cfg_path: Path, inventory=None):
        from fawkes.config import load_config

        self.cfg = load_config(cfg_path)
        self.coord = build(self.cfg, inventory=inventory)
        self.store = self.coord.store
        self.inv = self.coord.fleet.inventory
        self.world = self.coord.fleet.ex.world
        self.dead = False
        self.serial = False  # a fault armed: each step waits for the reconciler's operations in flight

    def until(self, what: str, pred, timeout: float = 90.0) -> None:
        s = self.cfg
        end = time.monotonic() + timeout
        next_sample = next_tick = 0.0
        while not pred():
            if self.dead:
                return
            if time.monotonic() > end:
                raise AssertionError(f"not reached in {timeout:g}s: {what}; events: "
                                     + "; ".join(e.message for e in self.store.events(limit=15)))
            now = time.monotonic()
            if now >= next_sample:
                self.coord.sample()
                next_sample = now + s.sample_period
            if now >= next_tick:
                self.coord.tick()
                next_tick = now + s.period
            if self.serial:
                # an operation dies at the armed point just after its transition: no step may start work
                # on that transition before the crash is in (a SIGKILL stops every thread at once)
                wait([f for f in self.coord.reconciler.inflight.values() if not f.done()], timeout=timeout)
                if self.dead:
                    return
            self.coord.fast()
            time.sleep(0.02)

    def kill(self) -> None:
        """A SIGKILL: nothing more of this coordinator runs (its worker pool abandoned, hosts untouched)."""
        self.dead = True
        self.coord.reconciler.shutdown(0.0)


@pytest.fixture
def armed(monkeypatch):
    """``arm(run, NAME)``: the reconciler of ``run`` dies at fault point NAME (every later call there too, until
    ``arm(None, None)``: the next coordinator's start)."""
    state = {}
    real = faults.point

    def point(name: str) -> None:
        if name == state.get("name"):
            state["run"].dead = True
            raise Crash(name)
        real(name)

    def arm(run: Run | None, name: str | None) -> None:
        assert name is None or name in faults.POINTS
        state.update(run=run, name=name)
        if run is not None:
            run.serial = name is not None

    monkeypatch.setattr(faults, "point", point)
    return arm


def state(store, name="etl") -> ClusterState:
    return ClusterState(store.get_cluster(name).state)


def idle_into_hibernation(run: Run) -> dict:
    """Request etl, run one job to its end, let it idle into hibernation; its saved-output record."""
    st = run.store
    st.register_framework("sim", "simulated", shared_dir="/simulated")
    st.request_cluster("etl", framework="sim", min_core=1)
    first = st.submit_job("etl", JOB)
    run.until("the first job done", lambda: st.get_job(first.id).state == JobState.SUCCEEDED)
    assert run.world.outputs["etl"] == 1 and run.world.written["etl"] == 1_000_000
    run.until("etl hibernating", lambda: state(st) is ClusterState.HIBERNATING)
    return json.loads(st.get_cluster("etl").saved_output)


def test_an_idle_cluster_hibernates_and_the_next_job_wakes_it_with_its_output_restored(tmp_path):
    run = Run(config(tmp_path))
    st = run.store
    try:
        rec = idle_into_hibernation(run)
        old = st.get_cluster("etl")
        # hibernated: saved as a release saves it (the manifest's digest recorded), every node released
        assert rec["path"] == f"{SAVE_TO}/etl/{old.id}" and (rec["files"], rec["bytes"]) == (1, 1_000_000)
        assert run.world.saved[rec["path"]] == (1, 1_000_000) and len(rec["manifest_sha256"]) == 64
        assert not st.list_nodes()  # no node holds a host
        ever = st.list_nodes("etl", live=False)
        assert ever and all(n.state == NodeState.RELEASED for n in ever)
        assert run.world.outputs["etl"] == 0 and not run.world.members.get("etl")  # its file system is gone
        row = next(c for c in st.status()["clusters"] if c["name"] == "etl")
        assert row["state"] == "hibernating" and row["held"] == 0
        hist = [(t.from_state, t.to_state, t.detail) for t in st.cluster_history("etl")]
        assert hist[-2][:2] == ("active", "saving") and hist[-2][2] == "inactive for T_idle"
        assert hist[-1][:2] == ("saving", "hibernating") and "node(s) released" in hist[-1][2], hist
        assert "s after it went idle" in hist[-1][2]

        # the next job wakes it: a new incarnation, restored before the job is dispatched
        second = st.submit_job("etl", JOB)
        new = st.get_cluster("etl")
        assert new.id != old.id and json.loads(new.restore_from) == rec
        run.until("the waking job done", lambda: st.get_job(second.id).state in (JobState.SUCCEEDED,
                                                                                   JobState.FAILED))
        job = st.get_job(second.id)
        assert job.state == JobState.SUCCEEDED and job.cluster_id == new.id
        hist = [(t.from_state, t.to_state, t.time, t.detail) for t in st.cluster_history("etl")]
        assert [h[:2] for h in hist[:4]] == [(None, "requested"), ("requested", "deploying"),
                                             ("deploying", "loading"), ("loading", "active")], hist
        active_at = hist[3][2]
        assert "output restored into /output" in hist[3][3] and "woken: active" in hist[3][3], hist[3]
        restored = [e for e in st.events(cluster="etl", limit=100) if e.message.startswith("output restored from")]
        assert len(restored) == 1 and rec["path"] in restored[0].message
        assert restored[0].time <= active_at <= job.dispatched_at  # restored, then active, then dispatched
        # the restored output is there again, and the waking job's output beside it
        assert run.world.outputs["etl"] == 2 and run.world.written["etl"] == 2_000_000

        # and it hibernates again: the second save holds both jobs' output
        run.until("etl hibernating again", lambda: state(st) is ClusterState.HIBERNATING
                  and st.get_cluster("etl").id == new.id)
        again = json.loads(st.get_cluster("etl").saved_output)
        assert (again["files"], again["bytes"]) == (2, 2_000_000) and again["path"] == f"{SAVE_TO}/etl/{new.id}"
        assert run.world.saved[rec["path"]] == (1, 1_000_000)  # the first copy is left where it was
    finally:
        run.kill()
        st.close()


def test_a_cluster_without_on_idle_hibernate_is_released_as_before(tmp_path):
    p = config(tmp_path)
    p.write_text(p.read_text().replace("  etl: {on_idle: hibernate}\n", "  bi: {on_idle: hibernate}\n"))
    run = Run(p)
    st = run.store
    try:
        st.register_framework("sim", "simulated", shared_dir="/simulated")
        st.request_cluster("etl", framework="sim", min_core=1)
        st.submit_job("etl", JOB)
        run.until("etl released", lambda: state(st) is ClusterState.RELEASED)
        assert json.loads(st.get_cluster("etl").saved_output)["files"] == 1
        with pytest.raises(Exception, match="already released"):
            st.submit_job("etl", JOB)
    finally:
        run.kill()
        st.close()


@pytest.mark.parametrize("point", ["output-saved", "nodes-released"])
def test_a_crash_between_save_and_hibernation_loses_nothing(tmp_path, armed, point):
    run = Run(config(tmp_path))
    st = run.store
    try:
        st.register_framework("sim", "simulated", shared_dir="/simulated")
        st.request_cluster("etl", framework="sim", min_core=1)
        first = st.submit_job("etl", JOB)
        run.until("the first job done", lambda: st.get_job(first.id).state == JobState.SUCCEEDED)
        armed(run, point)
        run.until(f"killed at {point}", lambda: run.dead)
    finally:
        run.kill()
    assert state(st) is ClusterState.SAVING
    rec = json.loads(st.get_cluster("etl").saved_output)
    assert bool(st.list_nodes("etl")) == (point == "output-saved")  # killed before the teardown, or after it
    # a new coordinator on the same state and fleet finishes the hibernation without saving again
    armed(None, None)
    run2 = Run(config(tmp_path), inventory=run.inv)
    try:
        assert run2.world is run.world
        run2.until("etl hibernating", lambda: state(st) is ClusterState.HIBERNATING)
        assert json.loads(st.get_cluster("etl").saved_output) == rec
        assert run2.world.saved[rec["path"]] == (1, 1_000_000)
        assert not st.list_nodes("etl")
        said = [e.message for e in st.events(cluster="etl", limit=200)]
        assert sum(m.startswith("output saved to") for m in said) == 1, said
        # and it still wakes with that output
        second = st.submit_job("etl", JOB)
        run2.until("the waking job done", lambda: st.get_job(second.id).state == JobState.SUCCEEDED)
        assert run2.world.outputs["etl"] == 2
    finally:
        run2.kill()
        st.close()


def test_a_crash_between_deploy_and_restore_loses_nothing(tmp_path, armed):
    run = Run(config(tmp_path))
    st = run.store
    try:
        rec = idle_into_hibernation(run)
        armed(run, "cluster-deployed")
        second = st.submit_job("etl", JOB)
        run.until("killed after the deployment", lambda: run.dead)
    finally:
        run.kill()
    c = st.get_cluster("etl")
    assert ClusterState(c.state) is ClusterState.LOADING and json.loads(c.restore_from) == rec
    assert run.world.outputs["etl"] == 0 and st.get_job(second.id).state == JobState.QUEUED  # nothing restored yet
    armed(None, None)
    run2 = Run(config(tmp_path), inventory=run.inv)
    try:
        run2.until("the waking job done", lambda: st.get_job(second.id).state == JobState.SUCCEEDED)
        assert run2.world.outputs["etl"] == 2 and run2.world.written["etl"] == 2_000_000
        restored = [e for e in st.events(cluster="etl", limit=200) if e.message.startswith("output restored from")]
        assert len(restored) == 1 and restored[0].time <= st.get_job(second.id).dispatched_at
    finally:
        run2.kill()
        st.close()


def test_a_saved_copy_that_does_not_match_is_never_restored(tmp_path):
    """The load-failure path: after its attempts the woken cluster leaves (its job cancelled), nothing
    loaded, the saved copy untouched."""
    run = Run(config(tmp_path))
    st = run.store
    try:
        rec = idle_into_hibernation(run)
        run.world.saved[rec["path"]] = (1, 999)  # the copy on the shared storage changed since it was saved
        second = st.submit_job("etl", JOB)
        new = st.get_cluster("etl")
        run.until("the woken cluster given up", lambda: st.get_job(second.id).state == JobState.CANCELLED)
        assert run.world.outputs["etl"] == 0
        said = [e.message for e in st.events(cluster="etl", limit=200)]
        assert any("holds 1 file(s), 999 bytes; 1 file(s), 1000000 bytes recorded" in m for m in said), said
        run.until("released", lambda: state(st) is ClusterState.RELEASED)
        assert st.get_cluster("etl").id == new.id and run.world.saved[rec["path"]] == (1, 999)
    finally:
        run.kill()
        st.close()


def test_a_saved_output_is_checked_against_its_manifest_before_a_restore(tmp_path):
    """The shared check of the real kinds (control.check_saved_script), run here by /bin/sh on a copy the
    shared-storage save script made: the copy as saved passes; a changed file, a changed manifest or a
    recorded digest or file count that differs is refused (exit 3, one line naming the path)."""
    src = tmp_path / "out"
    (src / "1").mkdir(parents=True)
    (src / "1" / "part-00000").write_text("a\t1\n")
    (src / "2.txt").write_text("b\n" * 1000)
    dest = tmp_path / "saved"
    r = subprocess.run(["/bin/sh", "-c", str(save_shared_script(str(src), str(dest)))], capture_output=True,
                       text=True, check=True)
    files, size, digest = r.stdout.split()[1:4]
    saved = SavedOutput("h", str(dest), int(files), int(size), digest)

    def check(s: SavedOutput) -> subprocess.CompletedProcess:
        return subprocess.run(["/bin/sh", "-c", str(check_saved_script(s))], capture_output=True, text=True,
                              cwd=tmp_path, check=False)

    assert check(saved).returncode == 0
    assert check(SavedOutput("h", str(dest), 3, int(size), digest)).returncode == 3
    assert check(SavedOutput("h", str(dest), 2, int(size), "0" * 64)).returncode == 3
    bad = check(SavedOutput("h", str(tmp_path / "x$(touch PWNED)"), 2, 1, digest))
    assert bad.returncode == 3 and "no MANIFEST.sha256" in bad.stderr and not (tmp_path / "PWNED").exists()
    (dest / "2.txt").write_text("c\n" * 1000)  # same size, other bytes
    r = check(saved)
    assert r.returncode == 3 and r.stderr.strip().splitlines()[-1] == f"{dest}: a file does not match MANIFEST.sha256"
