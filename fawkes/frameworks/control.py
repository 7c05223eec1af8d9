"""What every kind driven by a rendered control script shares (spark-hdfs, spark, dask).

Each host of an MR-cluster gets ``<root>/clusters/<cluster>/bin/fawkes-daemon.sh`` (start / stop /
status / status-all / stop-all / wipe by pid file) and its configs; :class:`ControlScriptDriver` holds
the helpers that drive it over SSH (commands per host in parallel, small files written atomically,
configs pushed where their hash changed, polling, teardown), and :func:`save_shared_script` the
size-checked copy with a ``MANIFEST.sha256`` that kinds on shared storage save their output with.
Nothing here names a framework's daemons: the control script of each kind knows them.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from pathlib import PurePosixPath

from fawkes import faults
from fawkes.errors import FawkesError
from fawkes.frameworks.base import FrameworkDriver, OpResult, SavedOutput
from fawkes.frameworks.render import CONTROL_SCRIPT, cluster_ports, own_port_block
from fawkes.frameworks.spec import ClusterSpec, NodeSpec
from fawkes.mechanism.model import Role
from fawkes.ssh.shell import Script

HASH_FILE = "conf/.fawkes-hashes"


def save_shared_script(source: str, dest: str) -> Script:
    """Copy the directory ``source`` to ``dest`` (both paths on one host) through ``dest.fawkes-partial``,
    renamed once its size equals the source's, with a ``MANIFEST.sha256`` (one sha256 line per file);
    prints ``fawkes-saved: FILES BYTES MANIFEST-SHA256``, or ``fawkes-saved: none`` when ``source`` is
    not a directory (:meth:`ControlScriptDriver._saved` reads it)."""
    tmp = dest.rstrip("/") + ".fawkes-partial"
    return Script(
        "if [ ! -d {s} ]; then echo 'fawkes-saved: none'; exit 0; fi; "
        "want=$(find {s} -type f -printf '%s\\n' | awk '{{s += $1}} END {{print s + 0}}'); "
        "rm -rf {tmp} && mkdir -p \"$(dirname {tmp})\" && cp -R {s} {tmp} && "
        "(cd {tmp} && find . -type f ! -path ./MANIFEST.sha256 -print0 | sort -z | xargs -0r sha256sum "
        "> MANIFEST.sha256) && "
        "got=$(find {tmp} -type f ! -path {man} -printf '%s\\n' | awk '{{s += $1}} END {{print s + 0}}') && "
        "if [ \"$got\" != \"$want\" ]; then echo \"saved $got bytes, the source holds $want\" >&2; exit 3; fi && "
        "files=$(wc -l < {man}) && rm -rf {dest} && mv {tmp} {dest} && "
        "echo \"fawkes-saved: $files $got $(sha256sum < {dest}/MANIFEST.sha256 | cut -d' ' -f1)\"",
        s=source, tmp=tmp, dest=dest, man=f"{tmp}/MANIFEST.sha256")


def check_saved_script(saved: SavedOutput) -> Script:
    """Check, on the host that reaches it, a copy :func:`save_shared_script` (or an HDFS save) left: its
    ``MANIFEST.sha256`` hashes to the recorded digest and lists the recorded number of files, and every
    file hashes as the manifest says (a restore loads nothing otherwise: exit 3, one line on stderr)."""
    return Script(
        "p={p}; want={digest}; files={files}; m=\"$p/MANIFEST.sha256\"; "
        "if [ ! -f \"$m\" ]; then echo \"$p: no MANIFEST.sha256 (not a saved output)\" >&2; exit 3; fi; "
        "got=$(sha256sum < \"$m\" | cut -d' ' -f1); "
        "if [ \"$got\" != \"$want\" ]; then echo \"$p: MANIFEST.sha256 is not the one recorded\" >&2; exit 3; fi; "
        "n=$(wc -l < \"$m\"); "
        "if [ \"$n\" != \"$files\" ]; then echo \"$p: $n file(s) in MANIFEST.sha256, $files recorded\" >&2; "
        "exit 3; fi; "
        "if ! (cd \"$p\" && sha256sum --quiet --strict -c MANIFEST.sha256 >&2); then "
        "echo \"$p: a file does not match MANIFEST.sha256\" >&2; exit 3; fi",
        p=saved.path, digest=saved.manifest_sha256, files=str(saved.files))


def check_problems(executor, hosts: Sequence[str], script: Script) -> dict[str, list[str]]:
    """Run a kind's installation check on ``hosts``: per host the lines it printed (one problem a line),
    or that the host did not answer (``check_framework``)."""
    out: dict[str, list[str]] = {}
    for h, r in executor.run(list(hosts), script, timeout=60).items():
        out[h] = [f"unreachable: {r.error}"] if r.error and r.exit_code is None else \
            [ln.strip() for ln in r.stdout.splitlines() if ln.strip()]
    return out


def refuse_save_inside_clusters(node: NodeSpec, dest: str) -> None:
    """A save must land outside ``<root>/clusters`` (teardown wipes it)."""
    root = str(PurePosixPath(node.root) / "clusters")
    if dest == root or dest.startswith(root + "/"):
        raise FawkesError(f"save to {dest}: inside {root}, which teardown wipes; choose a path outside it")


class ServerError(FawkesError):
    """A daemon's HTTP endpoint answered with a server error (HTTP 5xx)."""


class ControlScriptDriver(FrameworkDriver):
    """A driver whose daemons are started and stopped through the rendered control script."""

    #: the control script's name for the compute worker every node runs
    worker: str = "worker"
    #: how long a removal waits for its stopped workers to leave their master (``_gone``), each time
    leave_timeout_s: float = 60.0
    #: the named ports (``render.PORT_OFFSETS``) each daemon listens on: a deploy or a grow checks them free
    daemon_ports: Mapping[str, tuple[str, ...]] = {}

    def _refuse_busy_ports(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec]) -> None:
        """Before a deploy or a grow starts anything: on each of ``nodes`` where none of the cluster's own
        daemons runs (a restarted coordinator's second attempt finds its own there), the ports its daemons
        will listen on must not be in LISTEN (``/proc/net/tcp``, ``tcp6``).  Else one line naming each host
        and its ports, and nothing is started: another process there (an admin's own Spark or HDFS, another
        cluster of the standard ports) would make a daemon fail to bind, seen only as a timeout.  Only a
        cluster with a port block of its own is checked: on the frameworks' standard ports another
        cluster's daemons may rightly be there (a host lent by suspend or UBIS runs both), and Spark's
        UI ports move to the next free one."""
        if not own_port_block(cluster):
            return
        ports = cluster_ports(cluster)
        want: dict[str, dict[str, int]] = {}
        for n in nodes:
            names = {p for d in self.daemons_for(cluster, n) for p in self.daemon_ports.get(d, ())}
            if names:
                want[n.name] = {f"{ports[p]:04X}": ports[p] for p in sorted(names)}
        if not want:
            return
        cmds = {}
        for h, hexes in want.items():
            ctl = str(PurePosixPath(cluster.cluster_dir(cluster.node(h))) / CONTROL_SCRIPT)
            cmds[h] = Script(
                "if [ -f {c} ] && /bin/sh {c} status-all 2>/dev/null | grep -q ' running '; then exit 0; fi; "
                "busy=\" $(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | "
                "awk '$4 == \"0A\" {{n = split($2, a, \":\"); print a[n]}}' | sort -u | tr '\\n' ' ') \"; "
                "for p in {want}; do case \"$busy\" in *\" $p \"*) echo \"$p\" ;; esac; done",
                c=ctl, want=list(hexes))
        out = self._run(cmds, "checking the cluster's ports are free", 60)
        busy = {h: sorted(want[h][x] for x in text.split() if x in want[h]) for h, text in out.items()}
        busy = {h: ps for h, ps in busy.items() if ps}
        if busy:
            where = "; ".join(f"{h}: {', '.join(str(p) for p in ps)}" for h, ps in sorted(busy.items()))
            raise FawkesError(f"cluster {cluster.name}: port(s) already in use by another process ({where}): "
                              "free them or give the cluster another port_range (fawkes inventory probe "
                              "--port-range shows what listens); nothing was started")

    def __init__(self, executor, *, progress=None, http_timeout: float = 5.0, poll_s: float = 0.25):
        super().__init__(executor, progress=progress, http_timeout=http_timeout)
        self.poll_s = poll_s

    def _ctl(self, cluster: ClusterSpec, node: NodeSpec, *args: str) -> Script:
        script = str(PurePosixPath(cluster.cluster_dir(node)) / CONTROL_SCRIPT)
        return Script("/bin/sh {s} {a}", s=script, a=list(args))

    def _run(self, commands: Mapping[str, Script], what: str, timeout: float = 120.0) -> dict[str, str]:
        """Run per-host commands in parallel; raise one line naming every host that failed."""
        if not commands:
            return {}
        res = self.ex.run_each(dict(commands), timeout=timeout)
        bad = [f"{h}: {r.error}" for h, r in res.items() if not r.ok]
        if bad:
            raise FawkesError(f"{what} failed on {len(bad)} host(s): " + "; ".join(bad)[:400])
        return {h: r.stdout for h, r in res.items()}

    def _joining(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], t0: float) -> tuple[ClusterSpec, list[str]]:
        """``add_nodes``' first step: refuse the master node (it joins only at deployment) and a host already
        in the cluster under another role; the cluster with ``nodes`` and their names, the grow announced."""
        for n in nodes:
            if n.role is Role.CORE and cluster.master.name == n.name:
                raise FawkesError(f"{n.name}: the master node joins only at deployment")
            if any(o.name == n.name and o.role is not n.role for o in cluster.nodes):
                raise FawkesError(f"{n.name} is already in cluster {cluster.name} as {cluster.node(n.name).role}")
        new = cluster
        for n in nodes:
            new = new.with_node(n)
        self.emit(new, "grow", f"adding {', '.join(f'{n.name} ({n.role})' for n in nodes)}", t0=t0)
        return new, [n.name for n in nodes]

    @staticmethod
    def _leaving(cluster: ClusterSpec, names: Sequence[str]) -> list[NodeSpec]:
        """``remove_nodes``' first step: the nodes of ``names`` still in the cluster (none: already gone, the
        removal is idempotent); a core node is refused, it is never removed while the cluster is active."""
        present = [cluster.node(n) for n in names if any(x.name == n for x in cluster.nodes)]
        for n in present:
            if n.role is Role.CORE:
                raise FawkesError(f"{n.name} is a core node of {cluster.name}: core nodes are never removed "
                                  "while the cluster is active (tear the cluster down instead)")
        return present

    def _gone(self, cluster: ClusterSpec, gone: Sequence[str], still_registered, what: str, t0: float,
              phases: dict[str, float]) -> OpResult:
        """``remove_nodes``' last step: wait (``leave_timeout_s``) until ``still_registered()`` is false (the
        stopped workers have left their master), wipe the nodes' cluster directories, and return the
        cluster without them.  A master may keep listing a worker whose process is gone until its own
        heartbeat timeout: past the wait, the nodes' control scripts decide.  A worker still running there
        is stopped again and waited for once more (an error names it if it stays); none running: the
        removal goes on and an event says the master lags."""
        t = time.monotonic()
        try:
            self._wait(cluster, what, lambda: not still_registered(), self.leave_timeout_s, t0)
        except FawkesError as exc:
            nodes = [cluster.node(h) for h in gone]
            status = self._status(cluster, nodes)
            running = [h for h in gone if status.get(h) is None or status[h].get(self.worker, False)]
            if not running:
                self.emit(cluster, "shrink", f"{exc}; the {self.worker} process has exited on "
                          f"{', '.join(gone)}: going on (the master drops it at its own heartbeat timeout)", t0=t0)
            else:
                self.emit(cluster, "shrink", f"{exc}; the {self.worker} still runs (or the host did not answer) "
                          f"on {', '.join(running)}: stopping it again", t0=t0)
                self._ctl_each(cluster, {h: [("stop", self.worker, "10")] for h in running},
                               f"stopping {self.worker}s again", if_present=True)
                self._wait(cluster, f"{what} (after a second stop on {', '.join(running)})",
                           lambda: not still_registered(), self.leave_timeout_s, t0)
        self._ctl_each(cluster, {h: [("wipe",)] for h in gone}, "wiping removed nodes", if_present=True)
        faults.point("node-wiped")
        phases["cleanup"] = time.monotonic() - t
        phases["total"] = time.monotonic() - t0
        new = cluster
        for h in gone:
            new = new.without(h)
        self.emit(new, "shrink", f"removed {', '.join(gone)} in {phases['total']:.1f}s", t0=t0)
        return OpResult(new, phases, tuple(gone))

    def _ctl_if_present(self, cluster: ClusterSpec, node: NodeSpec, *args: str) -> Script:
        """The control script's action, or nothing on a host that no longer holds the cluster's
        directory (already wiped: nothing of the cluster runs there), so that removals are idempotent."""
        script = str(PurePosixPath(cluster.cluster_dir(node)) / CONTROL_SCRIPT)
        return Script("if [ -f {s} ]; then /bin/sh {s} {a}; else echo 'no cluster directory'; fi",
                      s=script, a=list(args))

    def _ctl_each(self, cluster: ClusterSpec, per_host: Mapping[str, Sequence[Sequence[str]]], what: str,
                  timeout: float = 120.0, *, if_present: bool = False) -> dict[str, str]:
        cmds = {}
        ctl = self._ctl_if_present if if_present else self._ctl
        for h, actions in per_host.items():
            if not actions:
                continue
            node = cluster.node(h)
            cmds[h] = Script(" && ".join("{c%d}" % i for i in range(len(actions))),
                             **{f"c{i}": ctl(cluster, node, *a) for i, a in enumerate(actions)})
        return self._run(cmds, what, timeout)

    def write_files(self, files: Mapping[str, Sequence[tuple[str, str]]], what: str = "writing files") -> None:
        """Write small text files on hosts (atomically: a temp file of this command's own + rename), hosts
        in parallel.

        The content travels inside one command per host, each file's text one quoted shell word,
        so no value ever reaches the shell unquoted.
        """
        self._run({h: self._write_script(items) for h, items in files.items()}, what, 60)

    @staticmethod
    def _write_script(items: Sequence[tuple[str, str]]) -> Script:
        """One ``mkdir -p`` of every directory, then per file the shell's builtin ``printf`` into a
        temp file and a rename: one process per file (a ``base64 -d`` pipeline per file cost three;
        on a loaded 2-core host, 137 ms instead of 47 ms for a node's ten config files)."""
        dirs = sorted({str(PurePosixPath(path).parent) for path, _ in items})
        parts, vals = ["mkdir -p {dirs}"], {"dirs": dirs}
        for i, (path, content) in enumerate(items):
            vals[f"c{i}"] = content
            vals[f"p{i}"] = path
            vals[f"t{i}"] = f"{path}.fawkes-tmp"  # + the shell's pid: two writers never share a temp file
            parts.append(f"printf %s {{c{i}}} > {{t{i}}}.$$ && mv -f {{t{i}}}.$$ {{p{i}}}")
        return Script(" && ".join(parts), **vals)

    @staticmethod
    def _config_files(r) -> list[tuple[str, str]]:
        """A rendered host's files (absolute paths), the hash file last."""
        files = [(f"{r.cluster_dir}/{p}", c) for p, c in sorted(r.files.items())]
        files.append((f"{r.cluster_dir}/{HASH_FILE}",
                      json.dumps({"hash": r.hash, "components": r.hashes}, sort_keys=True) + "\n"))
        return files

    def _http_json(self, url: str, *, server_error_retry_s: float | None = None):
        """The JSON document at ``url``; with ``server_error_retry_s``, a server error (HTTP 5xx) is asked
        once more after that many seconds (then :class:`ServerError`)."""
        try:
            with urllib.request.urlopen(url, timeout=self.http_timeout) as resp:  # noqa: S310 (lab/pool hosts only)
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            if server_error_retry_s is not None and exc.code >= 500:
                time.sleep(server_error_retry_s)
                return self._http_json(url)
            raise (ServerError if exc.code >= 500 else FawkesError)(f"GET {url}: {exc.reason}") from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise FawkesError(f"GET {url}: {getattr(exc, 'reason', exc)}") from None

    def _wait(self, cluster: ClusterSpec, what: str, check, timeout: float, t0: float,
              cancel: threading.Event | None = None):
        """Poll ``check()`` (a value or None; HTTP errors count as not yet) until it is truthy."""
        deadline = time.monotonic() + timeout
        last_err = None
        while True:
            try:
                v = check()
                if v:
                    return v
            except FawkesError as exc:
                last_err = exc
            if cancel is not None and cancel.is_set():
                return None
            if time.monotonic() >= deadline:
                why = f" (last error: {last_err})" if last_err else ""
                raise FawkesError(f"cluster {cluster.name}: timed out after {timeout:g}s waiting for {what}{why}")
            time.sleep(self.poll_s)

    def push_configs(self, cluster: ClusterSpec, hosts: Iterable[str] | None = None,
                     force: bool = False) -> dict[str, set[str]]:
        """Write the rendered configs where they changed; returns the changed components per host."""
        t0 = time.monotonic()
        rendered = self.render(cluster, hosts)
        old = self._run({h: Script("cat {f} 2>/dev/null || true", f=f"{r.cluster_dir}/{HASH_FILE}")
                         for h, r in rendered.items()}, "reading config hashes", 60)
        changed: dict[str, set[str]] = {}
        uploads = {}
        for h, r in rendered.items():
            try:
                rec = json.loads(old[h]) if old[h].strip() else None
            except ValueError:
                rec = None
            if not force and rec and rec.get("hash") == r.hash:
                changed[h] = set()
                continue
            changed[h] = r.changed_components(None if force or not rec else rec.get("components"))
            uploads[h] = self._config_files(r)
        if uploads:
            self.write_files(uploads, "writing configs")
        for h in rendered:
            self.emit(cluster, "configs", "written" if h in uploads else "unchanged", h, t0)
        return changed

    def _saved(self, cluster: ClusterSpec, out: str, dest: str, t0: float) -> SavedOutput | None:
        """What a save script printed (``fawkes-saved: FILES BYTES MANIFEST-SHA256`` or ``... none``)."""
        m = cluster.master
        line = next((ln for ln in out.splitlines() if ln.startswith("fawkes-saved: ")), "")
        if line == "fawkes-saved: none":
            self.emit(cluster, "save", "nothing to save", m.name, t0)
            return None
        try:
            files, size, digest = line.split()[1:4]
            saved = SavedOutput(m.name, dest, int(files), int(size), digest)
        except ValueError:
            raise FawkesError(f"saving the output: unexpected answer {out.strip()[-200:]!r}") from None
        self.emit(cluster, "save", f"done: {saved.describe()}", m.name, t0)
        return saved

    def teardown(self, cluster: ClusterSpec, *, wipe: bool = True, timeout: float = 120.0) -> OpResult:
        t0 = time.monotonic()
        self.emit(cluster, "teardown", f"stopping {len(cluster.nodes)} node(s)", t0=t0)
        cmds = {}
        for n in cluster.nodes:
            script = str(PurePosixPath(cluster.cluster_dir(n)) / CONTROL_SCRIPT)
            action = "wipe" if wipe else "stop-all"
            # idempotent: a host whose cluster dir is already gone has nothing left to stop
            cmds[n.name] = Script("if [ -f {s} ]; then /bin/sh {s} {a}; else echo 'nothing to stop'; fi",
                                  s=script, a=action)
        self._run(cmds, "teardown", timeout)
        self.emit(cluster, "teardown", "done", t0=t0)
        return OpResult(cluster, {"total": time.monotonic() - t0}, tuple(n.name for n in cluster.nodes))

    def _status(self, cluster: ClusterSpec, nodes: Sequence[NodeSpec], timeout: float = 30) -> dict[str, dict | None]:
        """Per host: daemon -> running (pid file + process), or None when the host did not answer."""
        if not nodes:
            return {}
        out = self.ex.run_each({n.name: Script("if [ -f {s} ]; then /bin/sh {s} status-all; fi",
                                                s=str(PurePosixPath(cluster.cluster_dir(n)) / CONTROL_SCRIPT))
                                for n in nodes}, timeout=timeout)
        return {h: ({ln.split()[0]: ln.split()[1] == "running" for ln in r.stdout.splitlines() if len(ln.split()) >= 2}
                    if r.ok else None) for h, r in out.items()}


class SharedStorage:
    """The storage half of a kind whose data lives on a file system every host sees (NFS, Lustre; in the
    lab, any directory outside the hosts' own ``node/``): the cluster's input and output under
    ``<shared_dir>/<cluster>/``, its master daemon and its workers started by the control script.  Mixed
    in before a :class:`ControlScriptDriver`; the kind's first master daemon is started first, and the
    kind says when it is ready (:meth:`master_ready`) and when its workers have registered
    (``_wait_workers``)."""

    @property
    def master_daemon(self) -> str:
        return self.master_daemons[0]

    def master_ready(self, cluster: ClusterSpec) -> bool:
        raise NotImplementedError

    @staticmethod
    def data_dir(cluster: ClusterSpec) -> str:
        """Where the cluster's input and output live on the shared file system."""
        shared = cluster.framework.shared_dir
        if not shared:
            raise FawkesError(f"framework {cluster.framework.name}: kind {cluster.framework.kind} needs --shared-dir")
        return str(PurePosixPath(shared) / cluster.name)

    def _shared(self, cluster: ClusterSpec, path: str) -> str:
        """A cluster path (``/input``, ``/output/7``) on the shared file system."""
        return self.data_dir(cluster) + "/" + path.lstrip("/")

    def deploy(self, cluster: ClusterSpec, *, timeout: float = 180.0) -> OpResult:
        """Configs, the cluster's shared directories and its master daemon; once that is ready, a worker
        on every node, waited for until each has registered."""
        t0 = time.monotonic()
        m = cluster.master
        self.emit(cluster, "deploy", f"{len(cluster.nodes)} node(s), {self.master_daemon} on {m.name} "
                  f"({m.address})", t0=t0)
        self._refuse_busy_ports(cluster, cluster.nodes)
        self.push_configs(cluster)
        phases = {"configs": time.monotonic() - t0}
        self._run({m.name: Script("mkdir -p {i} {o} && {s}", i=self._shared(cluster, "input"),
                                  o=self._shared(cluster, "output"),
                                  s=self._ctl(cluster, m, "start", self.master_daemon))},
                  f"starting the {self.master_daemon}", 120)
        self._wait(cluster, f"the {self.master_daemon}", lambda: self.master_ready(cluster), timeout, t0)
        self._ctl_each(cluster, {n.name: [("start", "worker")] for n in cluster.nodes}, "starting workers")
        self._wait_workers(cluster, cluster.nodes, timeout, t0)
        phases["total"] = time.monotonic() - t0
        self.emit(cluster, "done", f"deployed in {phases['total']:.1f}s", t0=t0)
        return OpResult(cluster, phases, tuple(n.name for n in cluster.nodes))

    def load_input(self, cluster: ClusterSpec, src: str, dest: str, *, timeout: float = 600.0) -> None:
        """Copy ``src`` (a file or directory the master host sees) to ``<shared_dir>/<cluster><dest>``."""
        t0 = time.monotonic()
        m, target = cluster.master, self._shared(cluster, dest)
        self.emit(cluster, "load", f"{src} -> {target}", m.name, t0)
        self._run({m.name: Script("rm -rf {t} && mkdir -p \"$(dirname {t})\" && cp -R {s} {t}", s=src, t=target)},
                  f"loading {src}", timeout)
        self.emit(cluster, "load", "done", m.name, t0)

    def save_output(self, cluster: ClusterSpec, src: str, dest: str, *, timeout: float = 600.0) -> SavedOutput | None:
        """Copy ``<shared_dir>/<cluster><src>`` to ``dest`` on the master host, size-checked and with a
        ``MANIFEST.sha256`` (:func:`save_shared_script`)."""
        t0 = time.monotonic()
        m, source = cluster.master, self._shared(cluster, src)
        refuse_save_inside_clusters(m, dest)
        self.emit(cluster, "save", f"{source} -> {dest}", m.name, t0)
        out = self._run({m.name: save_shared_script(source, dest)}, f"saving {source}", timeout)[m.name]
        return self._saved(cluster, out, dest, t0)

    def restore_output(self, cluster: ClusterSpec, saved: SavedOutput, dest: str, *, timeout: float = 600.0) -> None:
        """Copy the checked saved output back to ``<shared_dir>/<cluster><dest>`` (without its manifest)."""
        t0 = time.monotonic()
        m, target = cluster.master, self._shared(cluster, dest)
        self.emit(cluster, "restore", f"{saved.path} -> {target}", m.name, t0)
        self._run({m.name: Script("{check} && rm -rf {t} && mkdir -p \"$(dirname {t})\" && cp -R {s} {t} && "
                                  "rm -f {t}/MANIFEST.sha256", check=check_saved_script(saved), s=saved.path,
                                  t=target)}, f"restoring {saved.path}", timeout)
        self.emit(cluster, "restore", "done", m.name, t0)

    def teardown(self, cluster: ClusterSpec, *, wipe: bool = True, timeout: float = 120.0) -> OpResult:
        """Stop every daemon (and delete the cluster's directories on the nodes; with ``wipe``, its
        directory on the shared file system too, once its output was saved elsewhere)."""
        res = super().teardown(cluster, wipe=wipe, timeout=timeout)
        if wipe and cluster.framework.shared_dir:
            self._run({cluster.master.name: Script("rm -rf {d}", d=self.data_dir(cluster))},
                      "deleting the cluster's shared directory", timeout)
        return res
