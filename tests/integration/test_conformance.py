"""A representative subset of the conformance table (benchmarks/conformance.py): pyspark's
own examples under spark-submit and under ``clusterdeck submit`` give the same exit status
and the same stdout. The full table is in docs/conformance.md."""

from __future__ import annotations

import pytest

from benchmarks import conformance
from benchmarks.conformance import Cluster, Rule, Verdict

RUN_TIMEOUT = 240.0

# RDD with an argument (a multiset of lines), DataFrame with an argument (libsvm in,
# Parquet out and back), SQL, ML on data/mllib: each passes under spark-submit.
PASSING = ["wordcount.py", "ml/dataframe_example.py", "ml/sql_transformer.py",
           "ml/logistic_regression_with_elastic_net.py"]
# Reads examples/src/main/resources/people.json, which the wheel does not ship.
FAILING = "sql/basic.py"


@pytest.fixture(scope="module")
def cluster(up_cluster: Cluster) -> Cluster:
    """``clusterdeck up`` as a user runs it (tests/integration/conftest.py), shared with
    test_script_parity.py."""
    return up_cluster


@pytest.mark.integration
@pytest.mark.timeout(480)
@pytest.mark.parametrize("name", PASSING)
def test_an_example_that_passes_under_spark_submit_passes_under_clusterdeck(
        cluster: Cluster, name: str) -> None:
    outcome = conformance.compare(conformance.program(name), cluster, RUN_TIMEOUT)
    assert outcome.spark_submit.startswith("exit 0"), outcome
    assert outcome.verdict is Verdict.PASSES, outcome


@pytest.mark.integration
@pytest.mark.timeout(480)
def test_an_example_that_fails_under_spark_submit_fails_with_its_status_under_clusterdeck(
        cluster: Cluster) -> None:
    entry = conformance.program(FAILING)
    reference = conformance.spark_submit(entry, RUN_TIMEOUT)
    candidate = cluster.submit(entry, RUN_TIMEOUT)
    outcome = conformance.judge(entry, reference, candidate)
    assert outcome.verdict is Verdict.FAILS_BOTH, outcome
    assert candidate.exit_code == reference.exit_code, outcome
    assert "people.json" in outcome.note, outcome


def test_every_program_the_tables_name_ships_with_the_installed_pyspark() -> None:
    assert conformance.unknown_names() == set()
    assert set(PASSING) | {FAILING} <= set(conformance.discover())
    assert not (set(PASSING) | {FAILING}) & set(conformance.EXCLUDED)


def test_the_shape_of_a_line_keeps_its_wording_and_masks_its_values() -> None:
    assert conformance.shape("Pi is roughly 3.141592") == conformance.shape(
        "Pi is roughly 3.139880")
    assert conformance.shape("|[0.1,0.25]|  7|") == conformance.shape("|[1.5,-2.0E-4]|113|")
    assert conformance.shape("+---+-----+") == conformance.shape("+-----+---+")
    assert conformance.shape("Pi is roughly 3.14") != conformance.shape("Pi is about 3.14")


@pytest.mark.parametrize(("rule", "reference", "candidate", "same"), [
    (Rule.EXACT, "a\nb\n", "a\nb\n", True),
    (Rule.EXACT, "a\nb\n", "b\na\n", False),
    (Rule.LINES, "a\nb\nb\n", "b\na\nb\n", True),
    (Rule.LINES, "a\nb\nb\n", "a\nb\n", False),
    (Rule.SHAPE, "x = 1.5\ny = 2\n", "x = 0.25\ny = 7\n", True),
    (Rule.SHAPE, "x = 1.5\ny = 2\n", "y = 2\nx = 1.5\n", False),
    (Rule.KINDS, "Time: 1\nTime: 2\n(0, 100)\n", "Time: 9\n(0, 100)\n", True),
    (Rule.KINDS, "Job 1 status: RUNNING\nresult\n", "result\n", False),
    (Rule.SHAPE, "out\n", "", False),
])
def test_stdouts_compare_by_the_programs_rule(rule: Rule, reference: str, candidate: str,
                                              same: bool) -> None:
    assert conformance.same_stdout(rule, reference, candidate) is same


def test_a_script_failing_only_under_clusterdeck_differs_with_its_error() -> None:
    entry = conformance.program("pi.py")
    reference = conformance.Run(0, 10.0, "Pi is roughly 3.141200\n", "")
    candidate = conformance.Run(1, 5.0, "", "Traceback (most recent call last):\n"
                                "  File \"pi.py\", line 1\nValueError: no slot\n")
    outcome = conformance.judge(entry, reference, candidate)
    assert outcome.verdict is Verdict.DIFFERS
    assert outcome.note == "fails under clusterdeck: ValueError: no slot"
