"""DU's baseline (the bytes a cluster's file system holds right after its input load) lives in the
state, not in the sampler's memory: a restarted coordinator's sampler computes the same output bytes
(so the same DU weights) on the same store.  Real store (SQLite and PostgreSQL); the framework
driver answers with neutral samples."""

from __future__ import annotations

from types import SimpleNamespace

from store_fixtures import *  # noqa: F401,F403

from fawkes.coordinator.sampler import Sampler
from fawkes.frameworks.sample import FrameworkSample
from fawkes.mechanism import ClusterState, Settings
from fawkes.store import Store


class Driver:
    def __init__(self):
        self.stored: float | None = None
        self.written: float | None = None

    def web_ui(self, spec):  # the kind's own page, kept by the sampler for the dashboard
        return "http://10.0.0.1:8080/"

    def metrics(self, spec, *, jobs=()):
        return FrameworkSample(time=0.0, stored_bytes=self.stored, written_bytes=self.written,
                               storage_capacity=10_000.0)


class Fleet:
    def __init__(self, driver):
        self.driver = driver

    def spec(self, name, states=None):
        return SimpleNamespace(nodes=()), self.driver


def _active(store: Store, name: str = "a") -> None:
    store.request_cluster(name, framework="f", min_core=1)
    store.transition_cluster(name, ClusterState.DEPLOYING)
    store.transition_cluster(name, ClusterState.ACTIVE)


def _sampler(store: Store, driver: Driver) -> Sampler:
    return Sampler(store, Fleet(driver), None, Settings(policy="DU"), clock=lambda: 1000.0)


def test_a_restarted_sampler_computes_the_same_output_bytes(store):
    store.register_framework("f", "spark-hdfs")
    _active(store)
    driver = Driver()
    first = _sampler(store, driver)
    driver.stored = None  # the file system did not answer: no baseline yet, nothing written
    first.sample("a")
    assert store.get_cluster("a").stored_baseline is None and store.samples("a")[-1].output_bytes == 0.0
    driver.stored = 1000.0  # loading: not the baseline either
    first.sample("a", loading=True)
    assert store.get_cluster("a").stored_baseline is None
    first.sample("a")  # the first active sample sets it
    driver.stored = 1500.0
    first.sample("a")
    assert store.get_cluster("a").stored_baseline == 1000.0
    assert store.samples("a")[-1].output_bytes == 500.0

    restarted = _sampler(store, driver)  # a new coordinator process on the same state
    restarted.sample("a")
    assert store.samples("a")[-1].output_bytes == 500.0
    driver.stored = 1600.0
    restarted.sample("a")
    assert store.samples("a")[-1].output_bytes == 600.0

    # a kind that counts the bytes its jobs wrote is taken at its word
    driver.written = 42.0
    restarted.sample("a")
    assert store.samples("a")[-1].output_bytes == 42.0


def test_a_cluster_requested_again_starts_from_a_new_baseline(store):
    store.register_framework("f", "spark-hdfs")
    _active(store)
    driver = Driver()
    sampler = _sampler(store, driver)
    driver.stored = 1000.0
    sampler.sample("a")
    store.request_release("a")
    store.transition_cluster("a", ClusterState.SAVING)
    store.transition_cluster("a", ClusterState.RELEASED)
    _active(store)  # a new incarnation of "a"
    driver.stored = 300.0
    sampler.sample("a")
    assert store.get_cluster("a").stored_baseline == 300.0 and store.samples("a")[-1].output_bytes == 0.0
    # the dashboard's link to the kind's own page, as last sampled
    assert list(sampler.web_ui) == ["a"] and sampler.web_ui["a"].startswith("http://") and sampler.web_ui["a"].endswith(":8080/")
