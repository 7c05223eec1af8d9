"""Run experiments: one policy over several seeds, or several policies on the same seeds.

An experiment's workload is generated once per (seed, chunk of policies): a comparison is split
into chunks of about half the policies per seed, run on a process pool across the cores; a
trace's workload is reseeded per seed and run in this process.  Reference runtimes (each job
alone on a static cluster, A-23) are cached per workload in each process.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fawkes.errors import FawkesError
from fawkes.mechanism import Settings
from fawkes.mechanism.settings import MAX_SECONDS
from fawkes.mechanism.koala_mr import RUNNER_POLICIES, ResizeParams
from fawkes.mechanism.model import Role
from fawkes.mechanism.policies import policy_names
from fawkes.presets import read_preset
from fawkes.sim.engine import Simulator
from fawkes.sim.metrics import RunResult, aggregate, collect
from fawkes.sim.workloads import EXPERIMENTS, Workload, experiment_name, generate, reseed, static_job_workload

#: the policy tables live with the policies: the FAWKES registry (thesis order) and KOALA-MR's runners
FAWKES_POLICIES = tuple(policy_names())
CH2_POLICIES = RUNNER_POLICIES


@dataclass(frozen=True)
class PolicySpec:
    """A policy to simulate: a label, and either FAWKES settings overrides or a ch. 2 policy."""

    label: str
    overrides: dict[str, Any] = field(default_factory=dict)  # Settings fields explicitly chosen
    ch2: str | None = None
    ch2_params: dict[str, Any] = field(default_factory=dict)  # ResizeParams fields from a ch. 2 preset

    def __hash__(self) -> int:
        return hash((self.label, tuple(sorted(self.overrides.items(), key=lambda kv: kv[0])), self.ch2))


def parse_policy(text: str, experiment: str | None = None, sets: Sequence[str] = ()) -> PolicySpec:
    """A policy name (TD, None, ...), a preset name or YAML path, or for ch2 GS/GG/GGD/static.

    ``sets`` are ``key=value`` Settings overrides (e.g. ``min_change_nodes=3``).
    """
    text = text.strip()
    extra = _parse_sets(sets)
    if experiment == "ch2":
        for p in CH2_POLICIES:
            if p.lower() == text.lower():
                return PolicySpec(p, {}, ch2=p)
        try:
            preset = read_preset(text)
        except FawkesError:
            preset = None
        if preset is None or preset.resize is None:
            raise FawkesError(f"experiment ch2 takes --policy one of {', '.join(CH2_POLICIES)} or a chapter-2 "
                              f"preset, not {text!r}")
        return PolicySpec(preset.name, {}, ch2=preset.resize.policy,
                          ch2_params={k: getattr(preset.resize, k) for k in preset.explicit - {"policy"}})
    names = {n.lower(): n for n in policy_names()}
    if text.lower() in names:
        ov = {"policy": names[text.lower()]} | extra
        label = names[text.lower()] + _label_suffix(extra)
        _validate(ov)
        return PolicySpec(label, ov)
    looks_like_path = text.endswith((".yaml", ".yml")) or os.sep in text
    preset = read_preset(text)  # raises ConfigError naming the file on a bad preset
    if preset.settings is None:
        raise FawkesError(f"preset {text!r} is a chapter-2 runner policy ({preset.resize.policy}); "
                          "use it with the ch2 experiment")
    settings = preset.settings
    ov = {k: getattr(settings, k) for k in preset.explicit} | extra
    ov.setdefault("policy", settings.policy)
    _validate(ov)
    label = (Path(text).stem if looks_like_path else text) + _label_suffix(extra)
    return PolicySpec(label, ov)


def _label_suffix(extra: dict[str, Any]) -> str:
    return "" if not extra else "[" + ",".join(f"{k}={v}" for k, v in extra.items()) + "]"


def _parse_sets(sets: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in sets:
        if "=" not in item:
            raise FawkesError(f"--set expects KEY=VALUE, not {item!r}")
        k, v = item.split("=", 1)
        k = k.strip()
        if k not in Settings.model_fields:
            raise FawkesError(f"--set: unknown setting {k!r}; known: {', '.join(sorted(Settings.model_fields))}")
        out[k] = _coerce(v.strip(), Settings.model_fields[k].annotation)
    return out


def parse_cost(items: Sequence[str]) -> tuple[tuple[str, Any], ...]:
    """``--cost KEY=VALUE`` items as validated cost-model overrides (see :func:`costs.cost_model`)."""
    from fawkes.sim.costs import CostModel, cost_model

    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise FawkesError(f"--cost expects KEY=VALUE, not {item!r}")
        k, v = item.split("=", 1)
        field = CostModel.model_fields.get(k.strip())
        out[k.strip()] = _coerce(v.strip(), field.annotation if field is not None else None)
    over = tuple(out.items())
    try:
        cost_model(over)
    except ValueError as exc:
        raise FawkesError(f"--cost: {exc}") from None
    return over


def _coerce(v: str, annotation: Any = None) -> Any:
    """A ``KEY=VALUE`` item's value: a field's own word as it is (``penalty=off``, ``placement=none``: the
    field's Literal choices), else true/false/none and numbers converted."""
    import typing

    if typing.get_origin(annotation) is typing.Literal and v in typing.get_args(annotation):
        return v
    low = v.lower()
    if low in ("true", "yes", "on"):
        return True
    if low in ("false", "no", "off"):
        return False
    if low in ("none", "null"):
        return None
    for conv in (int, float):
        try:
            return conv(v)
        except ValueError:
            pass
    return v


def _validate(ov: dict[str, Any]) -> None:
    """Each override on its own (the experiment's period is known later: :func:`settings_for`)."""
    try:
        Settings(**({"period_s": MAX_SECONDS} | ov))
    except Exception as exc:  # pydantic.ValidationError
        raise FawkesError(f"invalid policy settings {ov}: {_first_line(exc)}") from None


def _first_line(exc: Exception) -> str:
    lines = [ln for ln in str(exc).splitlines() if ln.strip()]
    return " ".join(lines[:3])


def settings_for(wl: Workload, spec: PolicySpec, grow: str | None = None) -> Settings:
    """Experiment defaults (T, grow type, idle timeout), then the policy's explicit choices."""
    base: dict[str, Any] = {"period_s": wl.period_s, "grow_type": wl.grow_type} | dict(wl.settings)
    base.pop("policy", None)
    if grow:
        base["grow_type"] = Role.TR if grow.lower() in ("tr", "transient") else Role.TC
    try:
        return Settings(**(base | spec.overrides))
    except ValueError as exc:  # pydantic.ValidationError: overrides that clash with the experiment's
        raise FawkesError(f"invalid policy settings for {wl.name}: {_first_line(exc)}") from None


# --- caches (per process) ------------------------------------------------------------------------

_REFS: dict[tuple[int, int], tuple[Workload, tuple[float, ...]]] = {}


def reference_runtimes(wl: Workload, n_core: int = 10) -> tuple[float, ...]:
    """Each job's runtime alone on a static cluster of ``n_core`` core nodes (A-23); cached."""
    key = (id(wl), n_core)
    hit = _REFS.get(key)
    if hit is not None and hit[0] is wl:
        return hit[1]
    if len(_REFS) > 64:
        _REFS.clear()
    refs = []
    for j in wl.jobs:
        if j.ref_runtime_s:
            refs.append(float(j.ref_runtime_s))
            continue
        sim = Simulator(static_job_workload(j, wl.cost, n_core)).run()
        job = sim.done_jobs[0]
        refs.append(job.end - job.submit)
    _REFS[key] = (wl, tuple(refs))
    return _REFS[key][1]


def run_one(wl: Workload, spec: PolicySpec, seed: int, *, grow: str | None = None, timeline: bool = False,
            check: bool = False, experiment: str | None = None) -> RunResult:
    t0 = time.perf_counter()
    refs = list(reference_runtimes(wl))
    if spec.ch2:
        params = ResizeParams.for_policy(spec.ch2, **spec.ch2_params)
        sim = Simulator(wl, None, refs=refs, ch2=params, timeline=timeline, seed=seed).run()
    else:
        settings = settings_for(wl, spec, grow)
        sim = Simulator(wl, settings, refs=refs, timeline=timeline, check_invariants=check, seed=seed).run()
    return collect(sim, experiment or wl.name, spec.label, seed, time.perf_counter() - t0, timeline)


def _chunk(args) -> list[RunResult]:
    experiment, seed, specs, grow, check, scale, timeline, cost = args
    wl = generate(experiment, seed, scale, cost)
    return [run_one(wl, s, seed, grow=grow, check=check, timeline=timeline, experiment=experiment) for s in specs]


def run_matrix(experiment: str, specs: Sequence[PolicySpec], seeds: Sequence[int], *, grow: str | None = None,
               check: bool = False, scale: int = 1, workers: int | None = None, timeline: bool = False,
               progress: Callable[[int, int, str], None] | None = None,
               workload: Workload | None = None, cost: tuple[tuple[str, Any], ...] = ()) -> dict[str, list[RunResult]]:
    """Every policy on every seed; results grouped by policy label, in seed order.

    ``cost`` overrides the experiment's cost model (:func:`parse_cost`); a trace ``workload``
    carries its own."""
    specs = list(specs)
    total = len(specs) * len(seeds)
    out: dict[str, list[RunResult]] = {s.label: [] for s in specs}
    done = 0
    if workload is not None:  # a trace: one workload, durations drawn per seed
        for seed in seeds:
            wl = reseed(workload, seed)
            for s in specs:
                out[s.label].append(run_one(wl, s, seed, grow=grow, check=check, timeline=timeline,
                                            experiment=workload.name))
                done += 1
                if progress:
                    progress(done, total, f"{s.label} seed {seed}")
        return out
    experiment = experiment_name(experiment)
    half = max(1, math.ceil(len(specs) / 2))
    chunks = [(experiment, seed, tuple(specs[i:i + half]), grow, check, scale, timeline, cost)
              for seed in seeds for i in range(0, len(specs), half)]
    n_workers = workers if workers is not None else min(os.cpu_count() or 1, len(chunks))
    if n_workers <= 1 or total <= 2:
        results = []
        for ch in chunks:
            rs = _chunk(ch)
            results.append(rs)
            done += len(rs)
            if progress:
                progress(done, total, f"seed {ch[1]}")
    else:
        import multiprocessing as mp

        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
        with ProcessPoolExecutor(max_workers=n_workers, mp_context=ctx) as pool:
            results = []
            for ch, rs in zip(chunks, pool.map(_chunk, chunks)):
                results.append(rs)
                done += len(rs)
                if progress:
                    progress(done, total, f"seed {ch[1]}")
    for rs in results:
        for r in rs:
            out[r.policy].append(r)
    for v in out.values():
        v.sort(key=lambda r: r.seed)
    return out


def compare(experiment: str, specs: Sequence[PolicySpec], seeds: Sequence[int], **kw) -> list[dict[str, Any]]:
    """Aggregated results (means over seeds plus spread), one per policy, in the given order."""
    matrix = run_matrix(experiment, specs, seeds, **kw)
    return [aggregate(matrix[s.label]) for s in specs]


def default_policy(experiment: str) -> str:
    """The weighting of Table 3.2 for each experiment (A: JD; B-E: TD; ch2: GS; traces: TD)."""
    return {"ch2": "GS", "A": "JD"}.get(experiment, "TD")


def default_specs(experiment: str, which: str) -> list[PolicySpec]:
    """``all`` or a comma list of policies, for ``--compare``."""
    exp = experiment_name(experiment) if experiment in EXPERIMENTS or experiment.lower() in (
        e.lower() for e in EXPERIMENTS) else experiment
    if which.strip().lower() == "all":
        names = CH2_POLICIES if exp == "ch2" else FAWKES_POLICIES
    else:
        names = tuple(n for n in (x.strip() for x in which.split(",")) if n)
        if not names:
            raise FawkesError("--compare needs 'all' or a comma-separated list of policies")
    return [parse_policy(n, exp) for n in names]
