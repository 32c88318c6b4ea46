"""The command line's high-availability options (docs/ha.md): settings, refusals, status."""

from __future__ import annotations

import tomllib
import uuid
from pathlib import Path

import pytest

from clusterdeck.core import ha
from clusterdeck.core.cli.main import main, print_overview
from clusterdeck.core.config.settings import Config, ConfigError
from clusterdeck.core.protocol import messages as p


def test_up_options_become_the_ha_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "show", "-D", "ha.mode=local", "-D", "jobmanager.count=3"]) == 0
    shown = tomllib.loads(capsys.readouterr().out)
    assert (shown["ha.mode"], shown["jobmanager.count"]) == ("local", 3)
    assert shown["ha.zookeeper.session-timeout"] == 2.0 and shown["ha.storage-dir"] == ""


def test_more_than_one_jobmanager_without_an_election_is_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    status = main(["up", "--jobmanagers", "2", "--cluster", f"ha-{uuid.uuid4().hex[:6]}",
                   "-D", "spark.start=lazy"])
    assert status == 2
    assert "more than one JobManager needs ha.mode local or zookeeper" in \
        capsys.readouterr().err


def test_zookeeper_without_a_quorum_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"needs ha\.zookeeper\.quorum"):
        ha.election_for(Config({"ha.mode": "zookeeper"}), tmp_path)
    assert ha.storage_dir(Config({"ha.storage-dir": str(tmp_path / "s")}), tmp_path) == \
        tmp_path / "s"


def test_status_names_the_leader_its_epoch_why_it_leads_and_the_standbys(
        capsys: pytest.CaptureFixture[str]) -> None:
    print_overview(p.ClusterOverview(
        "lab", (), 0, 0, 41, 0.0, leader_epoch=3, leader_host="host-a",
        standbys=("pid 42 on host host-b",),
        leader_cause="won the zookeeper election after standing by 2.3 s"))
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "cluster lab: JobManager pid 41 on host-a leads (epoch 3), 0/0 slots free"
    assert out[1] == "leading since: won the zookeeper election after standing by 2.3 s"
    assert out[2] == "standby JobManager: pid 42 on host host-b"


def test_status_without_high_availability_names_no_epoch(
        capsys: pytest.CaptureFixture[str]) -> None:
    print_overview(p.ClusterOverview("lab", (), 0, 0, 41, 0.0, leader_host="host-a"))
    assert capsys.readouterr().out.splitlines()[0] == \
        "cluster lab: JobManager pid 41 on host-a, 0/0 slots free"
