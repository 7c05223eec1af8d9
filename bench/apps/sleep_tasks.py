"""A Spark job whose tasks hold their slots without computing (bench/bench_u7_lab.py: an I/O-bound job's
shape, slots occupied, CPU idle).

usage: sleep_tasks.py OUTPUT PARTITIONS SECONDS_PER_TASK
"""

import sys
import time

from pyspark.sql import SparkSession


def main() -> None:
    dst, parts, secs = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    spark = SparkSession.builder.appName("fawkes-sleep-tasks").getOrCreate()
    sc = spark.sparkContext
    sc.parallelize(range(parts), parts).map(lambda i: (time.sleep(secs), str(i))[1]).saveAsTextFile(dst)
    spark.stop()


if __name__ == "__main__":
    main()
