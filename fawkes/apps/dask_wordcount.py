"""Word count on a Dask cluster for the lab tests: reads INPUT (a text file on shared storage), writes
"word<TAB>count" lines to OUTPUT/part-NNNNN.

usage: dask_wordcount.py INPUT OUTPUT PARTITIONS SLEEP_PER_PARTITION_S
The scheduler is DASK_SCHEDULER_ADDRESS (what the ``dask`` kind's job_command sets).  The sleep makes
the job last long enough to grow and shrink the cluster while it runs.  Every task is a pure function
of its inputs and the output files are written by the client after the counts are final, so a worker
killed mid-run (its keys recomputed by the scheduler) changes nothing in the result.
"""

import os
import sys
import time

import dask.bag as db
from distributed import Client


def slow(lines, delay):
    time.sleep(delay)
    return lines


def main() -> None:
    src, dst, parts, delay = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    client = Client(os.environ["DASK_SCHEDULER_ADDRESS"], timeout=60)
    # blocks of about size/PARTITIONS bytes (split at line ends), read by the workers from shared storage;
    # each partition is a task that sleeps, then is counted
    size = os.path.getsize(src)
    bag = db.read_text(src, blocksize=max(1, -(-size // parts))).map_partitions(slow, delay)
    counts = bag.str.split().flatten().frequencies(split_every=8).compute()
    counts = sorted(counts)
    os.makedirs(dst, exist_ok=True)
    n_out = 4
    for i in range(n_out):
        with open(os.path.join(dst, f"part-{i:05d}.fawkes-tmp"), "w") as f:
            for w, c in counts[i::n_out]:
                f.write(f"{w}\t{c}\n")
        os.replace(os.path.join(dst, f"part-{i:05d}.fawkes-tmp"), os.path.join(dst, f"part-{i:05d}"))
    open(os.path.join(dst, "_SUCCESS"), "w").close()
    client.close()


if __name__ == "__main__":
    main()
