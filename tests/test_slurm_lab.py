"""Real SLURM on the lab (slurmctld, one slurmd per host, munged): fawkes inside an allocation,
and the coordinator's SLURM pool provider growing and shrinking the pool with real allocations.

Its own lab: 4 hosts of 0.5 CPU / 1536 MiB, prefix ``$FAWKES_TEST_LAB_PREFIX`` + ``s``.  When the
lab or SLURM cannot start the tests are skipped, or fail under ``$CI``.
"""

from __future__ import annotations

import shlex
import subprocess
import sys
import time

import pytest
import yaml

from tests.conftest import LAB_PREFIX, unavailable

pytestmark = pytest.mark.lab
PREFIX = f"{LAB_PREFIX}s"[:8]


@pytest.fixture(scope="module")
def slab(tmp_path_factory):
    from fawkes.errors import FawkesError
    from fawkes.lab import Lab, slurm

    d = tmp_path_factory.mktemp("slurmlab")
    try:
        Lab.cleanup(PREFIX, "10.230.0", d)
        lab = Lab.up_free(4, d, prefix=PREFIX, nets=range(230, 250), cpus=0.5, memory="1536M")
    except FawkesError as exc:
        unavailable(f"SSH lab cannot start: {exc}")
    try:
        t0 = time.monotonic()
        try:
            slurm.up(lab)
        except FawkesError as exc:
            unavailable(f"SLURM cannot start on the lab: {exc}")
        print(f"slurm up in {time.monotonic() - t0:.1f}s")
        yield lab
    finally:
        lab.down()


def sl(lab, *argv, check=True, timeout=60):
    from fawkes.lab import slurm
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=slurm.env(lab.dir), timeout=timeout)
    if check:
        assert proc.returncode == 0, (argv, proc.stderr)
    return proc


def test_daemons_listen_on_lab_addresses_only(slab):
    from fawkes.lab import slurm
    st = slurm.status(slab)
    assert st["slurmctld"] and st["munged"]
    assert [(n["name"], n["state"], n["slurmd"]) for n in st["nodes"]] == \
        [(h.name, "idle", True) for h in slab.hosts]
    conf = (slab.dir / "slurm" / "slurm.conf").read_text()
    assert f"NodeName=h2 NodeAddr={slab.hosts[1].address} CPUs=1 RealMemory=1536" in conf
    ctld = [ln.split()[3] for ln in subprocess.run(["ss", "-Hltnp"], capture_output=True, text=True).stdout.splitlines()
            if f"pid={st['slurmctld']}," in ln]
    assert ctld == [f"{slab.controller_address}:6817"]
    for h in slab.hosts:  # slurmd listens inside its host (its netns has only the lab address and lo)
        out = subprocess.run(["ip", "netns", "exec", h.netns, "ss", "-Hltnp"], capture_output=True, text=True).stdout
        assert any(":6818" in ln and "slurmd" in ln for ln in out.splitlines()), out


def test_from_slurm_inside_salloc(slab):
    """On a lab host (as on a login node): salloc -N 3 runs srun and `fawkes inventory from-slurm`
    with no flags inside the allocation."""
    from fawkes.lab import slurm
    inner = f"srun hostname | sort; echo ---; {shlex.quote(sys.executable)} -m fawkes inventory from-slurm"
    cmd = (f"cd /tmp && SLURM_CONF={shlex.quote(str(slurm.conf_path(slab.dir)))} "
           f"salloc -N 3 --job-name=fws-salloc sh -c {shlex.quote(inner)}")
    with slab.executor(["h4"], command_timeout=90) as ex:
        r = ex.run(["h4"], cmd)["h4"]
    assert r.exit_code == 0, r.stderr
    assert "Granted job allocation" in r.stderr
    ran, inv_text = r.stdout.split("---\n")
    ran_on = ran.split()
    inv = yaml.safe_load(inv_text)
    assert len(ran_on) == 3 and set(ran_on) <= {"h1", "h2", "h3", "h4"}
    assert [h["name"] for h in inv["hosts"]] == ran_on == inv["groups"]["slurm"]
    assert all(h["cores"] == 1 and h["address"] == h["name"] for h in inv["hosts"])
    assert inv_text.startswith("# SLURM allocation h[") and "(cpus per node 1(x3))" in inv_text


def test_from_slurm_inside_sbatch(slab, tmp_path):
    out = tmp_path / "inventory.yaml"
    wrap = f"cd /tmp && {shlex.quote(sys.executable)} -m fawkes inventory from-slurm -o {out}"
    job = sl(slab, "sbatch", "--parsable", "-N", "2", "--job-name=fws-sbatch", f"--output={tmp_path}/job.out",
             "--chdir=/tmp", "--wrap", wrap).stdout.strip()
    assert job.isdigit()
    # sbatch --wait polls every 10 s: poll squeue instead until the job has left the queue
    _wait(lambda: not sl(slab, "squeue", "--noheader", f"--jobs={job}", check=False).stdout.strip(), 60,
          f"job {job} to finish")
    inv = yaml.safe_load(out.read_text())
    assert len(inv["hosts"]) == 2 and all(h["cores"] == 1 for h in inv["hosts"])
    assert f"wrote {out} (2 hosts)" in (tmp_path / "job.out").read_text()


def _wait(cond, timeout, what):
    deadline = time.monotonic() + timeout
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.5)


def test_pool_grows_with_an_allocation_and_gives_it_back(slab, tmp_path, monkeypatch):
    from fawkes.config import CoordinatorConfig, PoolConfig
    from fawkes.coordinator.service import build
    from fawkes.frameworks.sizing import LAB_SIZES
    from fawkes.lab import slurm
    from fawkes.store.hosts import HostState
    from fawkes.store.lifecycle import NodeState

    monkeypatch.setenv("SLURM_CONF", str(slurm.conf_path(slab.dir)))
    # another user's job holds h1, which is also the coordinator's only inventory host
    tenant = sl(slab, "sbatch", "--parsable", "-w", "h1", "--exclusive", "--job-name=tenant", "--output=/dev/null",
                "--chdir=/tmp", "--wrap", "exec sleep 600").stdout.strip()
    inv = yaml.safe_load(slab.inventory_path.read_text())
    inv["hosts"] = inv["hosts"][:1]
    inv["groups"] = {"lab": ["h1"]}
    inv["known_hosts"] = str(slab.known_hosts)
    inv["defaults"]["key_file"] = str(slab.key_file)
    (tmp_path / "inventory.yaml").write_text(yaml.safe_dump(inv))
    cfg = CoordinatorConfig(state=f"sqlite:///{tmp_path}/state.db", inventory=tmp_path / "inventory.yaml",
                            cluster_options=dict(LAB_SIZES),
                            policy="td-tc",  # the pool's test, written for undamped TD (not the default td-damped)
                            pool=PoolConfig(provider="slurm", partition="lab", max_nodes=2, nodes_per_request=2,
                                            idle_s=2, key_file=slab.key_file, work_dir=str(slab.node_dir)))
    coord = build(cfg)
    store, pool = coord.store, coord.pool
    try:
        store.register_framework("spark", "spark-hdfs", spark_home="/opt/spark", hdfs_jars="/opt/hdfs")
        store.request_cluster("a", framework="spark", min_core=1)
        coord.control.between()  # a is admitted on h1: no free host left
        assert [h.name for h in store.list_hosts(HostState.ALLOCATED)] == ["h1"]
        store.request_cluster("b", framework="spark", min_core=1)

        t0 = time.monotonic()
        coord.sample()  # the service's sample step runs the pool's: b cannot be admitted, ask for 2 nodes
        first = pool.last
        assert first.request == 2 and "short of 1" in first.reason
        job = _wait(lambda: [a for a in pool.allocations() if a.running], 30, "the allocation to run")[0]
        assert len(job.hosts) == 2 and "h1" not in job.hosts
        pool.step(coord)  # its hosts join the pool
        joined = time.monotonic() - t0
        hosts = {h.name: h for h in store.list_hosts()}
        assert set(hosts) == {"h1", *job.hosts}
        for name in job.hosts:
            lab_host = slab.host(name)
            assert (hosts[name].address, hosts[name].cores, hosts[name].memory_mb, hosts[name].state) == \
                (lab_host.address, 1, 1536, HostState.FREE)
        r = coord.fleet.ex.run(list(job.hosts), "hostname")  # real SSH to the new hosts, strict host keys
        assert {h: x.stdout.strip() for h, x in r.items()} == {h: h for h in job.hosts}

        coord.control.between()  # b is admitted on a host of the allocation
        b_nodes = [n for n in store.list_nodes("b")]
        assert len(b_nodes) == 1 and b_nodes[0].host in job.hosts
        time.sleep(2.5)
        kept = pool.step(coord)  # one of its hosts is held: the allocation stays
        assert kept.release == () and job.job_id in {a.job_id for a in pool.allocations()}

        store.transition_node(b_nodes[0].id, NodeState.RELEASED, "test: b gives its node back")
        assert pool.step(coord).release == ()  # idle from now on
        time.sleep(2.5)
        t1 = time.monotonic()
        gone = pool.step(coord)
        assert gone.release == (job.job_id,)
        _wait(lambda: not [a for a in pool.allocations() if a.job_id == job.job_id], 30, "scancel")
        released = time.monotonic() - t1
        states = {h.name: h.state for h in store.list_hosts()}
        assert states == {"h1": HostState.ALLOCATED, **{h: HostState.RETIRED for h in job.hosts}}
        assert not set(job.hosts) & set(coord.fleet.ex.targets)
        assert sum("gave back SLURM job" in e.message for e in store.events(limit=20)) == 1
        print(f"pool: request to hosts joined {joined:.1f}s, release to allocation gone {released:.1f}s")

        # an allocation that SLURM ends by itself (time limit, node failure, an admin's scancel)
        store.request_cluster("c", framework="spark", min_core=1)
        assert pool.step(coord).request == 2
        job2 = _wait(lambda: [a for a in pool.allocations() if a.running], 30, "the second allocation to run")[0]
        pool.step(coord)
        assert {h.name for h in store.list_hosts(HostState.FREE)} == set(job2.hosts)
        sl(slab, "scancel", job2.job_id)
        _wait(lambda: not [a for a in pool.allocations() if a.job_id == job2.job_id], 30, "the external scancel")
        pool.step(coord)
        assert {h.name: h.state for h in store.list_hosts() if h.name in job2.hosts} == \
            {h: HostState.RETIRED for h in job2.hosts}
        assert not set(job2.hosts) & set(coord.fleet.ex.targets) and not pool.owner
        assert any("ended in SLURM" in e.message for e in store.events(limit=5))
    finally:
        coord.close(grace_s=1)
        store.close()
        sl(slab, "scancel", tenant, check=False)
        sl(slab, "scancel", f"--name={cfg.pool.job_name}", check=False)


def test_lab_down_stops_slurm(tmp_path):
    """A separate 1-host lab: `lab down` leaves no slurmctld, munged or slurmd behind."""
    from fawkes.errors import FawkesError
    from fawkes.lab import Lab, slurm

    prefix = f"{LAB_PREFIX}t"[:8]
    subnet = next((f"10.{n}.0" for n in range(249, 229, -1) if Lab.subnet_free(f"10.{n}.0")), None)
    if subnet is None:
        unavailable("no free subnet for the second SLURM lab")
    try:
        lab = Lab.up(1, tmp_path / "lab", prefix=prefix, subnet=subnet)
    except FawkesError as exc:
        unavailable(f"SSH lab cannot start: {exc}")
    try:
        st = slurm.up(lab)
        pids = [st["slurmctld"], st["munged"]] + slurm.slurmd_pids(slurm.slurm_dir(lab.dir), lab.hosts[0].netns)
        assert len(pids) == 3
    finally:
        removed = lab.down()
    assert removed["slurm"] == 2
    assert not [p for p in pids if _alive(p)]
    assert not slurm.running(lab.dir)
    # its state lost (an interrupted run): the clean-up by prefix finds slurmctld and munged too
    lab = Lab.up(1, tmp_path / "lab", prefix=prefix, subnet=subnet)
    try:
        st = slurm.up(lab)
        (lab.dir / "lab.json").unlink()
    finally:
        removed = Lab.cleanup(prefix, subnet)
    assert removed["slurm"] == 2 and removed["netns"] == 1
    assert not _alive(st["slurmctld"]) and not _alive(st["munged"])


def _alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
