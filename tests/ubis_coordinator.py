"""An in-process coordinator with UBIS lending on a lab of its own, for the UBIS lab test and benchmark.

:func:`ubis_coordinator` writes the config (policy TD, no tick until asked: period 1 h; sample period 1 s;
``opportunistic:`` with ``accept``, ``refuse`` per cluster), builds the coordinator, registers the lab's
Spark + HDFS, requests the clusters and yields a :class:`UbisRun`; on the way out it releases every cluster,
steps the coordinator until all are released, closes it, and checks that no daemon and no watchdog agent
is left on the lab's hosts.
"""

from __future__ import annotations

import json
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from fawkes.frameworks import dists
from fawkes.frameworks.sizing import LAB_SIZES
from tests.conftest import cluster_dirs_marker, pids_with_cmdline

LAB_OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "executor_memory": "512m", "replication": "1"}


@dataclass
class UbisRun:
    cfg: object
    coord: object
    store: object
    tmp: Path

    def deployed(self, hosts: dict[str, list[str]]) -> Path:
        """Wait until every cluster of ``hosts`` is active on exactly those hosts; the path of a words file
        for the jobs (2,000 lines of 50 words)."""
        self.drive(lambda: all(self.store.get_cluster(n).state == "active" for n in hosts), 240,
                   "the clusters deployed")
        assert {n: sorted(x.host for x in self.store.list_nodes(n)) for n in hosts} == hosts
        data = self.tmp / "words.txt"
        data.write_text("\n".join(f"w{i % 50} w{(i * 7) % 50}" for i in range(2000)) + "\n")
        return data

    def drive(self, until, timeout: float, what: str, sample: bool = True):
        """Fast steps (and samples) until ``until()`` is true; its value, or an AssertionError naming
        ``what`` with the last events."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.coord.fast()
            if sample:
                self.coord.sample()
            v = until()
            if v:
                return v
            time.sleep(0.3)
        raise AssertionError(f"timed out after {timeout:g} s waiting for {what}: "
                             + "; ".join(e.message for e in self.store.events(limit=8)))


@contextmanager
def ubis_coordinator(lab, tmp_path, clusters: dict[str, int], lending: dict[str, str], opportunistic: str = "",
                     preset_lines: str = "", t_alloc: float = 0.9, grow_type: str = "transient"):
    """``clusters``: name -> min core nodes, requested in that order; ``lending``: name -> accept | refuse;
    ``opportunistic``: more fields of the config's section (YAML flow, e.g. ``t_alloc_tune: true``);
    ``preset_lines``: more lines of the TD preset (e.g. ``pu_signal: measured``); ``grow_type``: the role
    TD grows (transient or transient-core)."""
    from fawkes.config import load_config
    from fawkes.coordinator.service import build

    d = dists.ensure_lab_dists()
    preset = tmp_path / "td.yaml"
    preset.write_text(f"policy: TD\ngrow_type: {grow_type}\nperiod_s: 3600\nsample_period_s: 1\ntau: 0.01\n"
                      "idle_timeout_s: 3600\n" + (preset_lines.rstrip("\n") + "\n" if preset_lines else ""))
    config = tmp_path / "config.yaml"
    config.write_text(f"state: sqlite:///{tmp_path / 'state.db'}\ninventory: {lab.inventory_path}\n"
                      f"policy: {preset}\nperiod: 3600\nsample_period: 1\n"
                      f"cluster_options: {json.dumps(LAB_OPTIONS)}\n"
                      f"opportunistic: {{clusters: {json.dumps(lending)}, t_alloc: {t_alloc:g}, measure_s: 0.5"
                      f"{', ' + opportunistic if opportunistic else ''}}}\n")
    cfg = load_config(config)
    coord = build(cfg)
    store = coord.store
    try:
        store.register_framework("lab", "spark-hdfs", spark_home=str(d.spark_home), hdfs_jars=str(d.hdfs_home))
        for name, min_core in clusters.items():
            store.request_cluster(name, framework="lab", min_core=min_core)
        yield UbisRun(cfg, coord, store, tmp_path)
    finally:
        if coord.lender is not None:
            coord.lender.close()
        for n in clusters:
            try:
                if store.get_cluster(n).state != "released":
                    store.request_release(n)
            except Exception:  # noqa: BLE001, S110 - a release that cannot be asked: the wait below says so
                pass
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and any(c.state != "released" for c in store.list_clusters()):
            coord.fast()
            time.sleep(0.5)
        coord.close()
        store.close()
    assert not pids_with_cmdline(cluster_dirs_marker(lab)), "daemons left on the lab hosts"
    assert not pids_with_cmdline("fawkes-agent/watchdog.py"), "a watchdog agent left running"
