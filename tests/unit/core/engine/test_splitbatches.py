"""How a source subtask pulls its input splits into batches: a small input is shared by
all the source's subtasks, a big one keeps its 64 MiB batches, and a subtask that is
done with its share still asks for more."""

from __future__ import annotations

from collections.abc import Iterator

from clusterdeck.core.engine.runtime import DEFAULT_SPLIT_BATCH_BYTES, _batch_bytes, _batches
from clusterdeck.core.executiongraph.splitassigner import InputSplitAssigner
from clusterdeck.core.jobapi.inputsplits import fair_share, plan_splits
from clusterdeck.core.protocol.jobgraph import InputSplit, JobVertex, OperatorSpec

MB = 1024 * 1024


def pulled(assigner: InputSplitAssigner, subtask: int) -> Iterator[InputSplit]:
    """What a subtask's TaskManager does: ask the JobMaster until it has none left."""
    while (split := assigner.next_split("v", subtask, None)) is not None:
        yield split


def ranges(count: int, length: int) -> list[InputSplit]:
    return [InputSplit(i, "v", path="in.txt", start=i * length, length=length)
            for i in range(count)]


def subtasks_batches(splits: list[InputSplit], parallelism: int,
                     batch_bytes: int) -> list[Iterator[list[InputSplit]]]:
    assigner = InputSplitAssigner({"v": splits})
    return [_batches(pulled(assigner, subtask), batch_bytes) for subtask in range(parallelism)]


def test_a_small_input_gives_every_subtask_a_batch_of_its_fair_share() -> None:
    splits = ranges(10, 1 * MB)  # 10 MB in 1 MB splits, parallelism 4
    share = fair_share(splits, 4)
    subtasks = subtasks_batches(splits, 4, _batch_bytes(DEFAULT_SPLIT_BATCH_BYTES, share))
    first = [next(batches, []) for batches in subtasks]  # each asks as it starts
    assert [len(batch) for batch in first] == [3, 3, 3, 1]
    assert sorted(s.split_id for batch in first for s in batch) == list(range(10))


def test_without_a_share_the_first_subtask_to_ask_takes_a_small_input_whole() -> None:
    subtasks = subtasks_batches(ranges(10, 1 * MB), 4,
                                _batch_bytes(DEFAULT_SPLIT_BATCH_BYTES, 0))
    assert [len(next(batches, [])) for batches in subtasks] == [10, 0, 0, 0]


def test_a_subtask_done_with_its_share_asks_for_more() -> None:
    """Work stealing: subtask 0 is fast, subtask 1 has read one batch, the others have
    not started; subtask 0 reads what they have not taken."""
    splits = ranges(12, 1 * MB)
    subtasks = subtasks_batches(splits, 4, _batch_bytes(DEFAULT_SPLIT_BATCH_BYTES,
                                                        fair_share(splits, 4)))
    read = [len(next(subtasks[0])), len(next(subtasks[1]))]
    fast = sum(len(batch) for batch in subtasks[0])
    assert read == [3, 3]
    assert fast == 6
    assert next(subtasks[2], None) is None


def test_a_big_input_keeps_the_batch_size() -> None:
    share = fair_share(ranges(64, 32 * MB), 4)  # 2 GB over 4 subtasks
    assert _batch_bytes(DEFAULT_SPLIT_BATCH_BYTES, share) == DEFAULT_SPLIT_BATCH_BYTES
    assert _batch_bytes(DEFAULT_SPLIT_BATCH_BYTES, -1) == DEFAULT_SPLIT_BATCH_BYTES


def test_a_few_megabytes_of_text_are_read_by_every_subtask(tmp_path) -> None:
    """Planning and pulling together: one 3 MB file, under the default 32 MiB splits."""
    path = tmp_path / "input.txt"
    path.write_text("".join(f"line {i} {'x' * 40}\n" for i in range(60_000)))
    vertex = JobVertex("v", "read", 4, (OperatorSpec(
        "op-1", "source.text", "read", {"paths": [str(path)]}),))
    splits = plan_splits(vertex)
    subtasks = subtasks_batches(splits, 4, _batch_bytes(DEFAULT_SPLIT_BATCH_BYTES,
                                                        fair_share(splits, 4)))
    assert all(next(batches, []) for batches in subtasks)
