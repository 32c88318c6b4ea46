"""The submit dialog's settings (a savepoint to start from among them), the checks a file
passes before it is offered, and a request's way to the client."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from PySide6.QtWidgets import QWidget

from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config
from clusterdeck.core.jobapi.errors import JobLoadError
from clusterdeck.core.protocol.checkpoints import SavepointRestore
from clusterdeck.core.rpc import RemoteError
from clusterdeck.gui.bridge import ClusterBridge
from clusterdeck.gui.controllers.jobcalls import JobWorker
from clusterdeck.gui.controllers.submission import SubmissionFlow, check_job_file
from clusterdeck.gui.session import savepoints_dir
from clusterdeck.gui.views.submitdialog import (
    CLUSTER_DEFAULT,
    JobErrorDialog,
    SubmitDialog,
    SubmitRequest,
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


def test_without_a_savepoint_the_request_starts_the_job_afresh(qtbot, tmp_path):
    dialog = SubmitDialog(tmp_path / "job.py", "dataflow job")
    qtbot.addWidget(dialog)
    assert dialog.request() == SubmitRequest(tmp_path / "job.py")
    assert not dialog.allow_non_restored.isEnabled()


def test_a_savepoint_named_in_the_dialog_goes_with_the_request(qtbot, tmp_path):
    dialog = SubmitDialog(tmp_path / "job.py", "dataflow job")
    qtbot.addWidget(dialog)
    dialog.savepoint.setText("  savepoint-3f2a91c0d4e1-9-d4e5f6 ")
    assert dialog.request().savepoint == SavepointRestore("savepoint-3f2a91c0d4e1-9-d4e5f6")
    dialog.allow_non_restored.setChecked(True)
    assert dialog.request().savepoint == SavepointRestore("savepoint-3f2a91c0d4e1-9-d4e5f6",
                                                          allow_non_restored_state=True)


def test_browse_opens_in_the_clusters_savepoint_folder(qtbot, tmp_path):
    savepoints = tmp_path / "savepoints"
    dialog = SubmitDialog(tmp_path / "job.py", savepoints_dir=savepoints)
    qtbot.addWidget(dialog)
    assert dialog.browse_start() == str(Path.cwd()), "a folder not here yet"
    (savepoints / "savepoint-a-1-b").mkdir(parents=True)
    assert dialog.browse_start() == str(savepoints)
    dialog.savepoint.setText(str(tmp_path / "elsewhere" / "savepoint-x"))
    (tmp_path / "elsewhere").mkdir()
    assert dialog.browse_start() == str(tmp_path / "elsewhere")


def test_the_savepoint_folder_is_the_dispatchers(tmp_path):
    assert savepoints_dir(Config({"cluster.id": "lab"})) == \
        paths.cluster_dir("lab") / "savepoints"
    assert savepoints_dir(Config({"cluster.id": "lab",
                                  "state.savepoints.dir": str(tmp_path)})) == tmp_path


class SubmittingClient:
    """``JobClient.submit`` as the submission flow calls it: it keeps the options, and
    refuses with ``refusal`` when one is given."""

    observing = False

    def __init__(self, refusal: Exception | None = None) -> None:
        self.service = SimpleNamespace(subscribe=lambda *_args, **_kwargs: None)
        self.refusal = refusal
        self.options: dict[str, Any] = {}

    def submit(self, job_file: Path, args: tuple[str, ...] = (), **options: Any) -> str:
        if self.refusal is not None:
            raise self.refusal
        self.options = options
        return "3f2a91c0d4e1"

    def close(self) -> None:
        pass


@pytest.fixture
def flow_with(qtbot):
    """A submission flow whose bridge follows the client given."""
    made: list[ClusterBridge] = []

    def make(client: SubmittingClient) -> SubmissionFlow:
        window = QWidget()
        qtbot.addWidget(window)
        bridge = ClusterBridge(window)
        made.append(bridge)
        bridge.connect_client(client)  # type: ignore[arg-type]
        return SubmissionFlow(bridge, JobWorker(bridge), window)

    yield make
    for bridge in made:
        bridge.close()


def test_the_flow_hands_the_savepoint_to_the_client(qtbot, flow_with, tmp_path):
    client = SubmittingClient()
    flow = flow_with(client)
    restore = SavepointRestore("savepoint-3f2a91c0d4e1-9-d4e5f6")
    with qtbot.waitSignal(flow.submitted, timeout=5000):
        flow.submit(SubmitRequest(tmp_path / "job.py", savepoint=restore))
    assert client.options["savepoint"] == restore


def test_a_job_the_savepoint_does_not_fit_is_refused_with_the_reason(qtbot, flow_with,
                                                                      tmp_path):
    reason = "savepoint-3f2a91c0d4e1-9-d4e5f6 holds state of 4 subtasks of map; the job has 2"
    flow = flow_with(SubmittingClient(RemoteError("SubmissionRefused", reason)))
    flow.submit(SubmitRequest(tmp_path / "job.py",
                              savepoint=SavepointRestore("savepoint-3f2a91c0d4e1-9-d4e5f6")))
    qtbot.waitUntil(lambda: flow.error_dialog is not None, timeout=5000)
    assert flow.error_dialog.message.text() == \
        f"The JobManager refused the job: SubmissionRefused: {reason}"
