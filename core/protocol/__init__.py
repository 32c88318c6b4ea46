"""The protocol: every message as a frozen dataclass, one module per conversation gathered
in ``messages``; every topic, one gateway per endpoint, and the data types messages carry
(the JobGraph, execution and job states, failures, result-partition wiring, the snapshot of
a job's ExecutionGraph); the formats processes agree on beside the messages: the ids of
jobs, subtasks and attempts (``ids``) and a job's work-dir layout (``workdir``).

Everything here is data checked by the codec; nothing imports a runtime room.
"""
