"""The dialogs of a submission: what to submit with which settings, and why a file was
refused.

``SubmitDialog`` asks for what ``clusterdeck submit`` takes as options: the default
parallelism, the program's arguments, the job's own restart strategy (none, fixed-delay,
failure-rate or exponential-delay, with its attempts and delay), a task timeout and a
savepoint to start from (``--from-savepoint``, ``--allow-non-restored-state``); its
``request()`` is the ``SubmitRequest`` the worker hands to ``JobClient.submit``. Restart
settings use the configuration's keys (``restart-strategy.*``), checked like any
configuration value. A savepoint is named, not checked, here: it lies on the JobManager's
machine, whose Dispatcher refuses a job it does not fit, with the reason.

``JobErrorDialog`` shows the loader's one-line message and the user's traceback when a
file is not a loadable job. Both are opened non-modally (``open``/``show``): the window
stays usable. GUI thread only.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import Qt
from PySide6.QtGui import QFontDatabase
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPlainTextEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.core.config.settings import Config
from clusterdeck.core.protocol.checkpoints import SavepointRestore

CLUSTER_DEFAULT = "cluster default"
STRATEGIES = (CLUSTER_DEFAULT, "none", "fixed-delay", "failure-rate", "exponential-delay")
_ATTEMPTS_KEY = {"fixed-delay": "restart-strategy.fixed-delay.attempts",
                 "failure-rate": "restart-strategy.failure-rate.max-failures"}
_DELAY_KEY = {"fixed-delay": "restart-strategy.fixed-delay.delay",
              "failure-rate": "restart-strategy.failure-rate.delay",
              "exponential-delay": "restart-strategy.exponential-delay.initial"}


@dataclass(frozen=True)
class SubmitRequest:
    """One job to submit, as ``JobClient.submit`` takes it."""

    path: Path
    args: tuple[str, ...] = ()
    parallelism: int | None = None
    restart_strategy: dict[str, Any] | None = None
    task_timeout: float = 0.0
    savepoint: SavepointRestore | None = None


def restart_settings(strategy: str, attempts: int, delay: float) -> dict[str, Any] | None:
    """The job's ``restart-strategy.*`` settings; None keeps the cluster's."""
    if strategy == CLUSTER_DEFAULT:
        return None
    settings: dict[str, Any] = {"restart-strategy.type": strategy}
    if strategy in _ATTEMPTS_KEY:
        settings[_ATTEMPTS_KEY[strategy]] = attempts
    if strategy in _DELAY_KEY:
        settings[_DELAY_KEY[strategy]] = delay
    checked = Config(settings)  # a bad value fails here, with its key
    return {key: checked[key] for key in settings}


class SubmitDialog(QDialog):
    """Settings for one job file; ``accepted`` means submit ``request()``."""

    def __init__(self, path: Path, kind: str = "", parent: QWidget | None = None, *,
                 savepoints_dir: Path | None = None) -> None:
        super().__init__(parent)
        self.path = Path(path)
        self.savepoints_dir = savepoints_dir
        """The cluster's savepoint folder, where Browse starts (None: not known)."""
        self.setWindowTitle(f"Submit {self.path.name}")
        self.setObjectName("submit-dialog")
        title = QLabel(f"<b>{self.path.name}</b>" + (f" \u2014 {kind}" if kind else ""))
        where = QLabel(str(self.path))
        where.setStyleSheet("color: #5b6470;")
        where.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.parallelism = QSpinBox()
        self.parallelism.setRange(0, 4096)
        self.parallelism.setSpecialValueText("the job's own")
        self.parallelism.setToolTip("Default parallelism of the job's operators (0: what the "
                                    "job file sets)")
        self.arguments = QLineEdit()
        self.arguments.setPlaceholderText("arguments of the job, as on a command line")
        self.strategy = QComboBox()
        self.strategy.addItems(STRATEGIES)
        self.attempts = QSpinBox()
        self.attempts.setRange(1, 1000)
        self.attempts.setValue(3)
        self.delay = QDoubleSpinBox()
        self.delay.setRange(0.0, 3600.0)
        self.delay.setDecimals(1)
        self.delay.setSingleStep(0.5)
        self.delay.setSuffix(" s")
        self.delay.setValue(1.0)
        self.task_timeout = QDoubleSpinBox()
        self.task_timeout.setRange(0.0, 86400.0)
        self.task_timeout.setDecimals(0)
        self.task_timeout.setSuffix(" s")
        self.task_timeout.setSpecialValueText("none")
        self.savepoint = QLineEdit()
        self.savepoint.setPlaceholderText("none: the job starts afresh")
        self.savepoint.setToolTip("A streaming job goes on from a savepoint of its cluster: "
                                  "its folder, or the folder's name (savepoint-\u2026)")
        browse = QPushButton("Browse\u2026")
        browse.setToolTip("Choose a savepoint folder of the cluster")
        browse.clicked.connect(self._browse)
        savepoint_row = QHBoxLayout()
        savepoint_row.addWidget(self.savepoint, 1)
        savepoint_row.addWidget(browse)
        self.allow_non_restored = QCheckBox("Allow non-restored state")
        self.allow_non_restored.setToolTip("Skip the savepoint's state of operators this job "
                                           "does not have instead of refusing the job")
        self.problem = QLabel()
        self.problem.setStyleSheet("color: #b03a36;")
        self.problem.hide()
        form = QFormLayout()
        form.addRow("Parallelism", self.parallelism)
        form.addRow("Program arguments", self.arguments)
        form.addRow("Restart strategy", self.strategy)
        form.addRow("Attempts", self.attempts)
        form.addRow("Delay", self.delay)
        form.addRow("Task timeout", self.task_timeout)
        form.addRow("Start from savepoint", savepoint_row)
        form.addRow("", self.allow_non_restored)
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.submit_button: QPushButton = self.buttons.addButton(
            "Submit", QDialogButtonBox.ButtonRole.AcceptRole)
        self.submit_button.setDefault(True)
        layout = QVBoxLayout(self)
        layout.addWidget(title)
        layout.addWidget(where)
        layout.addLayout(form)
        layout.addWidget(self.problem)
        layout.addWidget(self.buttons)
        self.buttons.accepted.connect(self.accept)
        self.buttons.rejected.connect(self.reject)
        self.strategy.currentTextChanged.connect(self._strategy_changed)
        self._strategy_changed(self.strategy.currentText())
        self.savepoint.textChanged.connect(self._savepoint_changed)
        self._savepoint_changed(self.savepoint.text())
        self.setMinimumWidth(480)

    def request(self) -> SubmitRequest:
        """What to submit; raises ValueError for arguments that do not parse."""
        strategy = self.strategy.currentText()
        return SubmitRequest(
            self.path, tuple(shlex.split(self.arguments.text())),
            self.parallelism.value() or None,
            restart_settings(strategy, self.attempts.value(), self.delay.value()),
            self.task_timeout.value(), self.savepoint_restore())

    def savepoint_restore(self) -> SavepointRestore | None:
        """The savepoint to start from, None when the field is empty."""
        path = self.savepoint.text().strip()
        if not path:
            return None
        return SavepointRestore(path, self.allow_non_restored.isChecked())

    def browse_start(self) -> str:
        """Where the folder chooser opens: the folder of a path typed, else the cluster's
        savepoint folder when it is on this machine, else the working directory."""
        typed = Path(self.savepoint.text().strip()).expanduser()
        for folder in (typed.parent if typed.name else None, self.savepoints_dir):
            if folder is not None and folder.is_absolute() and folder.is_dir():
                return str(folder)
        return str(Path.cwd())

    def accept(self) -> None:
        try:
            self.request()
        except ValueError as error:
            self.problem.setText(str(error))
            self.problem.show()
            return
        super().accept()

    def _browse(self) -> None:
        """Modal, as a file chooser is; the folder chosen fills the field."""
        folder = QFileDialog.getExistingDirectory(self, "Start from a savepoint",
                                                  self.browse_start())
        if folder:
            self.savepoint.setText(folder)

    def _savepoint_changed(self, text: str) -> None:
        self.allow_non_restored.setEnabled(bool(text.strip()))

    def _strategy_changed(self, strategy: str) -> None:
        self.attempts.setEnabled(strategy in _ATTEMPTS_KEY)
        self.delay.setEnabled(strategy in _DELAY_KEY)
        self.attempts.setToolTip("max failures in the interval" if strategy == "failure-rate"
                                 else "restarts before the job fails")
        self.delay.setToolTip("first pause (it grows)" if strategy == "exponential-delay"
                              else "pause before a restart")


class JobErrorDialog(QDialog):
    """Why a job file was not submitted: the loader's message, then the traceback."""

    def __init__(self, path: Path, message: str, traceback_text: str = "",
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(f"{Path(path).name} was not submitted")
        self.setObjectName("job-error-dialog")
        self.message = QLabel(message)
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.message.setStyleSheet("color: #b03a36; font-weight: bold;")
        self.traceback = QPlainTextEdit(traceback_text.rstrip())
        self.traceback.setReadOnly(True)
        self.traceback.setFont(QFontDatabase.systemFont(QFontDatabase.SystemFont.FixedFont))
        self.traceback.setLineWrapMode(QPlainTextEdit.LineWrapMode.NoWrap)
        self.traceback.setVisible(bool(traceback_text.strip()))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Close)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel(f"<b>{Path(path).name}</b> is not a job that can run:"))
        layout.addWidget(self.message)
        layout.addWidget(self.traceback, 1)
        layout.addWidget(buttons)
        self.resize(720, 420 if traceback_text.strip() else 160)
