"""``fawkes framework``: register framework installations and obtain the lab's distributions."""

from __future__ import annotations

import json
import sys

import click


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
    """Obtain and cache the lab's distributions (Spark 4 from pyspark, HDFS 2.7.3 jars).

    The HDFS 2.7.3 jars are end-of-life and for tests and the lab only.
    """
    from fawkes.frameworks import dists

    d = dists.ensure_lab_dists(install=install, progress=_progress(quiet or as_json))
    if as_json:
        click.echo(json.dumps(d.as_dict(), indent=2))
        return
    click.echo(f"spark_home   {d.spark_home}  (Spark {d.spark_version})")
    click.echo(f"hdfs_jars    {d.hdfs_home}  (HDFS {d.hdfs_version}, tests only)")
    click.echo(f"java         {d.java}")
    click.echo("register with: fawkes framework add lab --kind spark-hdfs "
               f"--spark-home {d.spark_home} --hdfs-jars {d.hdfs_home}")
