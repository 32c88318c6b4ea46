"""The engine: one subtask attempt's operator chain as Spark work on a slot thread.

Sources, operators, the keyed combine, result partitions (the exchange), sinks, PySpark
scripts with their captured output, cancellation by Spark job group, and ``local.run_local``
(a whole job in this process, for tests and demos). Only these modules import pyspark.
"""
