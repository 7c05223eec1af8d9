"""Word count for the lab tests: reads INPUT from HDFS, writes "word<TAB>count" lines to OUTPUT.

usage: wordcount.py INPUT OUTPUT PARTITIONS SLEEP_PER_PARTITION_S
The sleep makes the job last long enough to grow and shrink the cluster while it runs.
"""

import sys
import time

from pyspark.sql import SparkSession


def slow(it, delay):
    time.sleep(delay)
    yield from it


def main() -> None:
    src, dst, parts, delay = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    spark = SparkSession.builder.appName("fawkes-wordcount").getOrCreate()
    sc = spark.sparkContext
    lines = sc.textFile(src, minPartitions=parts).repartition(parts)
    counts = (lines.mapPartitions(lambda it: slow(it, delay))
              .flatMap(lambda ln: ln.split())
              .map(lambda w: (w, 1))
              .reduceByKey(lambda a, b: a + b, numPartitions=4))
    counts.map(lambda kv: f"{kv[0]}\t{kv[1]}").saveAsTextFile(dst)
    spark.stop()


if __name__ == "__main__":
    main()
