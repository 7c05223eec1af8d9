"""``fawkes down`` (issue 30 item 6; issue 29 item 3): every live cluster's release is requested (the
coordinator then saves each one's output before its teardown: tests/test_release_saves_output_lab.py),
queued requests are withdrawn, and without --yes and a terminal nothing changes."""

from __future__ import annotations

import json

from conftest import run_cli
from fawkes.mechanism import ClusterState
from fawkes.store import Store


def test_down_requests_every_release_and_asks_first(tmp_path):
    url = f"sqlite:///{tmp_path / 'state.db'}"
    with Store(url, create=True) as s:
        s.register_framework("fw", "spark", spark_home="/opt/spark", shared_dir="/srv/shared")
        for name in ("etl", "bi", "queued"):
            s.request_cluster(name, framework="fw", min_core=1)
        for name in ("etl", "bi"):
            s.transition_cluster(name, ClusterState.DEPLOYING)
            s.transition_cluster(name, ClusterState.ACTIVE)
    env = {"FAWKES_STATE": url}
    before = (tmp_path / "state.db").read_bytes()
    r = run_cli("down", env=env)  # no terminal, no --yes: refused, nothing changed
    assert r.returncode == 2 and "pass --yes to confirm" in r.stderr and "etl, bi, queued" in r.stderr, r.stderr
    assert (tmp_path / "state.db").read_bytes() == before
    r = run_cli("down", "--yes", "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"released": ["queued"], "requested": ["etl", "bi"]}
    with Store(url) as s:
        assert s.get_cluster("queued").state == ClusterState.RELEASED
        assert all(s.get_cluster(n).release_requested_at is not None for n in ("etl", "bi"))
    again = run_cli("down", "--yes", env=env)  # asking twice is harmless
    assert again.returncode == 0 and "release requested" in again.stdout
