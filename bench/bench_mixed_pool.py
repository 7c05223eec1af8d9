#!/usr/bin/env python3
"""The mixed-pool benchmark (issue 24): ``bench/bench_lab_policies.py --mixed`` under its own name.

    sudo python3 bench/bench_mixed_pool.py [--reps 3] [--policies None,td-damped-tr] [--dir DIR] [--json FILE] ...

One Spark (spark-hdfs), one Flink (flink-hdfs) and one Dask MR-cluster on the same 6 lab hosts of 0.33 CPU
and 2 GiB (fawkes.demo.MIXED_PLAN), a burst of each kind's CPU-bound job on each cluster in turn,
td-damped-tr (td-damped growing by transient nodes) against None in an order counterbalanced across repetitions and paired inside each; the target checked
for every cluster.  Every option of bench_lab_policies.py applies (see its docstring).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_lab_policies

if __name__ == "__main__":
    if "--mixed" not in sys.argv:
        sys.argv.insert(1, "--mixed")
    bench_lab_policies.main()
