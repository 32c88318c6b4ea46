"""Process supervision: start generic process specs, restart them by policy, stop them all.

One status enum (``ProcessStatus``), one explicit restart policy (``RestartPolicy``),
and children that die with their supervisor, even when it is killed with SIGKILL. The
supervisor knows nothing about MQTT or the cluster's roles; ``clusterdeck up`` and the
GUI describe the broker, JobManager and TaskManagers to it as ``ProcessSpec``s.
"""

from clusterdeck.core.supervisor._policy import RestartPolicy
from clusterdeck.core.supervisor._process import ProcessInfo, ProcessSpec, ProcessStatus
from clusterdeck.core.supervisor._spawn import RESTARTS_ENV
from clusterdeck.core.supervisor._supervisor import StatusListener, Supervisor

__all__ = [
    "RESTARTS_ENV",
    "ProcessInfo",
    "ProcessSpec",
    "ProcessStatus",
    "RestartPolicy",
    "StatusListener",
    "Supervisor",
]
