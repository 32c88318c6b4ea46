"""The command-line side of logins: export, --credentials and the --broker warning."""

import json
import stat

import pytest

from clusterdeck.broker import exported, tls
from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.connection import write_connection
from clusterdeck.broker.credentials import load_or_create
from clusterdeck.core.cli import credentialcommands
from clusterdeck.core.cli.main import build_parser, main
from clusterdeck.core.config import paths
from clusterdeck.core.config.settings import Config, ConfigError


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv(paths.HOME_ENV, str(tmp_path / "home"))
    return tmp_path


def a_tls_broker_ran(cluster_id):
    cluster_dir = paths.cluster_dir(cluster_id)
    credentials = load_or_create(cluster_dir, cluster_id)
    files = tls.ensure_certificates(cluster_dir, ["localhost", "127.0.0.1", "node-a"])
    write_connection(cluster_dir, "mosquitto",
                     BrokerAddress("127.0.0.1", 8883).with_tls(files.ca_file.read_text()),
                     files.ca_file)
    return credentials, files


def test_export_writes_a_private_file_a_taskmanager_can_use(home, capsys):
    credentials, files = a_tls_broker_ran("lab")
    out = home / "tm.json"
    status = main(["credentials", "export", "--cluster", "lab", "--host", "node-a",
                   "-D", "broker.tls=on", "-o", str(out)])
    assert status == 0
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    data = json.loads(out.read_text())
    assert data["broker_url"] == "mqtts://node-a:8883"
    assert data["identity"] == "taskmanager-64"
    assert data["password"] == credentials.for_role("taskmanager", "taskmanager-64")[1]
    assert data["ca_certificate"] == files.ca_file.read_text()
    assert "listens on 127.0.0.1 only" in capsys.readouterr().err


def test_export_warns_from_the_running_clusters_settings_not_its_own(home, capsys):
    """A cluster started with broker.bind=0.0.0.0 and TLS: export, run without those -D,
    once warned that the broker was loopback-only and TLS off, which was false."""
    a_tls_broker_ran("lab")
    run = paths.cluster_dir("lab") / "run"
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.toml").write_text(Config({"cluster.id": "lab",
                                             "broker.bind": "0.0.0.0"}).to_toml())
    status = main(["credentials", "export", "--cluster", "lab", "--host", "node-a",
                   "-o", str(home / "tm.json")])
    assert status == 0
    err = capsys.readouterr().err
    assert "listens on" not in err and "tls is off" not in err


def test_export_to_a_host_the_certificate_does_not_name_fails_with_usage(home, capsys):
    a_tls_broker_ran("lab")
    status = main(["credentials", "export", "--cluster", "lab", "--host", "node-z",
                   "-o", str(home / "tm.json")])
    assert status == 2
    assert "does not name 'node-z'" in capsys.readouterr().err
    assert not (home / "tm.json").exists()


def test_export_without_a_broker_is_unreachable(home, capsys):
    assert main(["credentials", "export", "--cluster", "nothing-here", "-o", "-"]) == 5


def test_taskmanager_takes_cluster_and_address_from_the_credentials_file(home):
    a_tls_broker_ran("lab")
    path = home / "tm.json"
    exported.write(exported.export(paths.cluster_dir("lab"), "lab", "taskmanager",
                                   "node-a"), path)
    args = build_parser().parse_args(["taskmanager", "--credentials", str(path)])
    config, address, resource_id = credentialcommands.taskmanager_broker(Config(), args)
    assert config["cluster.id"] == "lab"
    assert isinstance(address, BrokerAddress) and address.tls and address.ca_pem
    assert (address.username, resource_id) == ("cd-lab-taskmanager-64", "taskmanager-64")


def test_a_credentials_file_is_one_taskmanager_so_another_id_is_refused(home):
    a_tls_broker_ran("lab")
    path = home / "tm.json"
    exported.write(exported.export(paths.cluster_dir("lab"), "lab", "taskmanager",
                                   "node-a"), path)
    args = build_parser().parse_args(["taskmanager", "--credentials", str(path),
                                      "--id", "taskmanager-1"])
    with pytest.raises(ConfigError, match="login of TaskManager 'taskmanager-64'"):
        credentialcommands.taskmanager_broker(Config(), args)


def test_credentials_for_another_cluster_than_the_one_asked_for_are_refused(home):
    a_tls_broker_ran("lab")
    path = home / "tm.json"
    exported.write(exported.export(paths.cluster_dir("lab"), "lab", "taskmanager",
                                   "node-a"), path)
    args = build_parser().parse_args(["taskmanager", "--credentials", str(path)])
    with pytest.raises(ConfigError, match="for cluster 'lab', not 'other'"):
        credentialcommands.taskmanager_broker(Config({"cluster.id": "other"}), args)


def test_credentials_and_broker_together_are_refused(home):
    args = build_parser().parse_args(["taskmanager", "--credentials", "x.json",
                                      "--broker", "mqtt://h:1"])
    with pytest.raises(ConfigError, match="not both"):
        credentialcommands.taskmanager_broker(Config(), args)


def test_a_password_in_broker_is_warned_about(capsys):
    credentialcommands.warn_password_in_argv("mqtt://u:secret@h:1883")
    err = capsys.readouterr().err
    assert "visible to every user" in err and "--credentials" in err
    assert "secret" not in err


def test_a_broker_url_without_password_is_not_warned_about(capsys):
    credentialcommands.warn_password_in_argv("mqtt://h:1883")
    credentialcommands.warn_password_in_argv(None)
    assert capsys.readouterr().err == ""
