"""Liveness of peers: heartbeats both ways, judged by a phi-accrual failure detector.

Pure and clock-free: callers pass ``now`` (monotonic seconds). Endpoints own a
HeartbeatMonitor on their main thread and poll it from a periodic timer.
"""

from clusterdeck.core.heartbeat._monitor import HeartbeatMonitor
from clusterdeck.core.heartbeat._phi import PhiAccrualFailureDetector, detection_delay

__all__ = ["HeartbeatMonitor", "PhiAccrualFailureDetector", "detection_delay"]
