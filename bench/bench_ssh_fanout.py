#!/usr/bin/env python3
"""Fan-out benchmark: a 1-second command on 1 to 64 lab hosts, fawkes executor vs pdsh.

    python3 bench/bench_ssh_fanout.py [--sizes 1,4,16,64] [--repeat 3] [--keep]

Brings up its own lab (prefix "fwf", a free 10.x.0/24) with the largest size, runs each size
`--repeat` times through (a) a fresh fawkes Executor (connect + run, like pdsh) and (b)
`pdsh -R ssh` with the lab's key and strict known_hosts, and prints median wall times, the
ratio to the 1-host time (target <= 1.5 at the largest size) and the ratio to pdsh (target < 1:
faster than pdsh).
Then the per-command cost on open connections: `--serial` runs of `true` one after another on
one host, and the same number of `true` fan-outs to 8 hosts (median and p90 milliseconds).
The lab is torn down at the end (unless --keep).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.results_meta import meta  # noqa: E402
from fawkes.lab import Lab  # noqa: E402

COMMAND = "sleep 1; hostname"


def run_fawkes(lab: Lab, names: list[str]) -> float:
    t0 = time.monotonic()
    with lab.executor(names, command_timeout=30) as ex:
        res = ex.run(names, COMMAND)
    wall = time.monotonic() - t0
    bad = [h for h, r in res.items() if not r.ok or r.stdout.strip() != h]
    if bad:
        raise SystemExit(f"fawkes executor failed on {bad}: {[res[h].error for h in bad]}")
    return wall


def run_fawkes_warm(lab: Lab, names: list[str]) -> float:
    """The executor's steady state: connections already open (fawkes keeps one per host)."""
    with lab.executor(names, command_timeout=30) as ex:
        ex.run(names, "true")
        t0 = time.monotonic()
        res = ex.run(names, COMMAND)
        wall = time.monotonic() - t0
    if not all(r.ok for r in res.values()):
        raise SystemExit(f"fawkes executor failed: {[r.error for r in res.values() if not r.ok]}")
    return wall


def run_pdsh(lab: Lab, names: list[str]) -> float:
    addrs = [lab.host(n).address for n in names]
    env = {**os.environ, "PDSH_SSH_ARGS": (
        f"-o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile={lab.known_hosts} "
        f"-o IdentitiesOnly=yes -i {lab.key_file} -l%u %h"), "PDSH_RCMD_TYPE": "ssh"}
    t0 = time.monotonic()
    # own session: on a timeout the whole group (pdsh and its ssh children) is killed, by its id
    proc = subprocess.Popen(["pdsh", "-R", "ssh", "-l", "root", "-f", "64", "-t", "10", "-u", "30",
                             "-w", ",".join(addrs), COMMAND], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        raise SystemExit("pdsh did not finish within 60 s (killed)")
    wall = time.monotonic() - t0
    p = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    got = sorted(line.split(": ", 1)[1] for line in p.stdout.splitlines() if ": " in line)
    if p.returncode != 0 or got != sorted(names):
        raise SystemExit(f"pdsh failed (exit {p.returncode}): {p.stderr.strip()[:300]}")
    return wall


def per_command_ms(lab: Lab, names: list[str], n: int) -> tuple[float, float]:
    """Median and p90 wall milliseconds of ``n`` sequential ``true`` runs on already open connections."""
    walls = []
    with lab.executor(names, command_timeout=30) as ex:
        ex.run(names, "true")
        for _ in range(n):
            t0 = time.perf_counter()
            res = ex.run(names, "true")
            walls.append((time.perf_counter() - t0) * 1000)
            if not all(r.ok and r.stdout == "" for r in res.values()):
                raise SystemExit(f"`true` failed: {[r.error for r in res.values() if not r.ok]}")
    walls.sort()
    return statistics.median(walls), walls[int(0.9 * (len(walls) - 1))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1,4,16,64")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--serial", type=int, default=200, help="sequential `true` runs for the per-command cost")
    ap.add_argument("--keep", action="store_true", help="leave the lab running")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args()
    info = meta()
    print(json.dumps(info), flush=True)  # command, commit, date, load: what a results file carries
    sizes = [int(s) for s in args.sizes.split(",")]
    if shutil.which("pdsh") is None:
        raise SystemExit("pdsh is not installed (apt-get install pdsh)")
    subnet = next((s for s in (f"10.{n}.0" for n in range(210, 250)) if Lab.subnet_free(s)), None)
    if subnet is None:
        raise SystemExit("no free 10.x.0.0/24 subnet for the benchmark lab")
    lab_dir = Path(tempfile.mkdtemp(prefix="fawkes-bench-"))
    Lab.cleanup("fwf", subnet)
    lab = Lab.up(max(sizes), lab_dir, prefix="fwf", subnet=subnet)
    try:
        rows = []
        for n in sizes:
            names = [h.name for h in lab.hosts[:n]]
            fw, pd, warm = [], [], []
            for _ in range(args.repeat):  # interleaved, so load changes hit both alike
                fw.append(run_fawkes(lab, names))
                pd.append(run_pdsh(lab, names))
                warm.append(run_fawkes_warm(lab, names))
            rows.append((n, statistics.median(fw), statistics.median(pd), min(fw), min(pd),
                         statistics.median(warm)))
        base = rows[0][1]
        print(f"command: {COMMAND!r}; {args.repeat} runs per size, median (min) wall seconds; "
              f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        wbase = rows[0][5]
        print("fawkes = fresh executor (connect + run, comparable to pdsh); warm = connections already open")
        print(f"{'hosts':>5} {'fawkes':>14} {'pdsh':>14} {'fawkes/1host':>13} {'fawkes/pdsh':>12} "
              f"{'warm':>7} {'warm/1host':>11}")
        for n, fw, pd, fwmin, pdmin, w in rows:
            print(f"{n:>5} {fw:>7.3f} ({fwmin:.3f}) {pd:>7.3f} ({pdmin:.3f}) {fw / base:>13.2f} {fw / pd:>12.2f} "
                  f"{w:>7.3f} {w / wbase:>11.2f}")
        percmd = {}
        for k in (1, min(8, len(lab.hosts))):
            percmd[k] = per_command_ms(lab, [h.name for h in lab.hosts[:k]], args.serial)
            print(f"per command on open connections, `true` x {args.serial} on {k} host(s): "
                  f"median {percmd[k][0]:.1f} ms, p90 {percmd[k][1]:.1f} ms")
        n, fw, pd, *_ = rows[-1]
        ok1, ok2 = fw / base <= 1.5, fw / pd < 1.0
        if args.json:
            Path(args.json).write_text(json.dumps({
                **info, "load_end": [round(x, 2) for x in os.getloadavg()], "command_run": COMMAND,
                "repeat": args.repeat, "rows": [dict(zip(("hosts", "fawkes_s", "pdsh_s", "fawkes_min_s", "pdsh_min_s",
                                                           "warm_s"), r)) for r in rows],
                "per_command_ms": {str(k): {"median": m, "p90": p} for k, (m, p) in percmd.items()},
                "ratio_to_1_host": round(fw / base, 3), "ratio_to_pdsh": round(fw / pd, 3)}, indent=1) + "\n")
        print(f"targets at {n} hosts: ratio to 1 host {fw / base:.2f} (<= 1.5: {'met' if ok1 else 'MISSED'}), "
              f"ratio to pdsh {fw / pd:.2f} (< 1: {'met' if ok2 else 'MISSED'})")
        return 0 if ok1 and ok2 else 1
    finally:
        if not args.keep:
            lab.down()


if __name__ == "__main__":
    sys.exit(main())
