"""Jobs: the dataflow API, the JobGraph, job loading, and the Spark work of a task.

Modules, by who uses them:

* job files: ``api`` (``build(env)`` receives an ``ExecutionEnvironment``);
* client and Dispatcher: ``loader.load_job``, ``artifact.pack_artifact``;
* JobMaster: ``graph``, ``splits.plan_splits``, ``sinks.initialize_sinks``;
* TaskManager (slot threads): ``artifact.unpack_artifact``, ``loader.load_job``,
  ``runtime.run_subtask``, ``runtime.cancel_subtask``, ``exchange.result_partition_path``;
* tests and demos: ``local.run_local``.

This package imports nothing on its own, so ``core.jobs.graph`` stays cheap to import
for the JobManager; only the Spark-side modules import pyspark.
"""
