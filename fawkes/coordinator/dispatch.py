"""Run each ACTIVE MR-cluster's FIFO job queue on its master (the kind's submit command over SSH).

A job's driver runs in client mode on the cluster's master host, detached (``setsid nohup``:
its own session and process group, whose id is the pid in ``pid``), in its own directory
``<cluster dir>/jobs/<id>`` holding ``pid``, ``log`` and, when it ends, ``rc``.  The job's
state is read back from those files, so a coordinator restart loses nothing: a DISPATCHED
job whose directory does not exist goes back to the queue.

Cancelling a started job (``fawkes jobs cancel``) records ``cancel_requested_at`` in the
store; each :meth:`Dispatcher.step` carries such requests out first, on every live cluster:
it writes ``cancelled`` into the job directory (the job is never launched again, and a poll
reads it as cancelled), sends SIGTERM to the processes of the driver's process group and pid
tree (drivers started before process groups were used) that run in the job directory, waits
up to ``cancel_grace_s``, SIGKILLs what is left, and marks the job CANCELLED.  A job that had
already written ``rc`` ended on its own: it keeps its real outcome.  An unreachable master
leaves the request pending for the next step.

The command line is the framework kind's (:meth:`FrameworkDriver.job_command`): arguments may use
``{input}`` (the job's --input), ``{output}`` (``/output/<job id>`` in the cluster's file system) and
``{job}`` (the job id), which the kind writes as its framework addresses them (spark-hdfs: HDFS URIs).
"""

from __future__ import annotations

import logging
import shlex
from collections.abc import Callable, Mapping

from fawkes import faults
from fawkes.coordinator.fleet import Fleet
from fawkes.coordinator.reconcile import OUTPUT_DIR
from fawkes.errors import FawkesError
from fawkes.frameworks.base import driver_class
from fawkes.mechanism import ClusterState
from fawkes.ssh.shell import Script, trusted
from fawkes.store import Store
from fawkes.store.lifecycle import JOB_UNFINISHED, JobState

log = logging.getLogger("fawkes.dispatch")

#: Stop a job's driver (``$d``: the job directory, ``$steps``: 0.2 s steps of SIGTERM grace).
#: Only processes of the driver's process group or pid tree whose working directory is the job
#: directory are signalled (a pid reused after a reboot is left alone).  Prints ``missing`` |
#: ``rc CODE`` | ``killed nopid|gone|sigterm|sigkill`` | ``alive PID...``.
_CANCEL_SH = r"""
cd "$d" 2>/dev/null || { echo missing; exit 0; }
if [ -e rc ]; then echo rc $(cat rc); exit 0; fi
date +%s > cancelled
if [ ! -s pid ]; then echo killed nopid; exit 0; fi
p=$(cat pid)
tree() { echo "$1"; for k in $(ps -o pid= --ppid "$1" 2>/dev/null); do tree "$k"; done; }
pids=" $(tree "$p" | tr '\n' ' ') "
here=$(pwd -P)
live() {  # the driver's process group and the tree seen above, zombies excepted, working in $d
  for x in $(ps -eo pid=,pgid=,stat= |
             awk -v g="$p" -v l="$pids" '($2 == g || index(l, " " $1 " ")) && $3 !~ /^Z/ {print $1}'); do
    [ "$(readlink "/proc/$x/cwd" 2>/dev/null)" = "$here" ] && echo "$x"
  done
}
left=$(live)  # never signal a process that only reuses a pid of ours
if [ -z "$left" ]; then echo killed gone; exit 0; fi
kill -15 $left 2>/dev/null
i=0
while [ -n "$(live)" ] && [ "$i" -lt "$steps" ]; do sleep 0.2; i=$((i + 1)); done
left=$(live)
if [ -n "$left" ]; then kill -9 $left 2>/dev/null; sleep 0.5; fi
if [ -n "$(live)" ]; then echo alive $(live)
elif [ -n "$left" ]; then echo killed sigkill
else echo killed sigterm; fi
"""


def env_words(env: Mapping[str, str]) -> str:
    """``K=V `` words (values quoted) that set ``env`` for one shell command."""
    return "".join(f"{k}={shlex.quote(v)} " for k, v in env.items())


class Dispatcher:
    """``max_running``: jobs a cluster runs at once (a number, or a function of the cluster's name: the
    config's ``max_running_jobs``).  ``python`` / ``driver_memory``: passed to the kind's
    :meth:`~fawkes.frameworks.base.FrameworkDriver.job_command` (None: the cluster's options decide, from
    the hosts' inventory; the coordinator's own interpreter is never assumed to exist on a host)."""

    def __init__(self, store: Store, fleet: Fleet, *, max_running: int | Callable[[str], int] = 1,
                 python: str | None = None, driver_memory: str | None = None, cancel_grace_s: float = 8.0):
        self.store = store
        self.fleet = fleet
        self.max_running = max_running
        self.python = python
        self.driver_memory = driver_memory
        self.cancel_grace_s = cancel_grace_s  # SIGTERM -> SIGKILL
        self._capped: set[str] = set()  # clusters whose kind's job limit was logged

    def step(self) -> None:
        """Every live cluster with unfinished jobs (one read of them all): cancels carried out, then, on
        an active cluster, its started jobs polled and the head of its queue dispatched."""
        unfinished = self.store.unfinished_jobs_by_cluster()
        clusters = [c for c in self.store.live_clusters() if c.name in unfinished]
        for c in clusters:
            if any(j.cancel_requested_at is not None and j.state != JobState.QUEUED for j in unfinished[c.name]):
                try:
                    self.cancel_requested(c.name)
                except FawkesError as exc:
                    log.warning("cancel on %s: %s", c.name, exc)
                unfinished[c.name] = self.store.list_jobs(c.name, states=JOB_UNFINISHED)  # read again
        active = [c for c in clusters if ClusterState(c.state) is ClusterState.ACTIVE and c.release_requested_at is None]
        specs = self.fleet.specs(active)
        for c in active:
            try:
                got = specs[c.name]
                if isinstance(got, FawkesError):
                    raise got
                self._cluster_step(c.name, *got, unfinished[c.name])
            except FawkesError as exc:
                log.warning("dispatch on %s: %s", c.name, exc)

    def cancel_requested(self, name: str) -> list[int]:
        """Carry out the cancel requests of cluster ``name``'s started jobs; returns the ids now CANCELLED."""
        jobs = [j for j in self.store.list_jobs(name, states=[JobState.DISPATCHED, JobState.RUNNING])
                if j.cancel_requested_at is not None]
        if not jobs:
            return []
        spec, _ = self.fleet.spec(name)
        done = []
        for j in jobs:
            if self._cancel(spec, j):
                done.append(j.id)
        return done

    def _cancel(self, spec, job) -> bool:
        """Stop one job's driver on the master (see the module docstring); True once it is CANCELLED."""
        master = spec.master.name
        script = Script("d={d}; steps={steps}\n{body}", d=self.job_dir(spec, job.id),
                        steps=max(1, round(self.cancel_grace_s / 0.2)), body=trusted(_CANCEL_SH))
        res = self.fleet.ex.run([master], script, timeout=self.cancel_grace_s + 30)[master]
        words = res.stdout.split() if res.ok else []
        status = words[0] if words else ""
        if status == "rc":
            self.store.record_event("job", f"job {job.id}: cancel came too late, it had already ended "
                                    f"(exit code {words[1] if len(words) > 1 else '?'})", cluster=spec.name)
            self._poll(spec, job)  # it keeps its real outcome
            return False
        if status not in ("missing", "killed"):
            if not res.ok:
                why = res.error
            elif status == "alive":
                why = f"processes {' '.join(words[1:])} survive SIGKILL"
            else:
                why = f"unexpected answer {res.stdout.strip()[:200]!r}"
            log.warning("cancel of job %s on %s: %s; trying again next step", job.id, master, why)
            return False
        if status == "missing":
            how = "nothing had been started on the master"
        elif words[1:2] == ["nopid"]:
            how = "no driver process had been started"
        elif words[1:2] == ["gone"]:
            how = f"no driver process was left on {master}"
        else:
            how = f"driver stopped on {master} ({words[1] if len(words) > 1 else 'signalled'})"
        self.store.transition_job(job.id, JobState.CANCELLED, f"cancelled by the user: {how}")
        self.store.record_event("job", f"job {job.id} cancelled: {how}", cluster=spec.name)
        log.info("job %s cancelled: %s", job.id, how)
        return True

    # ------------------------------------------------------------------ internals
    def _cluster_step(self, name: str, spec, driver, jobs) -> None:
        """``jobs``: the cluster's unfinished jobs as read at the start of the step."""
        live = [j for j in jobs if j.state in (JobState.DISPATCHED, JobState.RUNNING)]
        for j in live:
            self._poll(spec, j)
        if live:  # polled: some may have ended (or gone back to the queue)
            live = self.store.list_jobs(name, states=[JobState.DISPATCHED, JobState.RUNNING])
        limit = self.max_running(name) if callable(self.max_running) else self.max_running
        kind_limit = driver.max_jobs(spec)
        if kind_limit is not None and kind_limit < limit:
            if name not in self._capped:
                self._capped.add(name)
                log.warning("cluster %s: at most %d jobs at once, not max_running_jobs %d: the %s kind's limit "
                            "(its port block's job ports)", name, kind_limit, limit, spec.framework.kind)
            limit = kind_limit
        while len(live) < limit:
            job = self.store.next_job(name)
            if job is None:
                return
            self.store.transition_job(job.id, JobState.DISPATCHED, "head of the queue")  # intent first
            faults.point("job-dispatched")
            self._launch(spec, driver, job)
            faults.point("job-launched")
            live.append(job)

    def job_dir(self, spec, job_id: int) -> str:
        return f"{spec.cluster_dir(spec.master)}/jobs/{job_id}"

    def launch(self, spec, driver, job):
        """The kind's :class:`~fawkes.frameworks.base.JobLaunch` of ``job`` on ``spec``'s master."""
        return driver.job_command(spec, job, output=f"{OUTPUT_DIR}/{job.id}", driver_memory=self.driver_memory,
                                  python=self.python)

    def driver_argv(self, spec, driver, job) -> list[str]:
        """The command line of ``job``'s driver on ``spec``'s master (the kind's, :meth:`launch`)."""
        return list(self.launch(spec, driver, job).argv)

    def _launch(self, spec, driver, job) -> None:
        d = self.job_dir(spec, job.id)
        how = self.launch(spec, driver, job)
        inner = f"{env_words(how.env)}{shlex.join(how.argv)}; echo $? > {shlex.quote(d + '/rc')}"
        script = Script(
            "mkdir -p {d} && cd {d} && if [ -e pid ] || [ -e cancelled ]; then exit 0; fi; "
            "setsid nohup sh -c {inner} > log 2>&1 < /dev/null & echo $! > {pid}",
            d=d, inner=inner, pid=f"{d}/pid",
        )
        res = self.fleet.ex.run([spec.master.name], script, timeout=30)[spec.master.name]
        if not res.ok:
            self.store.transition_job(job.id, JobState.QUEUED, f"launch failed, back in the queue: {res.error}")
            raise FawkesError(f"job {job.id}: launch on {spec.master.name} failed: {res.error}")
        log.info("job %s dispatched on %s", job.id, spec.master.name)

    def _poll(self, spec, job) -> None:
        d = self.job_dir(spec, job.id)
        pattern = driver_class(spec.framework.kind).job_id_pattern
        script = Script(
            "if ! cd {d} 2>/dev/null; then echo missing; exit 0; fi; "
            "if [ -e rc ]; then echo rc $(cat rc); elif [ -e cancelled ]; then echo cancelled; "
            "elif [ -e pid ] && kill -0 $(cat pid) 2>/dev/null; then echo running; "
            # the driver may have written rc and exited between the two tests: read rc again before
            # calling it vanished (a job that succeeded was recorded failed so: the fault campaign)
            "elif [ -e rc ]; then echo rc $(cat rc); else echo vanished; fi; "
            + ("grep -o {pattern} log 2>/dev/null | head -1" if pattern else "true"),
            d=d, **({"pattern": pattern} if pattern else {}),
        )
        res = self.fleet.ex.run([spec.master.name], script, timeout=20)[spec.master.name]
        if not res.ok:
            return  # host unreachable now: the sampler's health check deals with hosts
        out = res.stdout.splitlines()
        lines = out[0].split() if out else []  # the status line, then the framework's id of the job
        status = lines[0] if lines else "missing"
        app = out[1].strip() if len(out) > 1 and out[1].strip() else None
        state = JobState(job.state)
        if status == "missing":
            if state is JobState.DISPATCHED:
                self.store.transition_job(job.id, JobState.QUEUED, "no trace on the master: queued again")
            else:
                self.store.transition_job(job.id, JobState.FAILED, "job directory lost")
            return
        if status == "cancelled":  # killed by a cancel whose store update was lost (coordinator crash)
            self.store.transition_job(job.id, JobState.CANCELLED, "cancelled (found stopped on the master)")
            return
        if status in ("running", "rc"):
            # started: the framework has given the job its id, or (a kind whose jobs have none, e.g. a
            # script that connects to the cluster) its driver process runs, or it has ended
            if state is JobState.DISPATCHED and (app or status == "rc" or not pattern):
                self.store.transition_job(job.id, JobState.RUNNING, "application started", app_id=app)
                state = JobState.RUNNING
        if status == "rc":
            code = int(lines[1]) if len(lines) > 1 and lines[1].lstrip("-").isdigit() else -1
            to = JobState.SUCCEEDED if code == 0 else JobState.FAILED
            self.store.transition_job(job.id, to, f"exit code {code}", exit_code=code,
                                      output_path=f"{OUTPUT_DIR}/{job.id}")
            faults.point("job-finished")
        elif status == "vanished":
            if state is JobState.DISPATCHED:
                self.store.transition_job(job.id, JobState.FAILED, "driver process vanished before starting")
            else:
                self.store.transition_job(job.id, JobState.FAILED, "driver process vanished")
