"""The dashboard of a real coordinator on the lab, in headless chromium.

3 lab hosts, policy TD (transient growth, idle clusters share equally, T = 5 s):

1. ``alpha`` (1 core node) is requested and the coordinator started with its HTTP server on
   127.0.0.1; the page is opened at once and shows the clusters the store has;
2. the coordinator deploys ``alpha`` and grows it onto the 2 free hosts as TR nodes: the open
   page follows (no reload) to 1 core + 2 TR;
3. ``beta`` is requested (CLI): admission takes a TR node back from ``alpha`` for it; the page
   shows ``beta`` and ``alpha`` at 1 TR, then ``beta`` active, again without a reload, with the
   decisions, events and both clusters in the allocation plot.

A screenshot is kept in tests/artifacts/dashboard-lab.png (the path is printed).
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from fawkes.frameworks import dists
from fawkes.frameworks.sizing import LAB_SIZES
from fawkes.mechanism import Role
from fawkes.store import Store
from fawkes.store.lifecycle import NodeState
from tests.browser_fixtures import ARTIFACTS, browser, severe_console, wait_until  # noqa: F401
from tests.conftest import REPO, cluster_dirs_marker, pids_with_cmdline, run_cli

pytestmark = [pytest.mark.lab, pytest.mark.spark]

LAB_OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1",
               "replication": "1", "executor_memory": "512m"}


def small_inventory(lab, path: Path, n: int = 3) -> Path:
    """The first ``n`` hosts of the session lab as an inventory of their own."""
    inv = yaml.safe_load(lab.inventory_path.read_text())
    base = lab.inventory_path.parent
    inv["known_hosts"] = str(base / inv["known_hosts"])
    inv["defaults"]["key_file"] = str(base / inv["defaults"]["key_file"])
    inv["hosts"] = inv["hosts"][:n]
    inv["groups"] = {"lab": [h["name"] for h in inv["hosts"]]}
    path.write_text(yaml.safe_dump(inv, sort_keys=False))
    return path


def test_dashboard_follows_a_real_coordinator(lab, browser, tmp_path):  # noqa: F811
    from selenium.webdriver.common.by import By

    t_start = time.monotonic()
    d = dists.ensure_lab_dists()
    url = f"sqlite:///{tmp_path / 'state.db'}"
    preset = tmp_path / "td-dash.yaml"
    preset.write_text("policy: TD\ngrow_type: transient\nperiod_s: 5\nsample_period_s: 2\ntau: 0.1\n"
                      "idle_timeout_s: 3600\nall_zero: equal\n")
    config = tmp_path / "config.yaml"
    config.write_text(f"state: {url}\ninventory: {small_inventory(lab, tmp_path / 'inventory.yaml')}\n"
                      f"policy: {preset}\nperiod: 5\nsample_period: 2\nmetrics: {{bind: 127.0.0.1, port: 0}}\n"
                      f"cluster_options: {LAB_OPTIONS!r}\n".replace("'", '"'))
    with Store(url) as st:
        st.register_framework("lab", "spark-hdfs", spark_home=str(d.spark_home), hdfs_jars=str(d.hdfs_home))
    r = run_cli("cluster", "request", "alpha", "--framework", "lab", "--min-core", "1", "--state", url)
    assert r.returncode == 0, r.stderr

    log = tmp_path / "coordinator.log"
    proc = subprocess.Popen([sys.executable, "-m", "fawkes", "coordinator", "run", "--config", str(config)],
                            stdout=log.open("ab"), stderr=subprocess.STDOUT, cwd=REPO, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    store = Store(url)

    def coordinator_alive():
        assert proc.poll() is None, f"coordinator exited ({proc.returncode}):\n{log.read_text()[-3000:]}"
        return True

    def nodes(cluster: str) -> dict[str, int]:
        out = {r.value: 0 for r in Role}
        for n in store.list_nodes(cluster):
            if n.state == NodeState.RUNNING:
                out[n.role] += 1
        return out

    def page_rows() -> dict[str, dict[str, str]]:
        rows = {}
        for tr in browser.find_elements(By.CSS_SELECTOR, "#clusters tr[data-cluster]"):
            rows[tr.get_attribute("data-cluster")] = {
                "state": tr.get_attribute("data-state"),
                **{r: tr.find_element(By.CSS_SELECTOR, f"td.role-{r}").text for r in ("core", "transient", "transient-core")}}
        return rows

    try:
        m = wait_until("the dashboard URL in the coordinator's log", lambda: coordinator_alive() and re.search(
            r"dashboard at (http://127\.0\.0\.1:\d+/)", log.read_text()), 120)
        page = m.group(1)
        browser.get(page)
        browser.execute_script("window.loadedOnce = 'yes'")  # gone if the page reloads
        t_open = time.monotonic()

        # 1. the clusters the store has
        live = {c.name: c.state for c in store.list_clusters(include_released=False)}
        shown = wait_until("the clusters drawn", page_rows, 30)
        assert set(shown) == set(live) == {"alpha"}
        assert shown["alpha"]["state"] in ("requested", "deploying", "active")

        # 2. the coordinator deploys alpha and grows it onto the free hosts (TR): the page follows
        wait_until("alpha active with 2 TR nodes running", lambda: coordinator_alive() and
                   store.get_cluster("alpha").state == "active" and nodes("alpha") == {"core": 1, "transient": 2,
                                                                                       "transient-core": 0}, 300, poll=1)
        t_grown = time.monotonic()
        wait_until("the page to show alpha at 1 core + 2 TR", lambda: page_rows().get("alpha") == {
            "state": "active", "core": "1", "transient": "2", "transient-core": "0"}, 30)
        grows = wait_until("a decision growing alpha", lambda: [li.text for li in browser.find_elements(
            By.CSS_SELECTOR, "#decisions li") if "+ alpha:" in li.text and "as transient" in li.text], 30)
        assert grows

        # 3. a second cluster: admission takes a TR node back from alpha; the page shows both
        r = run_cli("cluster", "request", "beta", "--framework", "lab", "--min-core", "1", "--state", url)
        assert r.returncode == 0, r.stderr
        wait_until("beta admitted on a node taken from alpha", lambda: coordinator_alive() and
                   store.get_cluster("beta").state != "requested" and
                   sum(1 for n in store.list_nodes("alpha") if n.role == Role.TR.value) == 1, 180, poll=0.5)
        t_moved = time.monotonic()
        wait_until("the page to show beta and alpha at 1 TR", lambda: (lambda rows: set(rows) == {"alpha", "beta"}
                   and rows["alpha"]["transient"] == "1" and rows["beta"]["state"] != "requested")(page_rows()), 30)
        t_follow = time.monotonic() - t_moved
        events = browser.find_element(By.ID, "events").text
        assert "beta" in events
        wait_until("beta active", lambda: coordinator_alive() and store.get_cluster("beta").state == "active", 180,
                   poll=1)
        wait_until("the page to show beta active", lambda: page_rows().get("beta", {}).get("state") == "active", 30)
        alloc = {p.get_attribute("data-cluster") for p in
                 browser.find_elements(By.CSS_SELECTOR, "#chart-allocation path[data-cluster]")}
        assert alloc == {"alpha", "beta"}
        assert browser.execute_script("return window.loadedOnce") == "yes"  # followed without a reload
        assert severe_console(browser) == []
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "dashboard-lab.png"
        browser.save_screenshot(str(shot))
        print(f"\nscreenshot: {shot}\ntimings: page open {t_open - t_start:.1f}s after start; alpha grown "
              f"{t_grown - t_open:.1f}s after the page opened; the page followed beta's admission within "
              f"{t_follow:.1f}s; beta active {time.monotonic() - t_moved:.1f}s after its admission; whole test {time.monotonic() - t_start:.1f}s")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=30)
        store.close()
        for pid in pids_with_cmdline(cluster_dirs_marker(lab, "alpha")) + pids_with_cmdline(cluster_dirs_marker(lab, "beta")):
            try:
                os.kill(pid, signal.SIGKILL)  # this test's daemons only (the clusters were not released)
            except OSError:
                pass
