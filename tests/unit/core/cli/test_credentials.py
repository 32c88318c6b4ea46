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


def test_a_standby_jobmanager_takes_cluster_login_and_ca_from_its_credentials_file(home):
    path = a_login_file(home, "jobmanager")
    args = build_parser().parse_args(["jobmanager", "--ha", "zookeeper", "--credentials",
                                      str(path)])
    config, address = credentialcommands.jobmanager_broker(Config(), args)
    assert config["cluster.id"] == "lab"
    assert isinstance(address, BrokerAddress) and address.tls and address.ca_pem
    assert (address.host, address.username) == ("node-a", "cd-lab-jobmanager")


def test_a_taskmanager_file_is_no_jobmanagers_login(home):
    args = build_parser().parse_args(["jobmanager", "--credentials",
                                      str(a_login_file(home, "taskmanager"))])
    with pytest.raises(ConfigError, match="--role jobmanager"):
        credentialcommands.jobmanager_broker(Config(), args)


def test_a_jobmanager_without_a_file_keeps_its_broker_url(capsys):
    args = build_parser().parse_args(["jobmanager", "--broker", "mqtt://u:pw@h:1883"])
    assert credentialcommands.jobmanager_broker(Config(), args)[1] == "mqtt://u:pw@h:1883"
    assert "visible to every user" in capsys.readouterr().err


def test_a_password_in_broker_is_warned_about(capsys):
    credentialcommands.warn_password_in_argv("mqtt://u:secret@h:1883")
    err = capsys.readouterr().err
    assert "visible to every user" in err and "--credentials" in err
    assert "secret" not in err


def test_a_broker_url_without_password_is_not_warned_about(capsys):
    credentialcommands.warn_password_in_argv("mqtt://h:1883")
    credentialcommands.warn_password_in_argv(None)
    assert capsys.readouterr().err == ""


def a_login_file(home, role, cluster_id="lab"):
    address = BrokerAddress("node-a", 8883, f"cd-{cluster_id}-{role}", "s3cret").with_tls(
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    path = home / f"{role}.json"
    exported.write(exported.ExportedCredentials(cluster_id, role, address), path)
    return path


@pytest.mark.parametrize("command", credentialcommands.CLIENT_COMMANDS)
def test_every_client_command_takes_a_credentials_file(command):
    extra = {"submit": ["job.py"], "cancel": ["j1"], "result": ["j1"], "failures": ["j1"],
             "savepoint": ["j1"], "stop": ["j1"], "rescale": ["j1", "2", "job.py"]}.get(
                 command, [])
    args = build_parser().parse_args([command, *extra, "--credentials", "-"])
    assert args.credentials == "-"


def test_a_client_file_gives_its_cluster_address_and_login(home):
    path = a_login_file(home, "client")
    args = build_parser().parse_args(["list", "--credentials", str(path)])
    config, address, role = credentialcommands.client_login(Config({}), args)
    assert (config["cluster.id"], role) == ("lab", "client")
    assert (address.host, address.port, address.username) == ("node-a", 8883, "cd-lab-client")
    assert address.tls


def test_without_a_file_the_local_clusters_client_login_is_used():
    args = build_parser().parse_args(["list"])
    assert credentialcommands.client_login(Config({}), args)[1:] == (None, "client")


@pytest.mark.parametrize("command", [["status"], ["list"]])
def test_an_observer_file_may_watch(home, command):
    path = a_login_file(home, "observer")
    args = build_parser().parse_args([*command, "--credentials", str(path)])
    assert credentialcommands.client_login(Config({}), args)[2] == "observer"


@pytest.mark.parametrize("command", [["submit", "job.py"], ["cancel", "j1"], ["result", "j1"]])
def test_an_observer_file_is_refused_at_once_for_what_it_may_not_do(home, command, capsys):
    path = a_login_file(home, "observer")
    assert main([*command, "--credentials", str(path)]) == 2
    err = capsys.readouterr().err
    assert "holds the observer login, which may only watch (status, list)" in err
    assert f"`{command[0]}` needs a client login" in err


def test_a_taskmanager_file_is_no_clients_login(home, capsys):
    path = a_login_file(home, "taskmanager")
    assert main(["list", "--credentials", str(path)]) == 2
    assert "holds the taskmanager login" in capsys.readouterr().err


def test_a_file_of_another_cluster_than_named_is_refused(home):
    path = a_login_file(home, "client")
    args = build_parser().parse_args(["list", "--cluster", "other", "--credentials",
                                      str(path)])
    config = Config({"cluster.id": "other"})
    with pytest.raises(ConfigError, match="is for cluster 'lab', not 'other'"):
        credentialcommands.client_login(config, args)


def test_a_malformed_file_is_refused_before_connecting(home, capsys):
    path = home / "bad.json"
    path.write_text('{"format": "clusterdeck-credentials", "version": 1}')
    assert main(["status", "--credentials", str(path)]) == 2
    assert f"--credentials {path}: the credentials file lacks" in capsys.readouterr().err
