"""Allocation and queue length of each MR-cluster over time (like the thesis' figures 3.6-3.11)."""

from __future__ import annotations

from pathlib import Path

from fawkes.errors import FawkesError


def plot_timeline(result, path: str | Path, title: str | None = None) -> Path:
    """Two panels sharing the time axis: nodes held per cluster (stacked steps) and queue length."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise FawkesError("--plot needs matplotlib (pip install 'fawkes[plot]')") from None
    tl = result.timeline
    if not tl:
        raise FawkesError("no timeline recorded for this run")
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise FawkesError(f"--plot: directory {path.parent} does not exist")
    end = result.makespan_s or 1.0
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 6), sharex=True)
    for name, pts in tl["allocation"].items():
        xs = [t / 60 for t, _ in pts] + [end / 60]
        ys = [n for _, n in pts] + [pts[-1][1]]
        ax1.step(xs, ys, where="post", label=name)
    ax1.axhline(tl["capacity"], color="grey", lw=0.8, ls="--", label="capacity")
    for t in tl.get("reconfigurations", []):
        ax1.axvline(t / 60, color="black", lw=0.3, alpha=0.3)
    ax1.set_ylabel("nodes held")
    ax1.legend(loc="upper right", fontsize="small", ncol=4)
    for name, pts in tl["queue"].items():
        if pts:
            ax2.step([t / 60 for t, _ in pts], [q for _, q in pts], where="post", label=name)
    ax2.set_ylabel("jobs in queue (unfinished)")
    ax2.set_xlabel("time [min]")
    ax2.legend(loc="upper right", fontsize="small", ncol=3)
    fig.suptitle(title or f"{result.experiment} / {result.policy} / seed {result.seed}: "
                 f"mean slowdown {result.mean_slowdown:.2f}, {result.reconfigurations} reconfigurations")
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=110)
    except (OSError, ValueError) as exc:
        raise FawkesError(f"--plot: cannot write {path}: {exc}") from None
    finally:
        plt.close(fig)
    return path
