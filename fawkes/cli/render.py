"""``fawkes render CLUSTER [--host H]``: print the configs fawkes would write, writing nothing."""

from __future__ import annotations

import json

import click

from fawkes.config import state_option


@click.command()
@click.argument("cluster")
@click.option("--host", "-H", "hosts", multiple=True, help="Only these hosts (repeatable).")
@click.option("--files-only", is_flag=True, help="List the files and hashes, not their content.")
@click.option("--json", "as_json", is_flag=True, help="Everything as JSON: {host: {hash, components, files}}.")
@click.option("--inventory", "-i", "inventory_path", default=None, help="Inventory (default: the config's).")
@state_option
def render(cluster: str, hosts: tuple[str, ...], files_only: bool, as_json: bool, inventory_path, state) -> None:
    """Print what would be written on each host of CLUSTER (paths relative to its cluster dir), with the
    config's cluster_options and the cluster's block of ports, as the coordinator writes them."""
    from fawkes.cli.framework import _inventory
    from fawkes.config import load_config, open_store
    from fawkes.frameworks.registry import cluster_spec
    from fawkes.frameworks.render import render_cluster

    inv = _inventory(inventory_path)
    options = dict(load_config().cluster_options)  # the command's --config (defaults without one)
    with open_store(state) as store:
        spec = cluster_spec(store, inv, cluster, options)
    out = render_cluster(spec, list(hosts) or None)
    if as_json:
        click.echo(json.dumps({h: {"role": str(r.role), "cluster_dir": r.cluster_dir, "hash": r.hash,
                                   "components": r.hashes, "files": r.files} for h, r in out.items()},
                              indent=2, sort_keys=True))
        return
    for h, r in out.items():
        click.echo(f"### host {h} ({r.role}) dir {r.cluster_dir} hash {r.hash} "
                   + " ".join(f"{c}={v}" for c, v in sorted(r.hashes.items())))
        for path, content in sorted(r.files.items()):
            if files_only:
                click.echo(f"  {path} ({len(content)} bytes)")
            else:
                click.echo(f"--- {path}")
                click.echo(content, nl=not content.endswith("\n"))
