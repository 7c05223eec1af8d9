"""Class-data archives (AppCDS) for the JVMs of an installation: daemons that start in about half the CPU.

A JVM spends most of its start-up loading and verifying classes: a Spark master or worker 3-3.5 CPU s,
a NameNode 1.6 (Java 17, C1 only, this machine; ``bench/bench_jvm_archive.py``).  A class-data archive
holds those classes parsed and verified; every JVM started with ``-XX:SharedArchiveFile`` maps it (the
pages are shared between the JVMs of a host) instead.  On a host of a fraction of a core this is what a
grow waits for.

The cluster option ``jvm_archive_dir`` (off when empty) names a directory on the hosts that holds, per
installation and Java, ``spark-<key>.jsa`` (Spark's daemons, drivers and executors), ``hdfs-<key>.jsa``
(NameNode, DataNode and the HDFS tools of an ``--hdfs-jars`` install) and ``flink-<key>.jsa`` (JobManager,
TaskManagers and the ``flink run`` client, through ``JVM_ARGS``); :func:`archive_file` says which file.  A
daemon uses its archive only when the file is there (the control script checks); the archive's
classpath (the installation's jars) then goes first on the daemon's classpath, ahead of the cluster's conf
dir, because Java accepts an archive only for a classpath that starts with the one it was built for and
holds no non-empty directory before it.  No jar of these installations holds a file of that conf dir's
names, so the order changes nothing else.  A JVM checks the archive against its jars (size and time) and
Java's build; a stale one is ignored (the JVM starts as without it).  A driver's and its executors'
``spark.*.extraJavaOptions`` name the file without the check: the archive must be on every host.

:func:`ensure` builds the archives for the lab's installations (``fawkes.frameworks.dists``): it starts
each JVM once on loopback with ``-XX:DumpLoadedClassList`` (a master, a worker, a word count's driver and
executor; a NameNode, a DataNode, ``put``, ``cat`` and ``dfsadmin -report``; a JobManager, a TaskManager and
the word count's client), merges the lists and dumps them with ``-Xshare:dump``; about two minutes for the
three, once per installation and Java (cached beside the archive).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

FAMILIES = ("spark", "hdfs", "flink")
#: the flags the capture runs with (the lab's daemon_jvm_opts: an archive is the same for any GC or JIT)
CAPTURE_OPTS = ["-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1"]
APPS = Path(__file__).resolve().parent.parent / "apps"


def lab_dir() -> str:
    """Where the lab keeps its archives (beside its distributions), "" if that path is no option value."""
    from fawkes.frameworks.dists import cache_root
    from fawkes.frameworks.spec import option_path

    d = str(cache_root() / "jvm-archives")
    return d if option_path(d) else ""


def archive_file(archive_dir: str, family: str, home: str, java: str) -> str:
    """The archive of ``family`` (:data:`FAMILIES`) for the installation at ``home`` run by ``java`` (the
    framework record's: ``java`` or JAVA_HOME/bin/java) in ``archive_dir``."""
    if family not in FAMILIES:
        raise ValueError(f"unknown archive family {family!r}")
    key = hashlib.sha256(f"{home}\0{java}".encode()).hexdigest()[:12]
    return f"{archive_dir.rstrip('/')}/{family}-{key}.jsa"


def classpath_head(family: str, home: str) -> str:
    """The classpath the archive of ``family`` is built for, which goes first on a JVM's that uses it (Flink's:
    its scripts' own, ``constructFlinkClassPath``: every jar of lib/, flink-dist last)."""
    if family == "flink":
        r = subprocess.run(["bash", "-c", 'FLINK_LIB_DIR="$1/lib"; . "$1/bin/config.sh" >/dev/null 2>&1; '
                                          'constructFlinkClassPath', "cp", home],
                           capture_output=True, text=True, timeout=60, env={**os.environ, "FLINK_HOME": home})
        if r.returncode != 0 or not r.stdout.strip():
            raise RuntimeError(f"Flink's classpath: {r.stderr[-300:]}")
        return r.stdout.strip().splitlines()[-1]
    return f"{home}/jars/*"


# ------------------------------------------------------------------------------------------ building

def _identity(family: str, home: Path, java: str) -> str:
    """What the archive depends on: Java's binary and every jar (name, size, time)."""
    real = Path(shutil.which(java) or java).resolve()
    st = real.stat()
    parts = [f"{family} {real} {st.st_size} {int(st.st_mtime)}"]
    for jar in sorted((home / ("lib" if family == "flink" else "jars")).glob("*.jar")):
        s = jar.stat()
        parts.append(f"{jar.name} {s.st_size} {int(s.st_mtime)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def ensure(archive_dir: Path, family: str, home: Path, java: str = "java", *,
           progress: Callable[[str], None] | None = None) -> Path | None:
    """The archive of ``family`` for ``home`` and ``java`` in ``archive_dir``, built if missing or stale;
    None (and a line through ``progress``) when it cannot be built: the JVMs then start without one."""
    out = Path(archive_file(str(archive_dir), family, str(home), java))
    try:
        ident = _identity(family, home, java)
    except OSError as exc:
        if progress:
            progress(f"no {family} class-data archive ({exc}); its JVMs start without one")
        return None
    stamp = out.with_suffix(".id")
    if out.is_file() and stamp.is_file() and stamp.read_text() == ident:
        return out
    archive_dir.mkdir(parents=True, exist_ok=True)
    with open(archive_dir / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two test runs start at once: one builds, the other waits
        if out.is_file() and stamp.is_file() and stamp.read_text() == ident:
            return out
        t0 = time.monotonic()
        if progress:
            progress(f"building the {family} class-data archive (once per installation and Java, ~1 min)")
        try:
            with tempfile.TemporaryDirectory(prefix=f"fawkes-cds-{family}-") as tmp:
                capture = {"spark": _capture_spark, "hdfs": _capture_hdfs, "flink": _capture_flink}[family]
                lists = capture(Path(tmp), home, java)
                classes = _merge(lists)
                listing = Path(tmp) / "classes.lst"
                listing.write_text("\n".join(classes) + "\n")
                part = out.with_suffix(".part")
                part.unlink(missing_ok=True)
                r = subprocess.run([java, "-Xshare:dump", f"-XX:SharedClassListFile={listing}",
                                    f"-XX:SharedArchiveFile={part}", "-cp", classpath_head(family, str(home))],
                                   capture_output=True, text=True, timeout=600)
                if r.returncode != 0 or not part.is_file():
                    raise RuntimeError(f"-Xshare:dump exited {r.returncode}: {r.stdout[-300:]}{r.stderr[-300:]}")
                os.replace(part, out)
                stamp.write_text(ident)
        except (OSError, RuntimeError, subprocess.SubprocessError) as exc:
            if progress:
                progress(f"no {family} class-data archive ({exc}); its JVMs start without one")
            return None
        if progress:
            progress(f"{family} class-data archive: {out} ({len(classes)} classes, "
                     f"{time.monotonic() - t0:.0f} s)")
        return out


def _merge(lists: list[Path]) -> list[str]:
    seen: dict[str, None] = {}
    for f in lists:
        if not f.is_file():
            continue
        for line in f.read_text().splitlines():
            # generated proxies and lambda forms are made at run time: nothing to archive by name
            if line and not line.startswith("#") and "$Proxy" not in line:
                seen.setdefault(line, None)
    if not seen:
        raise RuntimeError("no class was listed")
    return list(seen)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(what: str, fn: Callable[[], bool], procs: list[subprocess.Popen], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if fn():
            return
        for p in procs:
            if p.poll() is not None:
                raise RuntimeError(f"{what}: {p.args[0] if isinstance(p.args, list) else p.args} exited "
                                   f"{p.returncode}")
        time.sleep(0.2)
    raise RuntimeError(f"timed out waiting for {what}")


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
        return True
    return False


@contextlib.contextmanager
def _daemons():
    """Started processes, stopped (TERM, then KILL) on the way out, last first."""
    procs: list[subprocess.Popen] = []
    try:
        yield procs
    finally:
        for p in reversed(procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()


def _java_home(java: str) -> dict[str, str]:
    """``JAVA_HOME`` for the frameworks' scripts when ``java`` is not the one on the PATH."""
    found = shutil.which(java)
    return {"JAVA_HOME": str(Path(found).resolve().parent.parent)} if found and java != "java" else {}


def _capture_spark(tmp: Path, home: Path, java: str) -> list[Path]:
    """Class lists of a master, a worker, and a word count's driver and executor, on loopback."""
    conf, logs, work = tmp / "conf", tmp / "logs", tmp / "work"
    for d in (conf, logs, work):
        d.mkdir()
    port, ui, wui = _free_port(), _free_port(), _free_port()
    opts = " ".join(CAPTURE_OPTS)
    head = classpath_head("spark", str(home))
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_CONF_DIR": str(conf), "SPARK_LOG_DIR": str(logs),
           "SPARK_DAEMON_CLASSPATH": head, "SPARK_DAEMON_MEMORY": "128m", "SPARK_NO_DAEMONIZE": "1",
           "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
           **_java_home(java)}
    lists = {n: tmp / f"{n}.lst" for n in ("master", "worker", "driver", "executor")}
    cls = str(home / "bin" / "spark-class")
    src = tmp / "input.txt"
    src.write_text("a b c a\n" * 200)
    with _daemons() as procs:
        procs.append(subprocess.Popen(
            [cls, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)], env={**env, "SPARK_DAEMON_JAVA_OPTS": f"{opts} "
                                                                            f"-XX:DumpLoadedClassList={lists['master']}"},
            stdout=(logs / "master.out").open("wb"), stderr=subprocess.STDOUT))
        _wait("the capture's Spark master", lambda: _listening(port) and _listening(ui), procs)
        wlog = logs / "worker.out"
        procs.append(subprocess.Popen(
            [cls, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--webui-port", str(wui),
             "--cores", "1", "--memory", "1g", "--work-dir", str(work), f"spark://127.0.0.1:{port}"],
            env={**env, "SPARK_DAEMON_JAVA_OPTS": f"{opts} -XX:DumpLoadedClassList={lists['worker']}"},
            stdout=wlog.open("wb"), stderr=subprocess.STDOUT))
        _wait("the capture's Spark worker", lambda: b"Successfully registered" in wlog.read_bytes(), procs)
        conf_args = {
            "spark.master": f"spark://127.0.0.1:{port}", "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1", "spark.executor.memory": "512m",
            "spark.driver.extraClassPath": head, "spark.executor.extraClassPath": head,
            "spark.driver.extraJavaOptions": f"{opts} -XX:DumpLoadedClassList={lists['driver']}",
            "spark.executor.extraJavaOptions": f"{opts} -XX:DumpLoadedClassList={lists['executor']}",
            "spark.ui.port": str(_free_port()), "spark.port.maxRetries": "0"}
        argv = [str(home / "bin" / "spark-submit"), "--driver-memory", "512m"]
        for k, v in conf_args.items():
            argv += ["--conf", f"{k}={v}"]
        argv += [str(APPS / "wordcount.py"), f"file://{src}", f"file://{tmp / 'out'}", "2", "0"]
        r = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, cwd=tmp)
        if r.returncode != 0:
            raise RuntimeError(f"the capture's word count exited {r.returncode}: {r.stderr[-400:]}")
    return list(lists.values())


def _capture_hdfs(tmp: Path, home: Path, java: str) -> list[Path]:
    """Class lists of a NameNode (format, then run), a DataNode and the tools (put, cat, dfsadmin)."""
    conf, name, data = tmp / "conf", tmp / "name", tmp / "data"
    conf.mkdir()
    rpc, http, xfer, dhttp, ipc = (_free_port() for _ in range(5))
    prop = "<property><name>{}</name><value>{}</value></property>"
    (conf / "core-site.xml").write_text(
        f"<?xml version=\"1.0\"?><configuration>{prop.format('fs.defaultFS', f'hdfs://127.0.0.1:{rpc}')}"
        "</configuration>\n")
    site = {"dfs.namenode.name.dir": name, "dfs.datanode.data.dir": data, "dfs.replication": 1,
            "dfs.namenode.http-address": f"127.0.0.1:{http}", "dfs.datanode.address": f"127.0.0.1:{xfer}",
            "dfs.datanode.http.address": f"127.0.0.1:{dhttp}", "dfs.datanode.ipc.address": f"127.0.0.1:{ipc}",
            "dfs.namenode.secondary.http-address": "127.0.0.1:0", "dfs.webhdfs.enabled": "false",
            "dfs.heartbeat.interval": 1}
    (conf / "hdfs-site.xml").write_text("<?xml version=\"1.0\"?><configuration>" + "".join(
        prop.format(k, v) for k, v in site.items()) + "</configuration>\n")
    (conf / "log4j.properties").write_text(
        "log4j.rootLogger=WARN,console\nlog4j.appender.console=org.apache.log4j.ConsoleAppender\n"
        "log4j.appender.console.layout=org.apache.log4j.PatternLayout\n")
    cp = f"{classpath_head('hdfs', str(home))}:{conf}:{home}"
    lists: dict[str, Path] = {}

    def jvm(label: str, cls: str, *args: str) -> list[str]:
        lists[label] = tmp / f"{label}.lst"
        return [java, "-Xmx256m", *CAPTURE_OPTS, f"-XX:DumpLoadedClassList={lists[label]}", "-cp", cp, cls, *args]

    def tool(label: str, cls: str, *args: str) -> str:
        r = subprocess.run(jvm(label, cls, *args), capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            raise RuntimeError(f"the capture's {label} exited {r.returncode}: {r.stderr[-400:]}")
        return r.stdout

    nn, dn = "org.apache.hadoop.hdfs.server.namenode.NameNode", "org.apache.hadoop.hdfs.server.datanode.DataNode"
    tool("format", nn, "-format", "-nonInteractive")
    src = tmp / "input.txt"
    src.write_text("a b c\n" * 100)
    with _daemons() as procs:
        procs.append(subprocess.Popen(jvm("namenode", nn), stdout=(tmp / "nn.out").open("wb"),
                                      stderr=subprocess.STDOUT))
        _wait("the capture's NameNode", lambda: _listening(rpc) and _listening(http), procs)
        procs.append(subprocess.Popen(jvm("datanode", dn), stdout=(tmp / "dn.out").open("wb"),
                                      stderr=subprocess.STDOUT))
        _wait("the capture's DataNode", lambda: _listening(xfer), procs)
        admin = "org.apache.hadoop.hdfs.tools.DFSAdmin"
        _wait("the capture's DataNode registered", lambda: "Live datanodes (1)" in tool("report", admin, "-report"),
              procs, timeout=120)
        shell = "org.apache.hadoop.fs.FsShell"
        tool("put", shell, "-put", str(src), "/input.txt")
        tool("cat", shell, "-cat", "/input.txt")
    return list(lists.values())


def _capture_flink(tmp: Path, home: Path, java: str) -> list[Path]:
    """Class lists of a JobManager, a TaskManager and a client running the lab's word count, on loopback."""
    import json

    from fawkes.frameworks import dists
    from fawkes.frameworks.render import FLINK_JAVA_OPENS

    conf, logs = tmp / "conf", tmp / "logs"
    conf.mkdir()
    logs.mkdir()
    rpc, rest = _free_port(), _free_port()
    lists = {n: tmp / f"{n}.lst" for n in ("jobmanager", "taskmanager", "client")}
    opts = f"{FLINK_JAVA_OPENS} {' '.join(CAPTURE_OPTS)}"
    loop = json.dumps("127.0.0.1")
    (conf / "config.yaml").write_text(
        f"env:\n  java:\n    opts:\n      all: {json.dumps(opts)}\n"
        + "".join(f"      {n}: {json.dumps(f'-XX:DumpLoadedClassList={f}')}\n" for n, f in lists.items())
        + f"jobmanager:\n  rpc:\n    address: {loop}\n    port: {rpc}\n  bind-host: {loop}\n"
        "  memory:\n    process:\n      size: 768m\n"
        f"taskmanager:\n  host: {loop}\n  bind-host: {loop}\n  numberOfTaskSlots: 1\n"
        "  memory:\n    process:\n      size: 1024m\n    managed:\n      fraction: 0.1\n"
        f"rest:\n  address: {loop}\n  bind-address: {loop}\n  port: {rest}\n"
        f"io:\n  tmp:\n    dirs: {json.dumps(str(tmp))}\n")
    env = {**os.environ, "FLINK_HOME": str(home), "FLINK_CONF_DIR": str(conf), "FLINK_LOG_DIR": str(logs),
           "FLINK_PID_DIR": str(tmp), "FLINK_IDENT_STRING": "fawkes-cds", **_java_home(java)}
    src = tmp / "input.txt"
    src.write_text("a b c a\n" * 200)

    def overview() -> dict:
        import urllib.request
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{rest}/overview", timeout=2) as r:
                return json.loads(r.read())
        except (OSError, ValueError):
            return {}

    with _daemons() as procs:
        procs.append(subprocess.Popen([str(home / "bin" / "jobmanager.sh"), "start-foreground"], env=env,
                                      stdout=(logs / "jm.out").open("wb"), stderr=subprocess.STDOUT))
        _wait("the capture's JobManager", lambda: bool(overview()), procs)
        procs.append(subprocess.Popen([str(home / "bin" / "taskmanager.sh"), "start-foreground"], env=env,
                                      stdout=(logs / "tm.out").open("wb"), stderr=subprocess.STDOUT))
        _wait("the capture's TaskManager", lambda: overview().get("taskmanagers", 0) >= 1, procs)
        jar = dists.flink_apps_jar()
        r = subprocess.run([str(home / "bin" / "flink"), "run", "-m", f"127.0.0.1:{rest}", str(jar),
                            f"file://{src}", f"file://{tmp / 'out'}", "1", "0"], env=env, capture_output=True,
                           text=True, timeout=600, cwd=tmp)
        if r.returncode != 0:
            raise RuntimeError(f"the capture's word count exited {r.returncode}: {r.stdout[-300:]}{r.stderr[-300:]}")
    return list(lists.values())


def main(argv: list[str] | None = None) -> int:
    """``python3 -m fawkes.frameworks.jvm_archive DIR spark|hdfs|flink HOME [JAVA]``: build (or find) an archive."""
    args = sys.argv[1:] if argv is None else argv
    if len(args) not in (3, 4) or args[1] not in FAMILIES:
        print("usage: python3 -m fawkes.frameworks.jvm_archive DIR spark|hdfs|flink HOME [JAVA]", file=sys.stderr)
        return 2
    out = ensure(Path(args[0]), args[1], Path(args[2]), args[3] if len(args) == 4 else "java",
                 progress=lambda m: print(m, file=sys.stderr, flush=True))
    if out is None:
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
