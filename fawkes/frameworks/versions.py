"""Which versions of a registered framework's components the hosts have, read from their jar names (no JVM
is started), and which of them fawkes has run live (issue 30, item 3: a Hadoop 3 HDFS or a Spark 3.5
installation passed the directory check of ``fawkes framework add`` and was never run).

``fawkes framework add`` prints them (a version fawkes has not run is a warning, not a refusal: it may
work) and ``fawkes inventory probe --framework NAME`` reports them per host with the kind's own check.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence

from fawkes.frameworks.spec import FrameworkPaths
from fawkes.ssh.shell import Script

#: component -> the version prefixes fawkes has run live (the lab's distributions, docs/frameworks.md)
RUN_LIVE: dict[str, tuple[str, ...]] = {"spark": ("4.",), "hadoop": ("2.7.3",), "flink": ("2.",),
                                        "distributed": ("2026.",)}
_LINE = re.compile(r"(spark|hadoop|flink|distributed) ([0-9][0-9A-Za-z.+_-]{0,40})")

# one jar's version: the file names under a directory, the first that matches, as "COMPONENT VERSION"
_JAR = ("for f in {dir}/{glob}; do [ -e \"$f\" ] && basename \"$f\"; done 2>/dev/null "
        "| sed -n {expr} | head -n 1; ")


def version_script(framework: FrameworkPaths, python: str | None = None) -> Script:
    """The read-only script printing one ``COMPONENT VERSION`` line per component found on a host."""
    parts: dict[str, object] = {}
    text = ""

    def jar(component: str, directory: str, glob: str, regex: str) -> None:
        nonlocal text
        i = len(parts)
        text += _JAR.replace("{dir}", f"{{d{i}}}").replace("{glob}", glob).replace("{expr}", f"{{e{i}}}")
        parts[f"d{i}"], parts[f"e{i}"] = directory, f"s/^{regex}\\.jar$/{component} \\1/p"

    if framework.spark_home:
        jar("spark", framework.spark_home + "/jars", "spark-core_*.jar", r"spark-core_[0-9.]*-\(.*\)")
    if framework.hdfs_jars:
        jar("hadoop", framework.hdfs_jars + "/jars", "hadoop-common-*.jar", r"hadoop-common-\(.*\)")
    if framework.hadoop_home:
        jar("hadoop", framework.hadoop_home + "/share/hadoop/common", "hadoop-common-*.jar", r"hadoop-common-\(.*\)")
    if framework.flink_home:
        jar("flink", framework.flink_home + "/lib", "flink-dist*.jar", r"flink-dist[_0-9.]*-\(.*\)")
    if framework.kind == "dask":  # its hosts' Python (DaskDriver.python: the framework's, else fawkes' own)
        text += "{py} -c 'import distributed; print(\"distributed\", distributed.__version__)' 2>/dev/null; "
        parts["py"] = python or framework.python or sys.executable
    return Script(text + "true", **parts)


def parse_versions(stdout: str) -> dict[str, str]:
    """``COMPONENT VERSION`` lines as a mapping (anything else is ignored)."""
    out: dict[str, str] = {}
    for ln in stdout.splitlines():
        m = _LINE.fullmatch(ln.strip())
        if m:
            out.setdefault(m[1], m[2])
    return out


def versions_on_hosts(executor, framework: FrameworkPaths, hosts: Sequence[str],
                      python: str | None = None) -> dict[str, dict[str, str] | None]:
    """Per host its components' versions (None: the host did not answer)."""
    script = version_script(framework, python)
    return {h: parse_versions(r.stdout) if r.ok else None
            for h, r in executor.run(list(hosts), script, timeout=60).items()}


def version_notes(versions: Mapping[str, str]) -> list[str]:
    """Each component whose version fawkes has not run live, as ``spark 3.5.1: fawkes has run spark 4.*``."""
    notes = []
    for comp, v in versions.items():
        known = RUN_LIVE.get(comp, ())
        if known and not any(v.startswith(k) for k in known):
            notes.append(f"{comp} {v}: fawkes has run {comp} " + " or ".join(k + ("*" if k.endswith(".") else "")
                                                                            for k in known) + " only")
    return notes


def differing(by_host: Mapping[str, Mapping[str, str] | None]) -> list[str]:
    """Components whose version differs between hosts, as ``spark: 4.3.0 (h1, h2), 4.2.1 (h3)``."""
    out = []
    comps = sorted({c for v in by_host.values() if v for c in v})
    for c in comps:
        seen: dict[str, list[str]] = {}
        for h, v in by_host.items():
            if v is not None:
                seen.setdefault(v.get(c, "missing"), []).append(h)
        if len(seen) > 1:
            out.append(f"{c}: " + ", ".join(f"{ver} ({', '.join(hs)})" for ver, hs in sorted(seen.items())))
    return out
