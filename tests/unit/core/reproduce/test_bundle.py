"""Writing a reproduction folder from what a JobManager kept: no Spark, no cluster."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdeck.core.checkpointing import CheckpointStorage
from clusterdeck.core.checkpointing.checkpoints import CompletedCheckpoint
from clusterdeck.core.jobapi.artifact import pack_artifact
from clusterdeck.core.jobapi.loader import load_job
from clusterdeck.core.jobmanager.jobstore import JobRecord
from clusterdeck.core.protocol.failures import FailureRecord, TaskFailure
from clusterdeck.core.reproduce.bundle import restored_checkpoint, write_reproduction
from clusterdeck.core.reproduce.copies import InputTooLarge
from clusterdeck.core.reproduce.folder import ReproductionError, read_manifest
from clusterdeck.core.reproduce.stored import StoredJob, chosen_failure

DATAFLOW = """\
def parse(line):
    return int(line)


def build(env):
    env.read_text(env.args[0]).map(parse).collect()
"""

SCRIPT = """\
import sys
from pyspark.sql import SparkSession

spark = SparkSession.builder.getOrCreate()
print(open(sys.argv[1]).read(), sys.argv[2])
"""


def failure(vertex: str = "vertex-1", subtask: int = 0, attempt: int = 0,
            splits: tuple[int, ...] = (0,), message: str = "ValueError: bad") -> FailureRecord:
    traceback = 'Traceback (most recent call last):\n  File "/tm/job/job.py", line 2, ' \
                'in parse\nValueError: bad\n'
    return FailureRecord(f"job1/{vertex}#{subtask}/a{attempt}", vertex, subtask, attempt,
                         "taskmanager-1", TaskFailure("ValueError", message, traceback),
                         100.0, splits, start_time=99.0)


def stored(tmp_path: Path, source: str, args: tuple[str, ...],
           failures: tuple[FailureRecord, ...] = ()) -> StoredJob:
    job_file = tmp_path / "submitted" / "job.py"
    job_file.parent.mkdir()
    job_file.write_text(source)
    graph = load_job(job_file, args, cwd=str(tmp_path)).graph
    artifact = pack_artifact(job_file)
    record = JobRecord("job1", graph, artifact.sha256, args)
    return StoredJob(record, artifact.data, tmp_path / "work" / "job1", failures)


def test_a_source_subtask_gets_its_split_and_a_copy_of_the_splits_file(tmp_path) -> None:
    data = tmp_path / "numbers.txt"
    data.write_text("1\n2\nx\n")
    job = stored(tmp_path, DATAFLOW, (str(data),))
    out = tmp_path / "repro"
    written = write_reproduction(job, failure(), out, max_input_bytes=1024)
    assert written == read_manifest(out)
    (split,) = written.splits
    assert split.path == "input/splits/0-numbers.txt"
    assert (out / split.path).read_text() == "1\n2\nx\n"
    assert (out / "job" / "job.py").read_text() == DATAFLOW
    assert (written.expected.file, written.expected.line) == ("job.py", 2)
    assert "clusterdeck reproduce --run" in (out / "run.txt").read_text()


def test_input_over_the_limit_is_refused_and_leaves_no_folder(tmp_path) -> None:
    data = tmp_path / "numbers.txt"
    data.write_text("1\n" * 1000)
    job = stored(tmp_path, DATAFLOW, (str(data),))
    out = tmp_path / "repro"
    with pytest.raises(InputTooLarge, match="--max-input-bytes"):
        write_reproduction(job, failure(), out, max_input_bytes=100)
    assert not out.exists()


def test_a_folder_that_holds_something_is_not_written_into(tmp_path) -> None:
    job = stored(tmp_path, DATAFLOW, (str(tmp_path / "none.txt"),))
    out = tmp_path / "repro"
    out.mkdir()
    (out / "mine.txt").write_text("keep me")
    with pytest.raises(ReproductionError, match="not an empty folder"):
        write_reproduction(job, failure(splits=()), out, max_input_bytes=100)
    assert (out / "mine.txt").read_text() == "keep me"


def test_a_scripts_file_argument_points_at_its_copy(tmp_path) -> None:
    (tmp_path / "in.txt").write_text("hello")
    job = stored(tmp_path, SCRIPT, ("in.txt", "plain"))
    out = tmp_path / "repro"
    written = write_reproduction(job, failure(splits=()), out, max_input_bytes=100,
                                 spark_conf={"spark.sql.shuffle.partitions": "3"})
    assert written.script_args == ("input/args/0-in.txt", "plain")
    assert (out / "input/args/0-in.txt").read_text() == "hello"
    assert written.spark_conf == {"spark.sql.shuffle.partitions": "3"}


def test_a_non_source_subtask_whose_producers_output_is_gone_says_so(tmp_path) -> None:
    source = DATAFLOW.replace(".map(parse)", ".map(parse).key_by(lambda x: x).sum()")
    job = stored(tmp_path, source, (str(tmp_path / "n.txt"),))
    downstream = job.record.graph.vertices[-1].id
    with pytest.raises(ReproductionError, match="no longer in the job's work dir"):
        write_reproduction(job, failure(downstream, splits=()), tmp_path / "repro",
                           max_input_bytes=100)


def test_the_root_cause_is_chosen_unless_a_subtask_or_attempt_is_named(tmp_path) -> None:
    first, second = failure(attempt=0), failure(attempt=1)
    job = stored(tmp_path, DATAFLOW, ("x",), (first, second))
    assert chosen_failure(job) == first
    assert chosen_failure(job, "vertex-1") == second
    assert chosen_failure(job, "vertex-1#0", attempt=0) == first
    with pytest.raises(ReproductionError, match="its failed attempts: vertex-1#0 attempt 0"):
        chosen_failure(job, "vertex-9")


def test_a_job_without_failures_has_nothing_to_reproduce(tmp_path) -> None:
    with pytest.raises(ReproductionError, match="no failed attempt"):
        chosen_failure(stored(tmp_path, DATAFLOW, ("x",)))


def test_a_failure_naming_a_vertex_the_job_lacks_is_refused(tmp_path) -> None:
    job = stored(tmp_path, DATAFLOW, ("x",), (failure("vertex-9"),))
    with pytest.raises(ReproductionError, match="does not have"):
        chosen_failure(job)


def committed(tmp_path: Path, *completions: float) -> CheckpointStorage:
    storage = CheckpointStorage(tmp_path / "checkpoints")
    for number, completed in enumerate(completions, 1):
        storage.commit(CompletedCheckpoint("job1", number, completed - 0.1, completed))
    return storage


def test_a_restored_attempts_checkpoint_is_the_newest_completed_before_it_started(
        tmp_path) -> None:
    storage = committed(tmp_path, 90.0, 95.0, 99.5)  # failure(): started 99, failed 100
    checkpoint, note = restored_checkpoint(storage, "job1", failure(attempt=1))
    assert (checkpoint.checkpoint_id, note) == (2, "")


def test_when_retention_dropped_it_the_attempts_own_last_checkpoint_stands_in(
        tmp_path) -> None:
    storage = committed(tmp_path, 99.2, 99.6, 101.0)
    checkpoint, note = restored_checkpoint(storage, "job1", failure(attempt=1))
    assert checkpoint.checkpoint_id == 2 and "no longer kept" in note


def test_an_attempt_with_no_checkpoint_before_it_starts_afresh(tmp_path) -> None:
    checkpoint, note = restored_checkpoint(committed(tmp_path), "job1", failure(attempt=1))
    assert checkpoint is None and "afresh" in note
