"""A simulation's observations and decisions, in order: what a parity replay feeds the coordinator.

The simulator calls a :class:`Recorder` on everything the coordinator would learn from the
outside world (cluster requests, lifecycle moves its reconciler carries out, node releases,
samples) and on every controller step with the snapshot it built and what the step decided.
``tests/test_parity.py`` replays such a record through the coordinator's ``Control`` on a real
store and checks that it decides the same, step by step.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from fawkes.mechanism import ClusterMetrics, ClusterState, Decision, JobFacts, Memory, Role, Snapshot
from fawkes.mechanism.controller import Between


@dataclass(frozen=True, slots=True)
class ObservedJob:
    """One unfinished job as the simulator measured it: its facts and its tasks finished so far (a re-run
    of a lost output counted again, as a driver counts a stage's new attempt)."""

    id: int
    facts: JobFacts
    completed: int


@dataclass(frozen=True, slots=True)
class Observed:
    """What one sample was measured from (the arguments of ``sample_cluster``, per job): the parity
    replay turns it into the daemons' documents and samples those with the live sampler's code."""

    jobs: tuple[ObservedJob, ...]
    busy_slots: float
    configured_slots: float
    output_bytes: float
    storage_capacity: float
    completed_jobs: int
    completed_tasks: int
    loading: bool
    node_cpu: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class RecordedStep:
    """One record: ``kind`` is static | request | state | release | fail | sample | tick | between."""

    kind: str
    time: float
    cluster: str = ""
    data: Any = None  # (min_core, expected s, deadline s) | ClusterState | host | ClusterMetrics | (Snapshot, result, Memory)
    observed: Observed | None = None  # a sample's: what it was measured from


@dataclass
class Recorder:
    events: list[RecordedStep] = field(default_factory=list)

    def static(self, name: str, min_core: int, nodes: tuple[tuple[str, Role], ...], t: float) -> None:
        """A cluster that exists from the start (chapter-2 runs): active, holding ``nodes``."""
        self.events.append(RecordedStep("static", t, name, (min_core, nodes)))

    def request(self, name: str, min_core: int, t: float, expected_duration_s: float | None = None,
                deadline_s: float | None = None) -> None:
        self.events.append(RecordedStep("request", t, name, (min_core, expected_duration_s, deadline_s)))

    def state(self, name: str, to: ClusterState, t: float) -> None:
        self.events.append(RecordedStep("state", t, name, to))

    def release(self, name: str, host: str, t: float) -> None:
        self.events.append(RecordedStep("release", t, name, host))

    def fail(self, host: str, t: float) -> None:
        """A host died: it leaves the pool; the node on it, if any, is lost."""
        self.events.append(RecordedStep("fail", t, data=host))

    def sample(self, name: str, m: ClusterMetrics, observed: Observed | None = None) -> None:
        self.events.append(RecordedStep("sample", m.time, name, m, observed))

    def tick(self, snap: Snapshot, d: Decision, memory: Memory) -> None:
        self.events.append(RecordedStep("tick", snap.now, data=(snap, d, memory)))

    def between(self, snap: Snapshot, b: Between) -> None:
        self.events.append(RecordedStep("between", snap.now, data=(snap, b, b.memory)))

    @property
    def steps(self) -> int:
        return sum(1 for e in self.events if e.kind in ("tick", "between"))
