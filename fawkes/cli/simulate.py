"""``fawkes simulate``: replay the thesis' experiments or a job trace with the FAWKES mechanism."""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

import click

from fawkes.cli.params import seconds
from fawkes.errors import FawkesError

EPILOG = """\b
Examples:
  fawkes simulate D --policy TD --seeds 5
  fawkes simulate D --compare all --seeds 5 --json
  fawkes simulate D --policy TD --set cap_to_demand=true --set min_change_nodes=6
  fawkes simulate ch2 --compare all --seeds 5
  fawkes simulate B --compare None,EQ,TD --grow tr
  fawkes simulate --trace traces/sample.csv --capacity 48 --min-core 10 --period 120 --compare TD,EQ,None
  fawkes simulate A --plot a.png
  fawkes simulate SIM-P3
  fawkes simulate SIM-U1 --json
  fawkes simulate SIM-B2 --seeds 3
  fawkes simulate SIM-C1 --seeds 5
  fawkes simulate --list
  fawkes simulate --trace week.csv --capacity 16 --min-core 4 --period 60 --cost map_slots=12 --cost reduce_slots=4
  fawkes simulate --trace live.csv --cost-file live-costs.yaml --clusters live-clusters.csv --capacity 8 \\
      --min-core 1 --period 10 --compare None,TD
"""


#: bounds of the options (docs/input-limits.md): a run that can finish, not one that hangs or runs out of memory
MAX_CAPACITY = 100_000  # nodes in the pool (one decision at 50,000 nodes: bench/bench_decision.py)
MAX_SEEDS = 1_000
MAX_SCALE = 1_000


@click.command(epilog=EPILOG)
@click.argument("experiment", required=False)
@click.option("--trace", "trace_file", type=click.Path(dir_okay=False), help="Replay this CSV job trace.")
@click.option("--clusters", "clusters_file", type=click.Path(dir_okay=False),
              help="With --trace: CSV cluster,request_s[,min_core,dataset_bytes].")
@click.option("--capacity", type=int, help="With --trace: nodes in the pool (C).")
@click.option("--min-core", type=int, help="With --trace: minimum core nodes per MR-cluster (m_i).")
@click.option("--period", type=seconds(1), help="With --trace: the period T in seconds (1 s .. 1 year).")
@click.option("--idle-timeout", type=seconds(0, min_open=True), help="With --trace: T_idle in seconds (default T).")
@click.option("--policy", default=None, help="Policy name (TD, JD, ... None, EQ), preset name or YAML path; "
              "ch2: GS, GG, GGD or static.  [default: the experiment's (Table 3.2): A JD, B-E TD, ch2 GS]")
@click.option("--compare", "compare_", default=None, help="'all' or a comma list of policies, on the same seeds.")
@click.option("--grow", type=click.Choice(["tr", "tc"], case_sensitive=False), default=None,
              help="Grow with transient (tr, FP shrink) or transient-core (tc, DP shrink) nodes.")
@click.option("--seeds", type=int, default=1, show_default=True, help="Number of seeds (first is --seed).")
@click.option("--seed", "first_seed", type=int, default=1, show_default=True, help="First seed.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Override a mechanism setting (repeatable).")
@click.option("--cost", "costs", multiple=True, metavar="KEY=VALUE",
              help="Override a cost-model parameter (repeatable): map_slots, reduce_slots, cv, w_dst_Bps, ... "
                   "or apps.NAME.FIELD (docs/simulation.md).")
@click.option("--cost-file", "cost_file", type=click.Path(dir_okay=False),
              help="YAML of cost-model fields (e.g. measured by 'fawkes trace from-state --costs'); "
                   "--cost items apply on top.")
@click.option("--scale", type=int, default=1, show_default=True, help="Multiply jobs, nodes and minima (bench).")
@click.option("--workers", type=int, default=None, help="Processes (default: one per core).")
@click.option("--check", is_flag=True, help="Check the invariants (docs/mechanism.md) on every tick.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (an object, or a list with --compare).")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False),
              help="PNG of each cluster's allocation and queue length over time (first seed).")
@click.option("-q", "--quiet", is_flag=True, help="No progress on stderr.")
@click.option("--list", "list_", is_flag=True, help="List the named experiments and checks, and exit.")
@click.option("--job-model", "job_model", default=None, metavar="MODEL",
              help="SIM-B1..B4, SIM-C1, SIM-C2: run every job as mr (MapReduce, the default) or spark "
                   "(stages with barriers, docs/reproduction.md).")
def simulate(experiment, trace_file, clusters_file, capacity, min_core, period, idle_timeout, policy, compare_,
             grow, seeds, first_seed, sets, costs, cost_file, scale, workers, check, as_json, plot_file, quiet,
             list_, job_model) -> None:
    """Simulate EXPERIMENT (ch2, A, B, C, D, E) or a --trace with the FAWKES mechanism; or run a
    supporting seed's check (SIM-P1, SIM-P2, SIM-P3, SIM-U1 .. SIM-U4, SIM-U7, SIM-B1, SIM-B2, SIM-C1, SIM-C2:
    docs/reproduction.md; --list names them all).

    Prints per-cluster mean slowdowns (against each job alone on a static 10-core-node
    cluster), p95/p50, reconfigurations, discrimination, makespan and utilisation; with
    several seeds, means over the seeds and their spread.
    """
    from fawkes.sim import runner
    from fawkes.sim.workloads import EXPERIMENTS, experiment_name

    if not 1 <= seeds <= MAX_SEEDS:
        raise FawkesError(f"--seeds must be 1..{MAX_SEEDS}")
    if not 0 <= first_seed < 2**63:
        raise FawkesError("--seed must be 0..2^63-1")
    if list_:
        if experiment or trace_file:
            raise FawkesError("--list takes no EXPERIMENT or --trace")
        _list_experiments()
        return
    if experiment and not trace_file:
        from fawkes.seeds.seed_checks import check_name

        seed_check = check_name(experiment)
        if seed_check is not None:
            _seed_check(seed_check, list(range(first_seed, first_seed + seeds)), as_json, locals())
            return
    if job_model is not None:
        raise FawkesError("--job-model applies to SIM-B1..B4, SIM-C1 and SIM-C2 only (a trace says it per row: "
                          "its model column)")
    if not 1 <= scale <= MAX_SCALE:
        raise FawkesError(f"--scale must be 1..{MAX_SCALE}")
    if workers is not None and not 1 <= workers <= 1024:
        raise FawkesError("--workers must be 1..1024")
    if policy and compare_:
        raise FawkesError("use either --policy or --compare, not both")
    cost = runner.parse_cost(costs)
    if cost_file is not None:
        from fawkes.traces.costfile import load_cost_file

        given = dict(cost)
        cost = tuple((k, v) for k, v in load_cost_file(cost_file) if k not in given) + cost
    workload = None
    if trace_file:
        if experiment:
            raise FawkesError(f"give either an EXPERIMENT ({experiment}) or --trace, not both")
        missing = [o for o, v in (("--capacity", capacity), ("--min-core", min_core), ("--period", period)) if v is None]
        if missing:
            raise FawkesError(f"--trace needs {', '.join(missing)}")
        if not 1 <= capacity <= MAX_CAPACITY:
            raise FawkesError(f"--capacity must be 1..{MAX_CAPACITY}, got {capacity}")
        if not 1 <= min_core <= capacity:
            raise FawkesError(f"--min-core must be 1..{capacity} (--capacity), got {min_core}")
        from fawkes.sim.costs import cost_model
        from fawkes.traces.trace import load_trace

        workload = load_trace(trace_file, capacity=capacity, min_core=min_core, period_s=period,
                              clusters_file=clusters_file, grow=grow or "tc", idle_timeout_s=idle_timeout,
                              cost=cost_model(cost))
        exp = workload.name
    else:
        if not experiment:
            raise FawkesError(f"name an EXPERIMENT ({', '.join(EXPERIMENTS)}) or give --trace FILE")
        for opt, v in (("--clusters", clusters_file), ("--capacity", capacity), ("--min-core", min_core),
                       ("--period", period), ("--idle-timeout", idle_timeout)):
            if v is not None:
                raise FawkesError(f"{opt} only applies with --trace")
        try:
            exp = experiment_name(experiment)
        except KeyError:
            raise FawkesError(f"unknown experiment {experiment!r}; choose one of {', '.join(EXPERIMENTS)}, "
                              "SIM-P1..P3, SIM-U1..U4, SIM-B*, SIM-C1, SIM-C2 (--list) or use --trace FILE") from None
        if exp == "ch2" and (grow or sets):
            raise FawkesError("ch2 uses the chapter-2 policies; --grow and --set do not apply")
    if compare_:
        specs = [runner.parse_policy(n, exp, sets) for n in _split(compare_, exp)]
    else:
        specs = [runner.parse_policy(policy or runner.default_policy(exp), exp, sets)]
    labels = [s.label for s in specs]
    if len(set(labels)) != len(labels):
        raise FawkesError(f"policy listed twice in --compare: {', '.join(labels)}")
    seed_list = list(range(first_seed, first_seed + seeds))
    progress = None if quiet else _Progress(len(specs) * len(seed_list))
    if workload is not None and scale != 1 and workload.cost.any_gated():  # a cost file of the live dispatcher
        raise FawkesError("--scale does not apply to a twin replay (max_running_jobs / job_startup_s)")
    matrix = runner.run_matrix(exp, specs, seed_list, grow=grow, check=check, scale=scale, workers=workers,
                               timeline=bool(plot_file), progress=progress, workload=workload, cost=cost)
    if progress:
        progress.close()
    from fawkes.sim.metrics import aggregate

    rows = [aggregate(matrix[s.label]) for s in specs]
    for r in rows:
        if grow:
            r["grow"] = grow.lower()
        if cost:
            r["cost"] = dict(cost)
    if plot_file:
        from fawkes.traces.plot import plot_timeline

        for s in specs:
            target = Path(plot_file)
            if len(specs) > 1:
                target = target.with_name(f"{target.stem}-{_safe(s.label)}{target.suffix or '.png'}")
            plot_timeline(matrix[s.label][0], target)
            if not quiet:
                click.echo(f"[simulate] wrote {target}", err=True)
    if as_json:
        out = rows if compare_ else rows[0]
        click.echo(json.dumps(_clean(out), indent=2))
        return
    _print_table(rows, exp, seed_list, baseline=_baseline(rows))


def _seed_check(name: str, seeds: list[int], as_json: bool, given: dict) -> None:
    """A supporting seed's check (SIM-P1..P3, SIM-U1..U4): its own model and figures beside the paper's."""
    from fawkes.seeds.seed_checks import run_check

    unused = {"--clusters": "clusters_file", "--capacity": "capacity", "--min-core": "min_core", "--period": "period",
              "--idle-timeout": "idle_timeout", "--policy": "policy", "--compare": "compare_", "--grow": "grow",
              "--cost-file": "cost_file", "--workers": "workers", "--plot": "plot_file"}
    for opt, var in unused.items():
        if given.get(var) is not None:
            raise FawkesError(f"{opt} does not apply to {name} (only --seeds, --seed, --json)")
    for opt, var in (("--set", "sets"), ("--cost", "costs")):
        if given.get(var):
            raise FawkesError(f"{opt} does not apply to {name} (only --seeds, --seed, --json)")
    if given.get("scale") != 1 or given.get("check"):
        raise FawkesError(f"--scale and --check do not apply to {name} (only --seeds, --seed, --json)")
    model = given.get("job_model")
    if model is not None:
        from fawkes.seeds.seed_checks import takes_job_model
        from fawkes.sim.stages import JOB_MODELS

        if model not in JOB_MODELS:
            raise FawkesError(f"--job-model: expected {' or '.join(JOB_MODELS)}, got {model!r}")
        if not takes_job_model(name):
            raise FawkesError(f"--job-model does not apply to {name} (only SIM-B1..B4, SIM-C1, SIM-C2)")
    out = run_check(name, seeds, model)
    if as_json:
        click.echo(json.dumps(_clean(out), indent=2))
        return
    click.echo(f"{name}, seeds {seeds[0]}..{seeds[-1]} ({len(seeds)})" + (f", job model {model}" if model else ""))
    rows = out["rows"]
    head = list(rows[0])
    table = [head] + [[str(r[k]) for k in head] for r in rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for k, row in enumerate(table):
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)))
        if k == 0:
            click.echo("  ".join("-" * w for w in widths))
    if out.get("note"):
        click.echo(out["note"])
    click.echo("paper: " + json.dumps(out["paper"]))
    for e in out["expect"]:
        click.echo(f"[{'holds' if e['holds'] else 'FAILS'}] {e['expected']}")


_THESIS = {"B": "S-3.6: Table 3.2 B, WordCount, a batch of 90 small / 5 medium / 5 large jobs, C = 60, T = 60 s.",
           "C": "S-3.6: Table 3.2 C, Sort, a batch of 90 small / 5 medium / 5 large jobs, C = 60, T = 60 s."}


def _list_experiments() -> None:
    """Every named experiment (the thesis') and supporting seed check, one a line."""
    from fawkes.seeds.seed_checks import CHECKS, describe
    from fawkes.sim.workloads import GENERATORS

    for name, gen in GENERATORS.items():
        doc = (gen.__doc__ or "").strip()
        click.echo(f"{name:8s} {doc.splitlines()[0] if doc else _THESIS.get(name, 'the thesis workload ' + name)}")
    for name in CHECKS:
        click.echo(f"{name:8s} {describe(name)}")


def _split(text: str, exp: str) -> list[str]:
    from fawkes.sim.runner import CH2_POLICIES, FAWKES_POLICIES

    if text.strip().lower() == "all":
        return list(CH2_POLICIES if exp == "ch2" else FAWKES_POLICIES)
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise FawkesError("--compare needs 'all' or a comma-separated list of policies")
    return names


def _safe(label: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in label)


def _baseline(rows) -> dict | None:
    for r in rows:
        if r["policy"] in ("None", "static"):
            return r
    return None


def _clean(obj):
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else obj
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_clean(v) for v in obj]
    return obj


def _fmt(x: float, spec: str = ".3f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _print_table(rows, exp: str, seeds: list[int], baseline) -> None:
    clusters = list(rows[0]["cluster_mean_slowdown"])
    metric = "slowdown" if exp != "ch2" and not math.isnan(rows[0]["mean_slowdown"]) else "response_s"
    key, ckey = ("mean_slowdown", "cluster_mean_slowdown") if metric == "slowdown" else (
        "mean_response_s", "cluster_mean_response_s")
    click.echo(f"experiment {exp}, seeds {seeds[0]}..{seeds[-1]} ({len(seeds)}), {rows[0]['jobs']} jobs, "
               f"{rows[0]['tasks']} tasks; mean {metric} per cluster (means over seeds)")
    if rows[0].get("cost"):
        click.echo("cost model: " + ", ".join(f"{k}={v}" for k, v in rows[0]["cost"].items()))
    head = ["policy", f"mean {metric}", *clusters, "p95/p50", "reconf", "G(mean)", "makespan", "util", "killed"]
    if baseline is not None and len(rows) > 1:
        head.append(f"vs {baseline['policy']}")
    table = [head]
    for r in rows:
        sd = r["spread"][key]["std"]
        line = [r["policy"], f"{_fmt(r[key])} ±{_fmt(sd, '.3f')}" if len(seeds) > 1 else _fmt(r[key])]
        line += [_fmt(r[ckey][c]) for c in clusters]
        line += [_fmt(r["p95_over_p50"], ".2f"), _fmt(r["reconfigurations"], ".1f"),
                 _fmt(r["global_discrimination"], ".1f"), _fmt(r["makespan_s"], ".0f"),
                 _fmt(r["utilization"], ".3f"), _fmt(r["killed_tasks"], ".0f")]
        if baseline is not None and len(rows) > 1:
            b = baseline[key]
            line.append(f"{100 * (r[key] - b) / b:+.1f}%" if b and not math.isnan(b) else "-")
        table.append(line)
    widths = [max(len(row[i]) for row in table) for i in range(len(head))]
    for k, row in enumerate(table):
        click.echo("  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
        if k == 0:
            click.echo("  ".join("-" * w for w in widths))
    errs = sum(r["invariant_errors"] for r in rows)
    if errs:
        click.echo(f"invariant violations: {errs} (run with --json for details)")


class _Progress:
    """Runs done so far, on stderr; a single updating line on a terminal."""

    def __init__(self, total: int):
        self.total = total
        self.t0 = time.perf_counter()
        self.tty = sys.stderr.isatty()
        self.last = 0.0

    def __call__(self, done: int, total: int, what: str) -> None:
        now = time.perf_counter()
        if not self.tty and done < total and now - self.last < 2.0:
            return
        self.last = now
        msg = f"[simulate] {done}/{total} runs ({what}), {now - self.t0:.1f} s"
        if self.tty:
            click.echo("\r" + msg.ljust(70), err=True, nl=False)
        else:
            click.echo(msg, err=True)

    def close(self) -> None:
        if self.tty:
            click.echo("", err=True)
