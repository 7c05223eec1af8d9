"""Admin operations racing the coordinator, as separate real processes on one database.

* a user cancels every job while a dispatcher takes each one from the head of the queue:
  each job ends up either CANCELLED (the cancel came first) or started with a recorded
  cancel request (the dispatch came first), never started without one, never lost;
* an admin takes hosts out of service while an allocator grabs the same hosts: each host
  ends up either held by a node or failed, never both.
"""

from __future__ import annotations

import multiprocessing as mp

from fawkes.mechanism.model import ClusterState, Role
from fawkes.store import HostState, JobState, Store

try:
    from store_fixtures import pg_server, store_url  # noqa: F401
except ImportError:
    from tests.store_fixtures import pg_server, store_url  # noqa: F401

JOBS = 60
HOSTS = [f"h{i}" for i in range(16)]


def _dispatcher(url: str, start, out) -> None:
    from fawkes.errors import FawkesError

    store = Store(url)
    got, lost = [], []
    start.wait(60)
    try:
        while True:
            job = store.next_job("a")
            if job is None:
                break
            try:
                store.transition_job(job.id, JobState.DISPATCHED, "head of the queue")
                got.append(job.id)
            except FawkesError as exc:
                lost.append(str(exc))
        for h in HOSTS:
            try:
                store.allocate_node("a", h, Role.TC)
                got.append(h)
            except FawkesError as exc:
                lost.append(str(exc))
        out.put({"who": "dispatcher", "won": got, "lost": lost})
    except Exception as exc:
        out.put({"who": "dispatcher", "crash": f"{type(exc).__name__}: {exc}"})
    finally:
        store.close()


def _admin(url: str, ids: list[int], start, out) -> None:
    from fawkes.errors import FawkesError

    store = Store(url)
    outcomes, lost = {}, []
    start.wait(60)
    try:
        for i in ids:
            [(_, outcome)] = store.cancel_jobs([i])
            outcomes[i] = outcome
        for h in reversed(HOSTS):
            try:
                store.fail_host(h, "maintenance")
                outcomes[h] = "failed"
            except FawkesError as exc:
                lost.append(str(exc))
        out.put({"who": "admin", "won": outcomes, "lost": lost})
    except Exception as exc:
        out.put({"who": "admin", "crash": f"{type(exc).__name__}: {exc}"})
    finally:
        store.close()


def test_cancel_and_fail_race_the_coordinator_with_one_winner_each(store_url):
    store = Store(store_url)
    store.register_framework("spark", "spark")
    store.sync_hosts([{"name": h, "cores": 2} for h in HOSTS])
    store.request_cluster("a", framework="spark", min_core=1)
    store.transition_cluster("a", ClusterState.DEPLOYING)
    ids = [store.submit_job("a", ["app", str(k)]).id for k in range(JOBS)]

    ctx = mp.get_context("spawn")
    start, out = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_dispatcher, args=(store_url, start, out)),
             ctx.Process(target=_admin, args=(store_url, ids, start, out))]
    for p in procs:
        p.start()
    start.set()
    results = {r["who"]: r for r in (out.get(timeout=300) for _ in procs)}
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert not [r["crash"] for r in results.values() if "crash" in r]
    disp, admin = results["dispatcher"], results["admin"]

    jobs = {j.id: j for j in store.list_jobs()}
    assert sorted(jobs) == ids  # nothing lost
    for i in ids:
        j, outcome = jobs[i], admin["won"][i]
        if outcome == "cancelled":  # the cancel came first: never dispatched
            assert j.state == JobState.CANCELLED and i not in disp["won"] and j.dispatched_at is None
        else:  # the dispatch came first: started, with the cancel recorded for the coordinator
            assert outcome == "requested" and j.state == JobState.DISPATCHED and j.cancel_requested_at is not None
            assert i in disp["won"]
    assert all("not allowed" in e or "changed concurrently" in e or "not free" in e or "taken concurrently" in e
               or "already held" in e for e in disp["lost"]), disp["lost"]

    held = {n.host for n in store.list_nodes()}
    failed = {h.name for h in store.list_hosts(HostState.FAILED)}
    assert held | failed == set(HOSTS) and not held & failed
    assert held == {h for h in disp["won"] if isinstance(h, str)}
    assert failed == {h for h, o in admin["won"].items() if o == "failed"}
    assert all("only a free host can be taken out of service" in e or "not free" in e
               or "changed concurrently" in e for e in admin["lost"]), admin["lost"]
    store.close()
