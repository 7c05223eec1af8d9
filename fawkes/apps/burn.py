"""A CPU-bound word count for the demo and the live benchmarks (not sleep-bound: a node is compute).

usage: burn.py INPUT OUTPUT PARTITIONS CORE_SECONDS_PER_PARTITION

Reads INPUT from HDFS into PARTITIONS map tasks; each hashes (SHA-256 chains) for about
CORE_SECONDS_PER_PARTITION seconds of one unthrottled core of the machine the demo was measured
on (``ITERATIONS_PER_CORE_S`` chained hashes; a task on a 0.25-CPU lab host takes four times
as long), then counts its words; two reduce tasks sum the counts and write "word<TAB>count"
lines to OUTPUT.  The task time therefore scales with the CPU a node has, and a job finishes
sooner on more nodes.
"""

import hashlib
import sys

from pyspark.sql import SparkSession

#: SHA-256 chain steps per second of one core of this machine (measured: 3.9 M/s, 2026-11)
ITERATIONS_PER_CORE_S = 3_900_000


def burn(it, iterations):
    h = b"fawkes" * 10
    for _ in range(iterations):
        h = hashlib.sha256(h).digest()
    for line in it:
        yield line


def main() -> None:
    src, dst, parts, core_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    iterations = int(core_s * ITERATIONS_PER_CORE_S)
    spark = SparkSession.builder.appName("fawkes-burn").getOrCreate()
    sc = spark.sparkContext
    lines = sc.textFile(src, minPartitions=1).repartition(parts)
    counts = (lines.mapPartitions(lambda it: burn(it, iterations))
              .flatMap(lambda ln: ln.split())
              .map(lambda w: (w, 1))
              .reduceByKey(lambda a, b: a + b, numPartitions=2))
    counts.map(lambda kv: f"{kv[0]}\t{kv[1]}").saveAsTextFile(dst)
    spark.stop()


if __name__ == "__main__":
    main()
