"""Every command of the window as a QAction: one object per command, shared by the menu,
the toolbar, the cluster panel's buttons and the process table's context menu, so a
command is enabled, disabled and triggered the same way wherever it appears.

The window connects ``triggered`` and decides enablement; nothing here knows the
cluster. GUI thread only.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QStyle, QWidget


@dataclass(frozen=True)
class WindowActions:
    start: QAction
    stop: QAction
    restart: QAction
    attach: QAction
    add_taskmanager: QAction
    submit: QAction
    cancel_job: QAction
    savepoint_job: QAction
    stop_job_savepoint: QAction
    stop_job: QAction
    compare_jobs: QAction
    inspect_state: QAction
    open_recording: QAction
    quit: QAction
    show_log: QAction
    restart_process: QAction
    kill_process: QAction
    thread_dump: QAction
    flame_graph: QAction
    spark_ui: QAction
    zoom_in: QAction
    zoom_out: QAction
    fit_graph: QAction
    reset_layout: QAction
    about: QAction

    def all(self) -> list[QAction]:
        return [getattr(self, f.name) for f in fields(self)]


def create_actions(owner: QWidget) -> WindowActions:
    style = owner.style()

    def action(text: str, shortcut: QKeySequence | str | None = None,
               icon: QStyle.StandardPixmap | None = None, tip: str = "") -> QAction:
        created = QAction(text, owner)
        if shortcut is not None:
            created.setShortcut(QKeySequence(shortcut))
        if icon is not None:
            created.setIcon(style.standardIcon(icon))
        tip = tip or text.replace("&", "").rstrip(".\u2026")
        if shortcut is not None:
            tip += f" ({created.shortcut().toString(QKeySequence.SequenceFormat.NativeText)})"
        created.setToolTip(tip)
        created.setStatusTip(tip)
        return created

    pixmap = QStyle.StandardPixmap
    return WindowActions(
        start=action("&Start", "F5", pixmap.SP_MediaPlay,
                     "Start a local cluster from the selected profile"),
        stop=action("S&top", "Shift+F5", pixmap.SP_MediaStop,
                    "Stop the local cluster, or detach from an attached one"),
        restart=action("&Restart", "Ctrl+Shift+F5", pixmap.SP_BrowserReload,
                       "Stop the local cluster and start it again"),
        attach=action("&Attach\u2026", "Ctrl+Shift+A", pixmap.SP_DriveNetIcon,
                      "Watch a cluster that is already running (clusterdeck up)"),
        add_taskmanager=action("Add &TaskManager", "Ctrl+Shift+T", pixmap.SP_FileDialogNewFolder,
                               "Start one more TaskManager in the local cluster"),
        submit=action("&Submit Job\u2026", QKeySequence.StandardKey.Open, pixmap.SP_FileIcon,
                      "Submit a job file (a .py file; dropping it on the window does the "
                      "same)"),
        cancel_job=action("&Cancel Job", "Ctrl+Shift+X", pixmap.SP_BrowserStop,
                          "Cancel the selected job"),
        savepoint_job=action("Take Save&point", "Ctrl+Shift+S", pixmap.SP_DialogSaveButton,
                             "Take a savepoint of the selected streaming job; it goes on "
                             "(clusterdeck savepoint)"),
        stop_job_savepoint=action("Stop &with Savepoint", None, None,
                                  "Stop the selected streaming job's sources at a savepoint, "
                                  "to submit it again from there (clusterdeck stop "
                                  "--savepoint)"),
        stop_job=action("Stop &Job", None, None,
                        "Stop the selected streaming job at a last checkpoint, which "
                        "commits its output; nothing is kept (clusterdeck stop)"),
        compare_jobs=action("C&ompare Jobs", "Ctrl+Shift+C", None,
                            "Two runs side by side: select two jobs in the Jobs list "
                            "(Ctrl+click)"),
        inspect_state=action("Inspect &State\u2026", None, None,
                             "The selected streaming job's keyed state in its checkpoints "
                             "and savepoints (clusterdeck state)"),
        open_recording=action("Open &Recording\u2026", "Ctrl+Shift+O",
                              pixmap.SP_DialogOpenButton, "Open a flight recording (clusterdeck "
                              "record export) offline, with no cluster"),
        quit=action("&Quit", QKeySequence.StandardKey.Quit),
        show_log=action("Show &Log", "Ctrl+L", pixmap.SP_FileDialogDetailedView,
                        "Follow the selected process's log"),
        restart_process=action("Restart &Process", "Ctrl+Shift+R", pixmap.SP_BrowserReload,
                               "Stop the selected process and start it again"),
        kill_process=action("&Kill Process (SIGKILL)", "Ctrl+K", pixmap.SP_DialogCancelButton,
                            "Kill the selected process, to watch failover happen"),
        thread_dump=action("&Thread Dump", "Ctrl+Shift+D", None,
                           "Every Python thread of the selected process now (py-spy)"),
        flame_graph=action("&Flame Graph (5 s)", "Ctrl+Shift+G", None,
                           "Sample the selected process for 5 s and draw where its time goes "
                           "(py-spy)"),
        spark_ui=action("Open Spark &UI", "Ctrl+Shift+U", None,
                        "Open the selected TaskManager's Spark UI in the browser"),
        zoom_in=action("Zoom &In", QKeySequence.StandardKey.ZoomIn),
        zoom_out=action("Zoom &Out", QKeySequence.StandardKey.ZoomOut),
        fit_graph=action("&Fit Graph", "Ctrl+0", pixmap.SP_TitleBarMaxButton,
                         "Show the whole ExecutionGraph"),
        reset_layout=action("Reset &Layout"),
        about=action("&About clusterdeck"),
    )
