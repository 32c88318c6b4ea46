"""Deployment reconciliation, after Flink's ExecutionDeploymentReconciler: what a
TaskManager reports it runs, held against what the JobMaster believes it deployed there.

A final update can be lost (its sender gave up, an error dropped it): without this the
attempt would stay RUNNING and its job wait for ever. An attempt the JobMaster expects
but the TaskManager no longer reports, twice in a row, is lost; one the TaskManager runs
but the JobMaster does not know (a zombie of an earlier attempt) is to be cancelled. Pure
logic: the JobMaster asks for the reports and carries out the answer.
"""

from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

from clusterdeck.core.protocol import messages as p

MISSES_TO_LOSE = 2  # one miss may be an update on its way; two heartbeats apart are not


@dataclass(frozen=True)
class Reconciliation:
    lost: tuple[str, ...] = ()  # expected there, reported by neither list
    unknown: tuple[str, ...] = ()  # running there, not an attempt the JobMaster has there


class DeploymentReconciler:
    """Used on the JobMaster's main thread only."""

    def __init__(self, misses_to_lose: int = MISSES_TO_LOSE) -> None:
        self.misses_to_lose = misses_to_lose
        self._misses: dict[str, int] = {}

    def reconcile(self, report: p.ExecutionReport, expected: Set[str],
                  known: Set[str]) -> Reconciliation:
        """``expected``: attempts the TaskManager confirmed (deployed or running);
        ``known``: those plus deployments it may not have received yet."""
        reported = set(report.running) | set(report.reporting)
        lost = []
        for attempt_id in expected:
            if attempt_id in reported:
                self._misses.pop(attempt_id, None)
                continue
            misses = self._misses.get(attempt_id, 0) + 1
            if misses >= self.misses_to_lose:
                self._misses.pop(attempt_id, None)
                lost.append(attempt_id)
            else:
                self._misses[attempt_id] = misses
        unknown = [a for a in report.running if a not in known]
        return Reconciliation(tuple(sorted(lost)), tuple(unknown))

    def forget(self, attempt_id: str) -> None:
        """The attempt ended: nothing more to expect of it."""
        self._misses.pop(attempt_id, None)
