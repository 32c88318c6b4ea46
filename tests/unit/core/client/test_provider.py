"""The resource provider carries out the ResourceManager's demand on a supervisor, and
reports a start that failed once per decision: run on the test's thread, against a
supervisor that only records what it is asked."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from clusterdeck.broker.address import BrokerAddress
from clusterdeck.core.client.provider import TaskManagerProvider
from clusterdeck.core.config.settings import Config
from clusterdeck.core.protocol import messages as p
from clusterdeck.core.protocol.fencing import fencing_token
from clusterdeck.core.supervisor import ProcessInfo, ProcessSpec, ProcessStatus

LEADER = fencing_token(3)


class FakeSupervisor:
    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.infos: dict[str, ProcessInfo] = {}
        self.specs: dict[str, ProcessSpec] = {}
        self.calls: list[tuple[str, str]] = []

    def add_listener(self, _listener: object) -> None: ...

    def processes(self) -> list[ProcessInfo]:
        return list(self.infos.values())

    def add(self, spec: ProcessSpec) -> None:
        self.specs[spec.name] = spec
        self.infos[spec.name] = ProcessInfo(spec.name, spec.role, None, ProcessStatus.STOPPED,
                                            None, 0, None, self.log_dir / f"{spec.name}.log")

    def start_process(self, name: str) -> None:
        self.calls.append(("start", name))
        self.infos[name] = replace(self.infos[name], pid=100 + len(self.calls),
                                   status=ProcessStatus.RUNNING, started_at=1.0)

    def stop_process(self, name: str) -> None:
        self.calls.append(("stop", name))

    def exit(self, name: str, code: int) -> ProcessInfo:
        self.infos[name] = replace(self.infos[name], pid=None, status=ProcessStatus.STOPPED,
                                   last_exit_code=code)
        return self.infos[name]


def demand(starts: tuple[str, ...] = (), stops: tuple[str, ...] = (),
           failed: int = 0) -> p.TaskManagerDemand:
    return p.TaskManagerDemand(LEADER, starts, stops, 1, 3, failed_starts=failed)


def provider(tmp_path: Path) -> tuple[TaskManagerProvider, FakeSupervisor, list]:
    supervisor = FakeSupervisor(tmp_path)
    reports: list[p.TaskManagerStartFailed] = []
    made = TaskManagerProvider(
        Config({}), supervisor, BrokerAddress("127.0.0.1", 1883),  # type: ignore[arg-type]
        lambda name: ProcessSpec(name, "taskmanager", ("false",)),
        lambda name: BrokerAddress("127.0.0.1", 1883, name, "pw"),
        lambda _config, _address, _demand, failure: reports.append(failure))
    return made, supervisor, reports


def run(made: TaskManagerProvider, *events: object) -> None:
    """Post what the other threads would, then drain the inbox on this thread."""
    for event in events:
        if isinstance(event, p.TaskManagerDemand):
            made._on_demand("state/taskmanager-demand", event)
        else:
            made._on_process(event)
    made._inbox.put(None)
    made._run()


def test_it_starts_what_is_asked_for_once_without_restarts_of_its_own(tmp_path) -> None:
    made, supervisor, _ = provider(tmp_path)
    run(made, demand(("taskmanager-2", "taskmanager-3")), demand(("taskmanager-2",)))
    assert supervisor.calls == [("start", "taskmanager-2"), ("start", "taskmanager-3")]
    assert not supervisor.specs["taskmanager-2"].restart


def test_it_stops_only_what_it_started(tmp_path) -> None:
    made, supervisor, _ = provider(tmp_path)
    supervisor.add(ProcessSpec("taskmanager-1", "taskmanager", ("true",)))
    run(made, demand(("taskmanager-2",)), demand(stops=("taskmanager-1", "taskmanager-2")))
    assert supervisor.calls == [("start", "taskmanager-2"), ("stop", "taskmanager-2")]


def test_an_exit_before_registering_is_reported_with_the_end_of_its_log(tmp_path) -> None:
    made, supervisor, reports = provider(tmp_path)
    (tmp_path / "taskmanager-2.log").write_text(
        "".join(f"line {n}\n" for n in range(40)) + "ssh: Connection refused\n")
    run(made, demand(("taskmanager-2",)))
    run(made, supervisor.exit("taskmanager-2", 1))
    (report,) = reports
    assert report.resource_id == "taskmanager-2" and report.exit_code == 1
    assert "exited with code 1 before it registered" in report.cause
    assert report.cause.endswith("ssh: Connection refused")
    assert "line 20" not in report.cause  # the last lines only


def test_a_failed_start_waits_for_a_decision_that_counts_it(tmp_path) -> None:
    made, supervisor, _ = provider(tmp_path)
    run(made, demand(("taskmanager-2",)))
    run(made, supervisor.exit("taskmanager-2", 1), demand(("taskmanager-2",)))
    assert supervisor.calls == [("start", "taskmanager-2")]  # not again under the same one
    run(made, demand(("taskmanager-2",), failed=1))
    assert supervisor.calls == [("start", "taskmanager-2"), ("start", "taskmanager-2")]


def test_an_asked_for_stop_and_a_registered_one_going_are_no_failed_start(tmp_path) -> None:
    made, supervisor, reports = provider(tmp_path)
    run(made, demand(("taskmanager-2", "taskmanager-3")))
    run(made, demand(stops=("taskmanager-2",)), supervisor.exit("taskmanager-2", -15),
        supervisor.exit("taskmanager-3", 1))
    assert reports == []


def test_the_late_exit_of_a_stopped_instance_is_no_failure_of_the_new_one(tmp_path) -> None:
    made, supervisor, reports = provider(tmp_path)
    run(made, demand(("taskmanager-2",)))
    run(made, demand(stops=("taskmanager-2",)))
    old_exit = supervisor.exit("taskmanager-2", 0)
    run(made, demand(("taskmanager-2",), failed=0), old_exit)  # the name reused at once
    assert supervisor.calls[-1] == ("start", "taskmanager-2")
    assert supervisor.infos["taskmanager-2"].pid is not None
    assert reports == []


def test_a_name_supervised_by_hand_is_a_failed_start_not_taken_over(tmp_path) -> None:
    made, supervisor, reports = provider(tmp_path)
    supervisor.add(ProcessSpec("taskmanager-4", "taskmanager", ("true",)))
    run(made, demand(("taskmanager-4",)))
    assert supervisor.calls == []
    assert "not started on demand" in reports[0].cause


def test_a_deposed_leaders_demand_is_refused(tmp_path) -> None:
    made, supervisor, _ = provider(tmp_path)
    run(made, demand(("taskmanager-2",)),
        replace(demand(("taskmanager-3",)), fencing_token=fencing_token(2)))
    assert supervisor.calls == [("start", "taskmanager-2")]
