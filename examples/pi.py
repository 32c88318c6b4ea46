"""Monte Carlo estimate of pi: an ordinary PySpark program, unmodified.

    clusterdeck submit examples/pi.py [PARTITIONS] [SAMPLES_PER_PARTITION]

It runs under spark-submit just the same; under clusterdeck it runs as one task in one
slot, on the TaskManager's Spark, and its output comes back to the client.
"""

import sys
from operator import add
from random import random

from pyspark.sql import SparkSession


def inside(_):
    x = random() * 2 - 1
    y = random() * 2 - 1
    return 1 if x * x + y * y <= 1 else 0


if __name__ == "__main__":
    spark = SparkSession.builder.appName("PythonPi").getOrCreate()
    partitions = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    samples = int(sys.argv[2]) if len(sys.argv) > 2 else 100000
    n = partitions * samples
    count = spark.sparkContext.parallelize(range(1, n + 1), partitions).map(inside).reduce(add)
    print(f"Pi is roughly {4.0 * count / n:f}")
    spark.stop()
