import io
import json
import stat

import pytest

from clusterdeck.broker import exported, tls
from clusterdeck.broker.address import BrokerAddress
from clusterdeck.broker.connection import NoBrokerError, write_connection
from clusterdeck.broker.credentials import load_or_create

CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def tls_credentials():
    address = BrokerAddress("node-a", 8883, "cd-lab-taskmanager", "s3cret").with_tls(CA)
    return exported.ExportedCredentials("lab", "taskmanager", address)


def test_a_written_file_reads_back_equal_and_is_private(tmp_path):
    path = tmp_path / "lab.json"
    exported.write(tls_credentials(), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert not exported.readable_by_others(path)
    assert exported.read(path) == tls_credentials()


def test_the_file_names_url_cluster_login_and_inline_ca(tmp_path):
    data = json.loads(tls_credentials().to_json())
    assert data["broker_url"] == "mqtts://node-a:8883"
    assert (data["cluster_id"], data["role"]) == ("lab", "taskmanager")
    assert (data["username"], data["password"]) == ("cd-lab-taskmanager", "s3cret")
    assert data["ca_certificate"] == CA


def test_a_plain_tcp_file_has_no_ca():
    plain = exported.ExportedCredentials("lab", "taskmanager",
                                         BrokerAddress("node-a", 1883, "u", "p"))
    assert json.loads(plain.to_json())["ca_certificate"] is None
    assert exported.ExportedCredentials.from_json(plain.to_json()) == plain


def test_dash_means_standard_output_and_input():
    out = io.StringIO()
    exported.write(tls_credentials(), "-", stdout=out)
    assert exported.read("-", stdin=io.StringIO(out.getvalue())) == tls_credentials()


@pytest.mark.parametrize(("text", "match"), [
    ("not json", "not JSON"),
    ('{"format": "other"}', "not a clusterdeck credentials file"),
    ('{"format": "clusterdeck-credentials", "version": 9}', "version"),
    ('{"format": "clusterdeck-credentials", "version": 1, "broker_url": "mqtt://h:1"}',
     "lacks"),
    ('{"format": "clusterdeck-credentials", "version": 1, "broker_url": "http://h:1", '
     '"username": "u", "password": "p", "cluster_id": "c", "role": "taskmanager"}',
     "malformed"),
    ('{"format": "clusterdeck-credentials", "version": 1, "broker_url": "mqtt://h:1", '
     '"username": "u", "password": "p", "cluster_id": "c", "role": "taskmanager", '
     '"ca_certificate": "pem"}', "plain mqtt://"),
])
def test_a_bad_file_is_refused_with_a_reason(text, match):
    with pytest.raises(exported.ExportedCredentialsError, match=match):
        exported.ExportedCredentials.from_json(text)


def fields(**changed):
    return json.dumps({**json.loads(tls_credentials().to_json()), **changed})


@pytest.mark.parametrize(("changed", "match"), [
    ({"role": "admin"}, "role 'admin' is none of"),
    ({"role": ["client"]}, "role is not a string"),
    ({"cluster_id": "../../etc"}, "cluster id"),
    ({"cluster_id": "lab/#"}, "cluster id"),
    ({"username": ""}, "username is not a string"),
    ({"password": "x" * 10_000}, "password is not a string of 1-256"),
    ({"ca_certificate": 42}, "not a PEM certificate"),
    ({"broker_url": 7}, "broker_url is not a string"),
])
def test_fields_from_another_machine_are_checked(changed, match):
    with pytest.raises(exported.ExportedCredentialsError, match=match):
        exported.ExportedCredentials.from_json(fields(**changed))


def test_a_file_too_large_is_refused_unread_past_the_bound(tmp_path):
    path = tmp_path / "big.json"
    path.write_text(" " * (exported.MAX_FILE_BYTES + 1) + tls_credentials().to_json())
    with pytest.raises(exported.ExportedCredentialsError, match="larger than 64 KiB"):
        exported.read(path)
    with pytest.raises(exported.ExportedCredentialsError, match="larger than"):
        exported.read("-", stdin=io.StringIO(path.read_text()))


def test_a_file_of_binary_garbage_is_refused(tmp_path):
    path = tmp_path / "garbage.json"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(exported.ExportedCredentialsError, match="cannot read"):
        exported.read(path)


def test_a_missing_file_is_refused(tmp_path):
    with pytest.raises(exported.ExportedCredentialsError, match="cannot read"):
        exported.read(tmp_path / "missing.json")


def test_a_group_readable_file_is_noticed(tmp_path):
    path = tmp_path / "lab.json"
    exported.write(tls_credentials(), path)
    path.chmod(0o644)
    assert exported.readable_by_others(path)


def test_export_takes_port_and_ca_from_the_running_broker(tmp_path):
    cluster_dir = tmp_path / "lab"
    credentials = load_or_create(cluster_dir, "lab")
    files = tls.ensure_certificates(cluster_dir, ["localhost", "127.0.0.1", "node-a"])
    local = BrokerAddress("127.0.0.1", 8883).with_tls(files.ca_file.read_text())
    write_connection(cluster_dir, "mosquitto", local, files.ca_file)
    result = exported.export(cluster_dir, "lab", "taskmanager", "node-a")
    assert result.address.url() == "mqtts://cd-lab-taskmanager-64@node-a:8883"
    assert result.address.password == credentials.for_role("taskmanager", "taskmanager-64")[1]
    assert result.address.ca_pem == files.ca_file.read_text()


def test_export_refuses_a_host_the_certificate_does_not_name(tmp_path):
    cluster_dir = tmp_path / "lab"
    load_or_create(cluster_dir, "lab")
    files = tls.ensure_certificates(cluster_dir, ["localhost", "127.0.0.1"])
    write_connection(cluster_dir, "amqtt", BrokerAddress("127.0.0.1", 8883, tls=True),
                     files.ca_file)
    with pytest.raises(exported.ExportedCredentialsError, match="does not name 'node-b'"):
        exported.export(cluster_dir, "lab", "taskmanager", "node-b")


def test_export_of_a_plain_broker_has_no_ca(tmp_path):
    cluster_dir = tmp_path / "lab"
    load_or_create(cluster_dir, "lab")
    write_connection(cluster_dir, "amqtt", BrokerAddress("0.0.0.0", 1883))
    result = exported.export(cluster_dir, "lab", "client", "node-a")
    assert result.address.url() == "mqtt://cd-lab-client@node-a:1883"
    assert not result.address.tls


def test_export_needs_a_broker_that_ran(tmp_path):
    with pytest.raises(NoBrokerError, match="start the cluster"):
        exported.export(tmp_path / "lab", "lab", "taskmanager", "node-a")
