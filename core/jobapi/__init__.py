"""The job API: what a job file imports and how a job file becomes a JobGraph.

* job files: ``environment`` (``build(env)`` receives an ``ExecutionEnvironment``) and
  ``counters``;
* client and TaskManagers: ``loader.load_job``, ``artifact.pack_artifact`` /
  ``unpack_artifact``;
* the JobMaster: ``inputsplits.plan_splits`` and ``sinkfolders.initialize_sinks`` (the
  engine reads the splits and writes the sinks), so the JobManager never imports Spark.

Nothing here runs Spark; the engine does.
"""
