"""`fawkes inventory`: check, probe and generate host inventories."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import click

from fawkes.cli.params import seconds
from fawkes.cli.status import emit_json, json_option
from fawkes.config import open_store, state_option


@click.group()
def inventory() -> None:
    """Host inventories (YAML): check, probe over SSH, write one from a SLURM allocation."""


@inventory.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--no-files", is_flag=True, help="do not check that key and known_hosts files exist")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output")
def check(file: Path, no_files: bool, as_json: bool) -> None:
    """Validate FILE: every problem is printed as FILE:LINE: FIELD: message (exit 2)."""
    from fawkes.inventory import check_inventory, load_inventory
    problems = check_inventory(file, check_files=not no_files)
    if problems:
        for p in problems[:-1]:
            click.echo(f"fawkes: error: {p}", err=True)
        raise problems[-1]
    inv = load_inventory(file, check_files=not no_files)
    if as_json:
        emit_json({"file": str(file), "ok": True, "hosts": [h.name for h in inv.hosts], "groups": sorted(inv.groups),
                   "simulated": inv.simulated is not None})
        return
    what = "SIMULATED hosts (a test and capacity-planning fleet)" if inv.simulated is not None else "hosts"
    click.echo(f"{file}: ok ({len(inv.hosts)} {what}, {len(inv.groups)} groups)")


def _python(ctx, param, value: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9._+-]{1,64}|/[A-Za-z0-9._+/-]{1,255}", value or ""):
        raise click.BadParameter(f"expected a command name or an absolute path (letters, digits, ._+/-), got {value!r}")
    return value


def _java_min(ctx, param, value: str) -> int:
    if not re.fullmatch(r"[1-9][0-9]?", value or ""):
        raise click.BadParameter(f"expected a Java major version 1..99, got {value!r}")
    return int(value)


def _port_range(ctx, param, value: str) -> str:
    from fawkes.frameworks.render import check_option

    try:
        return check_option("port_range", value)
    except ValueError as exc:
        raise click.BadParameter(str(exc).split(": ", 1)[1]) from None


@inventory.command()
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--host", "-H", "hosts", multiple=True, help="only these hosts or groups (repeatable)")
@click.option("--max-connects", default=32, show_default=True, type=click.IntRange(1, 1024),
              help="concurrent connection attempts")
@click.option("--timeout", default=30.0, show_default=True, type=seconds(0, 3600, min_open=True),
              help="per-host command timeout (s)")
@click.option("--java-min", default="17", show_default=True, callback=_java_min,
              help="the Java major version the kinds need (Spark 4, Flink 2: 17)")
@click.option("--python", "python", default="python3", show_default=True, callback=_python,
              help="the hosts' Python for jobs (the clusters' option job_python)")
@click.option("--port-range", default="21000-31999", show_default=True, callback=_port_range,
              help="the ports clusters listen on (the option port_range; standard: 7077, 8080, 8020, ...)")
@click.option("--framework", "framework_name", default=None, metavar="NAME",
              help="also run registered framework NAME's own check (files, Java) and read its versions on each host")
@click.option("--json", "as_json", is_flag=True, help="machine-readable output (no progress bar)")
@state_option
def probe(file: Path, hosts: tuple[str, ...], max_connects: int, timeout: float, java_min: int, python: str,
          port_range: str, framework_name: str | None, as_json: bool, state: str | None) -> None:
    """Connect to every host of FILE in parallel and report cores, memory, free disk, Java, and what the
    kinds need there: Java >= --java-min, --python running, a writable work dir, no listening port in
    --port-range, a clock within 2 s of this machine's, a delegated cgroup (for shrink_mode suspend); with
    --framework, that framework's own check and its components' versions (a version fawkes has not run
    live is named).  Exit 1 when a host does not answer; what a host lacks is reported (status column,
    JSON "problems")."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from fawkes.inventory import load_inventory
    from fawkes.inventory.probe import probe as run_probe
    from fawkes.inventory.probe import problems

    inv = load_inventory(file)
    chosen = inv.select(list(hosts) if hosts else None)
    fw = _framework(framework_name, state) if framework_name else None  # a bad name: one line, before SSH
    console = Console(stderr=True)
    with Progress(TextColumn("probing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  TextColumn("{task.description}"), console=console, transient=True, disable=as_json) as bar:
        task = bar.add_task("", total=len(chosen))
        results = run_probe(inv, chosen, max_connects=max_connects, command_timeout=timeout, python=python,
                            on_result=lambda p: bar.update(task, advance=1, description=p.host))
    ports = _ports(port_range)
    answered = [h.name for h in chosen if results[h.name].ok]
    fw_checks, fw_versions = _framework_checks(inv, fw, answered, timeout) if fw is not None and answered else ({}, {})

    def lacks(p) -> list[str]:
        return problems(p, java_min=java_min, ports=ports, python=python) + fw_checks.get(p.host, [])

    if as_json:
        rows = [_probe_row(h, results[h.name], lacks(results[h.name]), ports) for h in chosen]
        if fw is not None:
            for r in rows:
                r["framework"] = {"name": fw.name, "kind": fw.kind, "versions": fw_versions.get(r["host"])}
        emit_json(rows)
        if any(not r["ok"] for r in rows):
            sys.exit(1)  # click's Exit is swallowed by fawkes.cli.main (standalone_mode=False)
        return
    table = Table(title=f"{file}: {len(chosen)} hosts")
    for col in ("host", "address", "cores", "memory", "free disk", "java", "status"):
        table.add_column(col)
    failed = 0
    for h in chosen:
        p = results[h.name]
        if not p.ok:
            failed += 1
            table.add_row(h.name, h.address, "", "", "", "", f"[red]{p.error}[/red]")
            continue
        notes = _declared(h, p) + lacks(p)
        table.add_row(h.name, h.address, str(p.cores), _mib(p.memory_mb), _mib(p.disk_free_mb),
                      p.java or "[yellow]none[/yellow]", "[yellow]" + "; ".join(notes) + "[/yellow]" if notes
                      else "[green]ok[/green]")
    Console().print(table)
    if failed:
        click.echo(f"{failed} of {len(chosen)} hosts failed", err=True)
        sys.exit(1)  # click's Exit is swallowed by fawkes.cli.main (standalone_mode=False)


def _framework(name: str, state: str | None):
    """The registered framework ``name`` as its paths (one line when there is no such framework)."""
    from fawkes.config import open_store
    from fawkes.frameworks.registry import paths_of

    with open_store(state) as store:
        return paths_of(store.get_framework(name))


def _framework_checks(inv, fw, hosts: list[str], timeout: float) -> tuple[dict[str, list[str]], dict]:
    """Per host: the kind's own check's problems plus the versions fawkes has not run; and the versions."""
    from fawkes.frameworks.base import driver_class
    from fawkes.frameworks.versions import version_notes, versions_on_hosts

    with inv.executor(hosts, command_timeout=timeout) as ex:
        checks = driver_class(fw.kind).check_framework(ex, fw, hosts)
        versions = versions_on_hosts(ex, fw, hosts)
    out = {h: list(checks.get(h, [])) + version_notes(versions.get(h) or {}) for h in hosts}
    for h in hosts:
        if versions.get(h) is not None and not versions[h]:
            out[h].append(f"no {fw.kind} version found")
    return out, versions


def _ports(port_range: str) -> range | list[int]:
    """The ports a cluster may listen on: the range, or the frameworks' standard ports."""
    if port_range == "standard":
        from fawkes.frameworks.render import DASK_PORTS, FLINK_PORTS, ports_for

        return sorted({*ports_for(3).values(), *ports_for(2).values(), *FLINK_PORTS.values(), *DASK_PORTS.values()})
    first, last = (int(x) for x in port_range.split("-"))
    return range(first, last + 1)


def _declared(h, p) -> list[str]:
    """Where the inventory declares more than the host has."""
    notes = []
    if p.ok and h.cores and p.cores and h.cores > p.cores:
        notes.append(f"declares {h.cores} cores")
    if p.ok and h.memory_mb and p.memory_mb and h.memory_mb > p.memory_mb:
        notes.append(f"declares {h.memory_mb} MiB")
    return notes


def _probe_row(h, p, lacks: list[str], ports) -> dict:
    """One probed host as JSON: what it declares, what was measured, the mismatches and what it lacks."""
    return {"host": h.name, "address": h.address, "ok": p.ok, "error": p.error, "cores": p.cores,
            "memory_mb": p.memory_mb, "disk_free_mb": p.disk_free_mb, "java": p.java, "hostname": p.hostname,
            "java_major": p.java_major, "python": p.python, "work_dir_writable": p.work_dir_writable,
            "ports_in_use": sorted(p.listening.intersection(ports)), "clock_skew_s": p.clock_skew_s,
            "cgroup": p.cgroup, "declared": {"cores": h.cores, "memory_mb": h.memory_mb},
            "notes": _declared(h, p), "problems": lacks}


def _mib(v: int | None) -> str:
    if v is None:
        return "?"
    return f"{v / 1024:.1f} GiB" if v >= 1024 else f"{v} MiB"


@inventory.command("from-slurm")
@click.option("--nodelist", default=None, help="hostlist expression (default: $SLURM_JOB_NODELIST)")
@click.option("--cpus-per-node", default=None, help="e.g. '16(x3),8' (default: $SLURM_JOB_CPUS_PER_NODE)")
@click.option("--user", default="root", show_default=True)
@click.option("--key-file", default=None, help="SSH key for every host")
@click.option("--work-dir", default=None, help="absolute work directory on every host")
@click.option("--known-hosts", default=None, help="known_hosts file for the hosts")
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="write here (default: stdout)")
def from_slurm(nodelist, cpus_per_node, user, key_file, work_dir, known_hosts, output) -> None:
    """Write an inventory of a SLURM allocation."""
    from fawkes.errors import ConfigError, FawkesError
    from fawkes.inventory.slurm import inventory_text

    if not nodelist:  # inside an allocation: both from its environment (never one from each)
        nodelist = os.environ.get("SLURM_JOB_NODELIST")
        cpus_per_node = cpus_per_node or os.environ.get("SLURM_JOB_CPUS_PER_NODE")
    if not nodelist:
        raise FawkesError("no nodelist: pass --nodelist or run inside a SLURM job ($SLURM_JOB_NODELIST)")
    try:  # user, work_dir, ... are checked before anything is written
        text, n_hosts = inventory_text(nodelist, cpus_per_node, user=user, key_file=key_file, work_dir=work_dir,
                                       known_hosts=known_hosts)
    except ConfigError as exc:
        opt = (exc.field or "").rsplit(".", 1)[-1].replace("_", "-")
        raise FawkesError(f"--{opt}: {exc.detail}") from None
    if output is None:
        click.echo(text, nl=False)
        return
    from fawkes.atomicfile import write_atomic

    write_atomic(output, text)  # a new temporary file (O_EXCL), never one planted beside the output
    click.echo(f"wrote {output} ({n_hosts} hosts)", err=True)


@inventory.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--dry-run", is_flag=True, help="check and print what would change; change nothing")
@click.option("--wait", type=seconds(0, 600), default=30.0, show_default=True, metavar="SECONDS",
              help="how long to wait for a running coordinator's reload")
@state_option
@json_option
def apply(file: Path | None, dry_run: bool, wait: float, state: str | None, as_json: bool) -> None:
    """Apply an inventory change without a restart: FILE (default: the config's inventory) is checked
    completely first, then hosts added join the pool free and hosts dropped are retired; a host a
    cluster holds cannot be dropped (drain it first: fawkes host drain).  A coordinator running on this
    machine is told to reload (SIGHUP) and its answer is printed; without one, the state is updated."""
    import signal
    import time

    from fawkes.config import load_config, resolve_state_url
    from fawkes.coordinator.inventory_apply import apply_change, parse_summary, plan_change, summary
    from fawkes.coordinator.leadership import coordinator_status
    from fawkes.errors import FawkesError

    cfg = load_config()
    if file is None:
        if cfg.inventory is None:
            raise FawkesError("no inventory: pass FILE or set 'inventory' in the config file")
        file = cfg.inventory
    elif cfg.inventory is not None and file.resolve() != Path(cfg.inventory).resolve():
        raise FawkesError(f"{file}: not the config's inventory ({cfg.inventory}), which the coordinator reloads: "
                          "edit that file, then run 'fawkes inventory apply'")
    with open_store(state) as store:
        change = plan_change(store, file)  # the whole file checked, and the state asked: nothing written
        st = coordinator_status(resolve_state_url(state)) if not dry_run else {"running": False}
        if dry_run or not st["running"]:
            out = change.outcome if dry_run else apply_change(store, change)
            how = "dry run, nothing changed" if dry_run else "applied to the state"
        else:
            lease = st["lease"]
            if st["process"] != "alive":
                raise FawkesError(f"a coordinator runs on {lease['hostname']} (pid {lease['pid']}): reload it there "
                                  f"(systemctl reload fawkes-coordinator, or kill -HUP {lease['pid']}); nothing changed")
            mark = max((e.id for e in store.events(limit=1)), default=0)
            os.kill(int(lease["pid"]), signal.SIGHUP)
            answer = None
            end = time.monotonic() + wait
            while answer is None and time.monotonic() < end:
                time.sleep(0.2)
                answer = next((e for e in store.events(limit=100, after=mark) if e.kind == "inventory"), None)
            if answer is None:
                raise FawkesError(f"told the coordinator (pid {lease['pid']}) to reload; no answer within {wait:g}s "
                                  "(see fawkes events)")
            if answer.level == "warning":
                raise FawkesError(f"coordinator (pid {lease['pid']}): {answer.message}")
            # what the coordinator changed, from its answer: the plan above was made against the state as
            # this command read it, which a coordinator still starting may not have filled yet
            try:
                out = parse_summary(answer.message.rsplit(": ", 1)[-1])
                moved = set(out["added"]) | set(out["updated"])
                out["unchanged"] = sorted(h.name for h in change.inventory.hosts if h.name not in moved)
            except ValueError:  # an answer of another shape (another version's coordinator): the plan above
                out = change.outcome
            how = f"reloaded by the coordinator (pid {lease['pid']})"
    if as_json:
        emit_json({"file": str(file), "dry_run": dry_run, "how": how, **out})
    else:
        click.echo(f"{file}: {summary(out)} ({how})")
