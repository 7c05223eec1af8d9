"""Run each ACTIVE MR-cluster's FIFO job queue on its master (spark-submit over SSH).

A job's driver runs in client mode on the cluster's master host, detached (``nohup``), in
its own directory ``<cluster dir>/jobs/<id>`` holding ``pid``, ``log`` and, when it ends,
``rc``.  The job's state is read back from those files, so a coordinator restart loses
nothing: a DISPATCHED job whose directory does not exist goes back to the queue.

Arguments may use ``{input}`` (the job's --input, as an HDFS path), ``{output}``
(``hdfs:///output/<job id>``) and ``{job}`` (the job id).
"""

from __future__ import annotations

import logging
import shlex
import sys

from fawkes.coordinator.fleet import Fleet
from fawkes.coordinator.reconcile import OUTPUT_DIR
from fawkes.errors import FawkesError
from fawkes.mechanism import ClusterState
from fawkes.ssh.shell import Script
from fawkes.store import Store
from fawkes.store.lifecycle import JobState

log = logging.getLogger("fawkes.dispatch")

UI_PORT_BASE = 4040


def ui_port(job_id: int) -> int:
    """The driver UI port of a job (where its task counts are read), fixed by its id."""
    return UI_PORT_BASE + 1 + job_id % 2000


def expand(arg: str, job) -> str:
    inp = job.input_path or ""
    if inp and "://" not in inp:
        inp = "hdfs://" + inp if inp.startswith("/") else f"hdfs:///input/{inp}"
    return arg.replace("{input}", inp).replace("{output}", f"hdfs://{OUTPUT_DIR}/{job.id}").replace("{job}", str(job.id))


class Dispatcher:
    def __init__(self, store: Store, fleet: Fleet, *, max_running: int = 1, python: str | None = None,
                 driver_memory: str = "512m"):
        self.store = store
        self.fleet = fleet
        self.max_running = max_running
        self.python = python or sys.executable
        self.driver_memory = driver_memory

    def step(self) -> None:
        for c in self.store.list_clusters(include_released=False):
            if ClusterState(c.state) is not ClusterState.ACTIVE or c.release_requested_at is not None:
                continue
            try:
                self._cluster_step(c.name)
            except FawkesError as exc:
                log.warning("dispatch on %s: %s", c.name, exc)

    def driver_urls(self, cluster: str) -> list[str]:
        """Driver UIs of the cluster's running jobs (for per-application task counts)."""
        try:
            spec, _ = self.fleet.spec(cluster)
        except FawkesError:
            return []
        running = self.store.list_jobs(cluster, states=[JobState.RUNNING])
        return [f"http://{spec.master.address}:{ui_port(j.id)}" for j in running]

    # ------------------------------------------------------------------ internals
    def _cluster_step(self, name: str) -> None:
        spec, driver = self.fleet.spec(name)
        live = self.store.list_jobs(name, states=[JobState.DISPATCHED, JobState.RUNNING])
        for j in live:
            self._poll(spec, j)
        live = self.store.list_jobs(name, states=[JobState.DISPATCHED, JobState.RUNNING])
        while len(live) < self.max_running:
            job = self.store.next_job(name)
            if job is None:
                return
            self.store.transition_job(job.id, JobState.DISPATCHED, "head of the queue")  # intent first
            self._launch(spec, driver, job)
            live.append(job)

    def job_dir(self, spec, job_id: int) -> str:
        return f"{spec.cluster_dir(spec.master)}/jobs/{job_id}"

    def _launch(self, spec, driver, job) -> None:
        d = self.job_dir(spec, job.id)
        conf = dict(driver.submit_conf(spec))
        conf.update({
            "spark.driver.host": spec.master.address, "spark.driver.bindAddress": spec.master.address,
            "spark.ui.port": str(ui_port(job.id)), "spark.port.maxRetries": "0",
            "spark.driver.memory": self.driver_memory, "spark.pyspark.python": self.python,
            "spark.pyspark.driver.python": self.python,
        })
        argv = [f"{spec.framework.spark_home}/bin/spark-submit", "--name", f"fawkes-{spec.name}-{job.id}"]
        for k, v in conf.items():
            argv += ["--conf", f"{k}={v}"]
        argv += [expand(a, job) for a in job.argv]
        env = f"JAVA_HOME={shlex.quote(spec.framework.java_home)} " if spec.framework.java_home else ""
        inner = f"{env}SPARK_HOME={shlex.quote(spec.framework.spark_home)} {shlex.join(argv)}; echo $? > {shlex.quote(d + '/rc')}"
        script = Script(
            "mkdir -p {d} && cd {d} && if [ -e pid ]; then exit 0; fi; "
            "nohup sh -c {inner} > log 2>&1 < /dev/null & echo $! > {pid}",
            d=d, inner=inner, pid=f"{d}/pid",
        )
        res = self.fleet.ex.run([spec.master.name], script, timeout=30)[spec.master.name]
        if not res.ok:
            self.store.transition_job(job.id, JobState.QUEUED, f"launch failed, back in the queue: {res.error}")
            raise FawkesError(f"job {job.id}: launch on {spec.master.name} failed: {res.error}")
        log.info("job %s dispatched on %s", job.id, spec.master.name)

    def _poll(self, spec, job) -> None:
        d = self.job_dir(spec, job.id)
        script = Script(
            "if ! cd {d} 2>/dev/null; then echo missing; exit 0; fi; "
            "if [ -e rc ]; then echo rc $(cat rc); "
            "elif [ -e pid ] && kill -0 $(cat pid) 2>/dev/null; then echo running; else echo vanished; fi; "
            "grep -o 'app-[0-9]*-[0-9]*' log 2>/dev/null | head -1",
            d=d,
        )
        res = self.fleet.ex.run([spec.master.name], script, timeout=20)[spec.master.name]
        if not res.ok:
            return  # host unreachable now: the sampler's health check deals with hosts
        lines = res.stdout.split()
        status = lines[0] if lines else "missing"
        app = next((w for w in lines if w.startswith("app-")), None)
        state = JobState(job.state)
        if status == "missing":
            if state is JobState.DISPATCHED:
                self.store.transition_job(job.id, JobState.QUEUED, "no trace on the master: queued again")
            else:
                self.store.transition_job(job.id, JobState.FAILED, "job directory lost")
            return
        if status == "running" or status == "rc":
            if state is JobState.DISPATCHED and (app or status == "rc"):
                self.store.transition_job(job.id, JobState.RUNNING, "application started", app_id=app)
                state = JobState.RUNNING
        if status == "rc":
            code = int(lines[1]) if len(lines) > 1 and lines[1].lstrip("-").isdigit() else -1
            to = JobState.SUCCEEDED if code == 0 else JobState.FAILED
            self.store.transition_job(job.id, to, f"exit code {code}", exit_code=code,
                                      output_path=f"{OUTPUT_DIR}/{job.id}")
        elif status == "vanished":
            if state is JobState.DISPATCHED:
                self.store.transition_job(job.id, JobState.FAILED, "driver process vanished before starting")
            else:
                self.store.transition_job(job.id, JobState.FAILED, "driver process vanished")
