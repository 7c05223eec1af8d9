"""``fawkes submit`` and ``fawkes jobs``: MR-jobs in the per-cluster FIFO queues."""

from __future__ import annotations

import click

from fawkes.cli.status import emit_json, json_option, print_table, record, when
from fawkes.config import open_store, state_option
from fawkes.store import JobState


@click.command()
@click.argument("cluster")
@click.option("--input", "input_path", default=None, help="Input path of the job (for data-driven policies).")
@click.option("--input-bytes", type=click.IntRange(min=0), default=None, help="Size of the input in bytes.")
@click.option("--ref-runtime", type=click.FloatRange(min=0), default=None,
              help="Runtime on the reference static cluster, seconds (job slowdown policy).")
@state_option
@json_option
@click.argument("app", nargs=-1, required=True, type=click.UNPROCESSED)
def submit(cluster: str, input_path: str | None, input_bytes: int | None, ref_runtime: float | None,
           state: str | None, as_json: bool, app: tuple[str, ...]) -> None:
    """Queue a job on CLUSTER: fawkes submit CLUSTER [OPTIONS] -- APP [ARGS]...  Prints the job id."""
    with open_store(state) as store:
        job = store.submit_job(cluster, list(app), input_path=input_path, input_bytes=input_bytes,
                               ref_runtime=ref_runtime)
    if as_json:
        emit_json(record(job))
    else:
        click.echo(job.id)


@click.command()
@click.argument("cluster", required=False)
@click.option("--state-filter", "--status", "states", multiple=True, type=click.Choice([s.value for s in JobState]),
              help="Only jobs in this state (repeatable).")
@click.option("--limit", "-n", type=click.IntRange(min=1), default=None, help="Only the newest N.")
@state_option
@json_option
def jobs(cluster: str | None, states: tuple[str, ...], limit: int | None, state: str | None, as_json: bool) -> None:
    """Jobs (of CLUSTER) in submission order."""
    with open_store(state) as store:
        rows = store.list_jobs(cluster, states=states or None, limit=limit)
        names = {c.id: c.name for c in store.list_clusters()}
    if as_json:
        emit_json([record(j) | {"cluster": names.get(j.cluster_id)} for j in rows])
        return
    print_table(None, ["id", "cluster", "state", "submitted", "started", "ended", "app", "app id", "exit"],
                [(j.id, names.get(j.cluster_id), j.state, when(j.submitted_at), when(j.started_at),
                  when(j.ended_at), " ".join(j.argv), j.app_id, j.exit_code) for j in rows])
