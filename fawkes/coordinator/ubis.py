"""UBIS live (issue 12, U-1..U-5): opportunistic transient nodes on measured slack.

With the config's ``opportunistic:`` section naming a cluster ``accept``, every sample step the
coordinator

1. **measures** each host held by an active cluster: the watchdog agent (:mod:`fawkes.agent.watchdog`,
   copied to ``<host root>/fawkes-agent/watchdog.py``) runs on each with ``--sample --follow`` over an
   SSH session kept open (a *monitor*): a line every ``measure_s`` with CPU and memory use as fractions
   of the host (its cgroup quota on a lab host).  A host's use is the maximum over its samples of the
   last ``WINDOW_S`` seconds; a host without a fresh sample is not measured (nothing is lent on it).
   (A ``--sample`` run per measurement started an interpreter and an SSH exec every second on every
   host: more than a tenth of a 0.6-core lab host's quota, taken from the owner being measured.);
2. **decides** (:func:`fawkes.mechanism.opportunistic.decide`, pure) on a snapshot carrying those
   signals (``Snapshot.host_use``) and the controller's targets: hosts to lend, workers to promote,
   workers to withdraw;
3. **carries it out**: a lent host gets the borrower's configs (as if it were its TR node) and, over one
   SSH session kept open, the watchdog agent starting the borrower's worker in the foreground (the
   kind's :meth:`~fawkes.frameworks.base.FrameworkDriver.opportunistic_worker`; spark-hdfs: its Spark
   worker, ``fawkes-daemon.sh run worker``) in a cgroup capped at ``T_alloc x Cap - Util`` with ``cpu_shares`` and ``nice``.  The
   session writes a line every second (the agent's ``--stdin-timeout``) and reads the agent's JSON
   events: ``stopped`` (the watchdog preempted the worker on its own: three checks over
   ``t_preempt``) is recorded as an event and the host cools down ``cooldown_s`` before it is lent
   again.  A withdrawal closes the session's stdin: the agent stops the worker.  A promotion
   (the owner released the host, the borrower is due a node) allocates the host to the borrower as a
   TR node in the store first (intent), then tells the agent ``promote``: the worker stays, uncapped,
   its pid in the daemon's pid file, and the reconciler's grow finds it running and registered.

Nothing of this is durable: the opportunistic workers live as long as the coordinator's SSH
sessions.  When the coordinator stops (or dies, or loses the host) the sessions close and every
agent stops its worker; a restarted coordinator starts from nothing lent.

Accounting, two layers (U-5): the regular layer is FAWKES's own (opportunistic workers are in no
cluster's node count, allocation history or discrimination); the slack layer is
:func:`~fawkes.mechanism.opportunistic.slack_discrimination` over the lent hosts plus the node-seconds
each cluster borrowed (:attr:`Lender.slack_s`), in ``fawkes events`` (kind ``ubis``).
"""

from __future__ import annotations

import json
import logging
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from fawkes.agent import watchdog as agent
from fawkes.errors import FawkesError
from fawkes.frameworks.base import map_only_refusal
from fawkes.mechanism import ClusterState, Role
from fawkes.mechanism import opportunistic as opp
from fawkes.mechanism import talloc
from fawkes.mechanism.model import HostUse
from fawkes.ssh.shell import Script

log = logging.getLogger("fawkes.ubis")

AGENT_TEXT = Path(agent.__file__).read_text()
AGENT_DIR = "fawkes-agent"
HEARTBEAT_S = 1.0
WINDOW_S = 3.0  # a host's use: the maximum of its monitor's samples over the last WINDOW_S seconds


def agent_path(root: str) -> str:
    return str(PurePosixPath(root) / AGENT_DIR / "watchdog.py")


@dataclass
class AgentSession:
    """One opportunistic worker: the SSH session running its watchdog agent."""

    host: str
    cluster: str  # the borrower
    owner: str
    cpus: float
    client: object
    chan: object
    started: float
    events: list[dict] = field(default_factory=list)
    ended: threading.Event = field(default_factory=threading.Event)
    promoted: threading.Event = field(default_factory=threading.Event)
    exit_code: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)
    # U-6: the worker's CPU seconds at its last check and at its last idle check (the agent's worker_cpu_s)
    cpu_s: float = 0.0
    idle_cpu_s: float = 0.0
    check_t: float | None = None

    def send(self, data: bytes) -> bool:
        with self.lock:
            try:
                self.chan.sendall(data)
                return True
            except Exception:  # noqa: BLE001 - the channel died with the host or the connection
                return False

    def run(self, on_event: Callable[["AgentSession", dict], None]) -> None:
        """Read the agent's lines, send a heartbeat every second, until the session ends."""
        buf = b""
        next_beat = time.monotonic()
        try:
            while True:
                if time.monotonic() >= next_beat:
                    self.send(b"\n")
                    next_beat = time.monotonic() + HEARTBEAT_S
                select.select([self.chan], [], [], 0.5)
                while self.chan.recv_stderr_ready():  # the agent's one-line errors
                    err = self.chan.recv_stderr(65536).decode(errors="replace").strip()
                    if err:
                        log.warning("ubis: agent on %s: %s", self.host, err[:300])
                if self.chan.recv_ready():
                    data = self.chan.recv(65536)
                    if not data:
                        break
                    buf += data
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        try:
                            ev = json.loads(line)
                        except ValueError:
                            continue
                        self.events.append(ev)
                        del self.events[:-300]  # a check line a second: the last five minutes
                        if ev.get("event") == "promoted":
                            self.promoted.set()
                        on_event(self, ev)
                if (self.chan.eof_received or self.chan.exit_status_ready()) and not self.chan.recv_ready():
                    break
                transport = self.chan.get_transport()
                if transport is None or not transport.is_active():
                    break
        except Exception as exc:  # noqa: BLE001 - a dead connection ends the session like an EOF
            log.debug("%s on %s: session ended: %s", self.cluster, self.host, exc)
        finally:
            if self.chan.exit_status_ready():
                self.exit_code = self.chan.recv_exit_status()
            try:
                self.client.close()
            except Exception:  # noqa: BLE001
                pass
            self.ended.set()
            on_event(self, {"event": "session-ended", "code": self.exit_code})

    def close(self, wait: float = 15.0) -> None:
        """Withdraw: EOF on the agent's stdin (it stops the worker), then wait for it to exit."""
        with self.lock:
            try:
                self.chan.shutdown_write()
            except Exception:  # noqa: BLE001
                pass
        self.ended.wait(wait)
        if not self.ended.is_set():
            try:
                self.client.close()  # the connection's end: the agent sees EOF (or silence) all the same
            except Exception:  # noqa: BLE001
                pass


def _cores(x) -> bool:
    """A number of cores an agent may report (not a bool, NaN, inf or out of range)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and 0 < x < 1e6


IDLE_SHARE = 0.1  # U-6: a worker using under this share of its cap over a check period runs no task ...
IDLE_HOST_MAX = 0.9  # ... if its host had room for it (over this use of the host, the worker may be starved)


@dataclass
class TuneWindow:
    """UBIS U-6 live: what lending did over one window of the climb.  ``work_s``: CPU seconds the
    opportunistic workers used (their cpu groups, the worker's own start included); ``lost_s``: of those,
    what the watchdog's stops threw away, a stopped worker's CPU since its last idle check (a running task's
    progress and, for a framework that keeps shuffle output on the worker, the finished tasks' output the
    stop lost with it; idle: under a tenth of its cap while its host had room, since a worker starved by
    the owner's load uses little CPU too); ``waited``: some accepting cluster had demand while no host was free."""

    started: float
    work_s: float = 0.0
    lost_s: float = 0.0
    waited: bool = False
    preemptions: int = 0


class Lender:
    """The coordinator's UBIS pass: measure, decide, lend / promote / withdraw (module docstring)."""

    def __init__(self, store, fleet, control, cfg: opp.OpportunisticConfig, settings, *,
                 clock: Callable[[], float] = time.time, cooldown_s: float = 30.0):
        self.store, self.fleet, self.control, self.cfg, self.settings = store, fleet, control, cfg, settings
        self.clock = clock
        self.cooldown_s = cooldown_s
        self.sessions: dict[str, AgentSession] = {}  # host -> its opportunistic worker
        self.cool: dict[str, float] = {}  # host -> lendable again after (monotonic)
        self.slack_s: dict[str, float] = {}  # borrower -> node-seconds of opportunistic workers
        self.preemptions = 0
        self.promotions = 0
        self.last_use: dict[str, dict] = {}
        self.monitors: dict[str, AgentSession] = {}  # host -> the agent sampling its use (--sample --follow)
        self.samples: dict[str, list[tuple[float, float, float, float]]] = {}  # host -> (monotonic, cpu, mem, cpus)
        self._agent_on: set[str] = set()
        # whether an opportunistic worker can be confined to map tasks (every kind's capability)
        self.map_only_workers = map_only_refusal() is None
        self._lock = threading.Lock()
        self._last = time.monotonic()
        self.climb = cfg.climb_start()  # U-6: T_alloc climbed online (None: cfg.t_alloc throughout)
        self.window = TuneWindow(self._last)
        self.windows: list[dict] = []  # the climb's last windows, newest last (status, benchmarks)

    # ------------------------------------------------------------------ measuring
    def _ensure_agent(self, hosts) -> list[str]:
        need = [h for h in hosts if h not in self._agent_on]
        if not need:
            return []
        files = {h: [(agent_path(self.fleet.node_spec(h, Role.TR).root), AGENT_TEXT)] for h in need}
        res = self.fleet.ex.put_each(files, mode=0o755)
        bad = []
        for h, r in res.items():
            if r.ok:
                self._agent_on.add(h)
            else:
                bad.append(f"{h}: {r.error}")
        return bad

    def _open(self, host: str, cmd: Script):
        """A connection of its own and a session running ``cmd`` on ``host`` (kept open)."""
        ex = self.fleet.ex
        try:
            client = ex._connect(ex.targets[host])
            chan = client.get_transport().open_session(timeout=ex.connect_timeout)
            chan.exec_command(str(cmd))
        except Exception as exc:  # noqa: BLE001
            raise FawkesError(f"{host}: cannot start the agent's session: {exc}") from None
        return client, chan

    def _on_sample(self, s: AgentSession, ev: dict) -> None:
        if ev.get("event") == "sample":
            try:
                rec = (time.monotonic(), float(ev["cpu"]), float(ev["mem"]), float(ev["cpus"]))
            except (KeyError, TypeError, ValueError):
                return
            kept = [x for x in self.samples.get(s.host, []) if x[0] > rec[0] - WINDOW_S]
            self.samples[s.host] = kept + [rec]
        elif ev.get("event") == "session-ended":
            self._agent_on.discard(s.host)  # a wiped host, a lost agent: copied again before the next monitor

    def _monitor(self, hosts: set[str]) -> None:
        """A monitor on each of ``hosts`` (started where missing or ended), none elsewhere."""
        for h in [h for h in self.monitors if h not in hosts or self.monitors[h].ended.is_set()]:
            m = self.monitors.pop(h)
            self.samples.pop(h, None)
            try:
                m.client.close()  # the agent sees its stdin close and exits
            except Exception:  # noqa: BLE001
                pass
        need = sorted(h for h in hosts if h not in self.monitors)
        for p in self._ensure_agent(need):
            log.warning("ubis: cannot copy the watchdog agent: %s", p)
        for h in need:
            if h not in self._agent_on:
                continue
            cmd = Script("exec {py} {a} --sample --follow --period {p} --stdin-eof --stdin-timeout {hb}",
                         py=self.cfg.python, a=agent_path(self.fleet.node_spec(h, Role.TR).root),
                         p=f"{self.cfg.measure_s:g}", hb=f"{self.cfg.silence_s:g}")
            try:
                client, chan = self._open(h, cmd)
            except FawkesError as exc:
                log.warning("ubis: %s", exc)
                continue
            m = AgentSession(h, "", "", 0.0, client, chan, time.monotonic())
            self.monitors[h] = m
            threading.Thread(target=m.run, args=(self._on_sample,), name=f"ubis-monitor-{h}", daemon=True).start()

    def measure(self, hosts) -> dict[str, dict]:
        """Each host's use: the maximum of its monitor's samples over the last ``WINDOW_S`` s (one
        sample every ``cfg.measure_s``); hosts without a fresh sample are left out (nothing is lent on
        an unmeasured host)."""
        hosts = set(hosts)
        self._monitor(hosts)
        now = time.monotonic()
        out = {}
        for h in sorted(hosts):
            recent = [x for x in self.samples.get(h, []) if x[0] > now - WINDOW_S]
            if recent:
                out[h] = {"cpu": max(x[1] for x in recent), "mem": max(x[2] for x in recent), "cpus": recent[-1][3]}
        self.last_use = out
        return out

    def cpu_use(self) -> dict[str, float]:
        """UBIS U-7: host -> its mean CPU fraction over its monitor's samples of the last ``WINDOW_S``
        seconds, the signal PU reads with ``pu_signal: measured`` (:meth:`fawkes.coordinator.sampler.Sampler.use_host_cpu`).
        Hosts lent now are left out: their reading holds the borrower's worker, not only the owner's use."""
        now = time.monotonic()
        lent = set(self.sessions)
        out = {}
        for h, xs in list(self.samples.items()):
            recent = [x[1] for x in xs if x[0] > now - WINDOW_S]
            if recent and h not in lent:
                out[h] = sum(recent) / len(recent)
        return out

    # ------------------------------------------------------------------ the pass
    def step(self) -> opp.LendPlan | None:
        if not self.cfg.enabled:
            return None
        now_m = time.monotonic()
        with self._lock:
            for s in self.sessions.values():  # the slack layer's node-seconds
                self.slack_s[s.cluster] = self.slack_s.get(s.cluster, 0.0) + (now_m - self._last)
            self._last = now_m
            ended = [h for h, s in self.sessions.items() if s.ended.is_set()]
            for h in ended:
                del self.sessions[h]
        snap = self.control.snapshot()  # with the sampler's signals: CERES' usage windows for the partial reclaim
        held = {n.id for c in snap.clusters if c.state is ClusterState.ACTIVE for n in c.nodes if not n.draining}
        use = self.measure(held | set(self.sessions))
        cooled = {h for h, t in self.cool.items() if t > now_m}
        host_use = tuple(
            HostUse(h, u["cpu"], u["mem"], u["cpus"], borrower=self.sessions[h].cluster if h in self.sessions else None)
            for h, u in sorted(use.items()) if h in self.sessions or h not in cooled)
        # a lent host that did not answer still has its borrower: the decision must see it
        host_use += tuple(HostUse(h, 1.0, 1.0, 1.0, borrower=s.cluster) for h, s in sorted(self.sessions.items())
                          if h not in use)
        snap = replace(snap, host_use=host_use)
        targets = {n: m.target for n, m in self.control.memory().clusters if m.target is not None}
        self._tune(now_m)
        plan = opp.decide(snap, self.live_cfg, targets, map_only_workers=self.map_only_workers,
                          swollen_threshold=self.settings.swollen_threshold,
                          usage_window_s=self.settings.usage_window_s)
        with self._lock:
            self.window.waited = self.window.waited or plan.wanted
        for w in plan.withdrawals:
            self._withdraw(w.host, w.reason)
        for p in plan.promotions:
            self._promote(p.host, p.cluster, allocate=not p.allocated)
        for g in plan.grants:
            try:
                self._lend(g)
            except FawkesError as exc:
                self.store.record_event("ubis", f"lending {g.host} to {g.cluster} failed: {exc}", level="warning",
                                        cluster=g.cluster, node=g.host)
        return plan

    # ------------------------------------------------------------------ U-6: T_alloc climbed online
    @property
    def live_cfg(self) -> opp.OpportunisticConfig:
        """The config the decision reads: the configured one, with the climb's T_alloc when tuning."""
        return self.cfg if self.climb is None else self.cfg.model_copy(update={"t_alloc": self.climb.t_alloc})

    def _tune(self, now_m: float) -> None:
        """Close the climb's window once ``tune_window_s`` has passed: one step of the climb on its gain."""
        if self.climb is None or now_m - self.window.started < self.cfg.tune_window_s:
            return
        with self._lock:
            w, self.window = self.window, TuneWindow(now_m)
        span = now_m - w.started
        gain = talloc.window_gain(w.work_s, w.lost_s, span)
        before = self.climb
        self.climb = talloc.climb(before, gain, w.waited)
        rec = {"span_s": round(span, 1), "work_s": round(w.work_s, 2), "lost_s": round(w.lost_s, 2),
               "gain": round(gain, 4), "waited": w.waited, "preemptions": w.preemptions, "t_alloc": before.t_alloc,
               "next": self.climb.t_alloc}
        self.windows = (self.windows + [rec])[-100:]
        if not w.waited:  # nothing waited for slack: the window says nothing of T_alloc (no event)
            return
        rec["recapped"] = self._recap(self.climb.t_alloc - before.t_alloc)
        self.store.record_event("ubis", f"T_alloc {before.t_alloc:g} -> {self.climb.t_alloc:g} (U-6): over "
                                f"{span:.0f} s the opportunistic workers used {w.work_s:.1f} CPU s, {w.preemptions} preemption(s) "
                                f"threw away {w.lost_s:.1f}: gain {gain:.3f}/s, the window before "
                                f"{'none' if before.last_gain is None else format(before.last_gain, '.3f')}")
        log.info("ubis: T_alloc %g -> %g (gain %.3f)", before.t_alloc, self.climb.t_alloc, gain)

    def _recap(self, moved: float) -> int:
        """T_alloc moved by ``moved``: each lent worker's cap (T_alloc x Cap - Util at its loan) moves by
        ``moved`` x its host's capacity, the owner's use as measured at the loan kept (at least 0.01 cores).
        A worker lent once would otherwise keep its first cap, and the climb measure the same loan each
        window.  The agent confirms with a ``cap`` event (the session's cap changes then).  Returns how many
        workers were sent a new cap."""
        if abs(moved) < 1e-9:
            return 0
        sent = 0
        with self._lock:
            sessions = list(self.sessions.values())
        for s in sessions:
            host_cpus = self.last_use.get(s.host, {}).get("cpus")
            if not _cores(host_cpus):
                continue  # an unmeasured host: its cap stays
            cap = min(host_cpus, max(0.01, s.cpus + moved * host_cpus))
            sent += s.send(f"cap {cap:.4f}\n".encode())
        return sent

    def _account(self, s: AgentSession, ev: dict) -> None:
        """A check or stop of a worker's agent: its CPU since the last one is work; a stop for load throws
        away what it did since its last idle check."""
        used = ev.get("worker_cpu_s")
        if not isinstance(used, (int, float)) or isinstance(used, bool) or not 0 <= used < 1e9:
            return
        t = ev.get("time")
        with self._lock:
            step = max(0.0, used - s.cpu_s)
            self.window.work_s += step
            if ev.get("event") == "check" and isinstance(t, (int, float)) and s.check_t is not None:
                host = ev.get("cpu")
                roomy = isinstance(host, (int, float)) and host < IDLE_HOST_MAX  # NaN: not roomy
                if roomy and step < IDLE_SHARE * s.cpus * max(0.0, t - s.check_t):
                    s.idle_cpu_s = used
            elif ev.get("event") == "stopped" and ev.get("reason") == "load":
                self.window.lost_s += max(0.0, used - s.idle_cpu_s)
            s.cpu_s = max(s.cpu_s, used)
            if isinstance(t, (int, float)):
                s.check_t = t

    # ------------------------------------------------------------------ carrying it out
    def _lend(self, g: opp.Grant) -> AgentSession:
        spec, driver = self.fleet.spec(g.cluster)
        node = self.fleet.node_spec(g.host, Role.TR)
        # the borrower's configs on the host, as for a TR node, and how its worker runs in the foreground
        w = driver.opportunistic_worker(spec.with_node(node), node)
        self._ensure_agent([g.host])
        logs = PurePosixPath(w.log_dir)
        c = self.cfg
        cmd = Script(
            "mkdir -p {pids} {logs} && exec {py} {a} --stdin-eof --stdin-timeout {hb} --cpu {cpu} --mem {mem} "
            "--count {n} --period {p} --grace {g} --nice {nice} --worker-cpus {cpus} --worker-shares {sh} "
            "--worker-log {wlog} --worker-pidfile {pidf} --status {status} --verbose -- {worker}",
            pids=str(PurePosixPath(w.pidfile).parent), logs=str(logs), py=c.python, a=agent_path(node.root),
            hb=f"{c.silence_s:g}", cpu=f"{c.t_preempt_cpu:g}", mem=f"{c.t_preempt_mem:g}", n=str(c.checks),
            p=f"{c.check_period_s:g}", g=f"{c.grace_s:g}", nice=str(c.nice), cpus=f"{max(0.01, g.cpus):.4f}",
            sh=str(c.cpu_shares), wlog=str(logs / "opportunistic-worker.out"),
            pidf=w.pidfile, status=str(logs / "opportunistic-watchdog.json"), worker=list(w.argv))
        client, chan = self._open(g.host, cmd)  # a connection of its own: the session stays open
        s = AgentSession(g.host, g.cluster, g.owner, g.cpus, client, chan, time.monotonic())
        with self._lock:
            self.sessions[g.host] = s
        threading.Thread(target=s.run, args=(self._on_event,), name=f"ubis-{g.host}", daemon=True).start()
        why = (f" (CERES C-1's partial reclaim: {g.owner}'s node there is busy and swollen, {g.cluster} short of "
               "its target)") if g.swollen else ""
        self.store.record_event("ubis", f"{g.host} of {g.owner} lent to {g.cluster}: opportunistic worker, "
                                f"CPU cap {g.cpus:.3f} cores (T_alloc x Cap - Util), nice {c.nice}, "
                                f"shares {c.cpu_shares}{why}", cluster=g.cluster, node=g.host)
        log.info("ubis: %s of %s lent to %s (cap %.3f cores)", g.host, g.owner, g.cluster, g.cpus)
        return s

    def _on_event(self, s: AgentSession, ev: dict) -> None:
        kind = ev.get("event")
        if self.climb is not None and kind in ("check", "stopped"):
            self._account(s, ev)
        if kind == "stopped" and ev.get("reason") == "load":
            self.preemptions += 1
            with self._lock:
                self.window.preemptions += 1
            self.cool[s.host] = time.monotonic() + self.cooldown_s
            checks = ", ".join(f"cpu {c['cpu']:.2f} mem {c['mem']:.2f}" for c in ev.get("checks", []))
            self.store.record_event("ubis", f"watchdog on {s.host} stopped {s.cluster}'s opportunistic worker "
                                    f"({checks}; stopped in {ev.get('stop_s', 0):.1f} s)", level="warning",
                                    cluster=s.cluster, node=s.host)
            log.warning("ubis: watchdog on %s stopped %s's worker (%s)", s.host, s.cluster, checks)
        elif kind == "cap" and _cores(ev.get("cpus")):
            before, s.cpus = s.cpus, float(ev["cpus"])
            self.store.record_event("ubis", f"{s.cluster}'s opportunistic worker on {s.host}: CPU cap {before:.3f} -> "
                                    f"{s.cpus:.3f} cores (T_alloc moved)", cluster=s.cluster, node=s.host)
        elif kind == "cap-refused":
            self.store.record_event("ubis", f"{s.cluster}'s opportunistic worker on {s.host} kept its CPU cap: "
                                    f"{str(ev.get('reason'))[:200]}", level="warning", cluster=s.cluster, node=s.host)
        elif kind == "stopped":
            self.store.record_event("ubis", f"{s.cluster}'s opportunistic worker on {s.host} stopped: "
                                    f"{ev.get('reason')}", cluster=s.cluster, node=s.host)
        elif kind == "exit" and ev.get("reason") == "worker exited":
            self.cool[s.host] = time.monotonic() + self.cooldown_s  # a worker that cannot run: not at once again
            self.store.record_event("ubis", f"{s.cluster}'s opportunistic worker on {s.host} exited "
                                    f"(rc {ev.get('worker_rc')})", level="warning", cluster=s.cluster, node=s.host)

    def _withdraw(self, host: str, why: str) -> None:
        s = self.sessions.get(host)
        if s is None:
            return
        s.close()
        with self._lock:
            self.sessions.pop(host, None)
        # the host's readings of the last WINDOW_S still hold the withdrawn worker: a loan from them would cap
        # the next worker by the use of this one (a benchmark's re-loans got 0.14-0.29 cores instead of ~0.43)
        self.cool[host] = max(self.cool.get(host, 0.0), time.monotonic() + WINDOW_S + 1.0)
        self.store.record_event("ubis", f"{s.cluster}'s opportunistic worker on {host} withdrawn: {why}",
                                cluster=s.cluster, node=host)

    def _promote(self, host: str, cluster: str, allocate: bool = True) -> bool:
        s = self.sessions.get(host)
        if s is None:
            return False
        if allocate:  # intent first: the host is the borrower's TR node in the store, then the worker is kept
            done = self.store.allocate_nodes([(cluster, host, Role.TR, f"transient for {cluster} (promoted: its "
                                               "opportunistic worker already runs there)")])
            if isinstance(done[0], FawkesError):
                log.info("ubis: %s on %s not promoted: %s", cluster, host, done[0])
                return False
        ok = s.send(b"promote\n") and s.promoted.wait(15)
        with self._lock:
            self.sessions.pop(host, None)
        if ok:
            self.promotions += 1
            self.store.record_event("ubis", f"{cluster}'s opportunistic worker on {host} promoted to a regular TR "
                                    "node (same host, the worker kept)", cluster=cluster, node=host)
        else:  # the node is allocated: the reconciler's grow starts a worker of its own once ours is gone
            s.close()
            self.store.record_event("ubis", f"{cluster}'s worker on {host} not promoted in place (the agent did "
                                    "not answer): stopped; the TR node starts afresh", level="warning",
                                    cluster=cluster, node=host)
        return ok

    def status(self) -> dict:
        return {"lent": {h: {"cluster": s.cluster, "owner": s.owner, "cpus": s.cpus,
                             "age_s": round(time.monotonic() - s.started, 1)} for h, s in self.sessions.items()},
                "slack_node_s": {k: round(v, 1) for k, v in self.slack_s.items()},
                "preemptions": self.preemptions, "promotions": self.promotions}

    def close(self) -> None:
        """The coordinator stops: every agent stops its worker."""
        for h in list(self.sessions):
            self._withdraw(h, "the coordinator stops")
        self._monitor(set())
