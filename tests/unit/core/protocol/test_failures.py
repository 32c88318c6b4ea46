"""A failed script's exit status and output files survive a failure's flat form (the job
store's, a JobResult's root cause)."""

from __future__ import annotations

from clusterdeck.core.protocol.failures import FailureRecord, TaskFailure


def test_a_scripts_exit_status_and_output_go_through_the_flat_form_with_defaults():
    failure = TaskFailure("SystemExit", "3", "Traceback ...", ("a line",), exit_code=3,
                          stdout_path="/work/a.stdout", stderr_path="/work/a.stderr")
    record = FailureRecord("job/attempt", "vertex-1", 0, 1, "taskmanager-1", failure, 10.0)
    flat = record.to_dict()
    assert (flat["exit_code"], flat["stdout_path"]) == (3, "/work/a.stdout")
    assert FailureRecord.from_dict(flat) == record
    older = {key: value for key, value in flat.items()
             if key not in ("exit_code", "stdout_path", "stderr_path")}
    assert FailureRecord.from_dict(older).failure == TaskFailure(
        "SystemExit", "3", "Traceback ...", ("a line",))
