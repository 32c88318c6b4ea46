"""A job's result fits one message however large the job: long lists go to a manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clusterdeck.core.client.jobclient import collected_rows, result_files
from clusterdeck.core.jobmanager.jobresult import FILES_KEPT, bare, fitted
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.messages import PRINTED_KEPT
from clusterdeck.core.protocol.states import JobStatus
from clusterdeck.core.rpc import Envelope, FrameTooLargeError, encode

FRAMESIZE = 256 * 1024


def frame(result: p.JobResult) -> bytes:
    return encode(Envelope(kind="event", sender="dispatcher", message=result), FRAMESIZE)


def many_subtasks(tmp_path: Path, subtasks: int) -> p.JobResult:
    paths = []
    for index in range(subtasks):
        path = tmp_path / "rows" / f"collect-{index:05d}-of-a-rather-long-attempt-name.json"
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps([index]), encoding="utf-8")
        paths.append(str(path))
    outputs = tuple(f"{tmp_path}/out/part-{i:05d}-0123456789abcdef.txt" for i in range(subtasks))
    return p.JobResult("j", "many", JobStatus.FINISHED, outputs=outputs,
                       collected_paths=tuple(paths))


def test_a_small_result_is_sent_as_it_is(tmp_path: Path) -> None:
    result = p.JobResult("j", "small", JobStatus.FINISHED, outputs=("a.txt",), stdout="hello\n")
    assert fitted(result, tmp_path) == result
    assert not list(tmp_path.iterdir())


def test_the_file_lists_of_2000_subtasks_go_to_a_manifest_and_nothing_is_lost(
        tmp_path: Path) -> None:
    full = many_subtasks(tmp_path, 2000)
    with pytest.raises(FrameTooLargeError):
        frame(full)
    result = fitted(full, tmp_path / "work")
    assert len(frame(result)) < FRAMESIZE // 4
    assert len(result.outputs) == len(result.collected_paths) == FILES_KEPT
    assert (result.outputs_total, result.collected_total) == (2000, 2000)
    assert result_files(result) == (list(full.outputs), list(full.collected_paths))
    assert collected_rows(result) == list(range(2000))


def test_long_output_keeps_its_end_and_says_where_the_rest_is(tmp_path: Path) -> None:
    printed = "".join(f"line {i}\n" for i in range(20_000))
    result = fitted(p.JobResult("j", "chatty", JobStatus.FINISHED, stdout=printed), tmp_path)
    assert len(result.stdout) < PRINTED_KEPT + 200
    assert result.stdout.endswith("line 19999\n")
    assert "output files" in result.stdout.splitlines()[0]


def test_a_bare_result_keeps_status_and_counts_and_says_why(tmp_path: Path) -> None:
    huge = p.JobResult("j", "counters", JobStatus.FAILED, accumulators={"k": "x" * FRAMESIZE},
                       failures=3, finished=1, total=4)
    with pytest.raises(FrameTooLargeError):
        frame(huge)
    result = bare(huge)
    assert (result.status, result.failures, result.finished, result.total) == (
        JobStatus.FAILED, 3, 1, 4)
    assert "rpc.framesize" in result.stderr
    frame(result)
