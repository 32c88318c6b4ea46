"""Which peers are alive: one failure detector and the last payload per monitored target.

Flink's HeartbeatManager cut without its threads: the owning endpoint feeds received
heartbeats in and, from its periodic timer, asks which targets are lost; the endpoint is
the listener that acts on payloads and losses.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from clusterdeck.core.heartbeat._phi import PhiAccrualFailureDetector

P = TypeVar("P")


@dataclass
class _Target(Generic[P]):
    detector: PhiAccrualFailureDetector
    payload: P | None = None
    reported_lost: bool = False


class HeartbeatMonitor(Generic[P]):
    """Watches targets by id; ``P`` is the payload their heartbeats carry.

    Not thread-safe by design: owned by one endpoint's main thread, which calls
    ``receive`` when a heartbeat arrives and ``lost_targets`` from a periodic timer.

    Monitoring a target counts as its first heartbeat, so a peer that registers and never
    sends one is still declared lost. A lost target is reported once and stays monitored
    (its heartbeats are still recorded) until ``unmonitor`` or a new ``monitor``.
    """

    def __init__(self, interval: float, timeout: float, threshold: float,
                 min_std_deviation: float | None = None) -> None:
        self.interval = interval
        self.timeout = timeout
        self.threshold = threshold
        self.min_std_deviation = min_std_deviation
        self._new_detector()  # fail on bad settings now, not at the first monitor()
        self._targets: dict[str, _Target[P]] = {}

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> HeartbeatMonitor[P]:
        """Built from ``heartbeat.interval``, ``heartbeat.timeout`` and ``heartbeat.threshold``."""
        return cls(config["heartbeat.interval"], config["heartbeat.timeout"],
                   config["heartbeat.threshold"])

    def monitor(self, target_id: str, now: float) -> None:
        """Start (or restart, forgetting its history) watching ``target_id`` at ``now``."""
        detector = self._new_detector()
        detector.heartbeat(now)
        self._targets[target_id] = _Target(detector)

    def unmonitor(self, target_id: str) -> None:
        """Stop watching ``target_id``; unknown ids are ignored."""
        self._targets.pop(target_id, None)

    def receive(self, target_id: str, payload: P, now: float) -> bool:
        """Record a heartbeat; False (and nothing recorded) when the target is not monitored."""
        target = self._targets.get(target_id)
        if target is None:
            return False
        target.payload = payload
        target.detector.heartbeat(now)
        return True

    def lost_targets(self, now: float) -> list[str]:
        """Targets newly believed dead at ``now``; each is reported once. Phi decides, and
        a silence longer than ``timeout`` is always a loss: with jittery heartbeats phi
        alone would wait ``y * std`` more, and checked once per interval, a hang would be
        noticed later than heartbeat.timeout + one interval."""
        lost = [target_id for target_id, target in self._targets.items()
                if not target.reported_lost and self._silent(target, now)]
        for target_id in lost:
            self._targets[target_id].reported_lost = True
        return lost

    def all_quiet(self, now: float, within: float) -> bool:
        """Whether a target not yet reported lost would be reported at ``now`` while none
        of them was heard from within ``within`` seconds: what the watcher's own link
        going down looks like (their silences began together, though each crosses its
        threshold in a round of its own), rather than one peer failing on its own."""
        watched = [target for target in self._targets.values() if not target.reported_lost]
        return any(self._silent(target, now) for target in watched) and all(
            target.detector.last_heartbeat is None
            or now - target.detector.last_heartbeat > within for target in watched)

    def _silent(self, target: _Target[P], now: float) -> bool:
        last = target.detector.last_heartbeat
        return (not target.detector.is_available(now)
                or (last is not None and now - last > self.timeout))

    def last_payload(self, target_id: str) -> P | None:
        """The payload of the target's last heartbeat; None if unknown or none arrived yet."""
        target = self._targets.get(target_id)
        return None if target is None else target.payload

    def heartbeat_age(self, target_id: str, now: float) -> float | None:
        """Seconds since the last heartbeat (or since ``monitor``); None if unknown."""
        target = self._targets.get(target_id)
        last = None if target is None else target.detector.last_heartbeat
        return None if last is None else now - last

    def targets(self) -> list[str]:
        """The monitored target ids, lost ones included, in the order they were monitored."""
        return list(self._targets)

    def _new_detector(self) -> PhiAccrualFailureDetector:
        # heartbeat.timeout counts the whole silence tolerated; the detector adds its pause
        # to the mean interval, so it gets timeout - interval and a silent peer is declared
        # lost within heartbeat.timeout + one interval of its last heartbeat.
        pause = max(0.0, self.timeout - self.interval)
        return PhiAccrualFailureDetector(
            first_heartbeat_estimate=self.interval, acceptable_heartbeat_pause=pause,
            threshold=self.threshold, min_std_deviation=self.min_std_deviation)
