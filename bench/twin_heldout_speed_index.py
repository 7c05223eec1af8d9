#!/usr/bin/env python3
"""The held-out twin's errors with the single-job cluster as the runs' speed index (exploratory, issue 25).

    python3 bench/twin_heldout_speed_index.py RESULT.json [RESULT.json ...]

In every stream of ``bench/bench_twin_heldout.py`` one cluster gets a single job, which runs alone on its
1-node cluster under both policies when the policy does not grow it (its peak nodes 1 in the policy run):
the same work on the same shape, so its response time in the None run over the policy run is how much
slower the machine ran the None run (a speed index measured inside both runs, beside the loaded clusters).
Per seed: that ratio ``k``, and each loaded cluster's predicted None slowdown against the measured one
divided by ``k`` (error = predicted / (measured / k) - 1), beside the recorded verdict's error.  A seed
whose single-job cluster grew in the policy run (its peak nodes: recorded in the results since 2026-11-28
19:50 UTC, else read from the ``.log`` beside it) has no index (skipped, said).  Reads results files only.
Exploratory: thought of after the seeds below had run, so it judges none of them.
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def peak_nodes(doc: dict, log: Path | None) -> dict[str, int]:
    """The policy run's peak nodes per cluster: recorded in the results (``policy_run.peak_nodes``), else read
    from the run's printed table in ``log`` (the results file's ``.log`` beside it); {} when neither has them."""
    if doc["policy_run"].get("peak_nodes"):
        return doc["policy_run"]["peak_nodes"]
    if log is None or not log.is_file():
        return {}
    lines = log.read_text().splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith(f"--- {doc['policy']} (")), None)
    out = {}
    for ln in lines[start + 3:] if start is not None else []:
        f = ln.split()
        if len(f) != 5 or not f[1].isdigit():
            break
        out[f[0]] = int(f[4])
    return out


def speed_index(doc: dict, peaks: dict[str, int] | None = None) -> tuple[str, float] | None:
    """(the single-job cluster, its response in the None run over the policy run), or None (no single job,
    or its cluster grew in the policy run: ``peaks``, from :func:`peak_nodes`, must say 1)."""
    per = {}
    for _, c in doc["stream"]:
        per[c] = per.get(c, 0) + 1
    single = [c for c, n in per.items() if n == 1]
    if len(single) != 1:
        return None
    c = single[0]
    if (peaks or {}).get(c) != 1:
        return None
    pol = [j["response_s"] for j in doc["policy_run"]["jobs"] if j["cluster"] == c]
    none = [j["response_s"] for j in doc["measured"]["None"]["jobs"] if j["cluster"] == c]
    if len(pol) != 1 or len(none) != 1 or pol[0] <= 0:
        return None
    return c, none[0] / pol[0]


def errors(doc: dict, peaks: dict[str, int]) -> dict | None:
    """Per loaded cluster: predicted, measured (first R), measured / k, the error against it, and the recorded
    verdict's error; None without a speed index."""
    got = speed_index(doc, peaks)
    if got is None:
        return None
    single, k = got
    pred = doc["prediction"]["predicted"]["None"]["cluster_mean_slowdown"]
    meas = doc["measured"]["None"]["slowdowns"]
    recorded = {r["cluster"]: r["error"] for r in doc["comparison"]["rows"] if r["label"] == "None"}
    out = {}
    for c in meas:
        if c == single:
            continue
        adj = meas[c] / k
        out[c] = {"predicted": pred[c], "measured": meas[c], "indexed": adj, "error": pred[c] / adj - 1,
                  "recorded_error": recorded.get(c)}
    return {"single": single, "k": k, "clusters": out}


def main(argv=None) -> int:
    paths = [Path(p) for p in (argv if argv is not None else sys.argv[1:])]
    if not paths:
        print("error: expected one or more results files of bench/bench_twin_heldout.py", file=sys.stderr)
        return 2
    docs = []
    for p in paths:
        try:
            doc = json.loads(p.read_text())
            doc["stream"], doc["measured"]["None"], doc["prediction"]["predicted"]["None"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"error: {p}: not a finished held-out run ({exc})", file=sys.stderr)
            return 2
        docs.append((p, doc))
    idx, rec = [], []
    for p, doc in docs:
        e = errors(doc, peak_nodes(doc, p.with_suffix(".log")))
        if e is None:
            print(f"seed {doc['seed']}: no single-job cluster at 1 node in the policy run: skipped")
            continue
        print(f"seed {doc['seed']} ({p.name}): speed index {e['single']} None / policy {e['k']:.3f}")
        for c, r in e["clusters"].items():
            idx.append(abs(r["error"]))
            if r["recorded_error"] is not None:
                rec.append(abs(r["recorded_error"]))
            print(f"  {c:<4} predicted {r['predicted']:.2f}  measured {r['measured']:.2f} / k = {r['indexed']:.2f}  "
                  f"error {100 * r['error']:+.0f} %  (recorded verdict {100 * (r['recorded_error'] or 0):+.0f} %)")
    if idx:
        print(f"loaded clusters: median |error| indexed {100 * statistics.median(idx):.1f} % (max {100 * max(idx):.1f} %), "
              f"recorded {100 * statistics.median(rec):.1f} % (max {100 * max(rec):.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
