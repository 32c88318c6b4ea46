"""From a dropped or chosen file to a submitted job.

``offer(path)`` (a drop on the window, File > Submit...) first checks the file on the
worker thread: a file that is not a job gets the loader's own message and traceback in a
``JobErrorDialog`` at once, without a settings dialog. A job file opens the
``SubmitDialog``; Submit hands ``JobClient.submit`` to the worker, which loads the job with
its arguments (a file that fails only then is refused the same way, before anything is
sent), uploads it and returns the job id, announced by ``submitted``. Several dropped
files are offered one after the other. Dialogs are non-modal, so the window stays usable
and a test can drive them. GUI thread API.
"""

from __future__ import annotations

from collections import deque
from pathlib import Path

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QWidget

from clusterdeck.core.jobapi.errors import JobLoadError
from clusterdeck.core.jobapi.loader import detect_kind, load_job
from clusterdeck.core.protocol.jobgraph import JobKind
from clusterdeck.core.rpc import RemoteError
from clusterdeck.gui.bridge import ClusterBridge
from clusterdeck.gui.controllers.jobcalls import JobWorker
from clusterdeck.gui.views.submitdialog import JobErrorDialog, SubmitDialog, SubmitRequest

_KIND_TEXT = {JobKind.DATAFLOW: "dataflow job (build(env))",
              JobKind.PYSPARK_SCRIPT: "PySpark script"}


def check_job_file(path: Path) -> str:
    """What kind of job ``path`` is, read from its syntax tree (nothing of it runs);
    raises JobLoadError, with the loader's message and traceback, when it is none."""
    if path.suffix != ".py":
        raise JobLoadError(f"{path.name} is not a job file: a job is a Python file (.py) "
                           "that defines build(env), or a PySpark script")
    try:
        kind = detect_kind(path.read_text(encoding="utf-8"), str(path))
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError):
        kind = None
    if kind is None:
        kind = load_job(path).kind  # refuses it with the loader's own words
    return _KIND_TEXT.get(kind, str(kind))


class SubmissionFlow(QObject):
    """Check, ask, submit; refusals become error dialogs. GUI thread only."""

    submitted = Signal(str, str)
    """``(job_id, path)`` of a job the Dispatcher accepted."""
    notice = Signal(str)

    def __init__(self, bridge: ClusterBridge, worker: JobWorker, window: QWidget,
                 job_files: dict[str, Path] | None = None) -> None:
        super().__init__(window)
        self.bridge = bridge
        self.worker = worker
        self.window = window
        self.dialog: SubmitDialog | None = None
        self.error_dialog: JobErrorDialog | None = None
        self.job_files = job_files if job_files is not None else {}
        """Job id -> the local file it was submitted from (to mark the user's frames);
        shared with the failures view."""
        self.savepoints_dir: Path | None = None
        """The followed cluster's savepoint folder, where the dialog's Browse starts; the
        window sets it."""
        self._waiting: deque[Path] = deque()
        self._checking = False

    def offer(self, path: str | Path) -> None:
        """A file to submit; its dialog opens once the ones before it are answered."""
        self._waiting.append(Path(path))
        self._next()

    def submit(self, request: SubmitRequest) -> None:
        """Submit on the worker; ``submitted`` or an error dialog follows."""
        client = self.bridge.client
        if client is None:
            self._refused(request.path, "There is no cluster to submit to: start a local "
                          "cluster or attach to one, then submit again.")
            return
        start = f" from {Path(request.savepoint.path).name}" if request.savepoint else ""
        self.notice.emit(f"submitting {request.path.name}{start}\u2026")

        def done(job_id: str) -> None:
            self.job_files[job_id] = request.path.resolve()
            self.notice.emit(f"{request.path.name} submitted as job {job_id}")
            self.submitted.emit(job_id, str(request.path))

        self.worker.run(lambda: client.submit(
            request.path, request.args, parallelism=request.parallelism,
            restart_strategy=request.restart_strategy, task_timeout=request.task_timeout,
            savepoint=request.savepoint),
            done, lambda error: self._failed(request.path, error))

    # -- one file after the other -------------------------------------------------------------

    def _next(self) -> None:
        if self._checking or self.dialog is not None or not self._waiting:
            return
        path = self._waiting.popleft()
        self._checking = True

        def checked(kind: str) -> None:
            self._checking = False
            self._ask(path, kind)

        def refused(error: BaseException) -> None:
            self._checking = False
            self._failed(path, error)
            self._next()

        self.worker.run(lambda: check_job_file(path), checked, refused)

    def _ask(self, path: Path, kind: str) -> None:
        dialog = SubmitDialog(path, kind, self.window, savepoints_dir=self.savepoints_dir)
        self.dialog = dialog
        dialog.accepted.connect(lambda: self.submit(dialog.request()))
        dialog.finished.connect(lambda _result: self._closed(dialog))
        dialog.open()

    def _closed(self, dialog: SubmitDialog) -> None:
        if self.dialog is dialog:
            self.dialog = None
        dialog.deleteLater()
        self._next()

    # -- refusals -----------------------------------------------------------------------------

    def _failed(self, path: Path, error: BaseException) -> None:
        if isinstance(error, JobLoadError):
            self._refused(path, error.message, error.traceback_text)
        elif isinstance(error, RemoteError):
            self._refused(path, f"The JobManager refused the job: {error}")
        else:
            self._refused(path, f"The job could not be submitted: {error}")

    def _refused(self, path: Path, message: str, traceback_text: str = "") -> None:
        self.notice.emit(f"{path.name} was not submitted: {message.splitlines()[0]}")
        if self.error_dialog is not None:
            self.error_dialog.close()
        self.error_dialog = JobErrorDialog(path, message, traceback_text, self.window)
        self.error_dialog.show()
