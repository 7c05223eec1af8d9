"""Spark event logs -> job trace rows, so ``fawkes simulate --trace`` can replay a real workload.

One trace row per Spark application (the unit an admin submits and fawkes queues):

* ``submit_s``: the application's start, seconds after the earliest application read;
* ``maps`` / ``reduces``: successful tasks of the stages that do not / do read a shuffle, each task
  index counted once.  A stage reads a shuffle when it has parent stages ("Parent IDs", Spark >= 1.5)
  or when one of its tasks fetched shuffle blocks (Task Metrics "Shuffle Read Metrics": what Spark
  <= 1.4 logs, which have no "Parent IDs", say);
* ``map_s`` / ``reduce_s``: their mean slot time (finish - launch), so the simulator replays the
  measured task times instead of the DAS-4 cost model's;
* ``input_bytes``: bytes read by the map-side tasks (Input Metrics), each input RDD counted once:
  the size of the data the application works on, not the bytes it read (``sortBy`` samples its input
  in extra jobs that read it again; two actions on one input read it twice).  ``read_bytes`` is what
  the tasks read, every read counted; :func:`to_trace` lists the applications that read their input
  more than once (``reread``), and ``fawkes trace from-spark`` says so.  Spark <= 1.4 logs name no RDD
  parents, so there each map stage's input counts as its own; 0 for an application that reads no
  input;
* ``app``: the cost-model profile that gives the node-type penalty and the output volume (the DP
  cost): ``sort`` (I/O-bound) when the application wrote at least half as many bytes as it read,
  else ``wordcount`` (compute-bound); or the one the caller names.

Readable logs: Spark's defaults since 3.x/4.x (a rolling directory ``eventlog_v2_<app>`` of
``events_<n>_<app>[.zstd]`` files, zstd-compressed), single-file logs, plain or ``.zstd``, and Spark
1.0-1.2's directory per application (``<app>/EVENT_LOG_<n>`` beside ``SPARK_VERSION_<v>`` and, once the
application ended, ``APPLICATION_COMPLETE``).  Logs compressed with lz4, lzf or snappy are refused
with the setting that avoids them; a ``.zstd`` file that ends inside a compressed frame is reported
as truncated.
Applications without an ApplicationEnd event (still running or crashed) and applications that
ran no task are skipped and counted.  Files are streamed: memory grows with stages, not tasks.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from fawkes.errors import ConfigError
from fawkes.traces.trace import TraceRow

ROLLING_PREFIX = "eventlog_v2_"
_LEGACY_FILE = re.compile(r"^EVENT_LOG_(\d+)$")  # Spark <= 1.2: one directory per application
_LEGACY_CODEC = "COMPRESSION_CODEC_"
_ROLLING_FILE = re.compile(r"^events_(\d+)_")
_UNSUPPORTED = {".lz4": "lz4", ".lzf": "lzf", ".snappy": "snappy"}
# the events read; every other line (most of a log: TaskStart, metrics updates, ...) is not parsed
_WANTED = tuple(f'{{"Event":"SparkListener{e}"'.encode() for e in
                ("TaskEnd", "StageSubmitted", "StageCompleted", "ApplicationStart", "ApplicationEnd"))
#: output/input ratio from which an application counts as I/O-bound (the Sort profile)
SORT_SELECTIVITY = 0.5
# Shuffle Read Metrics that show a task read shuffle data (Spark 1.x-4.x names; zeros in map stages)
_SHUFFLE_READ = ("Remote Blocks Fetched", "Local Blocks Fetched", "Remote Bytes Read", "Local Bytes Read",
                 "Total Records Read")


@dataclass
class _Stage:
    has_parents: bool = False
    shuffle_read: bool = False  # a task fetched shuffle blocks (how Spark <= 1.4 logs show a reduce stage)
    sources: tuple[int, ...] = ()  # ids of the RDDs without parents it reads: same ids = the same input
    done: set[int] = field(default_factory=set)  # task indexes that succeeded (speculative copies once)
    slot_ms: int = 0
    bytes_read: int = 0


@dataclass(frozen=True)
class AppSummary:
    """What one application's log says, in the trace's terms."""

    app_id: str
    name: str
    start_ms: int
    end_ms: int | None
    maps: int
    reduces: int
    map_s: float | None
    reduce_s: float | None
    input_bytes: int
    output_bytes: int
    read_bytes: int = 0  # Input Metrics of the map-side tasks, every read counted (input_bytes: each input once)

    @property
    def complete(self) -> bool:
        return self.end_ms is not None


def find_apps(path: Path) -> list[list[Path]]:
    """The applications under ``path``, each as its list of log files in order.

    ``path`` is one log file, one rolling log directory (``eventlog_v2_*``), or a directory
    (``spark.eventLog.dir``) holding such files and directories.
    """
    if path.is_file():
        return [[path]]
    if not path.is_dir():
        raise ConfigError(str(path), "no such file or directory")
    if path.resolve().name.startswith(ROLLING_PREFIX):  # resolved: "." may be one
        return [_rolling_files(path)]
    if (legacy := _legacy_files(path)) is not None:
        return [legacy]
    apps = []
    for p in sorted(path.iterdir()):
        if p.name.startswith(".") or p.name.endswith(".crc"):
            continue
        if p.is_dir() and p.name.startswith(ROLLING_PREFIX):
            apps.append(_rolling_files(p))
        elif p.is_dir() and (legacy := _legacy_files(p)) is not None:
            apps.append(legacy)
        elif p.is_file():
            apps.append([p])
    return apps


def _rolling_files(d: Path) -> list[Path]:
    parts = [(int(m.group(1)), p) for p in d.iterdir() if (m := _ROLLING_FILE.match(p.name)) and p.is_file()]
    if not parts:
        raise ConfigError(str(d), "rolling event log directory without events_<n>_<app> files")
    return [p for _, p in sorted(parts)]


def _legacy_files(d: Path) -> list[Path] | None:
    """Spark 1.0-1.2's log directory of one application: its ``EVENT_LOG_<n>`` files in order (None:
    not such a directory).  Its ``APPLICATION_COMPLETE`` marker is not needed: the log's
    ApplicationEnd event says the same."""
    parts = [(int(m.group(1)), p) for p in d.iterdir() if (m := _LEGACY_FILE.match(p.name)) and p.is_file()]
    if not parts:
        return None
    codec = next((p.name[len(_LEGACY_CODEC):] for p in d.iterdir() if p.name.startswith(_LEGACY_CODEC)), None)
    if codec is not None:
        raise ConfigError(str(d), f"Spark 1.x event log compressed with {codec}: not readable here; "
                          "write logs with spark.eventLog.compress=false")
    return [p for _, p in sorted(parts)]


def _open(path: Path):
    suffix = path.suffix if path.suffix != ".inprogress" else Path(path.stem).suffix
    if suffix in _UNSUPPORTED:
        raise ConfigError(str(path), f"{_UNSUPPORTED[suffix]}-compressed event log: not readable here; write "
                          "logs with spark.eventLog.compression.codec=zstd (Spark's default) or "
                          "spark.eventLog.compress=false")
    try:
        raw = path.open("rb")
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read: {exc.strerror or exc}") from None
    return raw


def _zstd_lines(path: Path, raw) -> Iterator[bytes]:
    """The lines of a zstd stream of one or more frames; a stream that ends inside a frame is an error
    (zstandard's stream reader returns the part before the cut as if it were the whole file)."""
    import zstandard

    dctx = zstandard.ZstdDecompressor()
    dobj, inside, rest = dctx.decompressobj(), False, b""
    while chunk := raw.read(1 << 20):
        while chunk:
            try:
                out = dobj.decompress(chunk)
            except zstandard.ZstdError as exc:
                raise ConfigError(str(path), f"cannot decompress: {exc}") from None
            inside = not dobj.eof
            chunk = dobj.unused_data if dobj.eof else b""
            if dobj.eof:
                dobj = dctx.decompressobj()
            if out:
                *lines, rest = (rest + out).split(b"\n")
                for ln in lines:
                    yield ln + b"\n"
    if inside:
        raise ConfigError(str(path), "truncated zstd stream: the file ends inside a compressed frame "
                          "(cut short while being written or copied)")
    if rest:
        yield rest


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    with _open(path) as f:
        if path.suffix == ".zstd" or path.name.endswith(".zstd.inprogress"):
            yield from enumerate(_zstd_lines(path, f), 1)
        else:
            yield from enumerate(f if isinstance(f, io.BufferedReader) else io.BufferedReader(f, 1 << 20), 1)


def read_app(files: list[Path]) -> AppSummary:
    """Summarise one application from its log files (a single file, or a rolling log's parts)."""
    app_id = name = ""
    start = end = None
    stages: dict[int, _Stage] = {}
    written = 0
    for path in files:
        pending: tuple[int, bytes] | None = None  # a bad line is an error unless it is the file's last
        for lineno, line in _lines(path):
            if pending is not None:
                raise ConfigError(str(path), "not a Spark event (JSON) line", line=pending[0])
            if not line.startswith(_WANTED):
                if not line.startswith(b'{"Event":'):
                    pending = (lineno, line)  # Spark tolerates a truncated last line; so do we
                continue
            try:
                e = json.loads(line)
            except ValueError:
                pending = (lineno, line)
                continue
            kind = e["Event"][len("SparkListener"):]
            if kind == "TaskEnd":
                if (e.get("Task End Reason") or {}).get("Reason") != "Success":
                    continue
                info = e.get("Task Info") or {}
                st = stages.setdefault(int(e.get("Stage ID", -1)), _Stage())
                idx = int(info.get("Index", -1))
                if idx in st.done:
                    continue
                st.done.add(idx)
                metrics = e.get("Task Metrics") or {}
                written += int((metrics.get("Output Metrics") or {}).get("Bytes Written", 0))
                st.slot_ms += max(0, int(info.get("Finish Time", 0)) - int(info.get("Launch Time", 0)))
                st.bytes_read += int((metrics.get("Input Metrics") or {}).get("Bytes Read", 0))
                if not st.shuffle_read:
                    sr = metrics.get("Shuffle Read Metrics") or {}
                    st.shuffle_read = any(int(sr.get(k, 0) or 0) > 0 for k in _SHUFFLE_READ)
            elif kind in ("StageSubmitted", "StageCompleted"):
                si = e.get("Stage Info") or {}
                st = stages.setdefault(int(si.get("Stage ID", -1)), _Stage())
                st.has_parents = bool(si.get("Parent IDs"))
                st.sources = tuple(sorted(int(r.get("RDD ID", -1)) for r in si.get("RDD Info") or ()
                                          if not r.get("Parent IDs")))
            elif kind == "ApplicationStart":
                app_id, name, start = str(e.get("App ID", "")), str(e.get("App Name", "")), int(e["Timestamp"])
            else:
                end = int(e["Timestamp"])
    if start is None:
        raise ConfigError(str(files[0]), "no SparkListenerApplicationStart event: not a Spark event log")
    maps = [s for s in stages.values() if not (s.has_parents or s.shuffle_read) and s.done]
    reds = [s for s in stages.values() if (s.has_parents or s.shuffle_read) and s.done]
    n_m, n_r = sum(len(s.done) for s in maps), sum(len(s.done) for s in reds)
    read: dict[tuple[int, ...], int] = {}  # per input: the most any stage read of it
    for s in maps:
        read[s.sources] = max(read.get(s.sources, 0), s.bytes_read)
    return AppSummary(
        app_id=app_id or files[0].name, name=name, start_ms=start, end_ms=end, maps=n_m, reduces=n_r,
        map_s=sum(s.slot_ms for s in maps) / n_m / 1000 if n_m else None,
        reduce_s=sum(s.slot_ms for s in reds) / n_r / 1000 if n_r else None,
        input_bytes=sum(read.values()), output_bytes=written, read_bytes=sum(s.bytes_read for s in maps),
    )


def app_profile_for(s: AppSummary) -> str:
    """``sort`` for an I/O-bound application (output >= half its input), else ``wordcount``."""
    if s.input_bytes > 0 and s.output_bytes >= SORT_SELECTIVITY * s.input_bytes:
        return "sort"
    return "wordcount"


@dataclass
class Conversion:
    rows: list[TraceRow]
    skipped_incomplete: list[str] = field(default_factory=list)
    skipped_no_tasks: list[str] = field(default_factory=list)
    #: (application, read_bytes / input_bytes) of the converted applications that read their input
    #: more than once; their input_bytes counts it once
    reread: list[tuple[str, float]] = field(default_factory=list)


def to_trace(sources: list[tuple[str, Path]], *, app: str | None = None,
             progress: Callable[[int, int], None] | None = None) -> Conversion:
    """Trace rows of every complete application under each ``(cluster, path)`` source, in submit order.

    ``app`` forces one cost-model profile for every row; by default :func:`app_profile_for`.
    ``progress(done, total)`` is called after each application.
    """
    found = [(cluster, files) for cluster, path in sources for files in find_apps(path)]
    if not found:
        raise ConfigError(", ".join(str(p) for _, p in sources), "no Spark event logs found")
    apps: list[tuple[str, AppSummary]] = []
    out = Conversion([])
    for k, (cluster, files) in enumerate(found, 1):
        try:
            s = read_app(files)
        except ConfigError:
            if not any(f.name.endswith(".inprogress") for f in files):
                raise
            s = None  # an application that has just started: nothing (readable) written yet
        if s is None:
            out.skipped_incomplete.append(files[0].name)
        elif not s.complete:
            out.skipped_incomplete.append(s.app_id)
        elif s.maps == 0:
            out.skipped_no_tasks.append(s.app_id)
        else:
            apps.append((cluster, s))
            if s.read_bytes > 1.01 * s.input_bytes > 0:
                out.reread.append((s.app_id, s.read_bytes / s.input_bytes))
        if progress:
            progress(k, len(found))
    if apps:
        t0 = min(s.start_ms for _, s in apps)
        apps.sort(key=lambda a: (a[1].start_ms, a[1].app_id))
        out.rows = [
            TraceRow((s.start_ms - t0) / 1000, cluster, app or app_profile_for(s), float(s.input_bytes), s.maps,
                     s.reduces, map_s=s.map_s, reduce_s=s.reduce_s, job=s.app_id)
            for cluster, s in apps
        ]
    return out
