"""The protocol: every message as a frozen dataclass, every topic, one gateway per endpoint,
and the data types messages carry (the JobGraph, execution and job states, failures,
result-partition wiring, the snapshot of a job's ExecutionGraph).

Everything here is data checked by the codec; nothing imports a runtime room.
"""
