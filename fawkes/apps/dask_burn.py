"""A CPU-bound word count on a Dask cluster, the counterpart of burn.py for the mixed pool: reads INPUT (a
text file on shared storage) into PARTITIONS tasks, each hashing (SHA-256 chains, ``ITERATIONS_PER_CORE_S``
as burn.py) for about CORE_SECONDS_PER_PARTITION seconds of one core before its words are counted; writes
"word<TAB>count" lines to OUTPUT/part-NNNNN.  The task time scales with the CPU a node has.

usage: dask_burn.py INPUT OUTPUT PARTITIONS CORE_SECONDS_PER_PARTITION
The scheduler is DASK_SCHEDULER_ADDRESS (what the ``dask`` kind's job_command sets).  Self-contained: the
tasks' functions travel to the workers by value.
"""

import hashlib
import os
import sys

import dask.bag as db
from distributed import Client

#: SHA-256 chain steps per second of one core of this machine (burn.py's figure)
ITERATIONS_PER_CORE_S = 3_900_000


def burn(lines, iterations):
    h = b"fawkes" * 10
    for _ in range(iterations):
        h = hashlib.sha256(h).digest()
    return lines


def main() -> None:
    src, dst, parts, core_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    client = Client(os.environ["DASK_SCHEDULER_ADDRESS"], timeout=60)
    size = os.path.getsize(src)
    bag = db.read_text(src, blocksize=max(1, -(-size // parts))).map_partitions(burn, int(core_s * ITERATIONS_PER_CORE_S))
    counts = sorted(bag.str.split().flatten().frequencies(split_every=8).compute())
    os.makedirs(dst, exist_ok=True)
    for i in range(2):
        tmp = os.path.join(dst, f"part-{i:05d}.fawkes-tmp")
        with open(tmp, "w") as f:
            for w, c in counts[i::2]:
                f.write(f"{w}\t{c}\n")
        os.replace(tmp, os.path.join(dst, f"part-{i:05d}"))
    open(os.path.join(dst, "_SUCCESS"), "w").close()
    client.close()


if __name__ == "__main__":
    main()
