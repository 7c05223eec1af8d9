#!/usr/bin/env python3
"""Where the coordinator's Python heap grows on a SIMULATED fleet: tracemalloc snapshots at a third of the
trace and near its end, the difference by file and by line (the simulated world runs in the same process).

    python bench/trace_memory_growth.py HOSTS CLUSTERS TRACE_MINUTES SPEEDUP JOBS_PER_CLUSTER_HOUR

A diagnostic: it sees only what Python allocates and still holds (not memory the allocator keeps after
freeing it), and tracemalloc slows the run.
"""
import sys, time, threading, logging, tracemalloc, tempfile, gc
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
tracemalloc.start(1)
from fawkes.config import load_config
from fawkes.coordinator.service import build, setup_logging
from fawkes.inventory import load_inventory
from fawkes.sim.costs import cost_model
from fawkes.simfleet.player import Player
from fawkes.simfleet.scenario import write_scenario
from fawkes.store import Store
from fawkes.traces.costfile import load_cost_file
from fawkes.traces.trace import load_trace
hosts, clusters, minutes, speedup = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
d = Path(tempfile.mkdtemp(prefix="fawkes-mem-"))
sc = write_scenario(d, hosts=hosts, clusters=clusters, min_core=4, minutes=minutes, speedup=speedup, seed=1,
                    jobs_per_cluster_hour=float(sys.argv[5]), host_failures_per_hour=0.05, start_failure=0.02)
inv = load_inventory(sc.inventory)
store = Store(f"sqlite:///{sc.state}")
store.sync_hosts([{"name": h.name, "address": h.address, "cores": h.cores, "memory_mb": h.memory_mb, "rack": None} for h in inv.hosts])
store.register_framework("sim", "simulated", shared_dir="/simulated")
wl = load_trace(sc.trace, capacity=hosts, min_core=4, period_s=120, clusters_file=sc.clusters, cost=cost_model(load_cost_file(sc.costs)))
player = Player(store, "sim", wl, speedup=speedup)
setup_logging("text", level=logging.ERROR)
coord = build(load_config(sc.config), inventory=inv)
snaps = []
def feed():
    player.t0 = time.time()
    while not player.done():
        player.step(); time.sleep(0.2)
def snapper():
    for frac in (0.33, 0.95):
        time.sleep(player.duration_s * frac - (0 if not snaps else player.duration_s * 0.33))
        gc.collect(); snaps.append(tracemalloc.take_snapshot()); print("snap", frac, flush=True)
threading.Thread(target=feed, daemon=True).start()
threading.Thread(target=snapper, daemon=True).start()
coord.run(duration_s=player.duration_s + 5)
a, b = snaps
by = {}
for st in b.compare_to(a, "filename")[:25]:
    print(st)
print("--- by line")
for st in b.compare_to(a, "lineno")[:25]:
    print(st)
