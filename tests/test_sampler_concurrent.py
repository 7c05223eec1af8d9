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


class HoldsUntil(Waits):
    """A read that waits until ``target`` reads are in flight at once (or 30 s pass): on a loaded machine the
    pool's threads start slowly, and a fixed wait let the first reads end before the last thread began."""

    def __init__(self, target: int, timeout_s: float = 30):
        super().__init__(0.0)
        self.target, self.timeout_s, self.seen = target, timeout_s, threading.Condition(self.lock)

    def metrics(self, spec, *, jobs=()):
        with self.seen:
            self.at_once += 1
            self.most = max(self.most, self.at_once)
            self.seen.notify_all()
            self.seen.wait_for(lambda: self.most >= self.target, timeout=self.timeout_s)
            self.at_once -= 1
        return f"sample of {spec} for {list(jobs)}"


def test_clusters_are_read_at_once_each_with_its_running_jobs():
    drv = HoldsUntil(6, timeout_s=5)  # in series, each read would wait out its 5 s alone
    todo = {f"c{i}": (f"c{i}", drv, [i, 10 + i]) for i in range(6)}
    got = read_metrics(todo)
    assert got == {f"c{i}": f"sample of c{i} for {[i, 10 + i]}" for i in range(6)}
    assert drv.most == 6


def test_at_most_sample_workers_at_once():
    drv = HoldsUntil(SAMPLE_WORKERS)
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
