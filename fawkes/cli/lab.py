"""`fawkes lab`: the SSH test lab (hosts as network namespaces with their own sshd)."""

from __future__ import annotations

import json
from pathlib import Path

import click

DIR_HELP = "lab directory (default: $FAWKES_LAB_DIR or /tmp/fawkes-lab)"


def _dir(value: str | None) -> Path:
    from fawkes.lab import default_dir
    return Path(value) if value else default_dir()


def _quota(cpus: float | None, memory_mb: int | None) -> str:
    """``0.25 CPU, 2 GiB memory`` (either part only when set; empty without limits)."""
    from fawkes.lab.capacity import fmt_cpus, fmt_mb
    parts = ([f"{fmt_cpus(cpus)} CPU"] if cpus else []) + ([f"{fmt_mb(memory_mb)} memory"] if memory_mb else [])
    return ", ".join(parts)


@click.group()
def lab() -> None:
    """SSH test hosts as network namespaces: up, status, crash, revive, down."""


@lab.command()
@click.option("--hosts", default=4, show_default=True, type=int, help="number of hosts")
@click.option("--dir", "dir_", default=None, help=DIR_HELP)
@click.option("--prefix", default="fawkes", show_default=True, help="name prefix of namespaces and links")
@click.option("--subnet", default="10.200.0", show_default=True, help="the lab's /24 (first three octets)")
@click.option("--cpus", default=None, metavar="CORES|auto",
              help="CPU quota per host (a cgroup), e.g. 0.25 for 8 hosts on 2 cores; auto: the machine's "
                   "cores / hosts; default: unlimited")
@click.option("--memory", default=None, metavar="SIZE|auto",
              help="memory limit per host (a cgroup, no swap), e.g. 2G or 512M (MiB without a unit); auto: "
                   "the machine's memory / hosts; default: unlimited")
@click.option("--racks", default=None, type=int,
              help="rack labels r1..rN in the inventory, the hosts split in order (placement; default 2, "
                   "1 for a 1-host lab)")
@click.option("--rack-bandwidth", default=None, metavar="RATE",
              help="one bridge per rack, traffic between racks limited to RATE (e.g. 100mbit; tc htb); "
                   "default: one bridge, racks are labels only")
@click.option("--slurm", "with_slurm", is_flag=True,
              help="also start SLURM: munged, slurmctld and a slurmd per host (as `fawkes lab slurm up`)")
def up(hosts: int, dir_: str | None, prefix: str, subnet: str, cpus: str | None, memory: str | None,
       racks: int | None, rack_bandwidth: str | None, with_slurm: bool) -> None:
    """Start (or keep) a lab of N hosts and write its inventory.

    With --cpus/--memory every host runs under its own CPU quota and memory limit, and all hosts
    together must fit this machine (docs/lab.md, "What a lab host models").
    """
    from fawkes.lab import Lab
    if with_slurm:
        from fawkes.lab.slurm import require
        require()  # refuse before the lab is created
    lab_ = Lab.up(hosts, _dir(dir_), prefix=prefix, subnet=subnet, cpus=cpus, memory=memory, racks=racks,
                  rack_bandwidth=rack_bandwidth)
    quota = _quota(lab_.cpus, lab_.memory_mb)
    click.echo(f"lab up: {len(lab_.hosts)} hosts in {lab_.dir} "
               f"({lab_.hosts[0].address} .. {lab_.hosts[-1].address}, controller {lab_.controller_address}"
               f"{f', {quota} each' if quota else ''})")
    click.echo(f"inventory: {lab_.inventory_path} ({lab_.racks} rack{'s' if lab_.racks > 1 else ''}"
               + (f", one bridge each, {lab_.rack_bandwidth} between racks)" if lab_.rack_bandwidth and lab_.racks > 1
                  else ")"))
    click.echo(f"ssh: ssh -i {lab_.key_file} -o UserKnownHostsFile={lab_.known_hosts} root@{lab_.hosts[0].address}")
    if with_slurm:
        _slurm_up(lab_)


@lab.command()
@click.option("--dir", "dir_", default=None, help=DIR_HELP)
@click.option("--prefix", default="fawkes", show_default=True, help="prefix to clean when no lab state exists")
@click.option("--subnet", default="10.200.0", show_default=True, help="subnet to clean when no lab state exists")
def down(dir_: str | None, prefix: str, subnet: str) -> None:
    """Stop every host and remove every namespace, link and route of the lab."""
    from fawkes.errors import FawkesError
    from fawkes.lab import Lab
    try:
        removed = Lab.load(_dir(dir_)).down()
    except FawkesError as exc:
        if "no lab in" not in str(exc) and "unreadable lab state" not in str(exc):
            raise
        if "unreadable" in str(exc):  # clean by --prefix/--subnet and drop the broken state file
            click.echo(f"lab: {_dir(dir_) / 'lab.json'} is unreadable: cleaning up by --prefix {prefix} "
                       f"--subnet {subnet}", err=True)
        removed = Lab.cleanup(prefix, subnet, _dir(dir_))
    cgroups = f", {removed['cgroups']} cgroups" if removed.get("cgroups") else ""
    slurm_ = f", {removed['slurm']} SLURM daemons" if removed.get("slurm") else ""
    click.echo("lab down: removed {processes} processes, {netns} namespaces, {links} links{c}{r}{s}".format(
        **removed, c=cgroups, r=", the guard route" if removed["route"] else "", s=slurm_))


@lab.command()
@click.option("--dir", "dir_", default=None, help=DIR_HELP)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def status(dir_: str | None, as_json: bool) -> None:
    """Show the lab's hosts and whether they are alive."""
    from fawkes.lab import Lab
    st = Lab.load(_dir(dir_)).status()
    if as_json:
        click.echo(json.dumps(st, indent=2))
        return
    alive = sum(h["alive"] for h in st["hosts"])
    quota = _quota(st.get("cpus"), st.get("memory_mb"))
    click.echo(f"lab {st['dir']} (prefix {st['prefix']}, {st['subnet']}.0/24{f', {quota} per host' if quota else ''}): "
               f"{alive}/{len(st['hosts'])} alive")
    for h in st["hosts"]:
        state = f"up   pid {h['pid']}, {h['processes']} processes" if h["alive"] else "DOWN"
        limits = _quota(h.get("cpus"), h.get("memory_mb"))  # as the host's cgroups have them now
        click.echo(f"  {h['name']:<6} {h['address']:<15} {state}{f' ({limits})' if limits else ''}")
    from fawkes.lab import slurm
    if slurm.running(Path(st["dir"])):
        click.echo(f"  SLURM: {slurm.conf_path(Path(st['dir']))} (`fawkes lab slurm status`)")


@lab.command()
@click.argument("host")
@click.option("--dir", "dir_", default=None, help=DIR_HELP)
def crash(host: str, dir_: str | None) -> None:
    """Kill every process of HOST at once (a host crash)."""
    from fawkes.lab import Lab
    Lab.load(_dir(dir_)).crash(host)
    click.echo(f"crashed {host}")


@lab.command()
@click.argument("host")
@click.option("--dir", "dir_", default=None, help=DIR_HELP)
def revive(host: str, dir_: str | None) -> None:
    """Start HOST's sshd again after a crash (same host key)."""
    from fawkes.lab import Lab
    Lab.load(_dir(dir_)).revive(host)
    click.echo(f"revived {host}")


@lab.group("slurm")
def slurm_group() -> None:
    """Real SLURM on the lab: munged, slurmctld and one slurmd per host (docs/slurm.md)."""


def _slurm_up(lab_) -> None:
    import time

    from fawkes.lab import slurm
    t0 = time.monotonic()
    st = slurm.up(lab_)
    idle = sum(1 for n in st["nodes"] if n["state"])
    click.echo(f"slurm up: slurmctld {st['controller']} (pid {st['slurmctld']}), {idle}/{len(st['nodes'])} nodes "
               f"in partition {st['partition']} ({time.monotonic() - t0:.1f} s)")
    click.echo(f"clients: export SLURM_CONF={st['conf']}")


@slurm_group.command("up")
@click.option("--dir", "dir_", default=None, help=DIR_HELP)
def slurm_up(dir_: str | None) -> None:
    """Start (or complete) the lab's SLURM and wait until every live host's node is idle."""
    from fawkes.lab import Lab
    from fawkes.lab.slurm import require
    require()
    _slurm_up(Lab.load(_dir(dir_)))


@slurm_group.command("down")
@click.option("--dir", "dir_", default=None, help=DIR_HELP)
def slurm_down(dir_: str | None) -> None:
    """Stop the lab's slurmds (with their jobs), slurmctld and munged; the hosts stay up."""
    from fawkes.lab import Lab, slurm
    n = slurm.down(Lab.load(_dir(dir_)))
    click.echo(f"slurm down: stopped {n} processes")


@slurm_group.command("status")
@click.option("--dir", "dir_", default=None, help=DIR_HELP)
@click.option("--json", "as_json", is_flag=True, help="print JSON")
def slurm_status(dir_: str | None, as_json: bool) -> None:
    """Show the lab's SLURM daemons and node states."""
    from fawkes.lab import Lab, slurm
    st = slurm.status(Lab.load(_dir(dir_)))
    if as_json:
        click.echo(json.dumps(st, indent=2))
        return
    ctld = f"pid {st['slurmctld']}" if st["slurmctld"] else "not running"
    click.echo(f"slurm {st['conf']}: slurmctld {st['controller']} {ctld}, munged "
               f"{'pid ' + str(st['munged']) if st['munged'] else 'not running'}")
    for n in st["nodes"]:
        click.echo(f"  {n['name']:<6} {n['address']:<15} slurmd {'up  ' if n['slurmd'] else 'DOWN'} "
                   f"{n['state'] or '-'}")
