"""The coordinator as a long-running service: APScheduler runs the loop, SIGTERM stops it.

Four scheduled jobs, run one at a time (a single scheduler worker) so they never interleave:

* ``sample``  every sample period: host liveness, one policy sample per cluster;
* ``tick``    every T from start (A-40): the mechanism's decision, recorded and written as intent;
* ``fast``    every ``fast_s``: admission and refill between ticks, reconcile, carry out job
  cancels, dispatch jobs;
* ``prune``   every ``retention.every_s`` (first after T): old samples, events, decisions.

Long driver operations (deploy, grow, DP drains) run in the reconciler's own pool, so the
scheduled jobs stay short.  On SIGTERM/SIGINT the scheduler stops after the current step,
running DP waits are cancelled (their nodes stay DRAINING and resume on the next start).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable

from apscheduler.executors.pool import ThreadPoolExecutor as APThreadPool
from apscheduler.schedulers.blocking import BlockingScheduler
from apscheduler.schedulers import SchedulerNotRunningError

from fawkes.config import loop_policy
from fawkes.coordinator.control import Control
from fawkes.coordinator.dispatch import Dispatcher
from fawkes.coordinator.fleet import Fleet
from fawkes.coordinator.reconcile import Reconciler
from fawkes.coordinator.retention import PruneReport
from fawkes.coordinator.retention import prune as prune_state
from fawkes.coordinator.sampler import Sampler
from fawkes.coordinator.steptimes import StepTimes
from fawkes.errors import ConfigError, FawkesError
from fawkes.inventory import Inventory, load_inventory
from fawkes.mechanism import ClusterState, Role, Settings
from fawkes.store import Store
from fawkes.store.lease import LeaseLost
from fawkes.store.lifecycle import NodeState

log = logging.getLogger("fawkes.coordinator")


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {"time": round(record.created, 3), "level": record.levelname.lower(), "logger": record.name,
               "message": record.getMessage()}
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info).splitlines()[-1]
        took = getattr(record, "took_s", None)  # a tick's duration (its line's extra)
        if took is not None:
            out["took_s"] = took
        return json.dumps(out)


def setup_logging(fmt: str = "text", level: int = logging.INFO) -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else
                         logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    root = logging.getLogger("fawkes")
    root.handlers[:] = [handler]
    root.setLevel(level)
    logging.getLogger("paramiko").setLevel(logging.WARNING)
    # a step still running when its next run is due is skipped (coalesced): not worth a warning
    logging.getLogger("apscheduler").setLevel(logging.ERROR)


class Coordinator:
    """Everything the service runs, wired once.  Tests drive ``sample``/``tick``/``fast`` directly."""

    def __init__(self, store: Store, inventory: Inventory, settings: Settings, *, executor=None,
                 clock: Callable[[], float] = time.time, workers: int = 4,
                 max_running_jobs: int | Callable[[str], int] = 1,
                 host_grace_s: float = 30.0, cluster_options: dict[str, str] | None = None, retention=None,
                 timeouts=None, runner=None, pool=None, shrink_mode: str | None = None, footprint=None,
                 save_to: Callable[[str], str | None] | None = None, notifier=None,
                 hibernate: Callable[[str], bool] | None = None):
        from fawkes.config import RetentionConfig

        self.store = store
        self.retention = retention if retention is not None else RetentionConfig()
        self.settings = settings
        self.clock = clock
        # /metrics counters: numbers, or a getter read at scrape time
        self.counters: dict[str, float | Callable[[], float]] = {"reconfigurations": 0.0, "ticks": 0.0}
        self.step_times = StepTimes()  # fawkes_step_duration_seconds
        self.counters["step_seconds"] = self.step_times.families
        self.fast_s = 2.0  # the fast step's interval (run's fast_s)
        self._sync_inventory(inventory)
        self.fleet = Fleet(store, inventory, executor=executor, progress=self._progress,
                           cluster_options=cluster_options)
        self.counters["ssh_failures"] = lambda: float(getattr(self.fleet.ex, "failures", 0))
        self.control = Control(store, settings, clock, runner=runner)  # runner: a chapter-2 policy
        self.reconciler = Reconciler(store, self.fleet, workers=workers, clock=clock, timeouts=timeouts,
                                     shrink_mode=shrink_mode, footprint=footprint, save_to=save_to,
                                     hibernate=hibernate)
        self.dispatcher = Dispatcher(store, self.fleet, max_running=max_running_jobs)
        self.sampler = Sampler(store, self.fleet, self.dispatcher, settings, clock=clock, grace_s=host_grace_s)
        if settings.swollen_threshold is not None or settings.straggler_factor is not None:
            self.control.signals = self.sampler.signals  # CERES: usage and progress, kept by the sampler
        self._lock = threading.Lock()
        self._stopped = False  # set once run() ends: a step the scheduler had queued then does nothing
        self.pool = pool  # a fawkes.coordinator.pool.SlurmPool, stepped after every sample
        self.lender = None  # a fawkes.coordinator.ubis.Lender (config opportunistic:), stepped after every sample
        #: a fawkes.coordinator.notify.Notifier (config notify:): polled after every fast step, never waits
        self.notifier = notifier
        if notifier is not None:  # events recorded from now on (none before) are notified
            notifier.start(store)
            self.counters["notifications"] = notifier.counts
        self.inventory_path = None  # the file SIGHUP reloads (run_service sets it)
        self.reload_asked: threading.Event | None = None  # a SIGHUP before run() (run_service sets it)

    def sync_inventory(self) -> None:
        """The store's hosts = the inventory's now (a pool provider added or removed some)."""
        self._sync_inventory(self.fleet.inventory)

    def _sync_inventory(self, inv: Inventory) -> None:
        from fawkes.coordinator.inventory_apply import host_rows

        self.store.sync_hosts(host_rows(inv))

    def reload_inventory(self, path) -> dict[str, list[str]] | None:
        """SIGHUP (``fawkes inventory apply``): read the inventory file ``path`` again and apply it
        (:mod:`fawkes.coordinator.inventory_apply`) between two steps; a bad file or a refused change is
        one warning (and event) and changes nothing.  Returns what changed (None: refused)."""
        from fawkes.coordinator import inventory_apply as ia

        with self._lock:
            try:
                change = ia.plan_change(self.store, path, self.fleet.inventory)
                out = ia.apply_change(self.store, change, running=self.fleet.inventory, executor=self.fleet.ex)
            except FawkesError as exc:
                log.warning("inventory reload refused, nothing changed: %s", exc)
                self.store.record_event("inventory", f"reload of {path} refused, nothing changed: {exc}",
                                        level="warning")
                return None
            log.info("inventory reloaded from %s: %s", path, ia.summary(out))
            self.store.record_event("inventory", f"reloaded from {path}: {ia.summary(out)}")
            return out

    def _progress(self, ev) -> None:
        log.info("%s: %s%s", ev.cluster, ev.message, f" [{ev.host}]" if ev.host else "")

    # ------------------------------------------------------------------ the scheduled steps
    def sample(self) -> None:
        with self._lock:
            if self._stopped:
                return
            t0 = time.monotonic()
            self.sampler.step()
            if self.lender is not None:
                try:
                    self.lender.step()
                except FawkesError as exc:
                    log.warning("ubis: %s", exc)
            if self.pool is not None:
                try:
                    self.pool.step(self)
                except FawkesError as exc:
                    log.warning("%s", exc)
            self.step_times.observe("sample", time.monotonic() - t0, self.settings.sample_period_s)

    def tick(self) -> None:
        with self._lock:
            if self._stopped:
                return
            t0 = time.monotonic()
            tick, d, problems = self.control.tick()
            took = time.monotonic() - t0
            self.step_times.observe("tick", took, self.settings.period_s)
            self.counters["ticks"] += 1
            if d.resized:
                self.counters["reconfigurations"] += 1
            log.info("tick %d: %s", tick, d.reason, extra={"took_s": round(took, 4)})
            for p in problems:
                log.warning("tick %d: %s", tick, p)

    def fast(self) -> None:
        with self._lock:
            if self._stopped:
                return
            t0 = time.monotonic()
            for p in self.control.between()[1]:
                log.warning("%s", p)
            self.reconciler.step()
            self.dispatcher.step()
            if self.notifier is not None:
                try:
                    self.notifier.poll(self.store)
                except FawkesError as exc:
                    log.warning("notify: %s", exc)
            self.step_times.observe("fast", time.monotonic() - t0, self.fast_s)

    def prune(self) -> PruneReport:
        """Apply the retention config (never deleting samples the mechanism still reads)."""
        with self._lock:
            report = prune_state(self.store, self.retention, self.settings, self.clock())
        if report.samples or report.events or report.decisions:
            log.info("%s", report.summary())
        return report

    def recover(self) -> None:
        """After a (re)start: restart daemons that should run but do not (kill -9 of hosts or us).

        Each active cluster's check is an operation of the reconciler (its ``grow``: no grow of the
        cluster meanwhile), run by its workers while the scheduler already samples and decides: a new
        leader over a thousand clusters decides at once instead of after a thousand health checks.
        Everything else resumes from the recorded intent: PROVISIONING nodes are added again,
        DRAINING nodes drained again, DISPATCHED jobs found on their master or queued again.
        """
        for c in self.store.live_clusters():
            if ClusterState(c.state) is ClusterState.ACTIVE:
                self.reconciler.start(c.name, "grow", self._recover_cluster, c.name)

    def _recover_cluster(self, name: str) -> None:
        try:
            spec, driver = self.fleet.spec(name, states={NodeState.RUNNING})
            health = driver.health(spec)
        except FawkesError as exc:
            log.warning("recover %s: %s", name, exc)
            return
        down = [n for n in spec.nodes if not all(health.daemons.get(n.name, {}).values() or [False])]
        if any(n.name == spec.master.name for n in down):
            log.error("recover %s: daemons down on the master %s; the cluster needs its master back "
                      "(revive the host, then restart the coordinator)", name, spec.master.name)
            down = [n for n in down if n.name != spec.master.name]
        if down:
            log.warning("recover %s: daemons missing on %s, starting them", name, ", ".join(n.name for n in down))
            try:
                driver.add_nodes(spec, down)
            except FawkesError as exc:
                log.warning("recover %s: %s", name, exc)

    def close(self, grace_s: float = 30.0) -> list[str]:
        """Stop the reconciler (waiting up to ``grace_s`` for running operations) and close SSH.

        Returns the operations still running: they resume from their recorded intent."""
        if self.lender is not None:  # every opportunistic worker stopped by its watchdog
            self.lender.close()
        if self.notifier is not None:
            self.notifier.close()
        left = self.reconciler.shutdown(grace_s)
        if left:
            log.warning("left running, resumed on the next start: %s", ", ".join(left))
        else:
            self.fleet.close()
        return left

    # ------------------------------------------------------------------ the service
    def first_tick_at(self, start: float) -> float:
        """When the first tick after a (re)start is due: T after the last recorded decision, at
        once if that is already past (a restart after more than T); T after ``start`` on a state
        that has never decided (the first interval's samples come first)."""
        last = self.store.latest_decision()
        if last is None:
            return start + self.settings.period_s
        return max(start, min(last.time + self.settings.period_s, start + self.settings.period_s))

    def tick_first(self, start: float) -> bool:
        """Whether the first tick after a (re)start runs before the first sample and fast steps: when it is due
        at once and the state holds samples of the last two periods (a standby taking over from a leader that
        sampled until it died: the lease lets it in at most 1.45 T later), it decides on them, as the leader
        would have (the snapshot reads an interval without samples from the period before it), instead of
        waiting for a new sample of every cluster and the recovery's first step (seconds each at a thousand
        clusters); else the samples come first."""
        if self.first_tick_at(start) > start:
            return False
        latest = self.store.latest_sample_time()
        return latest is not None and latest >= start - 2 * self.settings.period_s

    def run(self, *, fast_s: float = 2.0, duration_s: float | None = None, on_tick=None,
            leadership=None) -> list[str]:
        """Run in the foreground until SIGTERM/SIGINT (or ``duration_s``, or the loss of the
        lease of ``leadership``, a :class:`~fawkes.coordinator.leadership.Leadership`).

        Returns the operations still running at exit (they resume on the next start)."""
        self._stopped = False
        self.fast_s = fast_s
        sched = BlockingScheduler(executors={"default": APThreadPool(1)},
                                  job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": 30})
        start = time.time()
        # one worker thread runs the steps in the order they fall due (at a tie, by name: fast, sample, tick)
        after = start + (0.01 if self.tick_first(start) else 0.0)
        sched.add_job(_fenced("sample", self.sample), "interval", seconds=self.settings.sample_period_s, id="sample",
                      next_run_time=_dt(after))
        sched.add_job(_fenced("tick", self._tick_job(on_tick)), "interval", seconds=self.settings.period_s, id="tick",
                      next_run_time=_dt(self.first_tick_at(start)))
        sched.add_job(_fenced("fast", self.fast), "interval", seconds=fast_s, id="fast", next_run_time=_dt(after))
        sched.add_job(self._prune_job, "interval", seconds=self.retention.every_s, id="prune",
                      next_run_time=_dt(start + min(self.retention.every_s, self.settings.period_s)))
        if duration_s is not None:
            sched.add_job(lambda: sched.shutdown(wait=False), "date", run_date=_dt(start + duration_s), id="stop")

        def stop(signum, _frame):
            log.info("signal %d: stopping after the current step", signum)
            self.reconciler.cancel.set()
            try:
                sched.shutdown(wait=False)
            except SchedulerNotRunningError:  # before it started: it is not started
                stopping.set()

        def hup(_signum, _frame):  # fawkes inventory apply / systemctl reload: between two steps
            if self.inventory_path is not None:
                sched.add_job(self.reload_inventory, "date", run_date=_dt(time.time()), args=[self.inventory_path])

        stopping = threading.Event()  # a signal before the scheduler started
        old = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
        old[signal.SIGHUP] = signal.signal(signal.SIGHUP, hup)
        if self.reload_asked is not None and self.reload_asked.is_set():  # asked before the handler was in
            self.reload_asked.clear()
            hup(signal.SIGHUP, None)
        if leadership is not None:
            def lost() -> None:  # called from the lease thread or from a refused write
                self.reconciler.cancel.set()
                try:
                    sched.shutdown(wait=False)
                except Exception:  # not running yet, or already stopping
                    pass
            leadership.on_lost(lost)

            def check_lease() -> None:  # a loss before the scheduler ran (lost() found nothing to stop)
                if leadership.lost.is_set():
                    lost()
            sched.add_job(check_lease, "interval", seconds=leadership.poll_s, id="lease", next_run_time=_dt(start))
        try:
            if leadership is not None and leadership.lost.is_set():
                return []
            self.recover()
            log.info("coordinator running: policy %s, T=%gs, tau=%g, sample every %gs",
                     self.settings.policy, self.settings.period_s, self.settings.tau, self.settings.sample_period_s)
            if not stopping.is_set():
                sched.start()
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            # the step still running (shutdown does not wait for it) ends; steps the scheduler's worker
            # had queued behind it then find _stopped and do nothing (they ran on a closed executor)
            if self._lock.acquire(timeout=120):
                self._stopped = True
                self._lock.release()
            else:
                self._stopped = True
            left = self.close()
            log.info("coordinator stopped")
        return left

    def _prune_job(self) -> None:
        try:
            self.prune()
        except FawkesError as exc:  # the state is busy or gone: try again next time
            log.warning("retention: %s", exc)

    def _tick_job(self, on_tick):
        def job():
            self.tick()
            if on_tick:
                on_tick(self)
        return job


def run_service(cfg, *, inventory_path=None, duration_s: float | None = None,
                on_lead: Callable[[Coordinator], None] | None = None) -> None:
    """``fawkes coordinator run``: be the state's one coordinator (:mod:`fawkes.coordinator.leadership`).

    SQLite: the file lock or a one-line refusal, before anything is written.  PostgreSQL: wait
    as a standby until this process holds the lease, then run; when the lease is lost, step
    down and wait again.  Returns on SIGTERM/SIGINT or after ``duration_s``."""
    period = loop_policy(cfg)[0].period_s  # a bad policy or inventory is refused before the lock is taken
    inv = config_inventory(cfg, inventory_path)
    check_save_to(cfg, inv)
    check_privileges(cfg, inv)
    end = None if duration_s is None else time.time() + duration_s
    # a reload asked (SIGHUP) before the loop's own handler is in: kept for the loop, never the default
    # action (which ends the process); the lease, and so `fawkes inventory apply`'s signal, comes first
    asked = threading.Event()
    before = signal.signal(signal.SIGHUP, lambda *_: asked.set())
    try:
        _lead(cfg, inv, inventory_path, period, end, on_lead, asked)
    finally:
        signal.signal(signal.SIGHUP, before)


def _lead(cfg, inv, inventory_path, period, end, on_lead, asked) -> None:
    from fawkes.coordinator.leadership import Leadership

    with Leadership(cfg.state_url(), period) as lead:
        while lead.wait(until=end):
            coord = build(cfg, inventory=inv, leadership=lead)
            coord.inventory_path = inventory_path or cfg.inventory
            coord.reload_asked = asked
            if cfg.opportunistic.enabled:
                from fawkes.coordinator.ubis import Lender

                coord.lender = Lender(coord.store, coord.fleet, coord.control, cfg.opportunistic, coord.settings,
                                      clock=coord.clock)
                if coord.settings.pu_signal == "measured":  # U-7: PU reads the UBIS agent's per-host CPU
                    coord.sampler.use_host_cpu(coord.lender.cpu_use)
            if on_lead is not None:
                on_lead(coord)
            left = coord.run(duration_s=None if end is None else max(0.0, end - time.time()), leadership=lead)
            if left:  # worker threads still in driver calls: their intent is recorded, do not wait for them
                lost = lead.lost.is_set()
                lead.step_down()
                logging.shutdown()
                os._exit(3 if lost else 0)
            if not lead.lost.is_set():
                return
            coord.store.close()
            lead.step_down()
            log.warning("standby again: waiting for the lease")


def _fenced(name: str, step: Callable[[], None]) -> Callable[[], None]:
    """A scheduled step that fails with a one-line error (its write refused for want of the lease,
    the database away) ends in one log line, not a traceback; the next run tries again (a lost
    lease stops the scheduler: :meth:`Coordinator.run`)."""
    def job() -> None:
        try:
            step()
        except LeaseLost as exc:
            log.warning("%s: refused: %s", name, exc)
        except FawkesError as exc:
            log.warning("%s: %s", name, exc)
    return job


def _dt(t: float):
    from datetime import datetime, timezone

    return datetime.fromtimestamp(t, tz=timezone.utc)


def config_inventory(cfg, inventory_path=None) -> Inventory:
    """The inventory a coordinator of ``cfg`` runs on (``inventory_path`` overrides the config's)."""
    path = inventory_path or cfg.inventory
    if path is None:
        raise FawkesError(f"{cfg.source or 'config'}: inventory: required to run the coordinator")
    return load_inventory(path)


def check_save_to(cfg, inv: Inventory) -> None:
    """A ``save_to`` inside a host's cluster directories would be wiped by the teardown that follows the
    save: refused in one line naming the config key, before anything starts."""
    paths = [("save_to", cfg.save_to)] + [(f"clusters.{n}.save_to", c.save_to) for n, c in cfg.clusters.items()]
    for key, path in paths:
        if path is None:
            continue
        for h in inv.hosts:
            root = h.work_dir.rstrip("/") + "/clusters"
            if path == root or path.startswith(root + "/"):
                raise ConfigError(str(cfg.source or "config"), f"{path} is inside {root} on {h.name}, which a "
                                  "cluster's teardown wipes: choose a path outside it", field=key)


def check_privileges(cfg, inv: Inventory) -> None:
    """What needs root on the hosts is refused, not silently degraded, when the hosts' user is not root:
    ``shrink_mode: suspend`` (moves a worker's processes into a cgroup of its own and caps it) and UBIS'
    ``opportunistic`` lending (its watchdog caps and preempts the borrowed worker through cgroups).  One
    line naming the config key and the hosts, before anything starts (docs/install.md, "A service user")."""
    users = sorted({h.user for h in inv.hosts if h.user != "root"})
    if not users:
        return
    hosts = [h.name for h in inv.hosts if h.user != "root"]
    who = f"{', '.join(hosts[:3])}{', ...' if len(hosts) > 3 else ''} log in as {', '.join(users)}, not root"
    if cfg.shrink_mode == "suspend":
        raise ConfigError(str(cfg.source or "config"), f"suspend moves workers into cgroups, which needs root on "
                          f"the hosts ({who}): use fp or graceful", field="shrink_mode")
    if cfg.opportunistic.enabled:
        raise ConfigError(str(cfg.source or "config"), f"the UBIS watchdog caps borrowed workers through cgroups, "
                          f"which needs root on the hosts ({who}): lend nothing, or run the hosts' user as root",
                          field="opportunistic")


def check_kinds(store: Store, settings: Settings) -> None:
    """Every live cluster's kind can serve the loop's policy: it has nodes of the role the preset grows
    by (``grow_type: transient-core`` needs a kind that stores data on its nodes), and its samples
    measure what the policy weighs (``Policy.needs``: DU needs stored or written bytes, TD task counts,
    PU slots).  Refused in one line naming the cluster, before anything starts."""
    from fawkes.frameworks.base import driver_class
    from fawkes.mechanism.policies import get_policy

    policy = get_policy(settings.policy)
    kinds = {f.name: f.kind for f in store.list_frameworks()}
    for c in store.list_clusters(include_released=False):
        kind = kinds.get(c.framework)
        if kind is None:
            continue
        drv = driver_class(kind)
        if settings.grow_type not in drv.roles:
            raise FawkesError(f"cluster {c.name}: its kind {kind} has no {settings.grow_type.value} nodes "
                              f"(roles: {', '.join(r.value for r in drv.roles)}): the policy's "
                              "grow_type cannot serve it; use a preset with grow_type: transient (td-damped-tr, td-tr)")
        for group in policy.needs:
            if not set(group) & set(drv.signals):
                raise FawkesError(f"cluster {c.name}: policy {policy.name} weighs {' or '.join(group)}, which "
                                  f"kind {kind} does not measure (it measures: {', '.join(sorted(drv.signals))}); "
                                  "choose a policy its samples can feed")


def build(cfg, *, inventory_path=None, leadership=None, inventory: Inventory | None = None) -> Coordinator:
    """A Coordinator from a config (state URL, inventory, policy preset, periods).  With
    ``leadership`` (holding the lease), every write of its store checks the lease."""
    inv = inventory if inventory is not None else config_inventory(cfg, inventory_path)
    check_save_to(cfg, inv)
    check_privileges(cfg, inv)
    store = Store(cfg.state_url())
    try:
        if leadership is not None:
            leadership.fence(store)
        settings, runner = loop_policy(cfg)
        check_kinds(store, settings)
        pool = None
        if cfg.pool is not None:  # provider slurm (the only one): its running allocations join first
            from fawkes.coordinator.pool import SlurmPool
            pool = SlurmPool(cfg.pool, inv)
            pool.adopt()
        from fawkes.coordinator.notify import Notifier

        try:
            notifier = Notifier.from_config(cfg)
        except ValueError as exc:  # a secret file changed since the config was checked
            raise ConfigError(str(cfg.source or "config"), str(exc), field="notify") from None
        return Coordinator(store, inv, settings, runner=runner, cluster_options=dict(cfg.cluster_options),
                           host_grace_s=cfg.host_grace, retention=cfg.retention, timeouts=cfg.timeouts, pool=pool,
                           shrink_mode=cfg.shrink_mode, footprint=cfg.suspend.footprint(), save_to=cfg.save_to_of,
                           notifier=notifier, hibernate=cfg.hibernates,
                           max_running_jobs=cfg.max_running_jobs_of, workers=cfg.parallel_operations)
    except Exception:
        store.close()
        raise


__all__ = ["Coordinator", "build", "run_service", "setup_logging", "Role"]
