"""Allocation and queue length of each MR-cluster over time (like the thesis' figures 3.6-3.11).

One drawing, two callers: :func:`plot_timeline` for a simulated run, and the live demo
(``fawkes demo``) with what its coordinator recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from fawkes.errors import FawkesError

Steps = Sequence[tuple[float, int]]  # (time, value) change points of a step function


def plot_allocations(path: str | Path, allocation: Mapping[str, Steps], queue: Mapping[str, Steps], *,
                     end: float, title: str, capacity: int | None = None, marks: Sequence[float] = (),
                     unit_s: float = 1.0, unit: str = "s", queue_label: str = "jobs in queue") -> Path:
    """Two panels sharing the time axis: the nodes each cluster holds, stacked (so equal shares
    stay visible and the top of the stack is the pool in use), and each cluster's queue length.

    Times are seconds (divided by ``unit_s`` on the axis); ``marks`` are reconfiguration times.
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FawkesError("plotting needs matplotlib (pip install 'fawkes-provisioner[plot]')") from None
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise FawkesError(f"plot: directory {path.parent} does not exist")
    names = [n for n, pts in allocation.items() if pts]
    grid = sorted({t for n in names for t, _ in allocation[n]} | {end})
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    if names:
        ax1.stackplot([t / unit_s for t in grid], [_at(allocation[n], grid) for n in names], labels=names,
                      step="post", alpha=0.85)
    if capacity is not None:
        ax1.axhline(capacity, color="grey", lw=0.8, ls="--", label="capacity")
    for t in marks:
        ax1.axvline(t / unit_s, color="black", lw=0.3, alpha=0.3)
    ax1.set_ylabel("nodes held (stacked)")
    ax1.legend(loc="upper right", fontsize="small", ncol=4)
    for name, pts in queue.items():
        if pts:
            ax2.step([t / unit_s for t, _ in pts], [q for _, q in pts], where="post", label=name)
    ax2.set_ylabel(queue_label)
    ax2.set_xlabel(f"time [{unit}]")
    ax2.legend(loc="upper right", fontsize="small", ncol=3)
    fig.suptitle(title)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except (OSError, ValueError) as exc:
        raise FawkesError(f"plot: cannot write {path}: {exc}") from None
    finally:
        plt.close(fig)
    return path


def _at(pts: Steps, grid: Sequence[float]) -> list[int]:
    """The step function ``pts`` at every time of ``grid`` (0 before its first point)."""
    out, i, v = [], 0, 0
    for t in grid:
        while i < len(pts) and pts[i][0] <= t:
            v = pts[i][1]
            i += 1
        out.append(v)
    return out


def plot_timeline(result, path: str | Path, title: str | None = None) -> Path:
    """The allocation and queue plot of a simulated run (``fawkes simulate --plot``)."""
    tl = result.timeline
    if not tl:
        raise FawkesError("no timeline recorded for this run")
    return plot_allocations(
        path, tl["allocation"], tl["queue"], end=result.makespan_s or 1.0, capacity=tl["capacity"],
        marks=tl.get("reconfigurations", ()), unit_s=60.0, unit="min", queue_label="jobs in queue (unfinished)",
        title=title or f"{result.experiment} / {result.policy} / seed {result.seed}: "
                       f"mean slowdown {result.mean_slowdown:.2f}, {result.reconfigurations} reconfigurations")
