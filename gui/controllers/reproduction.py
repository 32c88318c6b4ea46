"""The failure inspector's "Reproduce locally…": the folder ``clusterdeck reproduce``
writes, by the same code (core/reproduce/bundle.py), for the failure selected.

The user picks where; the folder is written on the job worker (it copies input and
state: file work), and the outcome comes back to the GUI thread as a notice naming the
command that runs it. The window never runs Spark itself: the command runs in a terminal
(or an editor's debugger with ``--debugpy``). GUI thread, but for the writing.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtWidgets import QFileDialog, QWidget

from clusterdeck.core.reproduce.bundle import reproduce_job
from clusterdeck.core.reproduce.folder import Reproduction
from clusterdeck.core.reproduce.stored import RECORDING_LACKS
from clusterdeck.gui.controllers.jobcalls import JobWorker
from clusterdeck.gui.session import ClusterSession


class ReproductionFlow:
    """From a selected failure to its reproduction folder; ``notice`` tells the user."""

    def __init__(self, window: QWidget, session: ClusterSession, worker: JobWorker,
                 notice: Callable[[str], None]) -> None:
        self.window = window
        self.session = session
        self.worker = worker
        self.notice = notice

    def reproduce(self, job_id: str, vertex_id: str, subtask: int, attempt: int) -> None:
        config = self.session.config
        if config is None:
            self.notice(RECORDING_LACKS)
            return
        parent = QFileDialog.getExistingDirectory(
            self.window, "Where to write the reproduction folder", str(Path.cwd()))
        if not parent:
            return
        out = Path(parent) / f"reproduce-{job_id}-{vertex_id}-{subtask}-a{attempt}"
        self.notice(f"writing {out} ...")
        self.worker.run(
            lambda: reproduce_job(config, job_id, f"{vertex_id}#{subtask}", attempt, out),
            self._written, lambda error: self.notice(f"cannot reproduce it: {error}"))

    def _written(self, outcome: tuple[Path, Reproduction]) -> None:
        folder, reproduction = outcome
        self.notice(f"wrote {folder} ({reproduction.expected.exception_type}); run it: "
                    f"clusterdeck reproduce --run {folder} [--pdb]")
