"""The failure inspector's "Reproduce locally…": enabled for a selected attempt, it asks
the controller for that attempt's folder; without a cluster's folders to read (a
recording), the controller says what is missing."""

from __future__ import annotations

from types import SimpleNamespace

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QWidget

from clusterdeck.core.reproduce.stored import RECORDING_LACKS
from clusterdeck.gui.controllers.reproduction import ReproductionFlow
from clusterdeck.gui.views.failuresview import FailuresView
from tests.gui.jobsnapshots import mixed_word_count


def test_the_button_asks_to_reproduce_the_selected_attempt(qtbot) -> None:
    _, snapshot = mixed_word_count()  # source 2 failed
    failures = FailuresView()
    qtbot.addWidget(failures)
    assert not failures.reproduce_button.isEnabled()
    failures.set_snapshot("job-1", snapshot)
    failures.show_job("job-1")
    assert failures.reproduce_button.isEnabled()
    with qtbot.waitSignal(failures.reproduce_wanted) as wanted:
        qtbot.mouseClick(failures.reproduce_button, Qt.MouseButton.LeftButton)
    assert wanted.args == ["job-1", "source", 2, 0]
    failures.clear()
    assert not failures.reproduce_button.isEnabled()


def test_without_a_clusters_folders_it_says_what_a_recording_lacks(qtbot) -> None:
    window = QWidget()
    qtbot.addWidget(window)
    notices: list[str] = []
    flow = ReproductionFlow(window, SimpleNamespace(config=None), None,  # type: ignore[arg-type]
                            notices.append)
    flow.reproduce("job-1", "source", 2, 0)
    assert notices == [RECORDING_LACKS]
