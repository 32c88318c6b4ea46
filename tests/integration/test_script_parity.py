"""Issue 37's parity tests with spark-submit, with Spark's own examples from the pyspark
wheel, unmodified: a script sees only its own Spark jobs through the status tracker
(``status_api_demo.py``, after other scripts ran on the same TaskManager), and its driver
hashes strings as spark-submit's does (``ml/word2vec_example.py``, on a cluster started
as a user starts it: no ``PYTHONHASHSEED`` in its environment)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from benchmarks import conformance
from benchmarks.conformance import Cluster, Program, Run, Verdict

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

RUN_TIMEOUT = 240.0
JOB_LINE = re.compile(r"^Job (\d+) status: ", re.MULTILINE)
STAGE_LINE = re.compile(r"^Stage (\d+): \d+ tasks total", re.MULTILINE)


@pytest.fixture(scope="module", autouse=True)
def no_hash_seed() -> Iterator[None]:
    """spark-submit runs as a user runs it too: without ``PYTHONHASHSEED``, whatever the
    test run's environment holds."""
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("PYTHONHASHSEED", raising=False)
        yield


@pytest.fixture(scope="module")
def cluster(up_cluster: Cluster) -> Cluster:
    """``clusterdeck up`` as a user runs it, without ``PYTHONHASHSEED`` in its environment
    (tests/integration/conftest.py), shared with test_conformance.py."""
    return up_cluster


def side_by_side(cluster: Cluster, entry: Program) -> tuple[Run, Run]:
    """The program under spark-submit and under clusterdeck at the same time: both runs
    mostly wait (a JVM starting), so the pair takes about as long as the longer one. The
    program writes no file."""
    with ThreadPoolExecutor(1) as pool:
        reference = pool.submit(conformance.spark_submit, entry, RUN_TIMEOUT)
        candidate = cluster.submit(entry, RUN_TIMEOUT)
        return reference.result(), candidate


def test_word2vec_example_prints_exactly_what_it_prints_under_spark_submit(
        cluster: Cluster) -> None:
    entry = conformance.program("ml/word2vec_example.py")
    reference, candidate = side_by_side(cluster, entry)
    assert reference.exit_code == 0, reference.stderr[-2000:]
    assert candidate.exit_code == 0, candidate.stderr[-2000:]
    assert "Text: [Hi, I, heard, about, Spark]" in reference.stdout
    assert candidate.stdout == reference.stdout


def test_status_api_demo_sees_only_its_own_spark_jobs_after_other_scripts_ran(
        cluster: Cluster) -> None:
    for _ in range(2):  # Spark jobs of other scripts on the same TaskManager
        assert cluster.check() == ""
    entry = conformance.program("status_api_demo.py")
    # one after the other: run beside spark-submit, this test failed in a CI run
    reference = conformance.spark_submit(entry, RUN_TIMEOUT)
    candidate = cluster.submit(entry, RUN_TIMEOUT)
    outcome = conformance.judge(entry, reference, candidate)
    assert outcome.verdict is Verdict.PASSES, outcome
    # Job and stage ids aside, the same lines: one Spark job of two stages in every poll,
    # and the same result.
    for run in (reference, candidate):
        assert len(set(JOB_LINE.findall(run.stdout))) == 1, run.stdout
        assert len(set(STAGE_LINE.findall(run.stdout))) == 2, run.stdout
        polls = len(JOB_LINE.findall(run.stdout))
        assert polls >= 2 and len(STAGE_LINE.findall(run.stdout)) <= 2 * polls
    results = [line for line in reference.stdout.splitlines() if line.startswith("Job results")]
    assert results == [line for line in candidate.stdout.splitlines()
                       if line.startswith("Job results")]
    assert len(results) == 1
