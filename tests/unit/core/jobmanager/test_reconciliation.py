"""Reports of what a TaskManager runs, held against what its JobMaster deployed there."""

from __future__ import annotations

from clusterdeck.core.jobmanager.reconciliation import DeploymentReconciler
from clusterdeck.core.protocol import messages as p


def report(running: tuple[str, ...] = (), reporting: tuple[str, ...] = ()) -> p.ExecutionReport:
    return p.ExecutionReport("tm-1", running, reporting)


def test_an_attempt_missing_from_two_reports_in_a_row_is_lost() -> None:
    reconciler = DeploymentReconciler()
    assert reconciler.reconcile(report(), {"a"}, {"a"}).lost == ()
    assert reconciler.reconcile(report(), {"a"}, {"a"}).lost == ("a",)


def test_a_report_listing_the_attempt_again_resets_its_misses() -> None:
    reconciler = DeploymentReconciler()
    reconciler.reconcile(report(), {"a"}, {"a"})
    reconciler.reconcile(report(running=("a",)), {"a"}, {"a"})
    assert reconciler.reconcile(report(), {"a"}, {"a"}).lost == ()


def test_an_attempt_whose_final_update_is_on_its_way_is_not_lost() -> None:
    reconciler = DeploymentReconciler()
    for _ in range(5):
        assert reconciler.reconcile(report(reporting=("a",)), {"a"}, {"a"}).lost == ()


def test_a_deployment_not_yet_confirmed_is_never_taken_for_lost() -> None:
    reconciler = DeploymentReconciler()
    for _ in range(5):
        assert reconciler.reconcile(report(), set(), {"a"}).lost == ()


def test_an_attempt_running_that_the_jobmaster_does_not_know_is_unknown() -> None:
    outcome = DeploymentReconciler().reconcile(report(running=("a", "zombie")), {"a"}, {"a"})
    assert outcome.unknown == ("zombie",)
    assert outcome.lost == ()


def test_a_forgotten_attempt_starts_counting_its_misses_again() -> None:
    reconciler = DeploymentReconciler()
    reconciler.reconcile(report(), {"a"}, {"a"})
    reconciler.forget("a")
    assert reconciler.reconcile(report(), {"a"}, {"a"}).lost == ()
