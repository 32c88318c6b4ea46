"""Reproduce a failed subtask on this machine, with no cluster (docs/reproduce.md).

``clusterdeck reproduce JOB [SUBTASK]`` writes a self-contained folder from what the
JobManager kept of a failed attempt (``bundle.py`` writes it, ``folder.py`` owns its
layout); ``python -m clusterdeck.core.reproduce DIR`` or ``clusterdeck reproduce --run
DIR`` runs just that subtask again on ``local[N]`` Spark (``runner.py``; a streaming
subtask with the job's other subtasks, all restored from the same checkpoint, in
``streamrun.py``). Only ``runner.py`` and ``streamrun.py`` import Spark: the desktop app
writes folders without it.
"""
