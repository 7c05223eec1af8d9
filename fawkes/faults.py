"""Test hook for fault campaigns (``bench/fault_campaign.py``): off unless ``FAWKES_FAULT_POINT`` is set.

``FAWKES_FAULT_POINT=NAME[:N]``, read once when this module is imported, makes the process kill
itself with SIGKILL (no cleanup, no flush: a crash) the N-th time (default 1) it reaches the
point ``NAME``: one of :data:`POINTS`, each a step of a reconfiguration or of a job's dispatch.
It is a test hook, not a feature; a malformed value is refused by ``fawkes coordinator run``.
"""

from __future__ import annotations

import os
import signal
import threading

#: The named points, in the order a reconfiguration reaches them (where each is called).
POINTS = (
    "decision-recorded",   # control.tick: the decision stored, its plan not yet written as intent
    "node-requested",      # intent.apply: grow intent written (nodes REQUESTED)
    "drain-requested",     # intent.apply: shrink intent written (nodes DRAINING)
    "node-provisioning",   # reconcile._grow: nodes PROVISIONING, nothing started yet
    "daemons-started",     # add_nodes (hdfs.HdfsStorage, dask): configs written and daemons started, not yet registered
    "node-running",        # reconcile._grow: nodes recorded RUNNING
    "worker-decommissioned",  # hdfs.HdfsStorage._decommission: the leaving workers told (Spark: SIGPWR)
    "exclude-written",     # hdfs.HdfsStorage._set_exclude: exclude file written, refreshNodes not yet run
    "exclude-refreshed",   # hdfs.HdfsStorage._set_exclude: the NameNode re-read the exclude file
    "datanode-stopped",    # hdfs.HdfsStorage._decommission: decommissioned worker and DataNode stopped
    "node-wiped",          # control.ControlScriptDriver._gone: removed nodes' directories wiped, not yet released
    "node-released",       # reconcile._shrink: the node recorded RELEASED (host free again)
    "output-saved",        # reconcile._save_and_release: where the output went is recorded, teardown not yet run
    "nodes-released",      # reconcile._save_and_release: a hibernating cluster's nodes released, not yet HIBERNATING
    "cluster-deployed",    # reconcile._deployed: deployed recorded (LOADING), saved output and input not yet loaded
    "output-restored",     # reconcile._restore: a woken cluster's saved output restored, not yet ACTIVE
    "job-dispatched",      # dispatch: the job recorded DISPATCHED, not yet launched
    "job-launched",        # dispatch: the driver started on the master
    "job-finished",        # dispatch: the job's end recorded
)


def parse(spec: str) -> tuple[str, int] | None:
    """``NAME[:N]`` -> (name, n); None for ''; ValueError (one line) when malformed."""
    if not spec:
        return None
    name, sep, n = spec.partition(":")
    if name not in POINTS:
        raise ValueError(f"FAWKES_FAULT_POINT: unknown point {name[:40]!r} (one of {', '.join(POINTS)})")
    if sep and not (n.isascii() and n.isdigit() and 0 < int(n) <= 10**6):
        raise ValueError(f"FAWKES_FAULT_POINT: N must be a whole number from 1 to 1000000, not {n[:20]!r}")
    return name, int(n) if sep else 1


try:
    _ARMED, _ERROR = parse(os.environ.get("FAWKES_FAULT_POINT", "")), None
except ValueError as exc:
    _ARMED, _ERROR = None, str(exc)
_hits = 0
_lock = threading.Lock()


def check() -> None:
    """Raise ValueError if ``FAWKES_FAULT_POINT`` is malformed (``coordinator run`` calls it first)."""
    if _ERROR:
        raise ValueError(_ERROR)


def point(name: str) -> None:
    """The process reached ``name``: SIGKILL it if that is the armed point's N-th hit."""
    global _hits
    if _ARMED is None or _ARMED[0] != name:
        return
    with _lock:
        _hits += 1
        if _hits == _ARMED[1]:
            os.write(2, f"fawkes: fault point {name}:{_hits} reached: SIGKILL\n".encode())
            os.kill(os.getpid(), signal.SIGKILL)
