"""The sample step reads its clusters' daemons at once (issue 26: in series, a step over N clusters took N
times one cluster's HTTP requests, and a daemon that did not answer held every cluster behind it)."""

from __future__ import annotations

import threading
import time

import pytest

from fawkes.coordinator.sampler import SAMPLE_WORKERS, read_metrics
from fawkes.errors import FawkesError


class Waits:
    """A driver whose read waits on the network for ``delay_s`` (as a daemon's HTTP API does)."""

    metrics_wait = True

    def __init__(self, delay_s: float, fail: set[str] = frozenset()):
        self.delay_s, self.fail, self.calls, self.threads = delay_s, fail, [], set()
        self.at_once = self.most = 0
        self.lock = threading.Lock()

    def metrics(self, spec, *, jobs=()):
        with self.lock:
            self.calls.append((spec, tuple(jobs)))
            self.threads.add(threading.get_ident())
            self.at_once += 1
            self.most = max(self.most, self.at_once)
        time.sleep(self.delay_s)
        with self.lock:
            self.at_once -= 1
        if spec in self.fail:
            raise FawkesError(f"GET http://{spec}:8080/json/: connection refused")
        return f"sample of {spec} for {list(jobs)}"


class InProcess(Waits):
    metrics_wait = False


def test_clusters_are_read_at_once_each_with_its_running_jobs():
    drv = Waits(0.3)
    todo = {f"c{i}": (f"c{i}", drv, [i, 10 + i]) for i in range(6)}
    t0 = time.monotonic()
    got = read_metrics(todo)
    took = time.monotonic() - t0
    assert got == {f"c{i}": f"sample of c{i} for {[i, 10 + i]}" for i in range(6)}
    assert drv.most == 6 and took < 6 * 0.3 / 2, (drv.most, took)  # in series: 1.8 s


def test_at_most_sample_workers_at_once():
    drv = Waits(0.05)
    got = read_metrics({f"c{i}": (f"c{i}", drv, []) for i in range(SAMPLE_WORKERS + 9)})
    assert len(got) == SAMPLE_WORKERS + 9 and drv.most == SAMPLE_WORKERS


def test_a_failing_read_is_its_clusters_error_only():
    drv = Waits(0.01, fail={"c1"})
    got = read_metrics({f"c{i}": (f"c{i}", drv, []) for i in range(3)})
    assert isinstance(got["c1"], FawkesError) and "connection refused" in str(got["c1"])
    assert got["c0"] == "sample of c0 for []" and got["c2"] == "sample of c2 for []"


def test_in_process_kinds_are_read_in_turn_in_this_thread():
    drv = InProcess(0.0)
    got = read_metrics({f"c{i}": (f"c{i}", drv, []) for i in range(5)})
    assert list(got) == [f"c{i}" for i in range(5)] and drv.most == 1
    assert drv.threads == {threading.get_ident()} and [c for c, _ in drv.calls] == list(got)


def test_an_unexpected_error_is_raised_as_a_read_in_turn_raises_it():
    class Broken(Waits):
        def metrics(self, spec, *, jobs=()):
            if spec == "c2":
                raise KeyError("workers")
            return "ok"

    with pytest.raises(KeyError, match="workers"):
        read_metrics({f"c{i}": (f"c{i}", Broken(0), []) for i in range(4)})


def test_one_cluster_is_read_in_this_thread():
    drv = Waits(0.0)
    assert read_metrics({"a": ("a", drv, [7])}) == {"a": "sample of a for [7]"}
    assert drv.threads == {threading.get_ident()}
