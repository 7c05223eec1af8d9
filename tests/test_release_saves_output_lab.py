"""A released MR-cluster keeps its output (issue 29), on real Spark + HDFS on the SSH lab.

Released by an admin (``fawkes cluster release``: the store's release request, carried out by the
reconciler), with the coordinator "crashing" twice on the way: once in the middle of the save (a
half-written ``.fawkes-partial`` copy left on the master, nothing recorded) and once after the save
was recorded but before the teardown.  The output, several files in nested directories written into
HDFS as a job writes them, must end up under ``save_to/<cluster>/<id>`` on the master, outside the
cluster's directory that teardown wipes, with a ``MANIFEST.sha256`` whose hashes equal those of the
files read back from HDFS before the release, recorded in the store and named by an event.  The
cluster's directory is gone afterwards; the saved copy is not.
"""

from __future__ import annotations

import json

import pytest

from fawkes.coordinator.reconcile import OUTPUT_DIR, Reconciler
from fawkes.frameworks.hdfs import FSSHELL
from fawkes.frameworks.sizing import LAB_SIZES
from fawkes.mechanism import ClusterState, Role
from fawkes.ssh.shell import Script
from tests.test_reconcile_lab import lab_state, run_until

pytestmark = [pytest.mark.lab, pytest.mark.spark]

OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1"}
NAME = "keep"


def hashes(text: str) -> dict[str, str]:
    """``sha256sum`` lines -> {relative path: hash}."""
    out = {}
    for line in text.splitlines():
        h, _, path = line.partition("  ")
        if h:
            out[path.removeprefix("./")] = h
    return out


def test_released_cluster_keeps_its_output_across_crashes(lab, tmp_path):
    store, fleet = lab_state(lab, tmp_path, OPTIONS)
    ex = fleet.ex
    master = lab.hosts[4].name
    save_to = f"{lab.node_dir}/team-saved"
    r = Reconciler(store, fleet, save_to=lambda name: save_to)
    try:
        store.request_cluster(NAME, framework="lab", min_core=1)
        store.transition_cluster(NAME, ClusterState.DEPLOYING, "admitted")
        store.allocate_node(NAME, master, Role.CORE)
        run_until("the cluster deployed", r, lambda: store.get_cluster(NAME).state == ClusterState.ACTIVE, 240)
        spec, driver = fleet.spec(NAME)
        ctl = f"{spec.cluster_dir(spec.master)}/bin/fawkes-daemon.sh"
        # two jobs' output, as Spark leaves it: part files and a _SUCCESS marker per job directory
        files = {"1/part-00000": "a\t1\nb\t2\n", "1/part-00001": "c\t3\n" * 5000, "1/_SUCCESS": "",
                 "2/part-00000": "z\t9\n"}
        local = f"{spec.cluster_dir(spec.master)}/tmp/out"
        write = " && ".join(f"mkdir -p {local}/{p.rsplit('/', 1)[0]} && printf %s '{c}' > {local}/{p}"
                            for p, c in files.items())
        res = ex.run([master], Script(write.replace("{", "{{").replace("}", "}}") + " && /bin/sh {ctl} hdfs {sh} "
                                      "-put {src} {dst}", ctl=ctl, sh=FSSHELL, src=local, dst=OUTPUT_DIR),
                     timeout=120)[master]
        assert res.ok, res.stderr
        in_hdfs = {}
        for p in files:
            out = ex.run([master], Script("/bin/sh {ctl} hdfs {sh} -cat {f} | sha256sum", ctl=ctl, sh=FSSHELL,
                                          f=f"{OUTPUT_DIR}/{p}"), timeout=120)[master]
            in_hdfs[p] = out.stdout.split()[0]
        c = store.get_cluster(NAME)
        dest = f"{save_to}/{NAME}/{c.id}"

        # crash 1: in the middle of the save (a partial copy on the master, nothing recorded)
        store.request_release(NAME)
        store.transition_cluster(NAME, ClusterState.SAVING, "release requested")
        assert ex.run([master], Script("mkdir -p {p} && echo half > {p}/part-00000", p=dest + ".fawkes-partial"))[
            master].ok
        # crash 2: the save recorded, the teardown not yet run: a new reconciler must neither save again
        # nor lose the copy; run the save alone (what the operation does before its teardown)
        r2 = Reconciler(store, fleet, save_to=lambda name: save_to)
        assert r2._save(NAME, store.get_cluster(NAME), spec, driver) is True
        rec = json.loads(store.get_cluster(NAME).saved_output)
        assert rec["path"] == dest and rec["files"] == len(files) and rec["host"] == master
        first = ex.run([master], Script("stat -c %Y {m}", m=f"{dest}/MANIFEST.sha256"))[master].stdout
        r3 = Reconciler(store, fleet, save_to=lambda name: "/elsewhere")  # a changed config: the record wins
        run_until("the cluster released", r3, lambda: store.get_cluster(NAME).state == ClusterState.RELEASED, 180)

        out = ex.run([master], Script("cd {d} && cat MANIFEST.sha256 && sha256sum -c --quiet MANIFEST.sha256 && "
                                      "echo CHECKED && stat -c %Y MANIFEST.sha256 && ls -d {p} {c} 2>&1; true",
                                      d=dest, p=dest + ".fawkes-partial", c=spec.cluster_dir(spec.master)))[master]
        saved = hashes(out.stdout.split("CHECKED")[0])
        assert "CHECKED" in out.stdout, out.stdout + out.stderr
        assert {p: saved[p] for p in files} == in_hdfs  # the saved files are HDFS's, byte for byte
        assert set(saved) == set(files)
        assert out.stdout.split("CHECKED")[1].split()[0] == first.strip()  # not saved a second time
        assert out.stdout.count("No such file or directory") == 2, out.stdout  # partial copy and cluster dir gone
        said = [e.message for e in store.events(cluster=NAME, limit=200)]
        assert any(m.startswith(f"output saved to {master}:{dest} ({len(files)} file(s)") for m in said), said
        assert not store.list_nodes(NAME)
    finally:
        r.shutdown(5)
        try:
            spec, driver = fleet.spec(NAME)
            driver.teardown(spec)
        except Exception:  # noqa: BLE001 - released already: nothing left to stop
            pass
        ex.run([master], Script("rm -rf {d}", d=save_to))
        fleet.close()
        store.close()
