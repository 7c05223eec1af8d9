"""Reclaim-first, straggler-aware elasticity (CERES; spec seeds §001, C-1..C-3).

Pure functions of the snapshot's views, this tick's targets and the settings; no I/O, no clock.
The signals arrive in the snapshot: each node's maximum CPU and memory use over a sliding window
(:class:`~fawkes.mechanism.model.NodeUsage`, ``NodeView.usage``) and each cluster's running jobs'
progress samples (:class:`~fawkes.mechanism.model.JobProgress`, ``ClusterView.progress``).  Every
setting defaults to off, and a snapshot without the signals leaves every decision as it was.

* **Swollen** (C-1, CERES' task filter): a node is swollen when its maximum use over the window
  (``usage_window_s``, and observed that long), the larger of CPU and memory as a fraction of what
  it holds, is below ``swollen_threshold``; a cluster's ratio is the mean of its nodes' ratios
  (:func:`cluster_ratio`).
* **Reclaim first** (C-1, :func:`reclaim_first`): when the clusters the targets want bigger need
  more nodes than are free, the idle swollen nodes of the over-share clusters are taken first, most
  swollen cluster first; then the surplus of swollen clusters (ratio below the threshold), most
  swollen first; only the rest from the other over-share clusters by ``victim_order``.  Never
  below a cluster's weighted share (CERES reclaims swollen allocations whatever their share; here
  a cluster taken below its share would be wanted back at the next tick, preempting another).  With
  ``shrink_amount: full`` every surplus is taken anyway (and the plan removes idle nodes first):
  C-1 changes who gives only when less is taken, with ``demand_capped`` (BIG-C's Algorithm 1).
  An idle node is taken without killing a task: preemptions drop.  Nodes are whole here (fawkes
  lends hosts, not container limits), so only *idle* swollen nodes are reclaimed whole; a *busy*
  swollen node is reclaimed in part by UBIS lending, where the config's ``opportunistic:`` section
  opts the short clusters in: its slack goes, capped and under the watchdog, to the clusters left
  short of their targets, before other hosts and other borrowers
  (:func:`fawkes.mechanism.opportunistic.decide`).
* **Straggler** (C-2, :func:`stragglers`): a job's speed over its last ``straggler_window_s`` of
  progress samples (0: the last pair, as CERES) gives ETA = (1 - progress) / speed; a job is a
  straggler when elapsed + ETA exceeds ``straggler_factor`` times its reference runtime, or,
  without one, when its ETA exceeds ``straggler_factor`` times the median ETA of the other running
  jobs of its cluster.
* **Expand** (C-2, :func:`expand`): a cluster with a straggler gets ``straggler_expand_nodes``
  more, only from idle capacity: the pool nodes that no target wants.
* **The pipeline** (C-3, :func:`pipeline`): targets, then reclaim (if short), then the weighted
  preemption of the rest, then (if not short) expansion; restoring victims is BIG-C's regrow
  delay (``regrow_delay_ticks``, :mod:`fawkes.mechanism.preemption`).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from fawkes.mechanism import preemption
from fawkes.mechanism.model import ClusterView, JobProgress, NodeView
from fawkes.mechanism.plan import shrink_victims
from fawkes.mechanism.settings import Settings


# --- C-1: nodes whose use stays far below what they hold are taken first --------------------------

def node_swollen(node: NodeView, threshold: float, window_s: float = 0.0) -> bool:
    """Measured over at least ``window_s``, and its maximum use over that window is below
    ``threshold`` of what it holds (a node observed for less, e.g. one just added, is not judged)."""
    u = node.usage
    return u is not None and u.window_s >= window_s and u.ratio < threshold


def cluster_ratio(view: ClusterView) -> float | None:
    """The cluster's max-utilisation ratio: the mean of its measured settled nodes' ratios."""
    r = [n.usage.ratio for n in view.nodes if n.usage is not None and not n.draining]
    return statistics.fmean(r) if r else None


def swollen_clusters(views: Sequence[ClusterView], threshold: float) -> list[str]:
    """Clusters whose ratio is below ``threshold``, most swollen first."""
    got = [(r, i, c.name) for i, c in enumerate(views) if (r := cluster_ratio(c)) is not None and r < threshold]
    return [n for _, _, n in sorted(got)]


def reclaimable(view: ClusterView, settings: Settings) -> list[NodeView]:
    """The idle swollen nodes the plan would remove first from ``view``: the prefix of its removal
    order (:func:`~fawkes.mechanism.plan.shrink_victims`: transient by fewest tasks, then
    transient-core by stored bytes; never core, never below the minimum) that runs no task and is
    swollen.  Taking them kills nothing, and the plan takes exactly these."""
    thr = settings.swollen_threshold
    if thr is None:
        return []
    out = []
    for n in shrink_victims(view, view.settled, settings):
        if n.running_tasks > 0 or not node_swollen(n, thr, settings.usage_window_s):
            break
        out.append(n)
    return out


def reclaim_first(targets: Mapping[str, int], views: Sequence[ClusterView], pool: int,
                  discrimination: Mapping[str, float], settings: Settings,
                  shares: Mapping[str, int] | None = None) -> tuple[dict[str, int], dict[str, int]]:
    """C-1: who gives the nodes the growing clusters need: idle swollen nodes first, then the
    surplus of swollen clusters, then the other over-share clusters by ``victim_order``.  Returns
    (targets, idle swollen nodes reclaimed per cluster); unchanged when nothing is short or
    nothing is swollen.

    ``shares`` are the targets before BIG-C's demand cap (default ``targets``): a donor gives at
    most its surplus over its share, ``settled - shares``, so no cluster is taken below the share
    its weights give it (taken below it, the weights want it back at the next tick, and without a
    free host that preempts another cluster; in SIM-C1 the bound never binds: the same figures
    without it, seeds 1-5).  Need: what the clusters ``targets`` want bigger lack
    beyond the nodes free or on their way back (``pool`` less the settled nodes).  The growing
    clusters' targets are unchanged, and so is what the donors give in total."""
    if settings.swollen_threshold is None:
        return dict(targets), {}
    shares = targets if shares is None else shares
    by = {c.name: c for c in views}
    settled = {n: by[n].settled if n in by else 0 for n in targets}
    grow = sum(t - settled[n] for n, t in targets.items() if t > settled[n])
    spare = max(0, pool - sum(c.settled for c in views if c.name in targets))
    need = grow - spare
    if need <= 0:
        return dict(targets), {}
    donors = [c for c in views if c.name in targets and targets[c.name] <= c.settled]
    avail = {c.name: max(0, c.settled - min(shares.get(c.name, targets[c.name]), c.settled)) for c in donors}
    pos = {c.name: i for i, c in enumerate(views)}
    donors.sort(key=lambda c: (r if (r := cluster_ratio(c)) is not None else math.inf, pos[c.name]))
    reclaimed: dict[str, int] = {}
    left = need
    for c in donors:
        if left <= 0:
            break
        k = min(len(reclaimable(c, settings)), avail[c.name], left)
        if k > 0:
            reclaimed[c.name] = k
            left -= k
    rest = {c.name: k for c in donors if (k := avail[c.name] - reclaimed.get(c.name, 0)) > 0}
    taken: dict[str, int] = {}
    for name in swollen_clusters([c for c in donors if c.name in rest], settings.swollen_threshold):
        k = min(rest.pop(name), left)  # swollen allocations' surplus next, most swollen first
        if k > 0:
            taken[name] = k
            left -= k
    if not reclaimed and not taken:
        return dict(targets), {}
    taken |= preemption.take_order(rest, min(left, sum(rest.values())), views, discrimination, settings)
    out = dict(targets)
    for c in donors:
        out[c.name] = c.settled - reclaimed.get(c.name, 0) - taken.get(c.name, 0)
    return out, reclaimed


# --- C-2: a job far slower than its peers grows its cluster ---------------------------------------

@dataclass(frozen=True)
class Estimate:
    """A job's speed over its last window and the one before it, and its ETA (inf: no progress
    in the last window)."""

    job: str
    progress: float
    at: float  # time of the last sample
    speed_cur: float
    speed_prev: float | None  # None: the job is not two windows old
    eta_s: float
    elapsed_s: float | None = None


#: the most samples kept per job (a short sample period over a long window keeps at most this many)
MAX_KEPT = 256


def _anchor(s: Sequence[tuple[float, float]], k: int, window_s: float) -> int:
    """The last sample before ``s[k]`` at least ``window_s`` older than it; the first when none is."""
    for j in range(k - 1, -1, -1):
        if s[j][0] <= s[k][0] - window_s:
            return j
    return 0


def keep_progress(samples: Sequence[tuple[float, float]], at: float, done: float,
                  window_s: float) -> tuple[tuple[float, float], ...]:
    """A job's progress samples with ``(at, done)`` added: what :func:`estimate` still needs (the
    last three, and the last two windows with the sample just before them).  A sample not later
    than the last one kept is dropped.  The coordinator's sampler and the simulator's collector
    both keep their samples with it, so the two estimate from the same memory."""
    if samples and samples[-1][0] >= at:
        return tuple(samples)
    s = (*samples, (at, done))
    i = _anchor(s, len(s) - 1, window_s)
    first = _anchor(s, i, window_s) if i > 0 else 0  # the oldest sample estimate() reads
    first = min(first, len(s) - 3) if len(s) >= 3 else 0
    return s[max(first, len(s) - MAX_KEPT):]


def estimate(p: JobProgress, window_s: float = 0.0) -> Estimate | None:
    """ETA = (1 - progress) / ``speed_cur``, the speed over the last ``window_s`` (from the last sample
    at least that old; from the first while the job is younger) and ``speed_prev`` over the window
    before it.  ``window_s`` 0 is CERES' last three samples: the last pair, and the pair before.
    Progress moves in whole tasks, so a window shorter than a few tasks reads no progress most of
    the time (no ETA) and a burst the rest.  None with fewer than three samples, times not
    increasing, or the job done."""
    s = p.samples
    if len(s) < 3:
        return None
    t3, p3 = s[-1]
    if p3 >= 1.0:
        return None
    i = _anchor(s, len(s) - 1, window_s)
    j = _anchor(s, i, window_s) if i > 0 else None
    lo = i if j is None else j
    if any(a[0] >= b[0] for a, b in zip(s[lo:], s[lo + 1:])):
        return None
    (ti, pi) = s[i]
    cur = max(0.0, (p3 - pi) / (t3 - ti))
    prev = None if j is None else max(0.0, (pi - s[j][1]) / (ti - s[j][0]))
    eta = (1.0 - p3) / cur if cur > 0 else math.inf
    elapsed = t3 - p.started_at if p.started_at is not None else None
    return Estimate(p.job, p3, t3, cur, prev, eta, elapsed)


def stragglers(views: Sequence[ClusterView], settings: Settings) -> dict[str, list[Estimate]]:
    """Per cluster, its straggling jobs (empty clusters left out).

    With a reference runtime (and a start time) a job straggles when elapsed + ETA exceeds
    ``straggler_factor`` x the reference; without one, when its ETA exceeds ``straggler_factor`` x
    the median ETA of the other jobs of its cluster that have one (at least one other needed).
    A job that made no progress over its last window has no ETA: with a reference it straggles once
    its elapsed time alone passes the bound; without one it is not judged (progress counts finished
    tasks, so a job whose first tasks run shows none yet)."""
    f = settings.straggler_factor
    if f is None:
        return {}
    out: dict[str, list[Estimate]] = {}
    for c in views:
        est = [(p, e) for p in c.progress if (e := estimate(p, settings.straggler_window_s)) is not None]
        slow = []
        for i, (p, e) in enumerate(est):
            if p.expected_s is not None and p.expected_s > 0 and e.elapsed_s is not None:
                if e.elapsed_s + (e.eta_s if math.isfinite(e.eta_s) else 0.0) > f * p.expected_s:
                    slow.append(e)
                continue
            if not math.isfinite(e.eta_s):
                continue
            peers = [o.eta_s for j, (_, o) in enumerate(est) if j != i and math.isfinite(o.eta_s)]
            if peers and e.eta_s > f * max(statistics.median(peers), 1e-9):
                slow.append(e)
        if slow:
            out[c.name] = slow
    return out


def expand(targets: Mapping[str, int], pool: int, slow: Mapping[str, list[Estimate]],
           settings: Settings) -> tuple[dict[str, int], dict[str, int]]:
    """C-2: each cluster with a straggler (in the order of ``targets``) gets up to
    ``straggler_expand_nodes`` more, from idle capacity only: ``pool`` less every target."""
    idle = pool - sum(targets.values())
    out, grown = dict(targets), {}
    for n in targets:
        if idle <= 0:
            break
        if n in slow:
            k = min(settings.straggler_expand_nodes, idle)
            out[n] += k
            grown[n] = k
            idle -= k
    return out, grown


# --- C-3: the ordered per-interval pipeline ----------------------------------------------------

@dataclass(frozen=True)
class CeresOutcome:
    targets: dict[str, int]
    reclaimed: dict[str, int] = field(default_factory=dict)
    stragglers: dict[str, list[Estimate]] = field(default_factory=dict)
    expanded: dict[str, int] = field(default_factory=dict)

    def reason(self) -> str:
        parts = []
        if self.reclaimed:
            parts.append("C-1 reclaimed idle swollen nodes first: " + ", ".join(
                f"{n} {k}" for n, k in self.reclaimed.items()))
        if self.stragglers:
            slow = ", ".join(f"{n} ({', '.join(e.job for e in es)})" for n, es in self.stragglers.items())
            grown = ", ".join(f"{n} +{k}" for n, k in self.expanded.items())
            parts.append(f"C-2 stragglers: {slow}; " + (f"expanded from idle capacity: {grown}" if grown
                                                         else "no idle capacity to expand"))
        return "; ".join(parts)


def active(settings: Settings) -> bool:
    return settings.swollen_threshold is not None or settings.straggler_factor is not None


def pipeline(targets: Mapping[str, int], views: Sequence[ClusterView], pool: int,
             discrimination: Mapping[str, float], settings: Settings,
             shares: Mapping[str, int] | None = None) -> CeresOutcome:
    """C-3 on this tick's targets (weights, minima, BIG-C's refinements already applied):

    1. idle (free or on its way back) vs what the growing clusters need;
    2. short: reclaim idle swollen nodes first (C-1);
    3. still short: the over-share clusters give the rest, by ``victim_order``;
    4. not short and a straggler: expand its cluster from idle capacity (C-2);
    5. (restoring victims: BIG-C's ``regrow_delay_ticks``, in the targets already)."""
    out, reclaimed = reclaim_first(targets, views, pool, discrimination, settings, shares)
    slow = stragglers(views, settings)
    grown: dict[str, int] = {}
    if slow:
        out, grown = expand(out, pool, slow, settings)
    return CeresOutcome(out, reclaimed, slow, grown)
