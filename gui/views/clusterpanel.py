"""The cluster panel: the profile to start from, the lifecycle buttons, the process table.

Profiles are edited in a small form and saved in the config dir (gui/models/profiles.py). The
buttons are the window's actions (Start, Stop, Restart, Attach), so they enable and work
exactly like the menu and the toolbar. The table is a QTableView over the process model;
its context menu offers the process actions (log, restart, kill). GUI thread only.
"""

from __future__ import annotations

from PySide6.QtCore import QModelIndex, QPoint, Qt, QTimer, Signal
from PySide6.QtWidgets import (
    QAbstractItemView,
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QSpinBox,
    QTableView,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from clusterdeck.gui.models.processmodel import ProcessRow, ProcessTableModel
from clusterdeck.gui.models.profiles import (
    BROKER_KINDS,
    MAX_JOBMANAGERS,
    ClusterProfile,
    ProfileStore,
)
from clusterdeck.gui.models.sessionstate import SessionMode, SessionState
from clusterdeck.gui.views.actions import WindowActions


class ProfileEditor(QGroupBox):
    """Choose, edit, save and delete cluster profiles."""

    def __init__(self, store: ProfileStore, parent: QWidget | None = None) -> None:
        super().__init__("Profile", parent)
        self.store = store
        self.choice = QComboBox()
        self.name = QLineEdit()
        self.taskmanagers = QSpinBox()
        self.taskmanagers.setRange(1, 64)
        self.slots = QSpinBox()
        self.slots.setRange(1, 256)
        self.broker = QComboBox()
        self.broker.addItems(BROKER_KINDS)
        self.spark_master = QLineEdit()
        self.spark_master.setPlaceholderText("local[<slots>]")
        self.jobmanagers = QSpinBox()
        self.jobmanagers.setRange(1, MAX_JOBMANAGERS)
        self.jobmanagers.setToolTip("One leads, the others stand by to take over when it "
                                    "dies (ha.mode local unless your configuration sets one)")
        self.on_demand = QSpinBox()
        self.on_demand.setRange(0, 64)
        self.on_demand.setSpecialValueText("off")
        self.on_demand.setToolTip("Start more TaskManagers when jobs wait for slots, up to "
                                  "this many, and stop them when idle (docs/elastic.md)")
        new, save, delete = QPushButton("New"), QPushButton("Save"), QPushButton("Delete")
        choose = QHBoxLayout()
        choose.addWidget(self.choice, 1)
        for button in (new, save, delete):
            choose.addWidget(button)
        form = QFormLayout(self)
        form.addRow(choose)
        form.addRow("Name (cluster id)", self.name)
        form.addRow("TaskManagers", self.taskmanagers)
        form.addRow("Slots per TaskManager", self.slots)
        form.addRow("Broker", self.broker)
        form.addRow("Spark master", self.spark_master)
        form.addRow("JobManagers", self.jobmanagers)
        form.addRow("At most, on demand", self.on_demand)
        self._fill_choice(store.names()[0])
        self.choice.currentTextChanged.connect(self._load)
        new.clicked.connect(self._new)
        save.clicked.connect(self.save)
        delete.clicked.connect(self._delete)
        self._load(self.choice.currentText())

    def profile(self) -> ClusterProfile:
        """The form's profile; ProfileError names a bad field."""
        return ClusterProfile(self.name.text().strip(), self.taskmanagers.value(),
                              self.slots.value(), self.broker.currentText(),
                              self.spark_master.text().strip(), self.jobmanagers.value(),
                              self.on_demand.value())

    def save(self) -> ClusterProfile:
        profile = self.profile()
        self.store.put(profile, replacing=self.choice.currentText() or None)
        self._fill_choice(profile.name)
        return profile

    def _fill_choice(self, current: str) -> None:
        self.choice.blockSignals(True)
        self.choice.clear()
        self.choice.addItems(self.store.names())
        self.choice.setCurrentText(current)
        self.choice.blockSignals(False)

    def _load(self, name: str) -> None:
        profile = self.store.get(name)
        if profile is None:
            return
        self.name.setText(profile.name)
        self.taskmanagers.setValue(profile.taskmanagers)
        self.slots.setValue(profile.slots)
        self.broker.setCurrentText(profile.broker_kind)
        self.spark_master.setText(profile.spark_master)
        self.jobmanagers.setValue(profile.jobmanagers)
        self.on_demand.setValue(profile.max_taskmanagers)

    def _new(self) -> None:
        profile = ClusterProfile(self.store.unused_name())
        self.store.put(profile)
        self._fill_choice(profile.name)
        self._load(profile.name)

    def _delete(self) -> None:
        self.store.remove(self.choice.currentText())
        self._fill_choice(self.store.names()[0])
        self._load(self.choice.currentText())


class ClusterPanel(QWidget):
    """Profile, lifecycle buttons, session line and process table, top to bottom."""

    process_activated = Signal(str)
    """A process row was double-clicked (the window opens its log)."""

    def __init__(self, model: ProcessTableModel, actions: WindowActions, store: ProfileStore,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.model = model
        self.actions = actions
        self.profiles = ProfileEditor(store)
        self.state_line = QLabel("No cluster. Start one from a profile, or attach to a "
                                 "running one.")
        self.state_line.setWordWrap(True)
        self.table = QTableView()
        self.table.setModel(model)
        self.table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.table.verticalHeader().setVisible(False)
        self.table.setAlternatingRowColors(True)
        # Fitted when the rows change and at most every two seconds after that, not on
        # every heartbeat: ResizeToContents would measure every cell at each update.
        self.table.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.table.horizontalHeader().setStretchLastSection(True)
        self.table.setWordWrap(False)
        self._fit = QTimer(self)
        self._fit.setSingleShot(True)
        self._fit.setInterval(2000)
        self._fit.timeout.connect(self.table.resizeColumnsToContents)
        model.modelReset.connect(self.table.resizeColumnsToContents)
        model.dataChanged.connect(lambda *_: self._fit.isActive() or self._fit.start())
        self.table.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.table.customContextMenuRequested.connect(self._context_menu)
        self.table.doubleClicked.connect(self._activated)
        buttons = QHBoxLayout()
        for action in (actions.start, actions.stop, actions.restart, actions.attach,
                       actions.add_taskmanager):
            button = QToolButton()
            button.setDefaultAction(action)
            button.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
            buttons.addWidget(button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(self.profiles)
        layout.addLayout(buttons)
        layout.addWidget(self.state_line)
        layout.addWidget(QLabel("Processes"))
        layout.addWidget(self.table, 1)
        self._uptime = QTimer(self)
        self._uptime.timeout.connect(model.refresh_uptime)
        self._uptime.start(1000)
        model.modelReset.connect(self._restore_selection)
        self._selected_name: str | None = None
        self.table.selectionModel().selectionChanged.connect(self._remember_selection)

    # -- reading and selecting ----------------------------------------------------------------

    def selected_row(self) -> ProcessRow | None:
        rows = self.table.selectionModel().selectedRows()
        return self.model.row_at(rows[0].row()) if rows else None

    def select_process(self, name: str) -> bool:
        for index, row in enumerate(self.model.rows()):
            if row.name == name:
                self.table.selectRow(index)
                return True
        return False

    def profile(self) -> ClusterProfile:
        return self.profiles.profile()

    # -- session ------------------------------------------------------------------------------

    def set_session_state(self, state: SessionState) -> None:
        """While a cluster is up the profile cannot change: its form makes room for the
        process table."""
        self.profiles.setVisible(not state.active)
        self.state_line.setStyleSheet("color: #b03a36;" if state.error else "")
        if state.error:
            self.state_line.setText(state.error)
        elif state.mode is SessionMode.IDLE:
            self.state_line.setText("No cluster. Start one from a profile, or attach to a "
                                    "running one.")
        else:
            how = "local, supervised here" if state.supervised else "attached, watched only"
            self.state_line.setText(f"Cluster <b>{state.cluster_id}</b>: {state.mode} "
                                    f"({how}; broker {state.broker_kind or '?'})")

    def show_notice(self, message: str) -> None:
        self.state_line.setStyleSheet("color: #b03a36;")
        self.state_line.setText(message)

    # -- internals ----------------------------------------------------------------------------

    def _context_menu(self, position: QPoint) -> None:
        index = self.table.indexAt(position)
        if not index.isValid():
            return
        self.table.selectRow(index.row())
        menu = QMenu(self)
        menu.addActions([self.actions.show_log, self.actions.restart_process,
                         self.actions.kill_process])
        menu.addSeparator()
        menu.addActions([self.actions.thread_dump, self.actions.flame_graph,
                         self.actions.spark_ui])
        menu.popup(self.table.viewport().mapToGlobal(position))

    def _activated(self, index: QModelIndex) -> None:
        row = self.model.row_at(index.row())
        if row is not None:
            self.process_activated.emit(row.name)

    def _remember_selection(self) -> None:
        row = self.selected_row()
        if row is not None:
            self._selected_name = row.name

    def _restore_selection(self) -> None:
        """A model reset (rows added or removed) drops the selection: keep it by name."""
        if self._selected_name is not None:
            self.select_process(self._selected_name)

