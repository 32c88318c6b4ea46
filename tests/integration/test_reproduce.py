"""``clusterdeck reproduce`` against a real cluster: three jobs fail on it (a user
exception in a dataflow subtask, a PySpark script on one bad input line, a streaming
subtask whose failure needs the keyed state it was restored with); the folder written for
each, moved elsewhere and run in a fresh process whose clusterdeck home has no cluster,
fails with the same exception type, message and line of the job's file.

One cluster for the module (the ``cluster`` fixture); every run of a folder is a child
process, killed if it outlives its deadline.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from clusterdeck.core.cli.main import main
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.reproduce.folder import read_manifest
from tests.integration.clusters import wait_result

pytestmark = [pytest.mark.integration]

NO_RESTART = {"restart-strategy.type": "none"}
RESTARTS = {"restart-strategy.type": "fixed-delay",
            "restart-strategy.fixed-delay.attempts": 3,
            "restart-strategy.fixed-delay.delay": 0.2}
RUN_DEADLINE = 300.0

DATAFLOW = """\
def double(value):
    if value == 7:
        raise ValueError(f"cannot double {value}")
    return value * 2


def build(env):
    env.from_collection(list(range(20))).map(double).collect()
"""

SCRIPT = """\
import sys

from pyspark.sql import SparkSession


def parse(line):
    name, amount = line.split(",")
    return name, int(amount)


spark = SparkSession.builder.getOrCreate()
print(spark.sparkContext.textFile(sys.argv[1]).map(parse).collect())
"""

STREAMING = """\
LIMIT = 60


def count(record, state):
    seen = (state.value() or 0) + 1
    state.update(seen)
    if seen == LIMIT:
        raise RuntimeError(f"{state.key} seen {seen} times, at record {record[0]}")
    return None


def build(env):
    env.set_parallelism(1)
    env.enable_checkpointing(0.2, retained=1000)  # the one restored from stays
    env.rate_source(150, count=100_000).key_by(1).process(count).print()
"""


def failed_job(client, tmp_path: Path, name: str, source: str, args: tuple[str, ...] = (),
               restart: dict | None = None):
    job_file = tmp_path / name
    job_file.write_text(source)
    job_id = client.submit(job_file, args, restart_strategy=restart or NO_RESTART,
                           cwd=str(tmp_path))
    result = wait_result(client, job_id, 240)
    assert result.status is JobStatus.FAILED, result
    return job_id, result


def reproduce(cluster_id: str, job_id: str, out: Path, *extra: str) -> Path:
    """``clusterdeck reproduce JOB [SUBTASK --attempt N]`` (``extra``) into ``out``."""
    assert main(["reproduce", job_id, *extra, "--cluster", cluster_id,
                 "--out", str(out)]) == 0
    assert (out / "run.txt").is_file()
    return out


def run_elsewhere(folder: Path, tmp_path: Path, *options: str,
                  typed: str = "") -> subprocess.CompletedProcess[str]:
    """The folder copied to another place and run by a fresh interpreter whose
    clusterdeck home is empty: no cluster, no job store, no work dir. ``typed``: its
    standard input (pdb's commands)."""
    moved = tmp_path / "moved" / folder.name
    shutil.copytree(folder, moved)
    shutil.rmtree(folder)
    home = tmp_path / "empty-home"
    home.mkdir()
    env = {**os.environ, "CLUSTERDECK_HOME": str(home)}
    return subprocess.run([sys.executable, "-m", "clusterdeck.core.reproduce", str(moved),
                           *options], input=typed, capture_output=True, text=True, env=env,
                          timeout=RUN_DEADLINE, cwd=tmp_path, check=False)


def assert_same_failure(run: subprocess.CompletedProcess[str], exception_type: str,
                        message: str, line: str) -> None:
    """The run failed with ``exception_type`` and a message ending in ``message``, at
    ``line`` of the job's file, and found it the cluster's failure."""
    assert run.returncode == 1, run.stderr[-3000:]
    assert f"failed: {exception_type}: " in run.stderr, run.stderr[-3000:]
    assert f"{message} at {line}\n" in run.stderr, run.stderr[-3000:]
    assert "reproduced: the same failure" in run.stderr, run.stderr[-3000:]


def test_a_user_exception_in_a_dataflow_subtask_fails_again_at_its_line(
        cluster, client, tmp_path) -> None:
    job_id, result = failed_job(client, tmp_path, "doubling.py", DATAFLOW)
    assert result.root_cause["exception_type"] == "ValueError"
    folder = reproduce(cluster[0].cluster_id, job_id, tmp_path / "repro")
    manifest = read_manifest(folder)
    assert manifest.expected.file == "doubling.py" and manifest.expected.line == 3
    assert manifest.splits  # its part of the collection
    run = run_elsewhere(folder, tmp_path, "--pdb", typed="p value * 100\nq\n")
    assert_same_failure(run, "ValueError", "cannot double 7", "doubling.py:3")
    assert "700" in run.stdout, run.stdout  # pdb stopped in double(), where value is 7


def test_a_script_failing_on_one_input_line_fails_again_on_the_copy_of_its_input(
        cluster, client, tmp_path) -> None:
    data = tmp_path / "amounts.csv"
    data.write_text("a,1\nb,2\nc,x\nd,4\n")
    job_id, _ = failed_job(client, tmp_path, "amounts.py", SCRIPT, ("amounts.csv",))
    folder = reproduce(cluster[0].cluster_id, job_id, tmp_path / "repro")
    manifest = read_manifest(folder)
    assert manifest.script_args == ("input/args/0-amounts.csv",)
    data.unlink()  # the run reads the folder's copy
    assert_same_failure(run_elsewhere(folder, tmp_path), "ValueError",
                        "ValueError: invalid literal for int() with base 10: 'x'",
                        "amounts.py:8")


def test_a_streaming_failure_that_needs_its_restored_state_fails_again(
        cluster, client, tmp_path) -> None:
    job_id, result = failed_job(client, tmp_path, "counting.py", STREAMING,
                                restart=RESTARTS)
    # Each restart restores the newest checkpoint and fails at the same record again; a
    # region's restart may also fail the source with a ChannelError (its consumer gone).
    failed_again = [f for f in result.failure_history
                    if f["exception_type"] == "RuntimeError" and f["attempt"] > 0]
    assert failed_again, result.failure_history
    restored = failed_again[-1]
    folder = reproduce(cluster[0].cluster_id, job_id, tmp_path / "repro",
                       restored["vertex_id"], "--attempt", str(restored["attempt"]))
    manifest = read_manifest(folder)
    assert manifest.checkpoint_id > 0 and manifest.states
    assert_same_failure(run_elsewhere(folder, tmp_path), "RuntimeError",
                        restored["message"], "counting.py:8")
