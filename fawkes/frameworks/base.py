"""The framework driver contract and the registry of framework kinds.

A *kind* (``spark-hdfs``, ...) is one module ``fawkes/frameworks/<kind with _>.py`` that defines
``DRIVER`` (a :class:`FrameworkDriver` subclass) plus its template set in ``templates/<kind>/``:
nothing else has to change to add one.  The service (``fawkes/coordinator``, ``mechanism``,
``store``) knows nodes, roles, removal modes, samples and jobs, never a kind's names: everything it
asks of a framework goes through the contract below (docs/frameworks.md, "The contract").

The contract, modelled on Ray autoscaler v2's node provider: a few verbs on a cluster's
:class:`ClusterSpec` -- observe (:meth:`~FrameworkDriver.observe`: per node :class:`NodeFacts`;
:meth:`~FrameworkDriver.metrics`: per cluster a neutral :class:`FrameworkSample`), deploy /
teardown, add nodes, remove nodes (with a removal mode the kind offers), submit a job
(:meth:`~FrameworkDriver.job_command`), load input / save output / restore a saved output, and the hooks the suspender
and the opportunistic lender need (:meth:`~FrameworkDriver.suspend_hooks`,
:meth:`~FrameworkDriver.opportunistic_worker`).  What a kind offers it declares as class
attributes: ``roles``, ``removal_modes``, ``default_shrink_mode``, ``signals``,
``map_only_workers``.

Drivers are stateless: every operation takes the MR-cluster's :class:`ClusterSpec` (the nodes
it has now) and does its I/O through the SSH executor and HTTP to the daemons.  State lives on
the hosts (pid files, the rendered-config hash file) and in the caller's store, so every
operation is idempotent: running it twice is safe.  Long operations report
:class:`ProgressEvent` objects through the ``progress`` callback.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from fawkes.errors import FawkesError
from fawkes.frameworks.render import RenderedHost, render_cluster
from fawkes.frameworks.sample import FrameworkSample, TaskCounts  # noqa: F401  (the contract's types)
from fawkes.frameworks.spec import ClusterSpec, FrameworkPaths, NodeSpec
from fawkes.mechanism.model import Role, ShrinkMode
from fawkes.ssh.shell import Script


@dataclass(frozen=True)
class ProgressEvent:
    cluster: str
    step: str  # e.g. "configs", "start", "register", "decommission", "stop"
    message: str
    host: str | None = None
    elapsed_s: float = 0.0  # since the operation began


Progress = Callable[[ProgressEvent], None]


class DecommissionTimeout(FawkesError):
    """DP did not finish in time: the node keeps running (still decommissioning); nothing was stopped."""


class DecommissionInterrupted(DecommissionTimeout):
    """The wait for DP was cancelled (e.g. the coordinator stops): as after a timeout, the node keeps
    decommissioning and nothing was stopped; a later ``remove_nodes`` resumes the wait.  Putting the
    node back in service is the kind's own (``SparkHdfsDriver.recommission``)."""


@dataclass(frozen=True)
class OpResult:
    """What a grow/shrink/deploy did: the cluster as it is now and the time of each phase."""

    cluster: ClusterSpec
    phases: dict[str, float] = field(default_factory=dict)  # phase -> seconds
    hosts: tuple[str, ...] = ()


@dataclass(frozen=True)
class SavedOutput:
    """Where a cluster's output was saved (:meth:`FrameworkDriver.save_output`): ``host``:``path``, its
    ``files`` and ``bytes``, and the sha256 of its ``MANIFEST.sha256`` (one sha256 line per file)."""

    host: str
    path: str
    files: int
    bytes: int
    manifest_sha256: str

    def describe(self) -> str:
        return (f"{self.host}:{self.path} ({self.files} file(s), {self.bytes} bytes, "
                f"MANIFEST.sha256 {self.manifest_sha256[:16]})")


@dataclass(frozen=True)
class Health:
    ok: bool
    daemons: dict[str, dict[str, bool]]  # host -> daemon -> running
    problems: tuple[str, ...] = ()


@dataclass(frozen=True)
class NodeFacts:
    """What reality says about one node of an MR-cluster (:meth:`FrameworkDriver.observe`).

    ``daemons``: each daemon the node should run -> whether its process runs (None: the host did
    not answer).  ``registration``: each daemon -> what its master reports of it (the worker's
    state in the Spark master, the DataNode's admin state in the NameNode, ...; None: that master
    did not answer).  ``up``: every daemon runs and is registered the way ``add_nodes`` /
    ``deploy`` wait for.  ``decommissioned``: the file system has finished decommissioning the
    node (or it stores nothing there): only then may its storage daemon be stopped.
    ``decommissioning``: the file system is at work decommissioning it now (told, not finished);
    None when the file system did not answer.  A node neither decommissioned nor decommissioning
    has not been told (or was taken back): its removal must (re)start the decommission.
    """

    host: str
    daemons: Mapping[str, bool | None]
    registration: Mapping[str, str | None]
    up: bool
    decommissioned: bool
    problems: tuple[str, ...] = ()
    decommissioning: bool | None = False

    def summary(self) -> str:
        parts = []
        for d, run in self.daemons.items():
            reg = self.registration.get(d)
            parts.append(f"{d} {'?' if run is None else 'running' if run else 'stopped'}"
                         + (f", {reg}" if reg else ""))
        return "; ".join(parts)


#: how a TR node can be taken away (the coordinator's ``shrink_mode``, docs/mechanism.md "Shrink modes"):
#: ``fp`` stops its worker (its tasks re-run elsewhere), ``graceful`` decommissions it first (running
#: tasks finish, bounded by ``timeouts.graceful``), ``suspend`` suspends it and lends its host
SHRINK_MODES = ("fp", "graceful", "suspend")

#: how a kind can remove a node (:attr:`FrameworkDriver.removal_modes`): ``fp`` fast (stop it, its
#: running tasks re-run elsewhere), ``dp`` data-preserving (decommission its storage, then stop),
#: ``graceful`` (no new tasks, running ones finish, bounded by ``drain_s``, then stop), ``suspend``
#: (its worker suspended in place and its host lent: :meth:`FrameworkDriver.suspend_hooks`)
REMOVAL_MODES = ("fp", "dp", "graceful", "suspend")

#: what a kind's :class:`FrameworkSample` feeds (:attr:`FrameworkDriver.signals`): ``tasks`` (queued,
#: running, done; per job), ``slots`` (configured and busy), ``stored_bytes`` (and capacity, per node),
#: ``written_bytes`` (counted by the framework itself), ``job_progress`` (per-job task counts while a
#: job runs)
SIGNALS = ("tasks", "slots", "stored_bytes", "written_bytes", "job_progress")


@dataclass(frozen=True)
class JobLaunch:
    """How to start one job's driver on the cluster's master host (:meth:`FrameworkDriver.job_command`):
    ``argv`` run with ``env`` set, from the job's own directory (its output goes to the file ``log``
    there, where :attr:`FrameworkDriver.job_id_pattern` finds the framework's id of the job)."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class SuspendHooks:
    """What the suspender runs on a host for one cluster (:meth:`FrameworkDriver.suspend_hooks`):
    ``pid`` prints the pid at the root of the cluster's worker process tree there (nothing when none
    runs); ``wipe`` stops whatever of the cluster runs there and deletes its directory (idempotent)."""

    pid: Script
    wipe: Script


@dataclass(frozen=True)
class WorkerLaunch:
    """An opportunistic worker (:meth:`FrameworkDriver.opportunistic_worker`): ``argv`` runs the
    cluster's worker in the foreground on the host (the watchdog agent's child); ``pidfile`` is where
    the kind's own control looks for that worker's pid (a promoted worker is kept there); ``log_dir``
    a directory of the cluster on the host for the agent's files."""

    argv: tuple[str, ...]
    pidfile: str
    log_dir: str


class FrameworkDriver(ABC):
    """Deploy, grow, shrink, observe and tear down MR-clusters of one framework kind."""

    kind: ClassVar[str]
    #: the node roles a cluster of this kind has (docs/mechanism.md "Roles")
    roles: ClassVar[tuple[Role, ...]] = (Role.CORE, Role.TC, Role.TR)
    #: how its nodes can be removed (a subset of :data:`REMOVAL_MODES`); a configured ``shrink_mode``
    #: the kind does not offer is refused (:func:`shrink_mode_for`)
    removal_modes: ClassVar[frozenset[str]] = frozenset({"fp", "dp"})
    #: B-6: how this kind's TR nodes leave when the coordinator's config sets no ``shrink_mode``
    #: (one of :data:`SHRINK_MODES` it offers, checked when the driver class is defined); a
    #: ``shrink_mode`` in the config wins for every cluster (:func:`shrink_mode_for`)
    default_shrink_mode: ClassVar[str] = "fp"
    #: what its samples feed (a subset of :data:`SIGNALS`)
    signals: ClassVar[frozenset[str]] = frozenset()
    #: whether an opportunistic worker of this kind can be confined to map tasks (UBIS ``maps_only``);
    #: when not, ``map_only_note`` says why (the config refuses ``maps_only`` with it)
    map_only_workers: ClassVar[bool] = False
    map_only_note: ClassVar[str] = ""
    #: how messages name the kind's file system (the one that decommissions a node's storage)
    storage_name: ClassVar[str] = "the file system"
    #: a ``grep -o`` basic regular expression finding the framework's id of a job in its driver's log
    #: (stored as the job's ``app_id``: the key of :attr:`FrameworkSample.tasks_by_job`); empty: none, the job
    #: is RUNNING once its driver process runs
    job_id_pattern: ClassVar[str] = ""
    #: the installation paths ``fawkes framework add`` takes for this kind (besides --java-home), as
    #: FrameworkPaths field names (``spark_home`` -> ``--spark-home``); any other path given is refused
    path_options: ClassVar[tuple[str, ...]] = ()
    #: those of :attr:`path_options` it cannot do without (``framework add`` names the first one missing)
    required_paths: ClassVar[tuple[str, ...]] = ()
    #: whether :meth:`metrics` waits on the network (its daemons' HTTP APIs, SSH): the sampler then reads
    #: several clusters at once (:data:`fawkes.coordinator.sampler.SAMPLE_WORKERS`); False: in-process
    metrics_wait: ClassVar[bool] = True
    #: daemons per node role (the master node runs its master daemons in addition)
    role_daemons: ClassVar[Mapping[Role, tuple[str, ...]]]
    master_daemons: ClassVar[tuple[str, ...]]

    def __init_subclass__(cls, **kw) -> None:
        super().__init_subclass__(**kw)
        mode = cls.__dict__.get("default_shrink_mode", cls.default_shrink_mode)
        if not isinstance(mode, str) or mode not in SHRINK_MODES:
            raise TypeError(f"{cls.__name__}.default_shrink_mode: {mode!r} is not one of {', '.join(SHRINK_MODES)}")
        bad = sorted(set(cls.removal_modes) - set(REMOVAL_MODES)) + sorted(set(cls.signals) - set(SIGNALS))
        if bad:
            raise TypeError(f"{cls.__name__}: unknown removal mode(s) or signal(s) {', '.join(bad)}")

    def __init__(self, executor, *, progress: Progress | None = None, http_timeout: float = 5.0):
        self.ex = executor
        self.progress = progress
        self.http_timeout = http_timeout

    # ------------------------------------------------------------------ shared helpers
    def emit(self, cluster: ClusterSpec, step: str, message: str, host: str | None = None,
             t0: float | None = None) -> None:
        if self.progress:
            self.progress(ProgressEvent(cluster.name, step, message, host,
                                        0.0 if t0 is None else time.monotonic() - t0))

    def daemons_for(self, cluster: ClusterSpec, node: NodeSpec) -> tuple[str, ...]:
        """The daemons ``node`` runs in ``cluster`` (master daemons first on the master node)."""
        extra = self.master_daemons if node.name == cluster.master.name else ()
        return (*extra, *self.role_daemons[node.role])

    def web_ui(self, cluster: ClusterSpec) -> str | None:
        """The kind's own web UI for ``cluster`` (a master's status page), or None when it has none."""
        return None

    def max_jobs(self, cluster: ClusterSpec) -> int | None:
        """The most jobs of ``cluster`` that can run at once by the kind's own limits (a Spark driver's UI
        needs a port of the cluster's block), or None when the kind sets none; the dispatcher takes the
        lower of this and the config's ``max_running_jobs``."""
        return None

    def render(self, cluster: ClusterSpec, hosts: Iterable[str] | None = None) -> dict[str, RenderedHost]:
        """What would be written on each host (pure; nothing is written)."""
        return render_cluster(cluster, hosts)

    # ------------------------------------------------------------------ operations
    @classmethod
    @abstractmethod
    def check_framework(cls, executor, framework: FrameworkPaths, hosts: Sequence[str]) -> dict[str, list[str]]:
        """Problems per host (files missing, Java not running); empty lists when all is well."""

    @abstractmethod
    def deploy(self, cluster: ClusterSpec, *, timeout: float = 180.0) -> OpResult:
        """Render and write configs, start every daemon of every node, wait until registered."""

    @abstractmethod
    def load_input(self, cluster: ClusterSpec, src: str, dest: str, *, timeout: float = 600.0) -> None:
        """Copy ``src`` (a path on the master host) into the cluster's file system at ``dest``."""

    @abstractmethod
    def add_nodes(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], *, timeout: float = 180.0) -> OpResult:
        """Grow by TR/TC nodes: configs, daemons, wait until registered (worker ALIVE, DataNode live)."""

    @abstractmethod
    def remove_nodes(self, cluster: ClusterSpec, names: Sequence[str], mode: ShrinkMode | None = None, *,
                     timeout: float = 600.0, cancel: threading.Event | None = None,
                     drain_s: float = 2.0) -> OpResult:
        """Shrink by FP or DP (default: by role, TR->FP, TC->DP). Core nodes are refused.  DP of a TR
        node is the graceful removal: its running tasks may finish for up to ``drain_s`` seconds."""

    @abstractmethod
    def save_output(self, cluster: ClusterSpec, src: str, dest: str, *, timeout: float = 600.0) -> SavedOutput | None:
        """Copy ``src`` from the cluster's file system to ``dest`` (a path on the master host, outside the
        cluster's directories), checked and with a checksum manifest; None when ``src`` does not exist."""

    @abstractmethod
    def restore_output(self, cluster: ClusterSpec, saved: SavedOutput, dest: str, *, timeout: float = 600.0) -> None:
        """Scale to zero: copy an output :meth:`save_output` saved (``saved``: its record; ``saved.path`` a
        path the master host reaches) back into the cluster's file system at ``dest``, once the copy is
        checked against its ``MANIFEST.sha256`` (every file's hash, and the manifest's own hash and file
        count as recorded); the manifest itself is not copied.  Replaces whatever ``dest`` held
        (idempotent); refused, with nothing loaded, when the saved copy does not match."""

    @abstractmethod
    def teardown(self, cluster: ClusterSpec, *, wipe: bool = True, timeout: float = 120.0) -> OpResult:
        """Stop every daemon on every node (and delete the cluster's directories)."""

    @abstractmethod
    def reconfigure(self, cluster: ClusterSpec) -> dict[str, list[str]]:
        """Re-render; on hosts whose configs changed, write them and restart only the affected daemons."""

    @abstractmethod
    def health(self, cluster: ClusterSpec) -> Health:
        """Which daemons run, and whether the master and the NameNode see every node."""

    @abstractmethod
    def observe(self, cluster: ClusterSpec, hosts: Sequence[str] | None = None) -> dict[str, NodeFacts]:
        """Per host (of ``hosts``, default every node): which daemons run, and what their masters
        say of them (one status command per host, in parallel, and one request per master).
        Never changes anything; a master or host that does not answer leaves its facts None."""

    @abstractmethod
    def metrics(self, cluster: ClusterSpec, *, jobs: Sequence[int] = (), host_stats: bool = False) -> FrameworkSample:
        """One neutral sample of the policy inputs, from the daemons themselves; ``jobs``: the ids of
        the cluster's running jobs started by :meth:`job_command` (their task counts, per job)."""

    @abstractmethod
    def job_command(self, cluster: ClusterSpec, job, *, output: str, driver_memory: str | None = None,
                    python: str | None = None) -> JobLaunch:
        """How to start ``job`` (a stored job: ``id``, ``argv``, ``input_path``) on the master host: the
        kind's submit command with its arguments, ``{input}`` / ``{output}`` / ``{job}`` in them
        replaced by the job's input path, ``output`` and its id as the framework addresses them.
        ``driver_memory``: over the cluster's option of that name; ``python``: the fallback when neither the
        cluster's option ``job_python`` nor the framework names the hosts' Python (kinds with a driver
        memory or a Python; None: the options decide)."""

    @classmethod
    @abstractmethod
    def suspend_hooks(cls, cluster: str, root: str) -> SuspendHooks:
        """The suspender's commands for ``cluster``'s worker on a host whose fawkes root is ``root``."""

    @abstractmethod
    def opportunistic_worker(self, cluster: ClusterSpec, node: NodeSpec) -> WorkerLaunch:
        """Write ``node``'s configs as for a TR node of ``cluster`` (which includes it) and say how to
        run its worker in the foreground under the watchdog agent (UBIS)."""



# ---------------------------------------------------------------------- registry of kinds
def _module_of(kind: str) -> str:
    return "fawkes.frameworks." + kind.replace("-", "_")


_SKIP = {"base", "control", "dists", "hdfs", "metrics", "render", "sample", "spec", "registry"}


def kinds() -> list[str]:
    """Every framework kind shipped (modules of this package that define ``DRIVER``)."""
    import fawkes.frameworks as pkg

    out = []
    for m in pkgutil.iter_modules(pkg.__path__):
        if m.name in _SKIP or m.name.startswith("_"):
            continue
        mod = importlib.import_module(f"fawkes.frameworks.{m.name}")
        drv = getattr(mod, "DRIVER", None)
        if drv is not None:
            out.append(drv.kind)
    return sorted(out)


def driver_class(kind: str) -> type[FrameworkDriver]:
    try:
        mod = importlib.import_module(_module_of(kind))
    except ModuleNotFoundError:
        mod = None
    drv = getattr(mod, "DRIVER", None) if mod else None
    if drv is None or drv.kind != kind:
        raise FawkesError(f"unknown framework kind {kind!r} (known: {', '.join(kinds()) or 'none'})")
    return drv


def shrink_mode_for(kind: str, configured: str | None = None) -> str:
    """B-6: how the TR nodes of a cluster of framework ``kind`` leave: the config's ``shrink_mode``
    when it sets one (checked: one of :data:`SHRINK_MODES`, and offered by the kind), else the kind's
    driver default (``spark-hdfs``: ``fp``)."""
    if configured is not None:
        if not isinstance(configured, str) or configured not in SHRINK_MODES:
            raise FawkesError(f"shrink_mode: {configured!r} is not one of {', '.join(SHRINK_MODES)}")
        offered = driver_class(kind).removal_modes
        if configured not in offered:
            raise FawkesError(f"shrink_mode: {configured!r} is not offered by framework kind {kind!r} "
                              f"(offers: {', '.join(sorted(offered))})")
        return configured
    return driver_class(kind).default_shrink_mode


def map_only_refusal() -> str | None:
    """Why UBIS' ``maps_only`` cannot run live (None: every shipped kind confines an opportunistic
    worker to map tasks): the config check (:func:`fawkes.config.load_config`) refuses it with this."""
    why = [driver_class(k).map_only_note or f"framework kind {k} cannot confine a worker to map tasks"
           for k in kinds() if not driver_class(k).map_only_workers]
    if not why:
        return None
    return "maps_only is not supported live: " + "; ".join(why) + "; use accept or refuse"


def driver_for(kind: str, executor, **kw) -> FrameworkDriver:
    return driver_class(kind)(executor, **kw)
