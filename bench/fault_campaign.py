#!/usr/bin/env python3
"""Seeded fault campaign: kill -9 the real coordinator at named points and at random times, check invariants.

    python3 bench/fault_campaign.py [--kills 100] [--seed N (default: the clock's, printed)] [--hosts 6] [--cpus 0.33] [--memory 2G]
                                    [--point-timeout 150] [--random 0.25] [--out FILE.json] [--keep]

Brings up its own lab (prefix ``fwfc``, a free 10.x.0/24, CPU quotas: docs/lab.md), runs the
coordinator (a subprocess, policy TD with TC growth, T = 10 s) on 3 MR-clusters of 1 core node
each and a stream of real Spark word counts sent in bursts to one cluster after the other, so
that the clusters grow and shrink (DP) all the time.  Then, ``--kills`` times:

* start the coordinator with ``FAWKES_FAULT_POINT=NAME`` (the test hook of ``fawkes/faults.py``:
  it SIGKILLs itself when it reaches that step of a reconfiguration or dispatch), or, for
  ``--random`` of the kills (rounded: an exact count at seeded positions), unarmed and SIGKILLed
  from outside after a seeded random delay; a named point not reached within ``--point-timeout`` is killed from outside too
  (counted as "not reached");
* with the coordinator dead, check: no host held by two clusters (store, and the daemons that
  really run on each host); no host leaked (allocated but held by no live node, or running
  daemons of a cluster that holds no node on it); no core node drained or released while its
  cluster was active; no job lost (each submitted job still there, none failed or cancelled);
* restart it (the next kill's run) and check HDFS on every cluster: ``fsck /`` HEALTHY, and the
  checksums of the input and of every finished job's output unchanged since first seen.

At the end the coordinator runs unarmed until every job has finished and the nodes are settled,
then: every job SUCCEEDED, none ran twice (no more Spark applications on a master than jobs), and its
output is exactly the word counts of its cluster's input; the clusters are released and no
daemon is left.  It prints one row per point: runs, kills at the point, not reached, violations,
and how many of the jobs in flight at its kills came out exact.  The schedule (points, order,
random delays, which cluster gets each burst) is fixed by ``--seed``; the timing is the machine's.
Exit code 1 if any invariant was violated.  docs/reliability.md keeps the figures.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench.results_meta import meta  # noqa: E402
from fawkes import faults  # noqa: E402
from fawkes.coordinator.fleet import Fleet  # noqa: E402
from fawkes.errors import FawkesError  # noqa: E402
from fawkes.frameworks.render import CONTROL_SCRIPT, cluster_ports  # noqa: E402
from fawkes.frameworks.hdfs import FSSHELL  # noqa: E402
from fawkes.frameworks.sizing import LAB_SIZES  # noqa: E402
from fawkes.inventory import load_inventory  # noqa: E402
from fawkes.mechanism import Role  # noqa: E402
from fawkes.simfleet import invariants  # noqa: E402
from fawkes.ssh.shell import Script  # noqa: E402
from fawkes.store import Store  # noqa: E402
from fawkes.store.lifecycle import JobState, NodeState  # noqa: E402

APP = REPO / "fawkes" / "apps" / "wordcount.py"
CLUSTERS = ("a", "b", "c")
IDLE_TIMEOUT_S = 20  # the last cluster is released by the coordinator itself, idle this long, at the end
LAB_OPTIONS = {**LAB_SIZES, "heartbeat_s": "1", "recheck_ms": "10000", "decommission_interval_s": "1",
               "replication": "2", "executor_memory": "512m"}
PRESET = ("policy: TD\ngrow_type: transient-core\nperiod_s: 10\nsample_period_s: 2\ntau: 0.5\n"
          "idle_timeout_s: 36000\nall_zero: equal\n")
RANDOM = "random"
END = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)

def words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    vocab = [f"w{i}" for i in range(60)]
    return "\n".join(" ".join(rng.choice(vocab) for _ in range(10)) for _ in range(n)) + "\n"

NAMED = "named"


def schedule(kills: int, seed: int, random_share: float) -> list[tuple[str, float]]:
    """(NAMED or RANDOM, delay for random kills): ``round(kills * random_share)`` kills at random times
    (seeded positions and delays) among kills at named points (which one is chosen at run time:
    :meth:`Campaign.choose_point`).  The count is exact, not drawn: a draw gave 4 random kills of 6 at a
    share of 0.2 (seed 41699), leaving too few named ones for the suite's check."""
    rng = random.Random(seed)
    randoms = set(rng.sample(range(kills), round(kills * random_share)))
    return [(RANDOM, round(rng.uniform(3.0, 45.0), 1)) if i in randoms else (NAMED, 0.0) for i in range(kills)]


def running_clusters(ex, node_dir, hosts, timeout: float = 30) -> dict[str, set[str]]:
    """Per host that answers, the clusters whose daemons (pid files under clusters/<c>/pids) really run there."""
    script = Script("for f in {d}/clusters/*/pids/*.pid; do [ -f \"$f\" ] || continue; p=$(cat \"$f\"); "
                    "c=${{f%/pids/*}}; [ -n \"$p\" ] && grep -qF \"$c/\" /proc/$p/cmdline 2>/dev/null "
                    "&& echo \"${{c##*/}}\"; done; true", d=str(node_dir))
    return {h: set(r.stdout.split()) for h, r in ex.run(list(hosts), script, timeout=timeout).items() if r.ok}


def saved_counts(ex, saved_output: str | None) -> tuple[str | None, dict[int, collections.Counter]]:
    """A released cluster's saved output (its store record, JSON): (a problem, or None; the word counts of
    each job's part files there, by job id).  ``sha256sum -c`` of its MANIFEST.sha256 must pass."""
    rec = json.loads(saved_output) if saved_output else {}
    if "path" not in rec:
        return f"output not saved: {saved_output}", {}
    script = Script("cd {d} && sha256sum -c --quiet MANIFEST.sha256 && echo MANIFEST-OK && "
                    "for j in */; do echo \"== ${{j%/}}\"; cat \"$j\"part-*; done", d=rec["path"])
    r = ex.run([rec["host"]], script, timeout=120)[rec["host"]]
    if "MANIFEST-OK" not in r.stdout:
        return (f"saved output at {rec['host']}:{rec['path']} fails its manifest: "
                f"{(r.stderr or r.stdout).strip()[:200]}"), {}
    got: dict[int, collections.Counter] = {}
    cur = None
    for line in r.stdout.split("MANIFEST-OK", 1)[1].splitlines():
        if line.startswith("== "):
            cur = got.setdefault(int(line[3:]), collections.Counter())
        elif line.strip() and cur is not None:
            w, n = line.split("\t")
            cur[w] += int(n)
    return None, got


class CoordinatorProc:
    """The coordinator as a subprocess (its own session), optionally armed with a fault point."""

    def __init__(self, config: Path, log: Path):
        self.config, self.log = config, log
        self.proc: subprocess.Popen | None = None
        self.started = 0.0

    def start(self, point: str | None = None) -> None:
        assert not self.alive(), "one coordinator at a time"
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        env.pop("FAWKES_FAULT_POINT", None)
        if point:
            env["FAWKES_FAULT_POINT"] = point
        with self.log.open("ab") as f:
            f.write(f"\n=== start {time.strftime('%H:%M:%S')} armed {point or '-'}\n".encode())
        self.proc = subprocess.Popen([sys.executable, "-m", "fawkes", "coordinator", "run", "--config",
                                      str(self.config), "--no-metrics"], stdout=self.log.open("ab"),
                                     stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True)
        self.started = time.monotonic()

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill9(self) -> None:
        """SIGKILL the coordinator and wait until it is gone (a single-coordinator lock is then free)."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=60)

    def stop(self, timeout: float = 180.0) -> int:
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=timeout)

@dataclass
class Row:
    runs: int = 0
    at_point: int = 0
    not_reached: int = 0
    violations: list[str] = field(default_factory=list)
    in_flight: set[int] = field(default_factory=set)  # jobs not finished at its kills

class Campaign:
    """One campaign on a running lab: ``setup()``, ``kill(point, delay)`` per kill, ``finish()``."""

    def __init__(self, inventory: Path, node_dir: Path, framework: tuple[str, str], work: Path, *,
                 seed: int = 1, point_timeout: float = 150.0, lines: int = 400, log=print, lab=None,
                 state_url: str | None = None, pg=None, host_grace: float = 30.0, stream_seed: int | None = None,
                 clusters: tuple[str, ...] = CLUSTERS):
        self.inventory_path, self.node_dir, self.work = inventory, node_dir, work
        if len(clusters) < 2 or len(set(clusters)) != len(clusters):
            raise ValueError(f"clusters: at least 2 distinct names, got {clusters!r}")
        # the MR-clusters (1 core node each); the last is the one the coordinator releases itself at the end
        self.clusters, self.idle_released_cluster = tuple(clusters), clusters[-1]
        self.spark_home, self.hdfs_jars = framework
        self.seed, self.point_timeout, self.lines, self.log = seed, point_timeout, lines, log
        self.lab, self.pg, self.host_grace = lab, pg, host_grace  # lab: for host faults; pg: a PgServer
        self.rng = random.Random(seed * 7919 + 1)
        # the job stream (which cluster gets each burst, the input texts) from stream_seed when given, so
        # that the kills can vary while the load stays the same; by default both come from seed
        self.stream_rng = self.rng if stream_seed is None else random.Random(stream_seed * 7919 + 1)
        stream_seed = seed if stream_seed is None else stream_seed
        self.url = state_url or f"sqlite:///{work / 'state.db'}"
        self.coord = CoordinatorProc(work / "coordinator.json", work / "coordinator.log")
        self.texts = {c: words(lines, stream_seed * 10 + i) for i, c in enumerate(self.clusters)}
        self.rows: dict[str, Row] = collections.defaultdict(Row)
        self.violations: list[str] = []
        self.checksums: dict[tuple[str, str], str] = {}
        self.jobs: dict[int, str] = {}  # job id -> cluster
        self.burst = 0
        self.first = 0  # the cluster of the first burst (drawn from the stream's seed at that burst)
        self.store: Store | None = None
        self.fleet: Fleet | None = None
        self.hdfs_checks = 0
        self.checksums_compared = 0  # file checksums compared with the first one seen
        self.reported: set[int] = set()  # failed jobs already reported
        self.moves: dict[str, dict[str, int]] = {}  # per cluster: nodes grown and removed by DP (finish)
        self.evidence_n = 0
        self.saved_checked = 0  # job outputs checked in the released clusters' saved copies
        self.idle_released = False  # the last cluster left by its idle timeout (finish)
        self.evidence_dirs: list[str] = []  # where each unhealthy fsck's evidence was kept

    # ------------------------------------------------------------------ setup
    def setup(self, timeout: float = 600.0) -> None:
        preset = self.work / "td-campaign.yaml"
        preset.write_text(PRESET)
        (self.work / "coordinator.json").write_text(json.dumps({
            "state": self.url, "inventory": str(self.inventory_path), "policy": str(preset), "period": 10,
            "sample_period": 2, "host_grace": self.host_grace, "cluster_options": LAB_OPTIONS,
            "timeouts": {"drain": 60}}))
        self.store = Store(self.url)
        self.store.register_framework("lab", "spark-hdfs", spark_home=self.spark_home, hdfs_jars=self.hdfs_jars)
        for c in self.clusters:
            src = self.work / f"{c}.txt"
            src.write_text(self.texts[c])
            self.store.request_cluster(c, framework="lab", min_core=1, input_path=str(src))
        self.fleet = Fleet(self.store, load_inventory(self.inventory_path), cluster_options=LAB_OPTIONS)
        self.coord.start()
        self.wait(f"{len(self.clusters)} active clusters",
                  lambda: all(self.store.get_cluster(c).state == "active" for c in self.clusters), timeout)
        self.check_hdfs("setup")
        self.coord.kill9()  # the campaign's first kill, at a quiet moment
        self.check_dead("setup")

    def wait(self, what: str, fn, timeout: float, poll: float = 1.0, feed: bool = False):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if feed:
                self.feed()
            v = fn()
            if v:
                return v
            if not self.coord.alive():
                raise FawkesError(f"coordinator exited ({self.coord.proc.returncode}) while waiting for {what} "
                                  f"(see {self.coord.log})")
            time.sleep(poll)
        raise FawkesError(f"timed out after {timeout:g}s waiting for {what} (see {self.coord.log})")

    # ------------------------------------------------------------------ the job stream
    def unfinished(self) -> list[int]:
        return [j.id for j in self.store.list_jobs() if JobState(j.state) not in END]

    def feed(self, to: str | None = None) -> bool:
        """Fewer than 2 jobs unfinished: a burst of 2 word counts to the next cluster (seeded order), or
        to cluster ``to``. True when a burst was sent."""
        if len(self.unfinished()) >= 2:
            return False
        if to is not None:
            c = to
        else:
            # one cluster after the other from a seeded first one: every cluster has a burst within the
            # first three, whatever the kills leave time for
            if self.burst == 0:
                self.first = self.stream_rng.randrange(len(self.clusters))
            c = self.clusters[(self.first + self.burst) % len(self.clusters)]
            self.burst += 1
        for _ in range(2):
            j = self.store.submit_job(c, [str(APP), "{input}", "{output}", "4", "0"], input_path="/input")
            self.jobs[j.id] = c
        return True

    # ------------------------------------------------------------------ one kill
    def choose_point(self) -> str:
        """The least-used named point that the current state can reach soon (seeded tie-break): grow
        steps while nodes are being added, DP steps while nodes drain, job steps while jobs wait or run;
        the decision and intent points are always reachable (every tick decides)."""
        states = {n.state for n in self.store.list_nodes()}
        live = [j for j in self.store.list_jobs() if JobState(j.state) not in END]
        jobs = {j.state for j in live}
        busy = {j.cluster_id for j in live if j.state != JobState.QUEUED}
        grow = states & {NodeState.REQUESTED, NodeState.PROVISIONING}
        drain = NodeState.DRAINING in states
        always = {"decision-recorded": 1, "node-requested": 2, "drain-requested": 2}  # tiers: reached soon first
        ok = set(always)
        if grow:
            ok |= {"node-provisioning", "daemons-started", "node-running"}
        if drain:
            ok |= {"worker-decommissioned", "exclude-written", "exclude-refreshed", "datanode-stopped",
                   "node-wiped", "node-released"}
        if any(j.state == JobState.QUEUED and j.cluster_id not in busy for j in live):  # one job at a time
            ok |= {"job-dispatched", "job-launched"}
        if jobs & {JobState.DISPATCHED, JobState.RUNNING}:
            ok.add("job-finished")
        def key(p: str):
            r = self.rows.get(p)
            return ((r.runs + 2 * r.not_reached) if r else 0, always.get(p, 0), self.rng.random())

        return min(sorted(ok), key=key)

    def kill(self, point: str, delay: float = 0.0) -> None:
        if point == NAMED:
            point = self.choose_point()
        row = self.rows[point]
        row.runs += 1
        armed = None if point == RANDOM else point
        self.coord.start(armed)
        t0 = time.monotonic()
        limit = delay if point == RANDOM else self.point_timeout
        hdfs_done = False
        while self.coord.alive() and time.monotonic() - t0 < limit:
            self.feed()
            if not hdfs_done and time.monotonic() - t0 > 3:  # the restarted coordinator is up: check HDFS
                self.check_hdfs(point)
                hdfs_done = True
            time.sleep(0.2)
        self_killed = not self.coord.alive()
        self.coord.kill9()
        took = time.monotonic() - t0
        rc = self.coord.proc.returncode
        at_point = point != RANDOM and self_killed and rc == -signal.SIGKILL
        if point != RANDOM:
            if at_point:
                row.at_point += 1
            elif self_killed:
                self.violation(point, f"coordinator exited with {rc} before the point (see {self.coord.log})")
            else:
                row.not_reached += 1
        flight = self.unfinished()
        row.in_flight |= set(flight)
        before = len(self.violations)
        self.check_dead(point)
        if not hdfs_done:  # killed within 3 s of its start: HDFS is checked now, with the coordinator down
            self.check_hdfs(point)
        how = f"killed itself at the point after {took:.1f}s" if at_point else \
            f"killed from outside after {took:.1f}s" + (" (point not reached)" if point != RANDOM else "")
        self.log(f"  {point:<22} {how:<44} jobs in flight {len(flight)}, done "
                 f"{len(self.jobs) - len(flight)}; violations {len(self.violations) - before}")

    def violation(self, point: str, msg: str) -> None:
        self.rows[point].violations.append(msg)
        self.violations.append(f"{point}: {msg}")
        self.log(f"  VIOLATION {point}: {msg}")

    # ------------------------------------------------------------------ checks
    def check_dead(self, point: str) -> None:
        """The coordinator is dead: the store and the hosts must agree on ownership; no core node
        removed from an active cluster; no job lost."""
        for msg in self.ownership() + self.core_nodes() + self.jobs_lost():
            self.violation(point, msg)

    def ownership(self) -> list[str]:
        """No host held twice, none leaked (in the store, and by the daemons running on the hosts)."""
        return invariants.ownership(self.store, {"daemons": self.daemons()})

    def daemons(self) -> dict[str, set[str]]:
        return running_clusters(self.fleet.ex, self.node_dir, [h.name for h in self.store.list_hosts()])

    def core_nodes(self) -> list[str]:
        """No core node drained or released while its cluster was active."""
        return invariants.core_nodes(self.store, {})

    def jobs_lost(self) -> list[str]:
        """Jobs failed or cancelled (each reported once, at the first check that sees it), or gone."""
        bad = []
        for j in self.store.list_jobs():
            if JobState(j.state) in (JobState.FAILED, JobState.CANCELLED) and j.id not in self.reported:
                self.reported.add(j.id)
                bad.append(f"job {j.id} {j.state}: {j.detail}")
        missing = set(self.jobs) - {j.id for j in self.store.list_jobs()}
        bad += [f"job {j} lost from the store" for j in sorted(missing)]
        return bad

    def check_hdfs(self, point: str) -> None:
        """Every live cluster: fsck / HEALTHY; checksums of the input and finished outputs unchanged."""
        done = {j.id for j in self.store.list_jobs(states=[JobState.SUCCEEDED])}

        def one(c: str) -> list[str]:
            spec, driver = self.fleet.spec(c)
            fsck = self.fsck(spec)
            bad = [] if "is HEALTHY" in fsck else [f"{c}: fsck not HEALTHY: {fsck.strip().splitlines()[-1:]} "
                                                   f"(evidence: {self.evidence(point, c, spec)})"]
            paths = ["/input"] + (["/output/*/part-*"] if any(self.jobs.get(j) == c for j in done) else [])
            out = driver.hdfs(spec, "fs", "-checksum", *paths)
            seen = 0
            for line in out.splitlines():  # "PATH<TAB>ALGORITHM<TAB>CHECKSUM", PATH as given or expanded
                parts = line.split()
                if len(parts) >= 3 and parts[0].startswith(("/", "hdfs://")):
                    path = parts[0].split("/", 3)[-1] if parts[0].startswith("hdfs://") else parts[0].lstrip("/")
                    seen += 1
                    self.checksums_compared += (c, path) in self.checksums
                    old = self.checksums.setdefault((c, path), parts[-1])
                    if old != parts[-1]:
                        bad.append(f"{c}: checksum of /{path} changed")
            if not seen:
                bad.append(f"{c}: no checksum in the output of -checksum: {out.strip()[:200]!r}")
            return bad

        self.hdfs_checks += 1
        with concurrent.futures.ThreadPoolExecutor(len(self.clusters)) as pool:
            futs = {c: pool.submit(one, c) for c in self.clusters}
        for c, f in futs.items():
            try:
                for msg in f.result():
                    self.violation(point, msg)
            except FawkesError as exc:
                self.violation(point, f"{c}: HDFS check failed: {str(exc)[:300]}")

    def evidence(self, point: str, cluster: str, spec) -> str:
        """Keep what explains an fsck that is not HEALTHY: fsck with every file, block and location (open
        files too), the NameNode's log lines about decommissions and blocks, and the cluster's recent
        events; returns the directory they went to."""
        self.evidence_n += 1
        d = self.work / "evidence" / f"{self.evidence_n:02d}-{point}-{cluster}"
        d.mkdir(parents=True, exist_ok=True)
        try:
            (d / "fsck.txt").write_text(self.fsck(spec, "&files=1&blocks=1&locations=1&openforwrite=1"))
        except FawkesError as exc:
            (d / "fsck.txt").write_text(f"fsck failed: {exc}\n")
        log = f"{spec.cluster_dir(spec.master)}/logs/namenode.out"
        script = Script("grep -aiE 'decommission|blk_|lease|recover|corrupt|exclude' {f} | tail -n 3000", f=log)
        r = self.fleet.ex.run([spec.master.name], script, timeout=60)[spec.master.name]
        (d / "namenode-decommission.log").write_text(r.stdout if r.ok else f"reading {log} failed: {r.error}\n")
        events = self.store.events(cluster=cluster, limit=300)
        (d / "events.txt").write_text("".join(f"{e.time:.1f} {e.kind} {e.level} {e.node or ''} {e.message}\n"
                                              for e in events))
        self.evidence_dirs.append(str(d))
        return str(d)

    @staticmethod
    def fsck(spec, extra: str = "") -> str:
        """HDFS fsck of / from the NameNode's own /fsck servlet (what DFSck calls; no JVM to start);
        ``extra``: more query parameters (``&files=1&blocks=1&locations=1&openforwrite=1``)."""
        url = (f"http://{spec.master.address}:{cluster_ports(spec)['nn_http']}/fsck?ugi=root"
               f"&path=%2F{extra}")
        try:
            with urllib.request.urlopen(url, timeout=60) as r:
                return r.read().decode(errors="replace")
        except OSError as exc:
            raise FawkesError(f"fsck {url}: {exc}") from None

    # ------------------------------------------------------------------ other faults (deliverable 2)
    def fault(self, kind: str, seconds: float) -> None:
        """Start the coordinator, inject fault ``kind`` for ``seconds`` while jobs run, wait until it is
        survived, check HDFS, then kill -9 the coordinator and check ownership, core nodes and jobs."""
        row = self.rows[kind]
        row.runs += 1
        self.coord.start()
        t0 = time.monotonic()
        self.wait("the coordinator up", lambda: time.monotonic() - t0 > 8, 30, feed=True)
        mark = self.coord.log.stat().st_size
        try:
            detected = getattr(self, "_" + kind.replace("-", "_"))(seconds, mark)
        except FawkesError as exc:
            detected = ""
            self.violation(kind, f"not survived: {exc}")
        if detected:
            row.at_point += 1
        else:
            row.not_reached += 1
            self.violation(kind, "not detected by the coordinator")
        flight = self.unfinished()
        row.in_flight |= set(flight)
        self.feed()
        self.check_hdfs(kind)
        alive = self.coord.alive()
        self.coord.kill9()
        if not alive:
            self.violation(kind, f"the coordinator died (exit {self.coord.proc.returncode})")
        before = len(self.violations)
        self.check_dead(kind)
        self.log(f"  {kind:<22} {seconds:g}s; {detected or 'NOT detected'}; jobs in flight {len(flight)}, "
                 f"done {len(self.jobs) - len(self.unfinished())}; violations {len(self.violations) - before}")

    def logged_since(self, mark: int, *needles: str) -> str:
        """The first line of the coordinator's log after ``mark`` that contains one of ``needles``."""
        with self.coord.log.open("rb") as f:
            f.seek(mark)
            for line in f.read().decode(errors="replace").splitlines():
                if any(n in line for n in needles):
                    return line.strip()[:160]
        return ""

    def tc_host(self) -> str | None:
        """A host lent as a running TC node (never a core node: the master would take its cluster)."""
        tcs = sorted(n.host for n in self.store.list_nodes() if Role(n.role) is Role.TC and n.state == NodeState.RUNNING)
        return self.rng.choice(tcs) if tcs else None

    def _lose_host(self, seconds: float, cut, heal) -> str:
        victim = self.wait("a running TC node", self.tc_host, 300, feed=True)
        t0 = time.monotonic()
        cut(victim)
        try:
            self.wait(f"{victim} marked failed", lambda: any(h.name == victim and h.state == "failed"
                                                             for h in self.store.list_hosts()),
                      self.host_grace + 180, feed=True)
            detected = f"{victim} marked failed after {time.monotonic() - t0:.0f}s"
            end = t0 + seconds
            self.wait("the end of the fault", lambda: time.monotonic() >= end, seconds + 10, feed=True)
        finally:
            heal(victim)
        self.wait(f"{victim}'s node released", lambda: victim not in {n.host for n in self.store.list_nodes()},
                  600, feed=True)
        self.store.restore_host(victim, "fault campaign: host back")  # what an admin does (docs/state.md)
        return detected

    def _host_crash(self, seconds: float, mark: int) -> str:
        """Every process of a TC host killed at once (``fawkes lab crash``), revived after ``seconds``."""
        return self._lose_host(seconds, self.lab.crash, self.lab.revive)

    def _partition(self, seconds: float, mark: int) -> str:
        """A TC host's link down for ``seconds`` (its veth in the root namespace)."""
        def link(state):
            return lambda h: subprocess.run(["ip", "link", "set", self.lab.host(h).veth, state], check=True)
        return self._lose_host(seconds, link("down"), link("up"))

    def _slow_links(self, seconds: float, mark: int) -> str:
        """Every host's link slow (TBF, 1 mbit/s each way) and lossy (5 % of packets dropped each way,
        iptables' statistic match) for ``seconds``; netem is not in this kernel."""
        hosts = [h.name for h in self.store.list_hosts()]
        rtt0 = self.rtt(hosts)

        def each(args_root, args_ns):
            for h in hosts:
                lh = self.lab.host(h)
                subprocess.run([*args_root(lh.veth)], check=False, capture_output=True)
                subprocess.run(["ip", "netns", "exec", lh.netns, *args_ns], check=False, capture_output=True)

        tbf = ["root", "tbf", "rate", "1mbit", "burst", "32kbit", "latency", "400ms"]
        drop = ["-m", "statistic", "--mode", "random", "--probability", "0.05", "-j", "DROP"]
        try:
            for h in hosts:
                lh = self.lab.host(h)
                for cmd in (["tc", "qdisc", "add", "dev", lh.veth, *tbf],
                            ["ip", "netns", "exec", lh.netns, "tc", "qdisc", "add", "dev", "eth0", *tbf],
                            ["ip", "netns", "exec", lh.netns, "iptables", "-A", "INPUT", *drop],
                            ["ip", "netns", "exec", lh.netns, "iptables", "-A", "OUTPUT", *drop]):
                    subprocess.run(cmd, check=True, capture_output=True)
            rtt1 = self.rtt(hosts)
            end = time.monotonic() + seconds
            self.wait("the end of the fault", lambda: time.monotonic() >= end, seconds + 10, feed=True)
        finally:
            for h in hosts:
                lh = self.lab.host(h)
                subprocess.run(["tc", "qdisc", "del", "dev", lh.veth, "root"], capture_output=True)
                subprocess.run(["ip", "netns", "exec", lh.netns, "tc", "qdisc", "del", "dev", "eth0", "root"],
                               capture_output=True)
                subprocess.run(["ip", "netns", "exec", lh.netns, "iptables", "-F"], capture_output=True)
        return f"SSH round trip {rtt0 * 1000:.0f} ms -> {rtt1 * 1000:.0f} ms under the fault"

    def rtt(self, hosts: list[str]) -> float:
        t = time.monotonic()
        self.fleet.ex.run(hosts, "head -c 200000 /dev/zero", timeout=60)
        return time.monotonic() - t

    def _pg_restart(self, seconds: float, mark: int) -> str:
        """PostgreSQL restarted (``pg_ctl restart -m fast``) as a tick is due: a tick runs every T from the
        coordinator's start, so the restart starts 0.1 s before the next one."""
        if self.pg is None:
            raise FawkesError("pg-restart needs the state on PostgreSQL (--state postgres)")
        line = ""
        while not line:
            time.sleep(1)
            line = self.logged_since(mark, "tick ")
        last = time.mktime(time.strptime(line[:19], "%Y-%m-%d %H:%M:%S")) + float("0." + line[20:23])
        due = last + 10.0
        while due - 0.1 < time.time():
            due += 10.0
        time.sleep(max(0.0, due - 0.1 - time.time()))
        from tests.store_fixtures import PG_BIN

        # stop, then start as tests/store_fixtures.py does (with -l: a restart without it would leave the
        # server holding this process's output pipes)
        ctl = [str(PG_BIN / "pg_ctl"), "-D", str(self.pg.data)]
        t = time.monotonic()
        for args in (["-m", "fast", "-w", "-t", "120", "stop"],
                     ["-l", str(self.pg.log), "-o", f"-c listen_addresses='' -k {self.pg.sock} -c fsync=off "
                      "-c max_connections=100", "-w", "-t", "120", "start"]):
            r = self.pg._run(*ctl, *args, timeout=300)
            if r.returncode != 0:
                raise FawkesError(f"pg_ctl {args[-1]} failed: {(r.stderr or r.stdout).strip()[-200:]}")
        took = time.monotonic() - t
        mark2 = self.coord.log.stat().st_size
        time.sleep(25)  # two ticks after the restart
        err = self.logged_since(mark, "OperationalError", "server closed", "connection", "terminating")
        after = self.logged_since(mark2, "tick ")
        return f"restart took {took:.1f}s; {err or 'no error logged'}; then {after}" if err and after else ""

    def _full_disk(self, seconds: float, mark: int) -> str:
        """The file system under the state (a small tmpfs) filled up for ``seconds``, then freed.  The WAL
        is checkpointed and truncated first: SQLite reuses a WAL's space, so with a full WAL file writes
        would go on succeeding on a full disk (seen: 40 s full, no write failed)."""
        import sqlite3

        db = Path(self.url.split("///", 1)[1])
        filler = db.parent / "filler"
        conn = sqlite3.connect(db, timeout=30)
        try:
            for _ in range(20):
                if conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0:
                    break
                time.sleep(0.2)
        finally:
            conn.close()
        chunk = b"\0" * (1 << 16)
        try:
            with filler.open("wb") as f:
                while True:
                    f.write(chunk)
                    f.flush()
        except OSError:
            pass
        try:
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                time.sleep(1)
        finally:
            filler.unlink()
        time.sleep(25)
        return self.logged_since(mark, "full", "No space")

    # ------------------------------------------------------------------ the end
    def finish(self, timeout: float = 1200.0) -> dict:
        self.coord.start()
        # a cluster the stream has not reached before the kills ended gets its burst now (kills and
        # restarts take their own time, so how many bursts fit between them is the machine's), and so does
        # one that has not grown yet: its burst can have fallen while the kills kept interrupting the DP
        # that would have freed its hosts (a local run of seed 49236: a's drain killed three times under
        # b's burst).  Every cluster has run jobs, and had an uninterrupted chance to grow, by the end.
        moves = self.count_moves()
        for c in self.clusters:
            if c not in self.jobs.values() or not moves[c]["grown"]:
                why = "no burst" if c not in self.jobs.values() else "not grown"
                self.log(f"  {c}: {why} during the kills: its burst now")
                self.wait(f"a burst sent to {c}", lambda c=c: self.feed(to=c), timeout, poll=2.0)
        self.wait("every job finished", lambda: not self.unfinished(), timeout, poll=2.0)
        self.wait("nodes settled", lambda: all(n.state == NodeState.RUNNING for n in self.store.list_nodes()),
                  300, poll=2.0)
        self.check_hdfs("final")
        for msg in self.ownership() + self.core_nodes() + self.jobs_lost():
            self.violation("final", msg)
        exact = self.outputs_exact()
        self.moves = self.count_moves()
        apps = self.applications()  # each job is one Spark application on its cluster's master
        for c in self.clusters:
            n = sum(1 for x in self.jobs.values() if x == c)
            if apps[c] > n:  # fewer: a restarted master (a drift re-render) forgets its completed apps
                self.violation("final", f"{c}: {n} jobs, but {apps[c]} Spark applications on its master")
            elif apps[c] < n:
                self.log(f"  note: {c}: {n} jobs, {apps[c]} applications listed (its master was restarted)")
        # the release, by both paths: the admin releases all clusters but the last, which the coordinator
        # releases itself once it has been idle for its own idle_timeout_s (the config's clusters: section);
        # the coordinator is killed once between a recorded save and its teardown, then restarted; every
        # cluster's saved output must check against its manifest and count exactly
        if self.coord.stop() != 0:
            self.violation("final", "coordinator stop before the release failed")
        cfg = json.loads(self.coord.config.read_text())
        cfg["clusters"] = {self.idle_released_cluster: {"idle_timeout_s": IDLE_TIMEOUT_S}}
        self.coord.config.write_text(json.dumps(cfg))
        for c in self.clusters:
            if c != self.idle_released_cluster:
                self.store.request_release(c)
        self.coord.start("output-saved")
        t0 = time.monotonic()
        while self.coord.alive() and time.monotonic() - t0 < self.point_timeout:
            time.sleep(0.5)
        self.rows["output-saved"].runs += 1
        if not self.coord.alive() and self.coord.proc.returncode == -signal.SIGKILL:
            self.rows["output-saved"].at_point += 1
        else:
            self.rows["output-saved"].not_reached += 1
        self.coord.kill9()
        self.coord.start()
        self.wait("released", lambda: all(self.store.get_cluster(c).state == "released" for c in self.clusters), 600,
                  poll=2.0)
        self.check_saved()
        self.idle_released = any(t.to_state == "saving" and t.detail == "inactive for T_idle"
                                 for t in self.store.cluster_history(self.idle_released_cluster))
        if not self.idle_released:
            self.violation("final", f"{self.idle_released_cluster}: released, but not by its idle timeout")
        rc = self.coord.stop()
        left = {h: cs for h, cs in self.daemons().items() if cs}
        if rc != 0:
            self.violation("final", f"coordinator stop exit code {rc}")
        if left or self.store.list_nodes():
            self.violation("final", f"after release: daemons {left}, nodes {len(self.store.list_nodes())}")
        return exact

    def check_saved(self) -> None:
        """Each released cluster's output, where the store says it was saved: ``sha256sum -c`` of its
        MANIFEST.sha256 passes, and every job's part files count exactly its cluster's words."""
        expected = {c: collections.Counter(t.split()) for c, t in self.texts.items()}
        self.saved_checked = 0
        for c in self.clusters:
            raw = self.store.get_cluster(c).saved_output
            rec = json.loads(raw) if raw else {}
            if "path" not in rec:  # nothing to save is right only for a cluster that ran no job
                if any(jc == c for jc in self.jobs.values()) or "nothing" not in rec:
                    self.violation("final", f"{c}: output not saved: {raw}")
                continue
            problem, got = saved_counts(self.fleet.ex, raw)
            if problem:
                self.violation("final", f"{c}: {problem}")
                continue
            for j, jc in self.jobs.items():
                if jc == c:
                    self.saved_checked += 1
                    if got.get(j) != expected[c]:
                        self.violation("final", f"job {j}: saved output at {rec['host']}:{rec['path']} not exact")

    def count_moves(self) -> dict[str, dict[str, int]]:
        """Per cluster, from the store's node events: nodes grown (beyond the core node's first start),
        nodes removed by DP and the most nodes running at once, over the whole campaign (the balancing
        the kills interrupted)."""
        out = {}
        for c in self.clusters:
            held = peak = grown = dp = 0
            for e in self.store.events(cluster=c, limit=100_000):
                if e.kind != "node":
                    continue
                if "-> running" in e.message:
                    held, grown = held + 1, grown + 1
                elif "-> released" in e.message or "-> failed" in e.message:
                    held -= 1
                    dp += "decommissioned (DP)" in e.message
                peak = max(peak, held)
            out[c] = {"grown": max(0, grown - 1), "dp": dp, "peak": peak}
        return out

    def outputs_exact(self) -> dict[int, bool]:
        expected = {c: collections.Counter(t.split()) for c, t in self.texts.items()}

        def outputs(c: str) -> dict[int, collections.Counter]:
            """Every job output of cluster c, copied out of HDFS in one FsShell run on its master."""
            spec, _ = self.fleet.spec(c)
            d = spec.cluster_dir(spec.master)
            script = Script("rm -rf {t} && /bin/sh {ctl} hdfs {sh} -copyToLocal /output {t} && "
                            "for j in {t}/*; do echo \"== ${{j##*/}}\"; cat \"$j\"/part-*; done; rm -rf {t}",
                            t=f"{d}/tmp/campaign-output", ctl=f"{d}/{CONTROL_SCRIPT}", sh=FSSHELL)
            r = self.fleet.ex.run([spec.master.name], script, timeout=600)[spec.master.name]
            if not r.ok:
                raise FawkesError(f"{c}: reading the outputs: {r.error}")
            got: dict[int, collections.Counter] = {}
            cur = None
            for line in r.stdout.splitlines():
                if line.startswith("== "):
                    cur = got.setdefault(int(line[3:]), collections.Counter())
                elif line.strip():
                    w, n = line.split("\t")
                    cur[w] += int(n)
            return got

        with concurrent.futures.ThreadPoolExecutor(len(self.clusters)) as pool:
            futs = {c: pool.submit(outputs, c) for c in self.clusters}
        got: dict[int, collections.Counter] = {}
        for c, f in futs.items():
            try:
                got.update(f.result())
            except (FawkesError, ValueError, TypeError) as exc:
                self.violation("final", f"{c}: outputs unreadable: {str(exc)[:200]}")
        exact = {}
        for j, c in sorted(self.jobs.items()):
            exact[j] = got.get(j) == expected[c]
            if not exact[j]:
                self.violation("final", f"job {j}: output {'missing' if j not in got else 'not exact'}")
        return exact

    def applications(self) -> collections.Counter:
        apps: collections.Counter = collections.Counter()
        for c in self.clusters:
            spec, driver = self.fleet.spec(c)
            st = driver.master_state(spec)
            apps[c] = len(st.active_apps) + len(st.completed_apps)
        return apps

    def close(self) -> None:
        if self.coord.alive():
            self.coord.kill9()
        if self.fleet:
            self.fleet.close()
        if self.store:
            self.store.close()

    # ------------------------------------------------------------------ the table
    def table(self, exact: dict[int, bool]) -> list[dict]:
        rows = []
        for point in [*faults.POINTS, RANDOM, *FAULTS, "final"]:  # output-saved: once, at the release
            r = self.rows.get(point)
            if r is None:
                continue
            flight = sorted(r.in_flight)
            rows.append({"point": point, "runs": r.runs, "killed_at_point": r.at_point if point != RANDOM else r.runs,
                         "not_reached": r.not_reached, "violations": len(r.violations),
                         "jobs_in_flight": len(flight), "jobs_exact": sum(1 for j in flight if exact.get(j))})
        return rows

FAULTS = ("host-crash", "partition", "slow-links", "full-disk", "pg-restart")


def print_table(rows: list[dict], out=print) -> None:
    out(f"{'point':<22} {'runs':>5} {'kills at point':>15} {'not reached':>12} {'violations':>11} {'jobs exact':>14}")
    for r in rows:
        if r["point"] == "final":
            out(f"{'final checks':<22} {'':>5} {'':>15} {'':>12} {r['violations']:>11}")
            continue
        out(f"{r['point']:<22} {r['runs']:>5} {r['killed_at_point']:>15} {r['not_reached']:>12} "
            f"{r['violations']:>11} {str(r['jobs_exact']) + '/' + str(r['jobs_in_flight']):>14}")

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kills", type=int, default=100)
    ap.add_argument("--seed", type=int, default=None, help="default: from the clock (printed)")
    ap.add_argument("--hosts", type=int, default=6)
    ap.add_argument("--cpus", default="0.33")
    ap.add_argument("--memory", default="2G")
    ap.add_argument("--prefix", default="fwfc")
    ap.add_argument("--point-timeout", type=float, default=150.0)
    ap.add_argument("--random", type=float, default=0.25, help="share of random-time kills")
    ap.add_argument("--faults", default="", help="after the kills, inject these once each (comma-separated): "
                    + ", ".join(FAULTS) + "; full-disk puts the state on a 64 MiB tmpfs, pg-restart on PostgreSQL")
    ap.add_argument("--fault-seconds", type=float, default=45.0, help="how long each fault lasts")
    ap.add_argument("--minutes", type=float, default=None, help="start no kill after this many minutes")
    ap.add_argument("--dir", default=None, help="work directory (default: a new one under /tmp)")
    ap.add_argument("--out", default=None, help="write the results as JSON here")
    ap.add_argument("--keep", action="store_true", help="leave the lab up")
    a = ap.parse_args(argv)
    if not 1 <= a.kills <= 10000 or not 0 <= a.random <= 1 or not 4 <= a.hosts <= 16 \
            or not 5 <= a.point_timeout <= 3600:
        ap.error("--kills 1..10000, --random 0..1, --hosts 4..16, --point-timeout 5..3600")
    kinds = [k for k in a.faults.split(",") if k]
    if any(k not in FAULTS for k in kinds) or not 1 <= a.fault_seconds <= 3600:
        ap.error(f"--faults: comma-separated of {', '.join(FAULTS)}; --fault-seconds 1..3600")
    if "full-disk" in kinds and "pg-restart" in kinds:
        ap.error("--faults: full-disk (state on a tmpfs) and pg-restart (state on PostgreSQL) need two runs")
    from fawkes.frameworks import dists
    from fawkes.lab import Lab

    work = Path(a.dir) if a.dir else Path(tempfile.mkdtemp(prefix="fawkes-campaign-"))
    work.mkdir(parents=True, exist_ok=True)
    d = dists.ensure_lab_dists()
    Lab.cleanup(a.prefix, "10.210.0")
    subnet = next(s for s in [f"10.{n}.0" for n in range(210, 250)] if Lab.subnet_free(s))
    lab = Lab.up(a.hosts, work / "lab", prefix=a.prefix, subnet=subnet, cpus=a.cpus, memory=a.memory)
    if a.seed is None:
        a.seed = int(time.time()) % 100000
    plan = schedule(a.kills, a.seed, a.random)
    print(f"fault campaign: seed {a.seed}, {a.kills} kills, {a.hosts} hosts of {a.cpus} CPU / {a.memory} "
          f"({subnet}.0/24), work {work}; load {os.getloadavg()[0]:.1f}", flush=True)
    state_url, pg, statefs = None, None, None
    if "full-disk" in kinds:
        statefs = work / "statefs"
        statefs.mkdir(exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=0700", "fawkes-campaign", str(statefs)],
                       check=True)
        state_url = f"sqlite:///{statefs / 'state.db'}"
    if "pg-restart" in kinds:
        from tests.store_fixtures import _PgServer

        pg = _PgServer()
        pg.start()
        pg.admin("CREATE DATABASE campaign")
        state_url = pg.url("campaign")
    camp = Campaign(lab.inventory_path, lab.node_dir, (str(d.spark_home), str(d.hdfs_home)), work, seed=a.seed,
                    point_timeout=a.point_timeout, log=lambda s: print(s, flush=True), lab=lab,
                    state_url=state_url, pg=pg)
    t0 = time.monotonic()
    try:
        camp.setup()
        print(f"setup: 3 clusters active in {time.monotonic() - t0:.0f}s", flush=True)
        for i, (point, delay) in enumerate(plan, 1):
            if a.minutes and time.monotonic() - t0 > a.minutes * 60:
                print(f"time budget of {a.minutes:g} min used: stopping after {i - 1} of {len(plan)} kills", flush=True)
                break
            print(f"[{i}/{len(plan)}] {time.monotonic() - t0:.0f}s", end="", flush=True)
            camp.kill(point, delay)
        for i, kind in enumerate(kinds, 1):
            print(f"[fault {i}/{len(kinds)}] {time.monotonic() - t0:.0f}s", end="", flush=True)
            camp.fault(kind, a.fault_seconds)
        exact = camp.finish()
    except (FawkesError, OSError, subprocess.SubprocessError) as exc:
        camp.violation("final", f"campaign stopped: {str(exc)[:300]}")
        exact = {}
    finally:
        camp.close()
        if not a.keep:
            lab.down()
        if statefs is not None:
            subprocess.run(["umount", str(statefs)], check=False)
        if pg is not None:
            pg.stop()
    rows = camp.table(exact)
    total = time.monotonic() - t0
    kills = sum(r["runs"] for r in rows if r["point"] not in FAULTS and r["point"] != "final")
    print(f"\n{kills} kills in {total / 60:.1f} min, {len(camp.jobs)} jobs ({sum(exact.values())} exact), "
          f"{camp.hdfs_checks} HDFS checks ({camp.checksums_compared} file checksums compared with the first "
          f"seen, {len(camp.checksums)} files), {camp.saved_checked} saved job outputs exact after the release, "
          f"load {os.getloadavg()[0]:.1f}")
    print_table(rows)
    print(f"violations: {len(camp.violations)}")
    for v in camp.violations:
        print(f"  {v}")
    if a.out:
        Path(a.out).write_text(json.dumps({"seed": a.seed, "kills": kills, "hosts": a.hosts, "cpus": a.cpus,
                                           "minutes": round(total / 60, 1), "jobs": len(camp.jobs),
                                           "exact": sum(exact.values()), "rows": rows,
                                           "hdfs_checks": camp.hdfs_checks, "checksums_compared": camp.checksums_compared,
                                           "checksum_files": len(camp.checksums),
                                           "saved_checked": camp.saved_checked,
                                           "violations": camp.violations, "evidence": camp.evidence_dirs,
                                           **meta()}, indent=1))
    return 1 if camp.violations else 0

if __name__ == "__main__":
    sys.exit(main())
