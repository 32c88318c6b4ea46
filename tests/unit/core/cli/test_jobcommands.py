"""The job commands' own parsing and exit codes: --conf as spark-submit reads it, and a
PySpark script's exit status passed on."""

from __future__ import annotations

import pytest

from clusterdeck.core.cli.jobcommands import exit_code, spark_settings
from clusterdeck.core.config.settings import ConfigError
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.states import JobStatus


def test_conf_keeps_values_as_given_and_the_last_of_a_repeated_key(capsys):
    assert spark_settings(["spark.sql.shuffle.partitions=3", "spark.a=x=y",
                           "spark.sql.shuffle.partitions=5", "spark.b="]) == {
        "spark.sql.shuffle.partitions": "5", "spark.a": "x=y", "spark.b": ""}
    assert capsys.readouterr().err == ""


def test_conf_ignores_a_non_spark_key_with_a_warning(capsys):
    assert spark_settings(["foo=bar", "spark.x=1"]) == {"spark.x": "1"}
    assert "ignoring non-Spark config property: foo" in capsys.readouterr().err


@pytest.mark.parametrize("assignment", ["spark.sql.shuffle.partitions", "=3"])
def test_conf_without_a_key_and_value_is_a_usage_error(assignment):
    with pytest.raises(ConfigError, match="--conf takes key=value"):
        spark_settings([assignment])


def result(status: str, root_cause: dict | None = None) -> p.JobResult:
    return p.JobResult("job-1", "script", status, root_cause=root_cause)


def test_a_scripts_exit_status_is_the_exit_code_of_its_failed_job():
    assert exit_code(result(JobStatus.FAILED, {"exception_type": "SystemExit",
                                               "exit_code": 42}), 1) == 42
    assert exit_code(result(JobStatus.FAILED, {"exception_type": "ValueError",
                                               "exit_code": None}), 1) == 1
    assert exit_code(result(JobStatus.FAILED, {"exception_type": "TaskManagerLost"}), 1) == 1
    assert exit_code(result(JobStatus.FINISHED), 1) == 0
    assert exit_code(result(JobStatus.CANCELED), 1) == 3


def test_submit_from_a_savepoint_sends_its_restore_settings():
    from clusterdeck.core.cli.jobcommands import job_options
    from clusterdeck.core.cli.main import build_parser
    from clusterdeck.core.protocol.checkpoints import SavepointRestore
    args = build_parser().parse_args(["submit", "job.py", "--from-savepoint", "savepoint-x",
                                      "--allow-non-restored-state"])
    assert job_options(args)["savepoint"] == SavepointRestore("savepoint-x", True)
    assert "savepoint" not in job_options(build_parser().parse_args(["submit", "job.py"]))


def test_allowing_non_restored_state_without_a_savepoint_is_a_usage_error():
    from clusterdeck.core.cli.jobcommands import job_options
    from clusterdeck.core.cli.main import build_parser
    args = build_parser().parse_args(["submit", "job.py", "--allow-non-restored-state"])
    with pytest.raises(ConfigError, match="goes with --from-savepoint"):
        job_options(args)


def test_stop_takes_a_savepoint_only_when_asked():
    from clusterdeck.core.cli.main import build_parser
    assert build_parser().parse_args(["stop", "j1"]).savepoint is False
    assert build_parser().parse_args(["stop", "j1", "--savepoint"]).savepoint is True
    assert build_parser().parse_args(["savepoint", "j1", "--timeout", "5"]).timeout == 5.0


def test_a_scripts_arguments_without_a_separator_are_refused_saying_how(capsys):
    """spark-submit takes everything after the script as the script's; clusterdeck's own
    options may follow the file, so the script's come after a --, and the refusal says so
    with the command line that works."""
    from clusterdeck.core.cli.main import main
    with pytest.raises(SystemExit) as usage:
        main(["submit", "pagerank.py", "links.txt", "10"])
    assert usage.value.code == 2
    assert "clusterdeck submit pagerank.py -- links.txt 10" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["status", "--bogus"])
    assert "follow a --" not in capsys.readouterr().err
