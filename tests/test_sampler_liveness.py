"""The hosts' SSH liveness is checked every quarter of the grace, not at every sample (issue 26: one SSH
command per allocated host per sample period: 2,000 a second at 10,000 hosts and 5 s), and a host that
stops answering is still failed within 1.5 grace."""

from __future__ import annotations

from types import SimpleNamespace

from fawkes.coordinator.sampler import Sampler
from fawkes.mechanism import Settings


class World:
    """A store with allocated hosts and no cluster, and an executor whose hosts answer unless ``down``."""

    def __init__(self):
        self.now, self.checks, self.down, self.failed = 0.0, [], set(), {}

    # the store
    def host_names(self, state):
        return ["h1", "h2"]

    def live_clusters(self):
        return []

    def list_nodes(self):
        return []

    def set_host_state(self, host, state, detail=""):
        self.failed.setdefault(host, self.now)  # the first time

    # the executor
    def run(self, hosts, cmd, timeout=None):
        self.checks.append(self.now)
        return {h: SimpleNamespace(ok=h not in self.down, error=None if h not in self.down else "timed out")
                for h in hosts}


def sampler(world: World, grace_s: float) -> Sampler:
    return Sampler(world, SimpleNamespace(ex=world), None, Settings(policy="TD"), clock=lambda: world.now,
                   grace_s=grace_s)


def test_liveness_every_quarter_grace_at_most_30s():
    w = World()
    s = sampler(w, 60.0)
    for t in range(0, 121):  # a sample a second for two minutes
        w.now = float(t)
        s.step()
    assert w.checks == [float(t) for t in range(0, 121, 15)]
    assert sampler(World(), 600.0).liveness_every_s == 30.0 and sampler(World(), 2.0).liveness_every_s == 0.5


def test_a_host_that_stops_answering_is_failed_within_one_and_a_half_grace():
    w = World()
    s = sampler(w, 20.0)
    for t in range(0, 200):
        w.now = float(t)
        if t == 31:
            w.down.add("h2")
        s.step()
    assert set(w.failed) == {"h2"} and 31 + 20 <= w.failed["h2"] <= 31 + 1.5 * 20, w.failed
