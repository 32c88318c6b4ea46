"""Driving the main window as a user does: a real drag and drop of files, the submit
dialog, and the clean-up of a window that followed a cluster it does not own."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDragEnterEvent, QDropEvent
from PySide6.QtWidgets import QApplication

from clusterdeck.gui.controllers.mainwindow import MainWindow


def drop_files(window: MainWindow, *paths: Path) -> None:
    """A drag entering the window, then the drop, as the platform delivers them (a drop
    goes to the widget that accepted the drag's enter)."""
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(path)) for path in paths])
    where = window.rect().center()
    enter = QDragEnterEvent(where, Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                            Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(window, enter)
    assert enter.isAccepted(), "the window refused the drag"
    drop = QDropEvent(QPointF(where), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                      Qt.KeyboardModifier.NoModifier)
    QApplication.sendEvent(window, drop)
    assert drop.isAccepted(), "the window refused the drop"


def submit_dropped(qtbot, window: MainWindow, path: Path, strategy: str | None = None,
                   timeout: int = 30_000) -> str:
    """Drop ``path``, set the dialog (restart strategy), click Submit; the job id."""
    drop_files(window, path)
    qtbot.waitUntil(lambda: window.submission.dialog is not None
                    and window.submission.dialog.isVisible(), timeout=10_000)
    dialog = window.submission.dialog
    assert dialog.path == path
    if strategy is not None:
        dialog.strategy.setCurrentText(strategy)
    with qtbot.waitSignal(window.submission.submitted, timeout=timeout) as submitted:
        qtbot.mouseClick(dialog.submit_button, Qt.MouseButton.LeftButton)
    return str(submitted.args[0])


def job_status(window: MainWindow, job_id: str) -> str:
    row = window.job_model.row(job_id)
    return row.status if row is not None else ""


def leave(window: MainWindow) -> None:
    """Stop following the cluster without stopping it; close the window's client."""
    window.worker.shutdown()
    client = window.bridge.disconnect_client()
    if client is not None:
        client.close()
    window.bridge.close()
