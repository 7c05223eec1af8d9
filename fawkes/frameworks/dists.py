"""Obtain and cache the lab's framework distributions (tests and the lab only).

* Flink 2.3: the wheels ``apache-flink`` (bin/, conf/) and ``apache-flink-libraries`` (lib/, plugins/,
  bin/bash-java-utils.jar) from PyPI, downloaded with ``--no-deps`` and unpacked into
  ``~/.cache/fawkes/flink-2.3.0``; the lab's Flink word count (``fawkes/apps/flink``) is compiled against it.

* Spark 4: the ``pyspark`` package from PyPI is a full Spark distribution; ``SPARK_HOME`` is
  the installed package directory (``bin/spark-class``, ``sbin/spark-daemon.sh``, ``jars/``).
* HDFS 2.7.3: the ``pyspark==2.4.8`` sdist carries ``deps/jars/hadoop-hdfs-2.7.3.jar`` and the
  jars NameNode, DataNode, FsShell, DFSAdmin and DFSck need.  We extract only those (about 28
  jars, 27 MB) into ``~/.cache/fawkes/hdfs-2.7.3/jars`` plus the empty ``webapps/*`` dirs that
  Hadoop 2.7's HTTP server looks up on the classpath.

Hadoop 2.7.3 is end-of-life: it exists here so tests can run a real HDFS on one machine.
Never ship it as a production artifact; real deployments bring their own Hadoop 3.x
(``fawkes framework add ... --hadoop-home``).

Everything is idempotent: a second call finds the cache and does nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from fawkes.errors import FawkesError

Progress = Callable[[str], None]

PYSPARK_LAB_VERSION = "4.3.0"
HDFS_SDIST_VERSION = "2.4.8"
HDFS_VERSION = "2.7.3"
FLINK_VERSION = "2.3.0"
#: what a Flink home needs of the two PyPI wheels (``apache-flink`` ships bin/ and conf/, ``apache-flink-libraries``
#: bin/bash-java-utils.jar, lib/ and plugins/): the daemons, the ``flink`` client and the Hadoop file system
FLINK_PARTS = ("bin", "conf", "lib", "plugins")

#: jar-name patterns (without version suffix) needed for NN, DN, FsShell, DFSAdmin, DFSck
HDFS_JARS: tuple[str, ...] = (
    "hadoop-common-2.7.3",
    "hadoop-hdfs-2.7.3",
    "hadoop-auth-2.7.3",
    "hadoop-annotations-2.7.3",
    "hadoop-mapreduce-client-core-2.7.3",
    "guava-14.0.1",
    "protobuf-java-2.5.0",
    "commons-cli-1.2",
    "commons-codec-1.10",
    "commons-collections-3.2.2",
    "commons-configuration-1.6",
    "commons-io-2.4",
    "commons-lang-2.6",
    "commons-logging-1.1.3",
    "commons-daemon",  # optional: absent from the sdist, kept for a Hadoop-provided dir
    "jetty-6.1.26",
    "jetty-util-6.1.26",
    "log4j-1.2.17",
    "slf4j-api-1.7.16",
    "slf4j-log4j12-1.7.16",
    "htrace-core-3.1.0-incubating",
    "jackson-core-asl-1.9.13",
    "jackson-mapper-asl-1.9.13",
    "netty-all-4.1.47.Final",
    "xercesImpl-2.9.1",
    "xmlenc-0.52",
    "javax.servlet-api-3.1.0",
    "javax.ws.rs-api-2.0.1",
    "jsr305-1.3.9",
    "commons-math3-3.4.1",
)
OPTIONAL_JARS = frozenset({"commons-daemon"})
WEBAPPS = ("hdfs", "datanode", "secondary", "journal")


def cache_root() -> Path:
    """``$FAWKES_CACHE`` or ``~/.cache/fawkes``."""
    return Path(os.environ.get("FAWKES_CACHE") or Path.home() / ".cache" / "fawkes")


@dataclass(frozen=True)
class LabDists:
    """Where the lab's distributions are."""

    spark_home: Path
    spark_version: str
    hdfs_home: Path  # holds jars/ and webapps/ (the webapps dir's parent goes on the classpath)
    hdfs_version: str
    java: str
    flink_home: Path
    flink_apps: Path  # the lab's Flink jobs (the word count), compiled against flink_home

    def as_dict(self) -> dict[str, str]:
        return {k: str(v) for k, v in asdict(self).items()}


def _say(progress: Progress | None, msg: str) -> None:
    if progress:
        progress(msg)


# --------------------------------------------------------------------------- Spark
def spark_home(*, install: bool = False, progress: Progress | None = None) -> Path:
    """The installed ``pyspark`` package directory (a full Spark distribution).

    With ``install``, pip-install ``pyspark==4.3.0`` first if missing (from the cached sdist in
    ``<cache>/dl`` when present).
    """
    spec = importlib.util.find_spec("pyspark")
    if spec is None and install:
        sdist = cache_root() / "dl" / f"pyspark-{PYSPARK_LAB_VERSION}.tar.gz"
        target = str(sdist) if sdist.is_file() else f"pyspark=={PYSPARK_LAB_VERSION}"
        _say(progress, f"installing {target} (builds in ~35 s the first time)")
        _pip("install", "--disable-pip-version-check", "-q", target)
        importlib.invalidate_caches()
        spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        raise FawkesError(
            "pyspark is not installed: run `pip install -e .[lab]` (or `fawkes framework dists --install`)"
        )
    home = Path(spec.origin).resolve().parent
    check_spark_home(home)
    return home


def check_spark_home(home: Path) -> None:
    for rel in ("bin/spark-class", "bin/spark-submit", "jars"):
        if not (home / rel).exists():
            raise FawkesError(f"{home} is not a Spark distribution: {rel} is missing")
    if re.search(r"\s", str(home)):
        raise FawkesError(f"Spark home {home!s} contains white space (Spark's scripts do not quote it)")


def spark_version(home: Path) -> str:
    for jar in sorted((home / "jars").glob("spark-core_*.jar")):
        m = re.match(r"spark-core_[\d.]+-(.+)\.jar$", jar.name)
        if m:
            return m.group(1)
    return "unknown"


# --------------------------------------------------------------------------- HDFS 2.7.3
def hdfs_home() -> Path:
    return cache_root() / f"hdfs-{HDFS_VERSION}"


def _wanted(name: str) -> str | None:
    """The HDFS_JARS pattern a jar file name matches, if any."""
    for pat in HDFS_JARS:
        if name == pat + ".jar" or (pat in OPTIONAL_JARS and name.startswith(pat + "-")):
            return pat
    return None


def _pip(*args: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if proc.returncode != 0:
        last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise FawkesError(f"pip {args[0]} failed: {last[0]}")


def _sdist_path(progress: Progress | None) -> Path:
    dl = cache_root() / "dl"
    sdist = dl / f"pyspark-{HDFS_SDIST_VERSION}.tar.gz"
    if sdist.is_file():
        return sdist
    dl.mkdir(parents=True, exist_ok=True)
    _say(progress, f"downloading pyspark=={HDFS_SDIST_VERSION} sdist (220 MB) into {dl}")
    # the sdist's metadata step fails under build isolation; it needs wheel and setuptools<70
    _pip("install", "-q", "--disable-pip-version-check", "wheel", "setuptools<70")
    _pip("download", "-q", "--disable-pip-version-check", "--no-deps", "--no-build-isolation",
         "--no-binary", ":all:", "-d", str(dl), f"pyspark=={HDFS_SDIST_VERSION}")
    if not sdist.is_file():
        raise FawkesError(f"pip download did not produce {sdist}")
    return sdist


@contextlib.contextmanager
def _staged(home: Path):
    """A fresh directory beside ``home`` to fill; once the block ends without error it replaces ``home``
    (renamed into place), otherwise it is deleted: a half-unpacked distribution is never left as ``home``."""
    home.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{home.name}-", dir=home.parent))
    try:
        yield tmp
        tmp.chmod(0o755)  # mkdtemp's 0700 would hide it from the daemons of a hosts' user other than ours
        if home.exists():
            shutil.rmtree(home)
        tmp.rename(home)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def _manifest(home: Path) -> Path:
    return home / "MANIFEST.json"


def _readable(home: Path) -> None:
    """A distribution unpacked by an earlier fawkes into a 0700 directory (mkdtemp's mode) opened to every
    user, as one unpacked now is: the daemons may run as a hosts' user other than the one that unpacked it."""
    try:
        mode = home.stat().st_mode & 0o777
        if mode & 0o055 != 0o055:
            home.chmod(mode | 0o755)
    except OSError:  # not ours to change: the daemons' user may still read it (or the probe says it cannot)
        pass


def hdfs_ready(home: Path | None = None) -> bool:
    home = home or hdfs_home()
    man = _manifest(home)
    if not man.is_file():
        return False
    _readable(home)
    try:
        jars = json.loads(man.read_text())["jars"]
    except (ValueError, KeyError):
        return False
    return all((home / "jars" / j).is_file() for j in jars) and all(
        (home / "webapps" / w).is_dir() for w in WEBAPPS
    )


def ensure_hdfs_jars(*, progress: Progress | None = None) -> Path:
    """Extract the HDFS 2.7.3 jars from the pyspark 2.4.8 sdist into the cache (idempotent)."""
    home = hdfs_home()
    if hdfs_ready(home):
        _say(progress, f"HDFS {HDFS_VERSION} jars already in {home}")
        return home
    sdist = _sdist_path(progress)
    _say(progress, f"extracting HDFS {HDFS_VERSION} jars from {sdist.name}")
    with _staged(home) as tmp:
        (tmp / "jars").mkdir()
        found: dict[str, str] = {}
        with tarfile.open(sdist, "r:gz") as tar:
            for member in tar:
                if not member.isfile() or "/deps/jars/" not in member.name:
                    continue
                base = member.name.rsplit("/", 1)[-1]
                pat = _wanted(base)
                if pat is None:
                    continue
                src = tar.extractfile(member)
                assert src is not None
                with open(tmp / "jars" / base, "wb") as out:
                    shutil.copyfileobj(src, out)
                found[pat] = base
                _say(progress, f"  {base}")
        missing = [p for p in HDFS_JARS if p not in found and p not in OPTIONAL_JARS]
        if missing:
            raise FawkesError(f"{sdist} lacks {', '.join(missing)} (wrong or damaged sdist?)")
        for w in WEBAPPS:
            (tmp / "webapps" / w).mkdir(parents=True)
        digest = hashlib.sha256()
        for j in sorted(found.values()):
            digest.update(j.encode())
        _manifest(tmp).write_text(json.dumps(
            {"hadoop": HDFS_VERSION, "source": sdist.name, "jars": sorted(found.values()),
             "note": "end-of-life Hadoop: tests and the lab only, never production"}, indent=1) + "\n")
    _say(progress, f"HDFS {HDFS_VERSION}: {len(found)} jars in {home / 'jars'}")
    return home


# --------------------------------------------------------------------------- Flink
def flink_home() -> Path:
    return cache_root() / f"flink-{FLINK_VERSION}"


def check_flink_home(home: Path) -> None:
    for rel in ("bin/flink-console.sh", "bin/config.sh", "bin/flink", "bin/bash-java-utils.jar",
                f"lib/flink-dist-{FLINK_VERSION}.jar"):
        if not (home / rel).exists():
            raise FawkesError(f"{home} is not a Flink distribution: {rel} is missing")


def flink_ready(home: Path | None = None) -> bool:
    home = home or flink_home()
    try:
        check_flink_home(home)
    except FawkesError:
        return False
    _readable(home)
    return True


def ensure_flink_home(*, progress: Progress | None = None) -> Path:
    """A Flink home (bin/, conf/, lib/, plugins/) unpacked from the PyPI wheels ``apache-flink`` and
    ``apache-flink-libraries`` (downloaded once with ``--no-deps``: the daemons need none of the Python
    packages their metadata pulls in) into ``<cache>/flink-<version>`` (idempotent)."""
    import zipfile

    home = flink_home()
    if flink_ready(home):
        _say(progress, f"Flink {FLINK_VERSION} already in {home}")
        return home
    dl = cache_root() / "dl" / "flink"
    dl.mkdir(parents=True, exist_ok=True)
    wheels = sorted(dl.glob(f"apache_flink*-{FLINK_VERSION}-*.whl"))
    if len(wheels) < 2:
        _say(progress, f"downloading apache-flink=={FLINK_VERSION} and apache-flink-libraries (about 330 MB) into {dl}")
        _pip("download", "-q", "--disable-pip-version-check", "--no-deps", "--only-binary", ":all:",
             "--python-version", "3.11", "-d", str(dl), f"apache-flink=={FLINK_VERSION}",
             f"apache-flink-libraries=={FLINK_VERSION}")
        wheels = sorted(dl.glob(f"apache_flink*-{FLINK_VERSION}-*.whl"))
    if len(wheels) < 2:
        raise FawkesError(f"pip download did not produce both Flink wheels in {dl}")
    with _staged(home) as tmp:
        for whl in wheels:
            _say(progress, f"unpacking {whl.name}")
            with zipfile.ZipFile(whl) as z:
                for info in z.infolist():
                    parts = info.filename.split("/")
                    if parts[0] != "pyflink" or len(parts) < 3 or parts[1] not in FLINK_PARTS or info.is_dir():
                        continue
                    target = tmp.joinpath(*parts[1:])
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with z.open(info) as src, open(target, "wb") as out:
                        shutil.copyfileobj(src, out)
                    if parts[1] == "bin":
                        target.chmod(0o755)
        (tmp / "log").mkdir(exist_ok=True)
        check_flink_home(tmp)
        (tmp / "MANIFEST.json").write_text(json.dumps(
            {"flink": FLINK_VERSION, "source": [w.name for w in wheels], "parts": list(FLINK_PARTS)}, indent=1) + "\n")
    _say(progress, f"Flink {FLINK_VERSION} in {home}")
    return home


def flink_apps_jar(*, progress: Progress | None = None) -> Path:
    """The lab's Flink jobs (``fawkes/apps/flink/*.java``; the word count is the jar's main class) compiled
    against the cached Flink home into ``<cache>/flink-apps/<digest of the sources>/fawkes-flink-apps.jar``
    (idempotent; needs javac).
    Tests and the lab only: real deployments submit their own jars."""
    home = ensure_flink_home(progress=progress)
    sources = sorted((Path(__file__).resolve().parent.parent / "apps" / "flink").glob("*.java"))
    if not sources:
        raise FawkesError("no Flink job sources in fawkes/apps/flink")
    digest = hashlib.sha256(FLINK_VERSION.encode())
    for src in sources:
        digest.update(src.name.encode() + b"\0" + src.read_bytes())
    out = cache_root() / "flink-apps" / digest.hexdigest()[:16] / "fawkes-flink-apps.jar"
    if out.is_file():
        return out
    javac = shutil.which("javac")
    if not javac:
        raise FawkesError("javac not found: install a JDK (17), e.g. apt-get install default-jdk-headless")
    _say(progress, f"compiling {len(sources)} Flink job(s) into {out}")
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".flink-apps-", dir=out.parent) as tmp:
        cp = f"{home}/lib/flink-dist-{FLINK_VERSION}.jar:{home}/lib/flink-connector-files-{FLINK_VERSION}.jar"
        for argv in ([javac, "-nowarn", "-d", f"{tmp}/classes", "-cp", cp, *map(str, sources)],
                     [str(Path(javac).with_name("jar")), "cfe", f"{tmp}/apps.jar", "fawkes.apps.FlinkWordCount",
                      "-C", f"{tmp}/classes", "."]):
            proc = subprocess.run(argv, capture_output=True, text=True)
            if proc.returncode != 0:
                raise FawkesError(f"{Path(argv[0]).name} failed: {(proc.stderr or proc.stdout).strip()[-300:]}")
        os.replace(f"{tmp}/apps.jar", out)
    return out


def java_bin(java_home: Path | None = None) -> str:
    if java_home:
        return str(Path(java_home) / "bin" / "java")
    env = os.environ.get("JAVA_HOME")
    if env:
        return str(Path(env) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise FawkesError("java not found: install a JDK (17) or pass --java-home")
    return found


def _lab_archives(spark: Path, hdfs: Path, flink: Path, progress: Progress | None) -> None:
    """The class-data archives of the lab's Spark, HDFS and Flink (``sizing.LAB_SIZES['jvm_archive_dir']``),
    built once; a lab without them runs as before, its JVMs starting slower."""
    from fawkes.frameworks import jvm_archive

    d = jvm_archive.lab_dir()
    if d:
        for family, home in (("hdfs", hdfs), ("spark", spark), ("flink", flink)):
            jvm_archive.ensure(Path(d), family, home, "java", progress=progress)


def ensure_lab_dists(*, install: bool = False, progress: Progress | None = None) -> LabDists:
    """Spark home + HDFS 2.7.3 jars, obtained and cached if needed."""
    home = spark_home(install=install, progress=progress)
    _say(progress, f"Spark home: {home}")
    hdfs = ensure_hdfs_jars(progress=progress)
    apps = flink_apps_jar(progress=progress)
    _lab_archives(home, hdfs, flink_home(), progress)
    return LabDists(spark_home=home, spark_version=spark_version(home), hdfs_home=hdfs,
                    hdfs_version=HDFS_VERSION, java=java_bin(), flink_home=flink_home(), flink_apps=apps)
