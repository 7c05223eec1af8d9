#!/usr/bin/env python3
"""The Spark-like job model's calibration: what the Spark event logs fawkes imports say about stages.

    python bench/bench_spark_stages.py [PATH ...] [--out FILE]

Reads every application under the given paths (default: the real event logs of
``tests/fixtures/eventlogs/``, Spark 4.3.0 and 1.2/1.4) with ``fawkes/traces/spark_stages.py`` and
writes its figures with bench/results_meta.py's command, commit, date and load: at each boundary
between a stage and a stage that reads its shuffle, the tasks of the child launched before the
parent's last task finished (a barrier: none), the gap between the two, and whether the child ran on
the parent's executors; per stage the idle share of the executors' cores between its first launch
and its last finish.  ``fawkes/sim/stages.py`` takes its rules and its ``stage_gap_s`` from this file.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout, not an installed fawkes

from bench.results_meta import meta  # noqa: E402
from fawkes.traces.spark_stages import calibrate  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "eventlogs"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="*", type=Path)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    paths = a.paths or [FIXTURES / "etl", FIXTURES / "bi", FIXTURES / "spark-tests"]
    out = {"meta": meta(), "sources": [str(p.relative_to(FIXTURES.parents[2]) if p.is_relative_to(FIXTURES.parents[2])
                                           else p) for p in paths], **calibrate(paths)}
    text = json.dumps(out, indent=1)
    if a.out:
        a.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
