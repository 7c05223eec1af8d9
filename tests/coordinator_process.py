"""The real coordinator as a subprocess, for the lab tests that drive one (failover, job cancel).

The end-to-end run of 3 clusters under TD with kill -9 at reconfiguration steps is the fault
campaign's short seeded run (tests/test_fault_campaign_lab.py, bench/fault_campaign.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench.fault_campaign import LAB_OPTIONS
from tests.conftest import REPO

__all__ = ["LAB_OPTIONS", "CoordinatorProcess", "wait_for"]


class CoordinatorProcess:
    def __init__(self, config: Path, log: Path, *, metrics: bool = False):
        """``metrics``: serve the config's HTTP server (metrics, dashboard, the teams' API); else --no-metrics."""
        self.config, self.log, self.metrics = config, log, metrics
        self.proc: subprocess.Popen | None = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        self.proc = subprocess.Popen([sys.executable, "-m", "fawkes", "coordinator", "run", "--config",
                                      str(self.config), *([] if self.metrics else ["--no-metrics"])],
                                     stdout=self.log.open("ab"), stderr=subprocess.STDOUT, env=env, cwd=REPO,
                                     start_new_session=True)

    def kill9(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)  # the coordinator and any child it started
        self.proc.wait(timeout=30)

    def stop(self) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=180)


def wait_for(what: str, fn, timeout: float, proc: CoordinatorProcess, poll: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        if proc.proc is not None and proc.proc.poll() is not None:
            raise AssertionError(f"coordinator exited ({proc.proc.returncode}) while waiting for {what}:\n"
                                 + proc.log.read_text()[-3000:])
        time.sleep(poll)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}\n" + proc.log.read_text()[-3000:])
