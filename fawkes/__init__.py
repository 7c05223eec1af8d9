"""fawkes: balance several Hadoop/Spark MR-clusters on one SSH-reachable machine pool.

The mechanism (:mod:`fawkes.mechanism`) is pure: weights, discrimination, admission,
targets and the grow/shrink plan are functions of a snapshot.  The simulator
(:mod:`fawkes.sim`) and the live coordinator (:mod:`fawkes.coordinator`) are its two callers.
"""

__version__ = "0.1.0"
