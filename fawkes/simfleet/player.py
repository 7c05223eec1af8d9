"""Play a job trace against the state, as users would (SIMULATED fleet): request each cluster at its
``request_s``, submit each job at its ``submit_s``, both divided by ``speedup``.

A job becomes ``fawkes-simulated-job tasks=N task_s=S [startup_s=U] output_bytes=B`` (kind
``simulated``): N = its maps + reduces, S = its measured ``map_s`` or the cost model's mean map time of
its split, U = its own ``startup_s``, B = its input times its application's selectivity.  A cluster
with a dataset gets an input path the simulated kind loads in ``dataset / load_Bps`` (``-<bytes>B``).
Nothing here is the coordinator's: it writes to the state through the store's public calls.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from fawkes.errors import FawkesError


@dataclass
class Player:
    store: object
    framework: str
    workload: object  # fawkes.sim.workloads.Workload from fawkes.traces.trace.load_trace
    speedup: float = 1.0
    clock: object = time.time
    t0: float | None = None
    requested: list[str] = field(default_factory=list)
    submitted: dict[int, str] = field(default_factory=dict)  # job id -> cluster
    refused: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.clusters = sorted(self.workload.clusters, key=lambda c: c.request_s)
        self.rows = sorted(self.workload._rows, key=lambda r: r.submit_s)  # noqa: SLF001 (load_trace's rows)
        self._c = 0
        self._j = 0

    @property
    def duration_s(self) -> float:
        """The trace's length in real seconds (its last request or submission, compressed)."""
        last = max([c.request_s for c in self.clusters] + [r.submit_s for r in self.rows] + [0.0])
        return last / self.speedup

    def done(self) -> bool:
        return self._c >= len(self.clusters) and self._j >= len(self.rows)

    def argv(self, row) -> list[str]:
        cost = self.workload.cost
        prof = cost.profile(row.app)
        maps = max(1, row.maps)
        task_s = row.map_s if row.map_s is not None else cost.map_mean(prof, row.input_bytes / maps)
        out = [f"tasks={row.maps + row.reduces}", f"task_s={task_s:.3f}"]
        if row.startup_s is not None:
            out.append(f"startup_s={row.startup_s:.3f}")
        out.append(f"output_bytes={int(row.input_bytes * prof.selectivity)}")
        return out

    def step(self) -> int:
        """Everything due by now; returns how many requests and submissions were made."""
        if self.t0 is None:
            self.t0 = self.clock()
        at = (self.clock() - self.t0) * self.speedup  # trace seconds
        made = 0
        while self._c < len(self.clusters) and self.clusters[self._c].request_s <= at:
            c = self.clusters[self._c]
            self._c += 1
            inp = f"/simulated-dataset-{int(c.dataset_bytes)}B" if c.dataset_bytes and not c.preloaded else None
            try:
                self.store.request_cluster(c.name, framework=self.framework, min_core=c.min_core, input_path=inp)
                self.requested.append(c.name)
                made += 1
            except FawkesError as exc:
                self.refused.append(f"cluster {c.name}: {exc}")
        while self._j < len(self.rows) and self.rows[self._j].submit_s <= at:
            r = self.rows[self._j]
            if r.cluster not in self.requested and any(c.name == r.cluster for c in self.clusters[self._c:]):
                break  # its cluster is requested later: the job waits for it (the trace's order holds)
            self._j += 1
            try:
                j = self.store.submit_job(r.cluster, self.argv(r), input_bytes=int(r.input_bytes),
                                          ref_runtime=r.ref_runtime_s)
                self.submitted[j.id] = r.cluster
                made += 1
            except FawkesError as exc:
                self.refused.append(f"job at {r.submit_s:g}s on {r.cluster}: {exc}")
        return made

    def run(self, stop=None, poll_s: float = 0.05) -> None:
        """Step until the trace is played (or ``stop``, a threading.Event, is set)."""
        while not self.done() and not (stop is not None and stop.is_set()):
            self.step()
            time.sleep(poll_s)
