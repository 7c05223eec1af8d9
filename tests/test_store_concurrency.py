"""Several real processes hammering one state database: nothing lost, nothing duplicated.

Each worker is a separate (spawned) process with its own Store, like concurrent CLI
invocations next to the coordinator.  They all start together and interleave job
submissions, cluster requests for the same names, and allocations of the same hosts.
"""

from __future__ import annotations

import multiprocessing as mp
import random

from fawkes.mechanism.model import ClusterState, Role
from fawkes.store import Store

try:
    from store_fixtures import pg_server, store_url  # noqa: F401
except ImportError:
    from tests.store_fixtures import pg_server, store_url  # noqa: F401

WORKERS = 4
SUBMITS = 40
NAMES = [f"r{i}" for i in range(10)]
HOSTS = [f"h{i}" for i in range(12)]


def _worker(url: str, wid: int, start, out) -> None:
    """Interleave submits, competing requests and competing allocations; report what happened."""
    from fawkes.errors import FawkesError

    rng = random.Random(wid)
    store = Store(url)
    names, hosts = NAMES[:], HOSTS[:]
    rng.shuffle(names)
    rng.shuffle(hosts)
    result = {"wid": wid, "jobs": [], "requests": {}, "hosts": [], "errors": []}
    start.wait(60)
    try:
        for i in range(SUBMITS):
            cluster = "a" if (i + wid) % 2 else "b"
            job = store.submit_job(cluster, ["app", f"w{wid}", str(i)])
            result["jobs"].append((job.id, cluster, i))
            if i % 4 == 0 and names:
                name = names.pop()
                try:
                    store.request_cluster(name, framework="spark", min_core=1)
                    result["requests"][name] = "ok"
                except FawkesError as exc:
                    result["requests"][name] = str(exc)
            if i % 3 == 0 and hosts:
                host = hosts.pop()
                try:
                    store.allocate_node(f"c{wid}", host, Role.TC)
                    result["hosts"].append(host)
                except FawkesError as exc:
                    result["errors"].append(str(exc))
    except Exception as exc:  # anything else is a failure the parent reports
        result["crash"] = f"{type(exc).__name__}: {exc}"
    finally:
        store.close()
    out.put(result)


def test_concurrent_processes_lose_nothing_and_duplicate_nothing(store_url):
    store = Store(store_url)
    store.register_framework("spark", "spark")
    store.sync_hosts([{"name": h, "cores": 2} for h in HOSTS])
    for name in ["a", "b"] + [f"c{w}" for w in range(WORKERS)]:
        store.request_cluster(name, framework="spark", min_core=1)
        store.transition_cluster(name, ClusterState.DEPLOYING)

    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(store_url, w, start, out)) for w in range(WORKERS)]
    for p in procs:
        p.start()
    start.set()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert [r for r in results if "crash" in r] == []

    # jobs: every acknowledged id is stored, exactly once, with the argv it was given
    acked = {job_id: (r["wid"], cluster, i) for r in results for job_id, cluster, i in r["jobs"]}
    assert len(acked) == WORKERS * SUBMITS
    stored = store.list_jobs()
    assert len(stored) == WORKERS * SUBMITS and len({j.id for j in stored}) == len(stored)
    names = {c.id: c.name for c in store.list_clusters()}
    for j in stored:
        wid, cluster, i = acked[j.id]
        assert (names[j.cluster_id], j.argv) == (cluster, ["app", f"w{wid}", str(i)])
    # FIFO: within one submitter, later submissions come later in the cluster's queue
    for r in results:
        ids = [job_id for job_id, _, _ in r["jobs"]]
        assert ids == sorted(ids)
    assert store.queue_lengths()["a"] + store.queue_lengths()["b"] == WORKERS * SUBMITS

    # cluster requests: each contested name created exactly once, the others told it exists
    for name in NAMES:
        outcomes = [r["requests"][name] for r in results if name in r["requests"]]
        assert outcomes.count("ok") == 1, (name, outcomes)
        assert all(o == f"cluster {name}: already exists" for o in outcomes if o != "ok")
    assert sorted(c.name for c in store.queue()) == sorted(NAMES)

    # hosts: each granted to exactly one worker; the database agrees
    granted = [h for r in results for h in r["hosts"]]
    assert sorted(granted) == sorted(HOSTS)
    nodes = store.list_nodes()
    assert sorted(n.host for n in nodes) == sorted(HOSTS)
    owner = {n.host: names[n.cluster_id] for n in nodes}
    for r in results:
        assert all(owner[h] == f"c{r['wid']}" for h in r["hosts"])
        assert all("already held by cluster" in e or "not free" in e or "taken concurrently" in e
                   for e in r["errors"]), r["errors"]
    assert store.free_hosts() == []
    store.close()
