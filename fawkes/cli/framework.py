"""``fawkes framework``: register framework installations and obtain the lab's distributions."""

from __future__ import annotations

import json

import click

from fawkes.cli.status import emit_json, json_option
from fawkes.config import state_option


def _progress(quiet: bool):
    if quiet:
        return None
    return lambda msg: click.echo(f"[dists] {msg}", err=True)


@click.group()
def framework() -> None:
    """Framework installations (Spark, HDFS, Hadoop) that MR-clusters run on."""


@framework.command("dists")
@click.option("--install/--no-install", default=True, show_default=True,
              help="pip-install pyspark (the lab's Spark) if it is missing.")
@click.option("--json", "as_json", is_flag=True, help="Print the paths as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
def dists_cmd(install: bool, as_json: bool, quiet: bool) -> None:
    """Obtain and cache the lab's distributions (Spark 4 from pyspark, HDFS 2.7.3 jars, Flink 2.3 from its wheels).

    The HDFS 2.7.3 jars are end-of-life and for tests and the lab only.
    """
    from fawkes.frameworks import dists

    d = dists.ensure_lab_dists(install=install, progress=_progress(quiet or as_json))
    if as_json:
        click.echo(json.dumps(d.as_dict(), indent=2))
        return
    click.echo(f"spark_home   {d.spark_home}  (Spark {d.spark_version})")
    click.echo(f"hdfs_jars    {d.hdfs_home}  (HDFS {d.hdfs_version}, tests only)")
    click.echo(f"flink_home   {d.flink_home}  (Flink {dists.FLINK_VERSION}; its word count: {d.flink_apps})")
    click.echo(f"java         {d.java}")
    from fawkes.frameworks.sizing import LAB_SIZES

    if LAB_SIZES["jvm_archive_dir"]:
        click.echo(f"jvm archives {LAB_SIZES['jvm_archive_dir']}  (the lab's option jvm_archive_dir: its JVMs start "
                   "from class-data archives)")
    click.echo("register with: fawkes framework add lab --kind spark-hdfs "
               f"--spark-home {d.spark_home} --hdfs-jars {d.hdfs_home}")
    click.echo("          or: fawkes framework add lab-flink --kind flink-hdfs "
               f"--flink-home {d.flink_home} --hdfs-jars {d.hdfs_home}")


def _inventory(path: str | None):
    from fawkes.config import load_config
    from fawkes.errors import FawkesError
    from fawkes.inventory.load import load_inventory

    if path is None:
        cfg = load_config()  # the command's --config
        if cfg.inventory is None:
            raise FawkesError("no inventory: pass --inventory FILE or set 'inventory' in the config file")
        path = str(cfg.inventory)
    return load_inventory(path)


def _show(fw) -> dict:
    p = fw.paths or {}
    return {"name": fw.name, "kind": fw.kind, "spark_home": p.get("spark_home"), "hadoop_home": p.get("hadoop_home"),
            "hdfs_jars": p.get("hdfs_jars"), "shared_dir": p.get("shared_dir"), "python": p.get("python"),
            "flink_home": p.get("flink_home"),
            "java_home": fw.java_home}


#: whether a kind's daemons run on this machine (its distribution can be obtained here), and why not
_LIVE = {"spark-hdfs": (True, "Spark from pyspark, HDFS 2.7.3 jars from the pyspark 2.4.8 sdist (lab only)"),
         "spark": (True, "Spark from pyspark; input and output on a directory every host sees"),
         "dask": (True, "Dask distributed from PyPI (the lab extra); input and output on a directory every host sees"),
         "flink-hdfs": (True, "Flink from the PyPI wheels apache-flink + apache-flink-libraries, HDFS 2.7.3 jars "
                        "(lab only)"),
         "simulated": (False, "SIMULATED hosts (inventory simulated: N): a test and capacity-planning tool, "
                       "never real (docs/simulated-fleet.md)"),
         "hadoop3": (False, "render-only: YARN and Hadoop 3 daemons cannot be obtained on this machine")}


def kind_rows() -> list[dict]:
    """Every framework kind: roles, removal modes, signals, options, whether it runs here."""
    from fawkes.frameworks.base import driver_class, kinds

    from fawkes.frameworks import dists

    try:  # the lab's Spark (pyspark) installed: every Spark kind can run here
        dists.check_spark_home(dists.spark_home(install=False))
        spark_here = True
    except Exception:  # noqa: BLE001 - not installed, or broken: not live here, and why
        spark_here = False
    try:  # Dask distributed importable by the Python fawkes runs under (the lab's hosts use it)
        import importlib.util

        dask_here = importlib.util.find_spec("distributed") is not None
    except (ImportError, ValueError):
        dask_here = False
    rows = []
    for k in kinds():
        d = driver_class(k)
        live, why = _LIVE.get(k, (False, "unknown"))
        if live and k == "dask" and not dask_here:
            live, why = False, why + "; not here: pip install distributed (or fawkes-provisioner[lab])"
        elif live and "spark_home" in d.required_paths and not spark_here:
            live, why = False, why + "; not here: run 'fawkes framework dists' first"
        elif live and "flink_home" in d.required_paths and not dists.flink_ready():
            live, why = False, why + "; not here: run 'fawkes framework dists' first"
        rows.append({"kind": k, "roles": [r.value for r in d.roles], "removal_modes": sorted(d.removal_modes),
                     "default_shrink_mode": d.default_shrink_mode, "signals": sorted(d.signals),
                     "options": d.path_options, "live": live, "note": why})
    rows.append({"kind": "hadoop3", "roles": [], "removal_modes": [], "default_shrink_mode": None, "signals": [],
                 "options": [], "live": False, "note": _LIVE["hadoop3"][1]})
    return rows


@framework.command("kinds")
@click.option("--json", "as_json", is_flag=True, help="Print the kinds as JSON.")
def kinds_cmd(as_json: bool) -> None:
    """The framework kinds fawkes ships: their node roles, removal modes, the policy signals their samples
    feed, their options, and whether they run live on this machine."""
    rows = kind_rows()
    if as_json:
        click.echo(json.dumps(rows, indent=2))
        return
    for r in rows:
        click.echo(f"{r['kind']:<11} live: {'yes' if r['live'] else 'no'} ({r['note']})")
        if r["roles"]:
            click.echo(f"{'':<11} roles: {', '.join(r['roles'])}; removal: {', '.join(r['removal_modes'])} "
                       f"(default {r['default_shrink_mode']}); signals: {', '.join(r['signals'])}")
            click.echo(f"{'':<11} options: {', '.join('--' + o.replace('_', '-') for o in r['options'])}")
        if "transient-core" not in r["roles"] and r["roles"]:
            click.echo(f"{'':<11} no storage on its nodes: a transient-core node would be a transient one "
                       "(grow_type transient-core is refused for its clusters)")


@framework.command("add")
@click.argument("name")
@click.option("--kind", required=True, help="Framework kind (spark-hdfs, spark, dask, flink-hdfs: fawkes framework kinds).")
@click.option("--spark-home", default=None, help="spark-hdfs, spark: Spark distribution on every host.")
@click.option("--hadoop-home", default=None,
              help="spark-hdfs, flink-hdfs: Hadoop 3.x installation on every host (real deployments).")
@click.option("--hdfs-jars", default=None,
              help="spark-hdfs, flink-hdfs: HDFS jar dir (jars/ + webapps/) on every host: the lab's HDFS 2.7.3.")
@click.option("--flink-home", default=None, help="flink-hdfs: Flink distribution on every host (bin/jobmanager.sh, lib/).")
@click.option("--shared-dir", default=None, help="spark, dask: a directory every host sees (NFS, Lustre) for input and output.")
@click.option("--python", "python_path", default=None,
              help="dask: the Python on every host with distributed installed (default: the one fawkes runs under).")
@click.option("--java-home", default=None, help="JDK on every host (default: java on the PATH).")
@click.option("--inventory", "-i", "inventory_path", default=None, help="Inventory to check on (default: the config's).")
@click.option("--host", "-H", "hosts", multiple=True, help="Check only these hosts or groups (repeatable).")
@click.option("--no-check", is_flag=True, help="Register without checking the hosts.")
@click.option("--replace", is_flag=True, help="Update an existing registration.")
@state_option
@json_option
def add(name, kind, spark_home, hadoop_home, hdfs_jars, flink_home, shared_dir, python_path, java_home, inventory_path, hosts,
        no_check, replace, state, as_json) -> None:
    """Register framework NAME after checking it on the hosts (files exist, Java runs)."""
    from fawkes.config import open_store
    from fawkes.errors import FawkesError
    from fawkes.frameworks.base import driver_class
    from fawkes.frameworks.registry import check_on_hosts
    from fawkes.frameworks.spec import FrameworkPaths

    drv = driver_class(kind)  # unknown kind: one line
    given = {"spark_home": spark_home, "hadoop_home": hadoop_home, "hdfs_jars": hdfs_jars, "shared_dir": shared_dir,
             "python": python_path, "flink_home": flink_home}
    opts = ", ".join("--" + o.replace("_", "-") for o in drv.path_options)
    foreign = [k for k, v in given.items() if v is not None and k not in drv.path_options]
    if foreign:
        raise FawkesError(f"framework {name}: --{foreign[0].replace('_', '-')} is not an option of kind {kind} "
                          f"(its options: {opts})")
    missing = [k for k in drv.required_paths if not given.get(k)]
    if missing:
        raise FawkesError(f"framework {name}: kind {kind} needs --{missing[0].replace('_', '-')} (its options: {opts})")
    fw = FrameworkPaths(name, kind, spark_home or "", hadoop_home=hadoop_home, hdfs_jars=hdfs_jars,
                        java_home=java_home, shared_dir=shared_dir, python=python_path, flink_home=flink_home)
    if not no_check:
        inv = _inventory(inventory_path)
        problems = check_on_hosts(fw, inv, list(hosts) or None,
                                  progress=lambda m: click.echo(f"[framework] {m}", err=True))
        bad = {h: p for h, p in problems.items() if p}
        if bad:
            first = next(iter(bad.items()))
            raise FawkesError(f"framework {name}: {len(bad)} of {len(problems)} host(s) fail the check; "
                              f"{first[0]}: {'; '.join(first[1])}")
        click.echo(f"[framework] {name}: ok on {len(problems)} host(s)", err=True)
        _say_versions(fw, inv, list(problems))
    with open_store(state, create=True) as store:
        store.register_framework(name, kind, spark_home=spark_home, hadoop_home=hadoop_home, hdfs_jars=hdfs_jars,
                                 shared_dir=shared_dir, python=python_path, flink_home=flink_home, java_home=java_home,
                                 replace=replace)
        fw_row = store.get_framework(name)
    if as_json:
        emit_json(_show(fw_row))
    else:
        click.echo(f"framework {name} ({kind}) registered")


def _say_versions(fw, inv, hosts: list[str]) -> None:
    """The components' versions on the hosts, and a warning for each one fawkes has not run live or that
    differs between hosts (not a refusal: it may work)."""
    from fawkes.frameworks.versions import differing, version_notes, versions_on_hosts

    with inv.executor(hosts) as ex:
        by_host = versions_on_hosts(ex, fw, hosts)
    found = next((v for v in by_host.values() if v), {})
    if found:
        click.echo(f"[framework] {fw.name}: " + ", ".join(f"{c} {v}" for c, v in found.items()), err=True)
    for note in version_notes(found) + differing(by_host):
        click.echo(f"[framework] warning: {note}", err=True)


@framework.command("list")
@state_option
@json_option
def list_(as_json: bool, state) -> None:
    """Registered frameworks."""
    from fawkes.config import open_store

    with open_store(state) as store:
        fws = store.list_frameworks()
    if as_json:
        click.echo(json.dumps([_show(f) for f in fws], indent=2))
        return
    if not fws:
        click.echo("no frameworks registered (fawkes framework add NAME --kind spark-hdfs ...)")
    for f in fws:
        p = f.paths or {}
        click.echo(f"{f.name:<16} {f.kind:<12} " + " ".join(f"{k.replace('_', '-')}={v}" for k, v in p.items() if v))


@framework.command("show")
@click.argument("name")
@state_option
@json_option
def show(name: str, as_json: bool, state) -> None:
    """One registered framework."""
    from fawkes.config import open_store

    with open_store(state) as store:
        f = store.get_framework(name)
    d = _show(f)
    if as_json:
        click.echo(json.dumps(d, indent=2))
        return
    for k, v in d.items():
        click.echo(f"{k:<12} {v if v is not None else '-'}")


@framework.command("remove")
@click.argument("name")
@state_option
@json_option
def remove(name: str, state, as_json: bool) -> None:
    """Unregister framework NAME (refused while a live cluster uses it)."""
    from fawkes.config import open_store

    with open_store(state) as store:
        gone = _show(store.get_framework(name))
        store.remove_framework(name)
    if as_json:
        emit_json(gone | {"removed": True})
    else:
        click.echo(f"framework {name} removed")
