"""``fawkes submit`` and ``fawkes jobs [list|cancel]``: MR-jobs in the per-cluster FIFO queues."""

from __future__ import annotations

import click

from fawkes.cli.params import count, seconds
from fawkes.cli.audit import audited
from fawkes.cli.remote import remote, remote_options
from fawkes.cli.status import emit_json, json_option, print_table, record, when
from fawkes.config import open_store, state_option
from fawkes.store import Job, JobState


@click.command()
@click.argument("cluster")
@click.option("--input", "input_path", default=None, help="Input path of the job (for data-driven policies).")
@click.option("--input-bytes", type=count(0), default=None, help="Size of the input in bytes.")
@click.option("--ref-runtime", type=seconds(), default=None,
              help="Runtime on the reference static cluster, seconds (job slowdown policy).")
@state_option
@remote_options
@json_option
@click.argument("app", nargs=-1, required=True, type=click.UNPROCESSED)
def submit(cluster: str, input_path: str | None, input_bytes: int | None, ref_runtime: float | None,
           state: str | None, url: str | None, token_file: str | None, as_json: bool, app: tuple[str, ...]) -> None:
    """Queue a job on CLUSTER: fawkes submit CLUSTER [OPTIONS] -- APP [ARGS]...  Prints the job id."""
    api = remote(url, token_file)
    if api is not None:
        out = api.call("POST", "/api/v1/jobs", {"cluster": cluster, "app": list(app), "input": input_path,
                                                "input_bytes": input_bytes, "ref_runtime": ref_runtime})
        emit_json(out["job"]) if as_json else click.echo(out["job"]["id"])
        return
    with open_store(state) as store, audited(store, "job.submit", cluster):
        job = store.submit_job(cluster, list(app), input_path=input_path, input_bytes=input_bytes,
                               ref_runtime=ref_runtime)
    if as_json:
        emit_json(record(job))
    else:
        click.echo(job.id)


class _DefaultList(click.Group):
    """``fawkes jobs [CLUSTER] [OPTIONS]`` stays ``fawkes jobs list ...``; ``cancel`` is a sub-command."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help")):
            args = ["list", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_DefaultList)
def jobs() -> None:
    """Jobs in submission order (fawkes jobs [list] [CLUSTER]), and cancelling them."""


@jobs.command(name="list")
@click.argument("cluster", required=False)
@click.option("--state-filter", "--status", "states", multiple=True, type=click.Choice([s.value for s in JobState]),
              help="Only jobs in this state (repeatable).")
@click.option("--limit", "-n", type=count(1), default=None, help="Only the newest N.")
@state_option
@remote_options
@json_option
def list_(cluster: str | None, states: tuple[str, ...], limit: int | None, state: str | None, url: str | None,
          token_file: str | None, as_json: bool) -> None:
    """Jobs (of CLUSTER) in submission order."""
    api = remote(url, token_file)
    if api is not None:
        got = api.call("GET", "/api/v1/jobs", query={"cluster": cluster, "limit": limit})["jobs"]
        got = [j for j in got if not states or j["state"] in states]
        if as_json:
            emit_json(got)
            return
        rows = [Job.model_validate(j) for j in got]
        names = {j.cluster_id: j_["cluster"] for j, j_ in zip(rows, got)}
    else:
        with open_store(state) as store:
            rows = store.list_jobs(cluster, states=states or None, limit=limit)
            names = {c.id: c.name for c in store.list_clusters()}
        if as_json:
            emit_json([record(j) | {"cluster": names.get(j.cluster_id)} for j in rows])
            return
    print_table(None, ["id", "cluster", "state", "submitted", "started", "ended", "app", "app id", "exit"],
                [(j.id, names.get(j.cluster_id),
                  j.state + (" (cancel requested)" if j.cancel_requested_at and j.state in ("dispatched", "running")
                             else ""),
                  when(j.submitted_at), when(j.started_at), when(j.ended_at), " ".join(j.argv), j.app_id,
                  j.exit_code) for j in rows])


@jobs.command()
@click.argument("job_ids", metavar="ID...", nargs=-1, required=True, type=count(1))
@state_option
@remote_options
@json_option
def cancel(job_ids: tuple[int, ...], state: str | None, url: str | None, token_file: str | None,
           as_json: bool) -> None:
    """Cancel jobs: a queued job at once; a started one is stopped by the coordinator
    (it kills the driver on the master, then marks the job cancelled).  All or none:
    a finished or unknown job refuses the whole command."""
    api = remote(url, token_file)
    if api is not None:
        got = api.call("POST", "/api/v1/jobs/cancel", {"ids": list(job_ids)})["jobs"]
        done = [(Job.model_validate(j), j["outcome"]) for j in got]
        if as_json:
            emit_json(got)
            return
    else:
        with open_store(state) as store, audited(store, "job.cancel", "jobs " + ",".join(map(str, job_ids))):
            done = store.cancel_jobs(job_ids)
    if as_json:
        emit_json([record(j) | {"outcome": outcome} for j, outcome in done])
        return
    for j, outcome in done:
        if outcome == "cancelled":
            click.echo(f"job {j.id}: cancelled")
        else:
            click.echo(f"job {j.id}: cancel requested ({j.state}); the coordinator will stop its driver"
                       + (" (already requested)" if outcome == "pending" else ""))
