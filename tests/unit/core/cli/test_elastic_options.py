"""``clusterdeck up``'s elastic options and the status lines of the active
ResourceManager."""

from __future__ import annotations

import time

from clusterdeck.core.cli.main import build_parser, effective_config, print_demand
from clusterdeck.core.protocol import messages as p


def config_of(*argv: str):
    args = build_parser().parse_args(["up", *argv])
    return effective_config(args)


def test_limits_alone_start_taskmanagers_on_this_machine() -> None:
    config = config_of("--min-taskmanagers", "1", "--max-taskmanagers", "3",
                       "--idle-timeout", "5 s")
    assert (config["elastic.provider"], config["elastic.min-taskmanagers"],
            config["elastic.max-taskmanagers"], config["elastic.idle-timeout"]) == \
        ("local", 1, 3, 5.0)


def test_without_limits_or_provider_nothing_starts_on_demand() -> None:
    assert config_of("--taskmanagers", "2")["elastic.provider"] == "none"
    assert config_of("--provider", "none", "--max-taskmanagers", "3")[
        "elastic.provider"] == "none"


def test_the_status_says_what_the_resource_manager_starts_stops_and_why_one_failed(
        capsys) -> None:
    print_demand(p.TaskManagerDemand(
        "1:ab", starts=("taskmanager-3",), stops=("taskmanager-2",), min_taskmanagers=1,
        max_taskmanagers=3, failed_starts=2, retry_at=time.time() + 60,
        last_failure="taskmanager-3: exited with code 1 before it registered"))
    out = capsys.readouterr().out
    assert "1 to 3 TaskManagers; starting on demand: taskmanager-3" in out
    assert "stopping (idle): taskmanager-2; failed starts: 2" in out
    assert "back-off after a failed start" in out
    assert "last failed start: taskmanager-3: exited with code 1" in out
