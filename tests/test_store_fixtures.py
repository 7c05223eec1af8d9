"""The PostgreSQL fixture itself: FAIL in CI, skip with a reason elsewhere, when it cannot start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _run_pg_test(ci: bool) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    env["FAWKES_PG_BIN"] = "/nonexistent/postgresql/bin"  # the server cannot start
    if ci:
        env["CI"] = "true"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfs",
         str(HERE / "test_store_api.py"), "-k", "postgres and test_frameworks_register_list_remove"],
        capture_output=True, text=True, env=env, cwd=HERE.parent, timeout=300)


@pytest.mark.parametrize("ci", [True, False])
def test_unstartable_postgres_fails_in_ci_and_skips_elsewhere(ci):
    r = _run_pg_test(ci)
    if ci:
        assert r.returncode == 1, r.stdout
        assert ("required test resource unavailable in CI: PostgreSQL server unavailable: "
                "/nonexistent/postgresql/bin/initdb not found") in r.stdout
    else:
        assert r.returncode == 0, r.stdout
        assert "1 skipped" in r.stdout and "PostgreSQL server unavailable: " in r.stdout
