"""The submit dialog's settings and the checks a file passes before it is offered."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterdeck.core.jobapi.errors import JobLoadError
from clusterdeck.gui.submission import check_job_file
from clusterdeck.gui.views.submitdialog import (
    CLUSTER_DEFAULT,
    JobErrorDialog,
    SubmitDialog,
    restart_settings,
)


@pytest.mark.parametrize(("strategy", "expected"), [
    (CLUSTER_DEFAULT, None),
    ("none", {"restart-strategy.type": "none"}),
    ("fixed-delay", {"restart-strategy.type": "fixed-delay",
                     "restart-strategy.fixed-delay.attempts": 5,
                     "restart-strategy.fixed-delay.delay": 2.5}),
    ("failure-rate", {"restart-strategy.type": "failure-rate",
                      "restart-strategy.failure-rate.max-failures": 5,
                      "restart-strategy.failure-rate.delay": 2.5}),
    ("exponential-delay", {"restart-strategy.type": "exponential-delay",
                           "restart-strategy.exponential-delay.initial": 2.5}),
])
def test_each_strategy_becomes_the_configurations_keys(strategy, expected):
    assert restart_settings(strategy, 5, 2.5) == expected


def test_the_dialog_builds_the_request_the_client_takes(qtbot, tmp_path):
    dialog = SubmitDialog(tmp_path / "job.py", "dataflow job")
    qtbot.addWidget(dialog)
    assert dialog.parallelism.value() == 0 and not dialog.attempts.isEnabled()
    dialog.parallelism.setValue(3)
    dialog.arguments.setText('input.txt "two words"')
    dialog.strategy.setCurrentText("fixed-delay")
    assert dialog.attempts.isEnabled() and dialog.delay.isEnabled()
    dialog.attempts.setValue(2)
    request = dialog.request()
    assert request.args == ("input.txt", "two words")
    assert request.parallelism == 3
    assert request.restart_strategy["restart-strategy.fixed-delay.attempts"] == 2


def test_arguments_that_do_not_parse_keep_the_dialog_open_with_the_reason(qtbot, tmp_path):
    dialog = SubmitDialog(tmp_path / "job.py")
    qtbot.addWidget(dialog)
    dialog.arguments.setText('"unclosed')
    dialog.open()
    dialog.submit_button.click()
    assert dialog.isVisible()
    assert "quotation" in dialog.problem.text()


def test_files_that_are_not_jobs_are_refused_with_the_loaders_words(tmp_path):
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    plain = tmp_path / "plain.py"
    plain.write_text("print('no build here')\n")
    broken = tmp_path / "broken.py"
    broken.write_text("def build(env):\n    return (\n")
    job = tmp_path / "job.py"
    job.write_text("def build(env):\n    env.from_range(0, 3).collect()\n")
    with pytest.raises(JobLoadError, match="not a job file"):
        check_job_file(text)
    with pytest.raises(JobLoadError, match="defines no build"):
        check_job_file(plain)
    with pytest.raises(JobLoadError, match="syntax error") as error:
        check_job_file(broken)
    assert "broken.py" in error.value.traceback_text
    assert check_job_file(job).startswith("dataflow")


def test_the_error_dialog_shows_message_and_traceback(qtbot):
    dialog = JobErrorDialog(Path("x.py"), "x.py failed to load: NameError",
                            "Traceback...\nNameError: y")
    qtbot.addWidget(dialog)
    assert dialog.message.text() == "x.py failed to load: NameError"
    assert "NameError: y" in dialog.traceback.toPlainText()
    assert not dialog.traceback.isHidden()
