#!/usr/bin/env python3
"""Time a coordinator's start over a large pool: what a restart or a standby's takeover pays before
its first step.

    python bench/bench_coordinator_start.py [--hosts 10000] [--repeat 5] [--backend sqlite,postgres]
                                            [--json FILE]

A SIMULATED inventory (``simulated: N``: no SSH) of ``--hosts`` hosts; per backend (a SQLite file, a
throwaway PostgreSQL server started like the tests' one, ``tests/store_fixtures.py``):

* ``first``: ``Coordinator(...)`` on an empty state (every host inserted), once;
* ``restart``: ``Coordinator(...)`` on the state the first start left (the inventory unchanged: what
  a restart or a takeover meets), ``--repeat`` times, a new store each time;
* ``floor``: the same repetitions of what the start cannot skip: the inventory's hosts validated
  (``store.hosts._host_specs``) and the hosts table read as plain rows, in one transaction.

Prints the medians and ``restart / floor``; writes them with bench/results_meta.py's command, commit,
date and load.  The leader also builds its fleet and schedules its first sample and tick; the
soak's takeover (bench/bench_service_scale.py) measures the whole of it.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.results_meta import meta  # noqa: E402
from fawkes.coordinator.inventory_apply import host_rows  # noqa: E402
from fawkes.coordinator.service import Coordinator  # noqa: E402
from fawkes.inventory import load_inventory  # noqa: E402
from fawkes.mechanism import Settings  # noqa: E402
from fawkes.store import Store  # noqa: E402
from fawkes.store.hosts import _host_specs  # noqa: E402
from fawkes.store.schema import Host  # noqa: E402


def start(url: str, inv) -> float:
    store = Store(url)
    try:
        t = time.perf_counter()
        c = Coordinator(store, inv, Settings(policy="TD"))
        dt = time.perf_counter() - t
        c.close()
        return dt
    finally:
        store.close()


def floor(url: str, inv) -> float:
    from sqlmodel import select

    store = Store(url)
    try:
        t = time.perf_counter()
        n = len(_host_specs(host_rows(inv)))
        with store.session() as s:
            rows = s.connection().execute(select(Host.name, Host.state, Host.position, Host.address, Host.cores,
                                                 Host.memory_mb, Host.rack)).all()
        dt = time.perf_counter() - t
        assert len(rows) == n, (len(rows), n)
        return dt
    finally:
        store.close()


def backend_url(name: str, root: Path, servers: list):
    if name == "sqlite":
        return f"sqlite:///{root / 'state.db'}"
    from tests.store_fixtures import _PgServer

    server = _PgServer()
    server.start()
    servers.append(server)
    server.admin("CREATE DATABASE bench_start")
    return server.url("bench_start")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--backend", default="sqlite,postgres")
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args(argv)
    backends = a.backend.split(",")
    if not 1 <= a.hosts <= 100000:
        ap.error("--hosts: 1 .. 100000")
    if not 1 <= a.repeat <= 50:
        ap.error("--repeat: 1 .. 50")
    if not backends or any(b not in ("sqlite", "postgres") for b in backends):
        ap.error("--backend: sqlite, postgres or both (comma-separated)")
    doc = {**meta(), "hosts": a.hosts, "repeat": a.repeat, "cpus": os.cpu_count(), "backends": {}}
    servers: list = []
    try:
        with tempfile.TemporaryDirectory(prefix="fawkes-bench-start-") as d:
            root = Path(d)
            inv_path = root / "inventory.yaml"
            inv_path.write_text(f"simulated: {a.hosts}\n")
            inv = load_inventory(inv_path)
            for b in backends:
                url = backend_url(b, root, servers)
                store = Store(url)
                store.register_framework("sim", "simulated", shared_dir="/simulated")
                store.close()
                first = start(url, inv)
                restart, base = [], []
                for _ in range(a.repeat):  # alternated, so that the machine's load falls on both
                    restart.append(start(url, inv))
                    base.append(floor(url, inv))
                r = {"first_s": round(first, 3), "restart_s": [round(x, 3) for x in restart],
                     "floor_s": [round(x, 3) for x in base], "restart_median_s": round(statistics.median(restart), 3),
                     "floor_median_s": round(statistics.median(base), 3)}
                r["restart_over_floor"] = round(r["restart_median_s"] / r["floor_median_s"], 2)
                doc["backends"][b] = r
                print(f"{b}: {a.hosts:,} hosts: first start {first:.2f} s; restart median {r['restart_median_s']:.3f} s "
                      f"(floor {r['floor_median_s']:.3f} s: {r['restart_over_floor']:.2f}x)", flush=True)
    finally:
        for s in servers:
            s.stop()
    doc["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    if a.json:
        a.json.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
