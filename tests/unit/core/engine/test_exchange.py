"""Result partitions on disk: a finished producer marks each one complete, and a consumer
tells an empty partition from a missing one, which fails it with PartitionNotFound.

No Spark: the checks run before any Spark work, on files alone.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from clusterdeck.core.engine.exchange import (
    COMPLETE_FILE,
    IncompletePartition,
    InputPartition,
    PartitionNotFound,
    Unfetched,
    declare_partitions,
    partition_files,
    read_inputs,
    result_partition_path,
)
from clusterdeck.core.jobapi.errors import SubtaskFailed
from clusterdeck.core.protocol.jobgraph import JobEdge, ShipStrategy
from clusterdeck.core.protocol.wiring import ResultPartitionRef

EDGE = JobEdge("map", "sink", ShipStrategy.HASH)


def produce(output_dir: Path, rows_in: tuple[int, ...] = (0,)) -> list[str]:
    """A producer's finished output for EDGE with two consumers: a data file in each
    partition of ``rows_in``, the others empty; returns the partition folders."""
    for partition in rows_in:
        folder = Path(result_partition_path(output_dir, "sink", 0, partition))
        folder.mkdir(parents=True)
        (folder / "part-00000-abc.snappy.parquet").write_bytes(b"PAR1")
        (folder / ".part-00000-abc.snappy.parquet.crc").write_bytes(b"crc")
    return [p.path for p in declare_partitions(str(output_dir), EDGE, consumer_parallelism=2)]


def input_partition(path: str, partition: int = 0, subtask: int = 1,
                    taskmanager_id: str | None = "tm-2") -> InputPartition:
    return InputPartition(path, "sink", 0, ResultPartitionRef(
        f"job/map#{subtask}/a0", "map", subtask, partition, taskmanager_id))


def test_a_finished_producer_marks_every_partition_complete_listing_its_data_files(
        tmp_path) -> None:
    with_data, empty = produce(tmp_path / "map-1")

    assert json.loads((Path(with_data) / COMPLETE_FILE).read_text()) == {
        "files": ["part-00000-abc.snappy.parquet"]}
    assert json.loads((Path(empty) / COMPLETE_FILE).read_text()) == {"files": []}


def test_an_empty_partition_has_no_files_and_a_written_one_has_its_own(tmp_path) -> None:
    with_data, empty = produce(tmp_path / "map-1")

    assert partition_files(with_data) == [str(Path(with_data) / "part-00000-abc.snappy.parquet")]
    assert partition_files(empty) == []


def test_a_partition_whose_folder_does_not_exist_is_missing(tmp_path) -> None:
    with pytest.raises(IncompletePartition, match="its folder does not exist"):
        partition_files(str(tmp_path / "elsewhere" / "sink.0" / "__part=0"))


def test_a_partition_without_its_completion_marker_is_missing_even_with_data(tmp_path) -> None:
    folder = Path(result_partition_path(tmp_path, "sink", 0, 0))
    folder.mkdir(parents=True)
    (folder / "part-00000-abc.snappy.parquet").write_bytes(b"PAR1")  # a producer cut short

    with pytest.raises(IncompletePartition, match="no completion marker"):
        partition_files(str(folder))


def test_a_partition_whose_data_file_is_gone_is_missing(tmp_path) -> None:
    with_data, _ = produce(tmp_path / "map-1")
    (Path(with_data) / "part-00000-abc.snappy.parquet").unlink()

    with pytest.raises(IncompletePartition, match="1 of its 1 data files are gone"):
        partition_files(with_data)


@pytest.mark.parametrize("marker", ["{not json", '{"rows": 3}', '{"files": 7}'])
def test_a_partition_whose_marker_cannot_be_read_is_missing(tmp_path, marker) -> None:
    _, empty = produce(tmp_path / "map-1")
    (Path(empty) / COMPLETE_FILE).write_text(marker)

    with pytest.raises(IncompletePartition, match="completion marker cannot be read"):
        partition_files(empty)


def test_reading_inputs_with_missing_partitions_names_every_one_before_any_spark_work(
        tmp_path) -> None:
    present, _ = produce(tmp_path / "map-0")
    gone = str(tmp_path / "map-1" / "sink.0" / "__part=0")
    also_gone = str(tmp_path / "map-1" / "sink.1" / "__part=0")
    inputs = [[input_partition(present, subtask=0), input_partition(gone)],
              [InputPartition(also_gone, "sink", 1, ResultPartitionRef(
                  "job/map#1/a0", "map", 1, 0, "tm-2"))]]
    work = SimpleNamespace(attempt_id="job/sink#0/a0")  # no session: Spark is never reached

    with pytest.raises(PartitionNotFound) as raised:
        read_inputs(work, inputs)  # type: ignore[arg-type]

    assert [p.path for p in raised.value.missing] == [gone, also_gone]
    assert raised.value.lost_producers == ("job/map#1/a0",)
    assert raised.value.attempt_id == "job/sink#0/a0"


def test_only_producers_whose_data_service_did_not_answer_are_named_unreachable(
        tmp_path) -> None:
    """tm-2 did not answer (a port closed one way); tm-3 answered that it has no such
    partition (deleted): only tm-2 is the failure's to blame."""
    silent = input_partition(str(tmp_path / "a"), subtask=1, taskmanager_id="tm-2")
    answered = input_partition(str(tmp_path / "b"), subtask=2, taskmanager_id="tm-3")
    work = SimpleNamespace(attempt_id="job/sink#0/a0")

    def fetch_missing(partitions):
        return {silent: Unfetched("TimeoutError (after 3 tries)", unanswered=True),
                answered: Unfetched("404 not found")}

    with pytest.raises(PartitionNotFound) as raised:
        read_inputs(work, [[silent, answered]], fetch_missing)  # type: ignore[arg-type]

    assert raised.value.unreachable == ("tm-2",)
    assert raised.value.lost_producers == ("job/map#1/a0", "job/map#2/a0")
    assert "TimeoutError (after 3 tries)" in str(raised.value)


def test_the_failure_names_the_partition_its_path_and_its_producer() -> None:
    missing = input_partition("/work/partitions/job_map-1_a0/sink.0/__part=3", partition=3)

    failure = PartitionNotFound([(missing, "its folder does not exist")], "job/sink#3/a0")

    assert str(failure) == (
        "result partition not found: partition 3 of input 0 of sink at "
        "/work/partitions/job_map-1_a0/sink.0/__part=3, written by map[1] (attempt "
        "job/map#1/a0 on TaskManager tm-2): its folder does not exist")
    assert failure.message == str(failure)
    assert isinstance(failure, SubtaskFailed)
    assert failure.vertex_id == "sink"


def test_a_producer_of_unknown_whereabouts_is_named_without_a_taskmanager() -> None:
    missing = input_partition("/p", taskmanager_id=None)

    assert "(attempt job/map#1/a0):" in str(PartitionNotFound([(missing, "gone")], "a"))


def test_many_missing_partitions_name_three_and_count_the_rest() -> None:
    missing = [(input_partition(f"/p{i}", subtask=i), "gone") for i in range(5)]

    failure = PartitionNotFound(missing, "job/sink#0/a0")

    assert str(failure).count("written by") == 3
    assert str(failure).endswith("; and 2 more")
    assert "\n" not in str(failure)  # one line: the failure's message is its first line
    assert failure.lost_producers == tuple(f"job/map#{i}/a0" for i in range(5))


def test_records_written_where_this_machine_sees_no_file_fail_the_producer(tmp_path) -> None:
    """A Spark cluster's executors wrote elsewhere: never marked as empty partitions."""
    with pytest.raises(SubtaskFailed, match="OutputNotVisible: 7 records"):
        declare_partitions(str(tmp_path / "map-1"), EDGE, consumer_parallelism=2,
                           records_written=7)
    assert [p.path for p in declare_partitions(str(tmp_path / "map-2"), EDGE, 2,
                                               records_written=0)]
    produce(tmp_path / "map-3")  # some file in sight: fine
    declare_partitions(str(tmp_path / "map-3"), EDGE, 2, records_written=7)
