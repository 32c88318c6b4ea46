"""A large job's snapshot is reduced to fit in one message, never dropped."""

from __future__ import annotations

import json

from core.jobmanager.snapshots import reductions


def big_snapshot(subtasks: int, attempts: int) -> dict:
    failure = {"exception_type": "ValueError", "message": "bad", "traceback": "x" * 10_000,
               "log_excerpt": ["line"] * 40}
    return {
        "job_id": "j", "status": "RUNNING", "failures": [failure] * 50, "root_cause": failure,
        "vertices": [{"id": "v", "name": "map", "parallelism": subtasks, "subtasks": [
            {"id": f"v#{i}", "subtask": i, "state": "RUNNING" if i % 2 else "FINISHED",
             "attempt_id": f"j/v#{i}/a{attempts - 1}",
             "attempts": [{"attempt_id": f"j/v#{i}/a{n}", "failure": failure}
                          for n in range(attempts)]}
            for i in range(subtasks)]}],
    }


def size(snapshot: dict) -> int:
    return len(json.dumps(snapshot))


def test_each_reduction_is_smaller_and_says_what_it_left_out() -> None:
    full, current, counts = reductions(big_snapshot(200, 3))
    assert size(full) > size(current) > size(counts)
    assert "truncated" not in full
    assert current["truncated"] == "attempts"
    assert all(len(s["attempts"]) == 1 for s in current["vertices"][0]["subtasks"])
    assert counts["truncated"] == "subtasks"
    assert counts["vertices"][0]["state_counts"] == {"RUNNING": 100, "FINISHED": 100}


def test_the_current_attempt_and_the_root_cause_survive_the_reduction() -> None:
    _, current, counts = reductions(big_snapshot(10, 4))
    subtask = current["vertices"][0]["subtasks"][3]
    assert subtask["attempts"][0]["attempt_id"] == subtask["attempt_id"]
    assert counts["root_cause"]["exception_type"] == "ValueError"
    assert len(counts["root_cause"]["traceback"]) <= 2000
