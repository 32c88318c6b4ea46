"""The process table's model: supervisor processes and TaskManagers, one row each."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from clusterdeck.core.config.settings import Config
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.supervisor import ProcessInfo, ProcessSpec, ProcessStatus, Supervisor
from clusterdeck.gui.bridge import ClusterBridge
from clusterdeck.gui.models.processmodel import COLUMNS, ProcessTableModel
from clusterdeck.gui.sampler import ResourceSample
from tests.gui.overviews import overview, taskmanager


def info(name: str, status: ProcessStatus, pid: int | None = None, role: str = "taskmanager",
         exit_code: int | None = None) -> ProcessInfo:
    return ProcessInfo(name, role, pid, status, 1000.0 if pid else None, 0, exit_code,
                       Path(f"/tmp/{name}.log"))


def cell(model: ProcessTableModel, name: str, column: str) -> str:
    row = next(i for i, r in enumerate(model.rows()) if r.name == name)
    return model.data(model.index(row, COLUMNS.index(column)))


@pytest.mark.integration
def test_the_table_shows_the_supervisors_processes_and_their_states(qtbot, tmp_path):
    bridge = ClusterBridge()
    model = ProcessTableModel()
    bridge.processes_changed.connect(model.update_processes)
    supervisor = Supervisor(Config({"supervisor.shutdown-grace": 1.0}), tmp_path)
    python = sys.executable
    supervisor.add(ProcessSpec("sleeper", "worker", (python, "-c", "import time; time.sleep(30)")))
    supervisor.add(ProcessSpec("quitter", "worker", (python, "-c", "raise SystemExit(3)"),
                               restart=False))
    bridge.connect_supervisor(supervisor)
    try:
        qtbot.waitUntil(lambda: [r.name for r in model.rows()] == ["sleeper", "quitter"],
                        timeout=2000)
        assert cell(model, "sleeper", "State") == "stopped"
        supervisor.start()
        qtbot.waitUntil(lambda: cell(model, "sleeper", "State") == "running"
                        and model.row_named("quitter").last_exit_code == 3, timeout=5000)
        assert cell(model, "sleeper", "PID") == str(supervisor.info("sleeper").pid)
        assert cell(model, "quitter", "State") == "stopped"
        supervisor.stop_process("sleeper")
        qtbot.waitUntil(lambda: cell(model, "sleeper", "State") == "stopped", timeout=5000)
    finally:
        bridge.close()
        supervisor.stop()


def test_a_process_the_supervisor_gave_up_on_shows_as_crashed(qtbot):
    model = ProcessTableModel()
    model.update_processes([info("taskmanager-1", ProcessStatus.FAILED, exit_code=-9),
                            info("taskmanager-2", ProcessStatus.RESTARTING)])
    assert cell(model, "taskmanager-1", "State") == "crashed"
    assert cell(model, "taskmanager-2", "State") == "restarting"
    assert "signal 9" in model.data(model.index(0, 0), role=3)  # Qt.ToolTipRole


def test_the_overview_adds_registration_and_heartbeat_to_supervised_taskmanagers(qtbot):
    model = ProcessTableModel()
    model.update_processes([info("jobmanager", ProcessStatus.RUNNING, 10, "jobmanager"),
                            info("taskmanager-1", ProcessStatus.RUNNING, 11)])
    model.set_overview(overview(taskmanager("taskmanager-1", lost=True)))
    assert [r.name for r in model.rows()] == ["jobmanager", "taskmanager-1"]
    assert model.row_named("taskmanager-1").registration == "lost"
    assert cell(model, "taskmanager-1", "Heartbeat") == "lost"
    assert cell(model, "jobmanager", "Heartbeat") == "\u2013"
    model.set_overview(overview(taskmanager("taskmanager-1")))
    assert cell(model, "taskmanager-1", "Heartbeat") == "0.3 s ago"


def test_attached_the_rows_come_from_the_overview_alone(qtbot):
    model = ProcessTableModel()
    model.set_overview(overview(taskmanager("tm-a", pid=21), taskmanager("tm-b", lost=True),
                                jobmanager_pid=20))
    assert [(r.name, r.state, r.pid) for r in model.rows()] == [
        ("jobmanager", "running", 20), ("tm-a", "running", 21), ("tm-b", "lost", None)]
    assert not any(r.supervised for r in model.rows())


def test_resource_samples_fill_cpu_and_memory(qtbot):
    model = ProcessTableModel()
    model.update_processes([info("taskmanager-1", ProcessStatus.RUNNING, 11)])
    model.set_resources({11: ResourceSample(11, 12.5, 300 * 1024 * 1024)})
    assert cell(model, "taskmanager-1", "CPU %") == "12.5"
    assert cell(model, "taskmanager-1", "Memory") == "300.0 MiB"


def test_a_changed_state_updates_the_row_in_place(qtbot):
    model = ProcessTableModel()
    model.update_processes([info("taskmanager-1", ProcessStatus.RUNNING, 11)])
    with qtbot.waitSignal(model.dataChanged, timeout=1000), \
            qtbot.assertNotEmitted(model.modelReset):
        model.update_processes([info("taskmanager-1", ProcessStatus.RESTARTING)])
    assert cell(model, "taskmanager-1", "State") == "restarting"


def test_the_jobmanagers_show_which_one_leads_and_which_stand_by(qtbot):
    """Two supervised JobManagers: the overview names the leader by pid and the other as a
    standby; the leader's row says its epoch and, in its tooltip, why it leads."""
    model = ProcessTableModel()
    model.update_processes([info("jobmanager", ProcessStatus.RUNNING, 4000, "jobmanager"),
                            info("jobmanager-2", ProcessStatus.RUNNING, 4001, "jobmanager")])
    model.set_overview(replace(overview(), leader_epoch=3, leader_host="host-a",
                               standbys=("pid 4001 on host host-a",),
                               leader_cause="won the local election after standing by 0.1 s"))
    assert cell(model, "jobmanager", "State") == "running (leader, epoch 3)"
    assert cell(model, "jobmanager-2", "State") == "running (standby)"
    tooltip = model.data(model.index(0, 0), Qt.ItemDataRole.ToolTipRole)
    assert "leading since: won the local election after standing by 0.1 s" in tooltip
    # The standby took over: the rows follow the next overview.
    model.set_overview(replace(overview(jobmanager_pid=4001), leader_epoch=4))
    assert cell(model, "jobmanager-2", "State") == "running (leader, epoch 4)"
    assert cell(model, "jobmanager", "State") == "running"


def test_a_cluster_attached_to_shows_its_leader_and_standbys_from_the_overview(qtbot):
    model = ProcessTableModel()
    model.set_overview(replace(overview(), leader_epoch=2,
                               standbys=("pid 77 on host host-b",)))
    assert cell(model, "jobmanager", "State") == "running (leader, epoch 2)"
    assert cell(model, "jobmanager (pid 77 on host host-b)", "State") == "running (standby)"


def test_a_cluster_without_high_availability_shows_no_leadership(qtbot):
    """ha.mode none leads at epoch 0 with no standbys: there is nothing to lead over, so the
    row says only that the JobManager runs."""
    model = ProcessTableModel()
    model.update_processes([info("jobmanager", ProcessStatus.RUNNING, 4000, "jobmanager")])
    model.set_overview(replace(overview(jobmanager_pid=4000), leader_epoch=0))
    assert cell(model, "jobmanager", "State") == "running"


def test_taskmanagers_the_resource_manager_starts_and_stops_say_so(qtbot):
    model = ProcessTableModel()
    model.update_processes([info("taskmanager-1", ProcessStatus.RUNNING, 11),
                            info("taskmanager-2", ProcessStatus.RUNNING, 12),
                            info("taskmanager-3", ProcessStatus.STARTING, 13),
                            info("taskmanager-4", ProcessStatus.STOPPED)])
    stopped = replace(taskmanager("taskmanager-4", lost=True), lost_cause=(
        "TaskManager taskmanager-4 lost: stopped by the ResourceManager: idle for 30 s"))
    demand = p.TaskManagerDemand("1:ab", starts=("taskmanager-3",), stops=("taskmanager-2",),
                                 min_taskmanagers=1, max_taskmanagers=4,
                                 started=("taskmanager-1",))
    model.set_overview(replace(overview(taskmanager("taskmanager-1"),
                                        taskmanager("taskmanager-2"), stopped),
                               elastic=demand))
    assert cell(model, "taskmanager-1", "State") == "running (on demand)"
    assert cell(model, "taskmanager-2", "State") == "running (idle, stopping)"
    assert cell(model, "taskmanager-3", "State") == "starting (on demand)"
    assert cell(model, "taskmanager-4", "State") == "stopped (idle)"
