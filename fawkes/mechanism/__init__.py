"""The FAWKES mechanism, pure: functions of a :class:`Snapshot`, no I/O, no clock.

The loop: :mod:`fawkes.mechanism.controller` (``controller.tick`` and ``controller.between``,
each (memory, snapshot) in, (plan, next memory) out), built on :func:`decide` (one tick),
:func:`admit_now` (admission between ticks) and :func:`refill` (grow towards standing targets
as hosts free up); :func:`sample_cluster` builds a policy sample.  Types live in
:mod:`fawkes.mechanism.model`, the loop's memory in :mod:`fawkes.mechanism.memory`.
"""

from fawkes.mechanism.admission import Admission, admit
from fawkes.mechanism.decide import Decision, admit_now, decide, refill
from fawkes.mechanism.inactivity import is_inactive, next_idle_since
from fawkes.mechanism.model import (
    CLUSTER_TRANSITIONS,
    ClusterMetrics,
    ClusterRequest,
    ClusterState,
    ClusterView,
    Grow,
    JobFacts,
    NodeView,
    Plan,
    Role,
    Shrink,
    ShrinkMode,
    Snapshot,
)
from fawkes.mechanism.plan import plan_towards, shrink_victims
from fawkes.mechanism.policies import get_policy, normalise, policy_names, register
from fawkes.mechanism.sampling import sample_cluster
from fawkes.mechanism.settings import Settings
from fawkes.mechanism.targets import weighted_targets
from fawkes.mechanism.memory import ClusterMemory, Memory
from fawkes.mechanism import controller  # noqa: E402  (after what it imports)

__all__ = [
    "CLUSTER_TRANSITIONS", "ClusterMemory", "Memory", "controller", "Admission", "ClusterMetrics", "ClusterRequest", "ClusterState", "ClusterView", "Decision", "Grow",
    "JobFacts", "NodeView", "Plan", "Role", "Settings", "Shrink", "ShrinkMode", "Snapshot", "admit",
    "admit_now", "decide", "get_policy", "is_inactive", "next_idle_since", "normalise", "plan_towards",
    "policy_names", "refill", "register", "sample_cluster", "shrink_victims", "weighted_targets",
]
